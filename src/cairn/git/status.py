"""The status pass of a snapshot (``cairn.wip.scan`` parses it): its arguments, and starting it
early, so that ``git status`` (the bulk of a save on a big repository) runs while the rest of
cairn is imported and set up. Light on purpose: ``os``, ``cairn.git.command`` and
``cairn.git.process``.
"""

from __future__ import annotations

import os

from cairn.git.command import argv, scrubbed_env
from cairn.git.discovery import DISCOVER_ARGS
from cairn.git.process import Started, popen

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

STATUS_ARGS = [
    "status",
    "--porcelain=v2",
    "-z",
    "--branch",
    "--no-ahead-behind",
    "--untracked-files=all",
    "--ignored=no",
    "--no-renames",
    "--ignore-submodules=dirty",
]


class Early:
    """What ``start_early`` started for one work tree (``workspace``, as typed): its status pass
    and its repository's discovery (``cairn.git.discovery``), each None when it could not
    start. The save takes them (``status`` for its scan, ``discovery`` for ``Repo.discover``);
    whoever holds this object and does not run the save calls ``abandon``."""

    __slots__ = ("discovery", "status", "workspace")

    def __init__(self, workspace: str, status: Started | None, discovery: Started | None) -> None:
        self.workspace, self.status, self.discovery = workspace, status, discovery

    def abandon(self) -> None:
        """Stop both (each only if it still runs)."""
        for started in (self.status, self.discovery):
            if started is not None:
                started.abandon()


def start_early(workspace: str) -> Early:
    """The status pass and the discovery of the work tree at ``workspace`` (``.`` when empty),
    started now: the command line calls it before it imports the save, and passes what it
    returns to the save."""
    where = workspace or "."
    return Early(where, start(where, STATUS_ARGS), start(where, DISCOVER_ARGS))


def start(workspace: Path | str, args: list[str]) -> Started | None:
    """``git <args>`` in the work tree at ``workspace``, started now with the environment and
    config overrides every git command gets; None when it is not a directory or git cannot
    start (the caller then runs git again and says what is wrong). ``git status`` reads the
    index in place and reports paths from the top of the work tree, from any directory of
    it."""
    where = os.path.expanduser(os.fspath(workspace))
    if not os.path.isdir(where):
        return None
    try:
        return Started(list(args), popen(argv(args), where, scrubbed_env()))
    except Exception:  # OSError, or CairnError (no git): the save runs git again and says so
        return None


# fields before the path in each kind of record of ``git status --porcelain=v2``
_FIELDS_BEFORE_PATH = {b"1": 8, b"2": 9, b"u": 10, b"?": 1}


def entries(out: bytes) -> Iterator[tuple[bytes, bytes, bytes]]:
    """The records of the status pass's ``-z`` output as (kind, record, path): kind ``#`` (a
    header; path empty), ``1`` (changed), ``2`` (renamed; its original path is skipped), ``u``
    (unmerged) or ``?`` (untracked; a nested repository's path ends in ``/``)."""
    fields = out.split(b"\0")
    i = 0
    while i < len(fields):
        record = fields[i]
        i += 1
        if not record:
            continue
        kind = record[:1]
        if kind == b"2":
            i += 1
        before = _FIELDS_BEFORE_PATH.get(kind)
        path = record.split(b" ", before)[-1] if before else b""
        yield kind, record, path
