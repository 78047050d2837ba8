"""Read and write the change-summary file; every write is an atomic replace."""

from __future__ import annotations

from pathlib import Path

from cairn.summary.model import Summary
from cairn.summary.parse import parse
from cairn.summary.render import render
from cairn.util.durable import atomic_write, decode_text, read_state_file

WHAT = "change summary"
READ_LIMIT = 4 * 1024 * 1024


def load(path: Path) -> Summary | None:
    """The summary at ``path``, None when there is no file."""
    data = read_state_file(path, WHAT, READ_LIMIT)
    if data is None:
        return None
    return parse(decode_text(data, path, WHAT), source=str(path))


def save(path: Path, summary: Summary) -> None:
    atomic_write(path, render(summary))
