"""Integrations that agents call back into: Claude Code hooks."""
