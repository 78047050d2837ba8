"""Utilities with no knowledge of runs: atomic state writes, YAML, durations, processes."""
