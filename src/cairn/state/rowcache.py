"""What was read from files, kept under the ``stat`` signatures of the files it came from: what
``cairn status`` read of each ticket (a settled ticket's row; a marker, as its record's
builtins, with its run's status line) between two calls, and the dashboard's fleet rows
between two requests (``cairn.fleet.fleetstatus.FleetRows``), one mechanism for both.

An entry holds the paths it was read from, the signature of each (size, mtime, ctime, inode;
None for a path that was not there) taken before or as it was read, and the value. ``get``
stats the paths again and gives the value only when every signature agrees: every entry change
moves a directory's mtime (cairn writes by rename), a file edited in place or appended to
changes its own. An entry is kept only when none of its times is within ``RACY_WINDOW_NS`` of
now (git's racy rule, as in the snapshot stat cache): a change in the same timestamp tick as
the read could leave every ``stat`` as it was.

Given a file (``cairn status``: ``<state root>/cache/status-rows.json``), the entries are read
from it and ``save`` writes the ones this call used or found; a missing, unreadable or older
file is ignored and replaced, deleting it is always safe, and it is written without fsync (a
cache lost in a crash costs one full listing). Without one, they live as long as the object.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from typing import Any

from cairn import __version__
from cairn.wip.proof import RACY_WINDOW_NS

FORMAT = 3
NAME = "status-rows.json"

Signature = list[int] | None


def signature(path: str) -> Signature:
    """``path``'s size, mtime, ctime and inode; None when it cannot be stated."""
    try:
        return of(os.stat(path))
    except OSError:
        return None


def of(st: os.stat_result) -> list[int]:
    """The signature of a ``stat`` already taken."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


class StatCache:
    """Entries by key; paths are relative to ``root``. ``path``: the file they are kept in
    between processes (None: in memory only); ``racy_ns``: the racy window (a cache in memory,
    stated again at every use, may take a timestamp tick's margin instead)."""

    def __init__(self, root: str, path: str | None = None, racy_ns: int | None = None) -> None:
        self.root = root.rstrip(os.sep) + os.sep
        self.path = path
        self.racy_ns = racy_ns  # None: RACY_WINDOW_NS
        self.entries: dict[str, list[Any]] = _load(path) if path is not None else {}
        self.used: set[str] = set()
        self.changed = False

    def get(self, key: str) -> Any:
        """The value kept under ``key`` when every path's signature agrees; None otherwise."""
        entry = self.entries.get(key)
        if entry is None:
            return None
        try:
            paths, signatures, value = entry
            for rel, kept in zip(paths, signatures, strict=True):
                if signature(self.root + rel) != kept:
                    return None
        except (TypeError, ValueError):
            return None
        self.used.add(key)
        return value

    def put(
        self, key: str, paths: Sequence[str], signatures: Sequence[Signature], value: Any
    ) -> bool:
        """Keep ``value``, read from ``paths`` (relative to the root) whose signatures were
        ``signatures``, unless one of them is racy; whether it was kept."""
        newest = max((max(s[1], s[2]) for s in signatures if s is not None), default=0)
        window = RACY_WINDOW_NS if self.racy_ns is None else self.racy_ns
        if newest >= time.time_ns() - window:
            self.entries.pop(key, None)
            return False
        self.entries[key] = [list(paths), list(signatures), value]
        self.used.add(key)
        self.changed = True
        return True

    def retain(self, keys: Iterable[str]) -> None:
        """Forget every entry but those of ``keys``."""
        wanted = set(keys)
        for key in [k for k in self.entries if k not in wanted]:
            del self.entries[key]

    def save(self) -> None:
        """Write the entries this call used or found to the file, when they differ from it."""
        if self.path is None or (not self.changed and self.used == self.entries.keys()):
            return
        from pathlib import Path

        from cairn.errors import BadInput
        from cairn.util import durable

        kept = {key: self.entries[key] for key in self.used if key in self.entries}
        text = json.dumps({"format": FORMAT, "version": __version__, "tickets": kept})
        path = Path(self.path)
        try:
            durable.ensure_dir(path.parent)
            durable.atomic_write(path, text, fsync=False)
        except (OSError, BadInput):  # BadInput: a symlink or a file where its directory goes
            pass  # a cache that cannot be written is a cache that is not used


def status_cache(state_root: str, tickets_dir: str) -> StatCache:
    """``cairn status``'s cache of settled tickets' rows (paths relative to the tickets
    directory), kept in the state root."""
    return StatCache(tickets_dir, os.path.join(state_root, "cache", NAME))


def _load(path: str) -> dict[str, list[Any]]:
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return {}
    if data.get("version") != __version__:
        return {}
    tickets = data.get("tickets")
    if not isinstance(tickets, dict):
        return {}
    return {k: v for k, v in tickets.items() if isinstance(v, list) and len(v) == 3}
