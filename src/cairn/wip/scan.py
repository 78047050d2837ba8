"""What differs in the work tree: one ``git status`` pass, then the choice of untracked files.

The status pass runs on the private copy of the index, so git's stat cache decides which files
need reading; its cost grows with the changed files, not with the size of the repository.
"""

from __future__ import annotations

import os
import stat
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from cairn.config.records import SnapshotConfig
from cairn.git import Deadline, Git
from cairn.git.process import Started
from cairn.git.status import STATUS_ARGS, entries
from cairn.wip.models import Skipped

# Directory names that are almost always generated; over budget they are dropped first.
HEAVY_DIRS = frozenset(
    {
        "node_modules",
        "bower_components",
        ".venv",
        "venv",
        "__pycache__",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".gradle",
        ".next",
        ".nuxt",
        ".turbo",
        ".parcel-cache",
        ".cache",
    }
)


class Change(NamedTuple):
    """A tracked path that differs from HEAD: ``x`` in the index, ``y`` in the work tree."""

    path: str
    x: str
    y: str
    submodule: bool
    index_mode: str
    index_oid: str
    worktree_mode: str


class StatusScan:
    """What one ``git status`` said: HEAD, the branch, and the paths by kind."""

    def __init__(self, head: str | None, branch: str | None) -> None:
        self.head = head
        self.branch = branch
        self.changes: list[Change] = []
        self.conflicted: list[str] = []
        self.untracked: list[str] = []
        self.nested: list[str] = []

    @property
    def staged(self) -> bool:
        return any(c.x != "." for c in self.changes)

    @property
    def worktree_changed(self) -> list[str]:
        return [c.path for c in self.changes if c.y != "."]

    @property
    def changed(self) -> int:
        return len(self.changes) + len(self.conflicted)


def scan_status(git: Git, deadline: Deadline | None, started: Started | None = None) -> StatusScan:
    """The status of the work tree: from ``started`` (``git.start(STATUS_ARGS)``, run while the
    caller did other work), else from a status run now."""
    if started is not None:
        return parse_status(started.result(deadline=deadline).stdout)
    return parse_status(git.run(STATUS_ARGS, deadline=deadline).stdout)


def parse_status(out: bytes) -> StatusScan:
    result = StatusScan(head=None, branch=None)
    for kind, record, raw_path in entries(out):
        if kind == b"#":
            _header(result, record.decode("utf-8", "surrogateescape"))
        elif kind in (b"1", b"2"):
            # 1 XY sub mH mI mW hH hI path  (2: … Xscore path, then the original path)
            parts = record.decode("utf-8", "surrogateescape").split(" ", 8)
            xy = parts[1]
            result.changes.append(
                Change(
                    path=os.fsdecode(raw_path),
                    x=xy[0],
                    y=xy[1],
                    submodule=parts[2].startswith("S"),
                    index_mode=parts[4],
                    index_oid=parts[7],
                    worktree_mode=parts[5],
                )
            )
        elif kind == b"u":
            result.conflicted.append(os.fsdecode(raw_path))
        elif kind == b"?":
            path = os.fsdecode(raw_path)
            (result.nested if path.endswith("/") else result.untracked).append(path)
    return result


def _header(result: StatusScan, line: str) -> None:
    key, _, value = line[2:].partition(" ")
    if key == "branch.oid" and value != "(initial)":
        result.head = value
    elif key == "branch.head" and value != "(detached)":
        result.branch = value


class Selection(NamedTuple):
    included: list[str]
    skipped: list[Skipped]
    stats: dict[str, os.stat_result]  # lstat of the included files


def select_untracked(
    toplevel: Path, untracked: list[str], nested: list[str], limits: SnapshotConfig
) -> Selection:
    """Untracked files to capture: per-file cap, no nested repos, and a total budget."""
    skipped = [Skipped(path=p, reason="nested_repo") for p in nested]
    sizes: dict[str, int] = {}
    stats: dict[str, os.stat_result] = {}
    cap = limits.max_new_file_bytes
    top = os.fspath(toplevel) + "/"  # plain strings: a Path per file costs more than its lstat
    for path in untracked:
        try:
            st = os.lstat(top + path)
        except OSError:
            continue  # vanished since the status pass: nothing to save
        stats[path] = st
        if stat.S_ISLNK(st.st_mode):
            sizes[path] = st.st_size
        elif not stat.S_ISREG(st.st_mode):
            skipped.append(Skipped(path=path, reason="special_file"))
        elif cap and st.st_size > cap:
            skipped.append(Skipped(path=path, reason="too_large", bytes=st.st_size))
        else:
            sizes[path] = st.st_size
    skipped += _enforce_budget(sizes, limits.max_new_files, limits.max_new_bytes)
    return Selection(included=sorted(sizes), skipped=skipped, stats={p: stats[p] for p in sizes})


def _enforce_budget(sizes: dict[str, int], max_files: int, max_bytes: int) -> list[Skipped]:
    """Drop whole directories (generated ones first, then the dominant one) until within budget.

    Mutates ``sizes``. The dominant directory is found by descending from the root into the
    child that holds at least half of what remains, so a flood such as ``app/node_modules/`` is
    dropped while ``app/src/`` next to it is kept.
    """
    dropped: list[Skipped] = []

    def over() -> str | None:
        if max_files and len(sizes) > max_files:
            return "files"
        if max_bytes and sum(sizes.values()) > max_bytes:
            return "bytes"
        return None

    while (measure := over()) is not None:
        stats = _dir_stats(sizes)
        column = 0 if measure == "files" else 1

        def weight(d: str, stats: dict[str, tuple[int, int]] = stats, column: int = column) -> int:
            return stats[d][column]

        heavy = [d for d in stats if d and Path(d).name in HEAVY_DIRS]
        if heavy:
            victim = max(heavy, key=lambda d: (weight(d), -d.count("/")))
        else:
            victim = _dominant(stats, weight)
        if victim:
            files, size = stats[victim]
            for path in [p for p in sizes if p.startswith(victim)]:
                del sizes[path]
            dropped.append(Skipped(path=victim, reason="over_budget", bytes=size, files=files))
        else:
            largest = max(sizes, key=lambda p: (sizes[p], p))
            dropped.append(Skipped(path=largest, reason="over_budget", bytes=sizes.pop(largest)))
    return dropped


def _dir_stats(sizes: dict[str, int]) -> dict[str, tuple[int, int]]:
    """(files, bytes) under every directory prefix ('' is the root), keys ending in '/'."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for path, size in sizes.items():
        prefix = ""
        for part in path.split("/")[:-1]:
            entry = counts[prefix]
            entry[0] += 1
            entry[1] += size
            prefix += part + "/"
        entry = counts[prefix]
        entry[0] += 1
        entry[1] += size
    return {d: (c, b) for d, (c, b) in counts.items()}


def _dominant(stats: dict[str, tuple[int, int]], weight: Callable[[str], int]) -> str:
    children: dict[str, list[str]] = defaultdict(list)
    for d in stats:
        if d:
            children[d[: d.rstrip("/").rfind("/") + 1]].append(d)
    node = ""
    while children[node]:
        best = max(children[node], key=lambda d: (weight(d), d))
        if 2 * weight(best) < weight(node):
            return node or best
        node = best
    return node
