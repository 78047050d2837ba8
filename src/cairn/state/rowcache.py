"""The status rows of finished tickets, kept between ``cairn status`` calls.

A ticket with no marker is settled: its row (the latest run, the status line and usage of that
run's latest change summary) changes only when its directory, that run's directory or that
summary changes. The cache, ``<state root>/cache/status-rows.json``, keeps for each such ticket
the ``stat`` of the three (the ticket and run directories' mtime and inode, the summary's size,
mtime, ctime and inode) and what the row was read from them; a later call whose ``stat`` calls
all agree uses it without listing the directories or reading the summary. Every entry change
moves a directory's mtime (cairn writes by rename), and a summary edited in place changes its
own ``stat``.

An entry is stored only when none of those times is within ``RACY_WINDOW_NS`` of the call's
start (git's racy rule, as in the snapshot stat cache): a change in the same timestamp tick as
the read could leave every ``stat`` as it was. A missing, unreadable or older cache is ignored
and replaced; deleting it is always safe. Written without fsync: a cache lost in a crash costs
one full listing.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from cairn import __version__
from cairn.wip.proof import RACY_WINDOW_NS

FORMAT = 1
NAME = "status-rows.json"

# what a finished ticket's row was read from: run id, summary name, status line, usage
Settled = tuple[str | None, str | None, str | None, dict[str, Any] | None]


def _dir_key(st: os.stat_result) -> list[int]:
    return [st.st_mtime_ns, st.st_ino]


def _file_key(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


class RowCache:
    """The entries read from the cache file, and the ones this call found (``put``)."""

    def __init__(self, state_root: str) -> None:
        self.path = os.path.join(state_root, "cache", NAME)
        self.start_ns = time.time_ns()
        self.old: dict[str, list[Any]] = _load(self.path)
        self.new: dict[str, list[Any]] = {}
        self.changed = False

    def get(self, ticket: str, ticket_dir: str) -> tuple[Settled, os.stat_result | None] | None:
        """What the ticket's row was read from, and its summary's ``stat`` (None without a
        summary), when every ``stat`` agrees with the entry; None otherwise."""
        entry = self.old.get(ticket)
        if entry is None:
            return None
        try:
            dir_key, run_id, run_key, summary, summary_key, line, usage = entry
            if _dir_key(os.stat(ticket_dir)) != dir_key:
                return None
            found = None
            if run_id is not None:
                run_dir = f"{ticket_dir}/{run_id}"
                if _dir_key(os.stat(run_dir)) != run_key:
                    return None
                if summary is not None:
                    found = os.stat(f"{run_dir}/{summary}", follow_symlinks=False)
                    if _file_key(found) != summary_key:
                        return None
        except (OSError, TypeError, ValueError):
            return None
        self.new[ticket] = entry
        return (run_id, summary, line, usage), found

    def put(
        self,
        ticket: str,
        dir_stat: os.stat_result,
        run_stat: os.stat_result | None,
        summary_stat: os.stat_result | None,
        settled: Settled,
    ) -> None:
        """Keep what a settled ticket's row was read from, unless a ``stat`` is racy."""
        newest = max(
            [s.st_mtime_ns for s in (dir_stat, run_stat, summary_stat) if s is not None]
            + ([summary_stat.st_ctime_ns] if summary_stat is not None else [])
        )
        if newest >= self.start_ns - RACY_WINDOW_NS:
            return
        run_id, summary, line, usage = settled
        self.new[ticket] = [
            _dir_key(dir_stat),
            run_id,
            _dir_key(run_stat) if run_stat is not None else None,
            summary,
            _file_key(summary_stat) if summary_stat is not None else None,
            line,
            usage,
        ]
        self.changed = True

    def save(self) -> None:
        """Write the entries found by this call, when they differ from the file's."""
        if not self.changed and self.new.keys() == self.old.keys():
            return
        from pathlib import Path

        from cairn.errors import BadInput
        from cairn.util import durable

        text = json.dumps({"format": FORMAT, "version": __version__, "tickets": self.new})
        path = Path(self.path)
        try:
            durable.ensure_dir(path.parent)
            durable.atomic_write(path, text, fsync=False)
        except (OSError, BadInput):  # BadInput: a symlink or a file where its directory goes
            pass  # a cache that cannot be written is a cache that is not used


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
    return {k: v for k, v in tickets.items() if isinstance(v, list) and len(v) == 7}
