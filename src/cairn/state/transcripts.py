"""A run's transcripts: each dispatch's raw agent event stream, one JSON object a line, in
``NN_<role>_transcript.jsonl`` in the run directory. NN counts the run's dispatches across
resumes (the first is 01); ``cairn logs`` reads them."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

TRANSCRIPT = re.compile(r"(\d{2,})_([a-z][a-z0-9-]*)_transcript\.jsonl")


class Transcript(NamedTuple):
    number: int
    role: str
    path: Path


def listing(run_dir: Path) -> list[Transcript]:
    """The run's transcripts, in dispatch order."""
    try:
        names = os.listdir(run_dir)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in names:
        match = TRANSCRIPT.fullmatch(name)
        if match:
            found.append(Transcript(int(match.group(1)), match.group(2), run_dir / name))
    return sorted(found)


def records(lines: Iterator[str] | list[str]) -> Iterator[dict[str, Any]]:
    """The JSON objects of transcript lines; a line that is not one (torn, or not JSON) is
    given as ``{"type": "unreadable", "text": …}``."""
    for line in lines:
        if not line.strip():
            continue
        try:
            parsed = json.loads(line)
        except ValueError:
            parsed = None
        yield parsed if isinstance(parsed, dict) else {"type": "unreadable", "text": line}
