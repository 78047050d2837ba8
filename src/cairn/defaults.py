"""Defaults of settings that a hot path reads without loading the config, and where the config
lives: ``cairn.config`` declares its fields and finds its file with them, so each is spelled
once. Imports nothing."""

# The config's files at the top of the work tree, in the order looked at: cairn.toml, else
# pyproject.toml's [tool.cairn]
CONFIG_FILE = "cairn.toml"
CONFIG_FILES = (CONFIG_FILE, "pyproject.toml")

# agent.cutoff_timeout_ms: the time a snapshot (a save, the hooks' saves) may take
CUTOFF_TIMEOUT_MS = 60000
