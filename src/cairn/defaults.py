"""Defaults of settings that a hot path reads without loading the config: ``cairn.config``
declares its fields with them, so each is spelled once. Imports nothing."""

# agent.cutoff_timeout_ms: the time a snapshot (a save, the hooks' saves) may take
CUTOFF_TIMEOUT_MS = 60000
