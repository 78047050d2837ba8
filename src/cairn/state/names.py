"""The names of a ticket's state files (``cairn.state.layout`` says where they live), in a
module of their own that imports nothing."""

MARKER = ".in-progress.yaml"
LEASE = "lease"
LOCK = ".lock"
JOURNAL = "run-log.jsonl"
MARKER_READ_LIMIT = 1024 * 1024  # a marker larger than this is not one
MARKER_VERSION = 1  # the marker's schema (cairn.state.marker)
BRANCHES = "branches.json"  # at the state root: the tickets run from each branch
