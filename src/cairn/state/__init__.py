"""Durable run state: where it lives, the marker, the lease, the journal, the views over them."""
