"""A dispatch's transcript: the agent's raw event stream, one line as the agent wrote it, kept in
the run directory as ``NN_<role>_transcript.jsonl``.

It is capped: once the file passes ``LIMIT`` bytes it is renamed to ``….jsonl.1`` (replacing an
older one) and a new file begins, so a dispatch keeps at most about twice ``LIMIT``, and always
its newest lines, the ones that say how it ended. Writing never fails the dispatch: after an
error the transcript stops.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO

LIMIT = 8 * 1024 * 1024
ROTATED = ".1"


def file_name(number: int, role: str) -> str:
    """``NN_<role>_transcript.jsonl`` (the dispatch number, two digits at least)."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in role) or "agent"
    return f"{number:02d}_{safe}_transcript.jsonl"


def claim(run_dir: Path, role: str) -> Path:
    """A new dispatch's transcript: numbered after the run's transcripts so far (a resumed run
    goes on counting), created empty at once so the number is taken."""
    prefixes = [p.name.split("_", 1)[0] for p in run_dir.glob("[0-9][0-9]*_transcript.jsonl")]
    taken = [int(prefix) for prefix in prefixes if prefix.isdigit()]
    number = max(taken, default=0) + 1
    while True:
        path = run_dir / file_name(number, role)
        try:
            path.touch(exist_ok=False)
        except FileExistsError:
            number += 1
            continue
        except OSError:
            return path
        return path


class Transcript:
    """Lines appended to ``path``, rotated to ``path.1`` past ``limit`` bytes."""

    def __init__(self, path: Path, limit: int = LIMIT) -> None:
        self.path, self.limit = path, limit
        self._file: IO[bytes] | None = None
        self._size = 0
        self._broken = False

    def write(self, line: str) -> None:
        if self._broken:
            return
        data = line.rstrip("\n").encode("utf-8", "replace") + b"\n"
        try:
            if self._file is None:
                self._open()
            elif self._size + len(data) > self.limit and self._size > 0:
                self._rotate()
            assert self._file is not None
            self._file.write(data)
            self._file.flush()
            self._size += len(data)
        except OSError:
            self._broken = True
            self.close()

    def _open(self) -> None:
        self._file = self.path.open("ab")
        self._size = self._file.tell()

    def _rotate(self) -> None:
        self.close()
        os.replace(self.path, self.path.with_name(self.path.name + ROTATED))
        self._open()

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None


def open_for(path: Path | None) -> Transcript | None:
    return Transcript(path) if path is not None else None
