"""The status pass of a snapshot (``cairn.wip.scan`` parses it): its arguments, and starting it
early, so that ``git status`` (the bulk of a save on a big repository) runs while the rest of
cairn is imported and set up. Light on purpose: ``os``, ``cairn.git.command`` and
``os.posix_spawn`` (``cairn.git.early``) rather than ``subprocess``.
"""

from __future__ import annotations

import os

from cairn.git.command import argv, scrubbed_env
from cairn.git.discovery import DISCOVER_ARGS
from cairn.git.early import Spawned

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


# started by ``start_early``, by kind ("status", "discovery") and the work tree's real path
_early: dict[tuple[str, str], Spawned] = {}


class Early:
    """What ``start_early`` started, for the command line to abandon when the command does not
    run."""

    def abandon(self) -> None:
        abandon_early()


def start_early(workspace: str) -> Early:
    """Start the status pass and the repository's discovery (``cairn.git.discovery``) now, for
    ``start_status`` and ``take_discovery`` of the same work tree to take: the command line calls
    it before it imports the save (``cairn.cli.main``)."""
    where = _real(workspace)
    if ("status", where) not in _early:
        started = start_status(where)
        if started is not None:
            _early["status", where] = started
    if ("discovery", where) not in _early:
        discovery = spawn_discovery(where)
        if discovery is not None:
            _early["discovery", where] = discovery
    return Early()


def spawn_discovery(workspace: Path | str) -> Spawned | None:
    """The repository's discovery (``cairn.git.discovery``) started now, without ``subprocess``;
    None when it cannot start (``Repo.discover`` then runs git again and says what is wrong)."""
    where = _real(workspace)
    if not os.path.isdir(where):
        return None
    try:
        return Spawned(argv(DISCOVER_ARGS), list(DISCOVER_ARGS), where, scrubbed_env())
    except OSError:
        return None


def abandon_early() -> None:
    """Stop what ``start_early`` started and nothing took (the command did not run)."""
    while _early:
        _early.popitem()[1].abandon()


def start_status(workspace: Path | str) -> Spawned | None:
    """``git status`` of the work tree at ``workspace``: the one ``start_early`` started for it,
    else one started now, with the environment and config overrides every git command gets
    (None when it is not a directory, or git cannot start: the save then says why). It reads
    the index in place and reports paths from the top of the work tree, from any directory of
    it."""
    where = _real(workspace)
    early = _early.pop(("status", where), None)
    if early is not None:
        return early
    if not os.path.isdir(where):
        return None
    try:
        return Spawned(argv(STATUS_ARGS), list(STATUS_ARGS), where, scrubbed_env())
    except OSError:
        return None  # the save runs git again and reports what is wrong


def take_discovery(workspace: Path | str) -> Spawned | None:
    """The discovery ``start_early`` started for ``workspace``, once; None when it started none."""
    return _early.pop(("discovery", _real(workspace)), None)


def hand_back(workspace: Path | str, status: Spawned | None, discovery: Spawned | None) -> None:
    """Return what was taken and not used up, for the next taker (the save, after the command
    line's quick look at them)."""
    where = _real(workspace)
    for kind, spawned in (("status", status), ("discovery", discovery)):
        if spawned is not None:
            _early[kind, where] = spawned


def _real(workspace: Path | str) -> str:
    return os.path.realpath(os.path.expanduser(os.fspath(workspace)))


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
