"""How a repository's paths are found: one ``git rev-parse`` (its arguments and the reading of
its answer), shared by ``Repo.discover`` and the save's early start (``cairn.git.status``), which
runs it beside ``git status`` before the rest of cairn is imported. Standard library only."""

from __future__ import annotations

import os

DISCOVER_ARGS = [
    "rev-parse",
    "--path-format=absolute",
    "--show-toplevel",
    "--git-dir",
    "--git-common-dir",
    "--git-path",
    "index",
    "--show-object-format",
]


class Found:
    """A work tree's paths, as ``git rev-parse`` printed them (absolute)."""

    __slots__ = ("common_dir", "git_dir", "index", "object_format", "toplevel")

    def __init__(
        self, toplevel: str, git_dir: str, common_dir: str, index: str, object_format: str
    ) -> None:
        self.toplevel, self.git_dir, self.common_dir = toplevel, git_dir, common_dir
        self.index, self.object_format = index, object_format


def parse(returncode: int, stdout: bytes) -> Found | None:
    """The paths ``DISCOVER_ARGS`` printed; None when git failed or printed something else (not
    a work tree, or a git older than 2.31, which does not know ``--path-format``)."""
    lines = stdout.decode("utf-8", "surrogateescape").splitlines()
    if returncode != 0 or len(lines) < 5 or not all(os.path.isabs(p) for p in lines[:4]):
        return None
    return Found(*lines[:5])
