"""Agent adapters: one module per kind, all with the interface in ``base``."""
