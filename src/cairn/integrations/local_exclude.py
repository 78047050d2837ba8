"""Keeping a checkout-only file out of git: ``cairn hooks install claude --local`` writes
``.claude/settings.local.json``, which holds this machine's interpreter path and is never meant
to be committed. Unless git ignores it already (a ``.gitignore``, the user's excludes), it is
added to the repository's ``info/exclude`` under a line saying who added it, as Claude Code does
for the file it creates; uninstalling takes that entry out again once the file is gone."""

from __future__ import annotations

from pathlib import Path

from cairn.git import Repo
from cairn.util import durable

WHY = "# added by cairn hooks install claude --local (this checkout's Claude Code settings)"


def exclude(workspace: Path | str, path: Path) -> Path | None:
    """Add ``path`` (a file in the work tree at ``workspace``) to the repository's
    ``info/exclude`` unless git ignores it already; the exclude file when it was changed."""
    repo, entry = _entry(workspace, path)
    ignored = repo.git.run(["check-ignore", "-q", "--no-index", "--", entry[1:]], check=False)
    if ignored.ok:
        return None
    target = repo.common_dir / "info" / "exclude"
    old = target.read_bytes() if target.is_file() else b""
    if old and not old.endswith(b"\n"):
        old += b"\n"
    durable.ensure_dir(target.parent)
    durable.atomic_write(target, old + f"{WHY}\n{entry}\n".encode())
    return target


def unexclude(workspace: Path | str, path: Path) -> Path | None:
    """Take out the entry ``exclude`` added for ``path``; the exclude file when it changed."""
    repo, entry = _entry(workspace, path)
    target = repo.common_dir / "info" / "exclude"
    if not target.is_file():
        return None
    lines = target.read_bytes().decode("utf-8", "surrogateescape").splitlines(keepends=True)
    kept = [
        line
        for n, line in enumerate(lines)
        if not (line.rstrip("\n") == WHY and n + 1 < len(lines) and lines[n + 1].strip() == entry)
        and not (line.strip() == entry and n > 0 and lines[n - 1].rstrip("\n") == WHY)
    ]
    if kept == lines:
        return None
    durable.atomic_write(target, "".join(kept).encode("utf-8", "surrogateescape"))
    return target


def _entry(workspace: Path | str, path: Path) -> tuple[Repo, str]:
    """The repository at ``workspace`` and the exclude line that matches exactly ``path``."""
    repo = Repo.discover(workspace)
    return repo, "/" + path.relative_to(repo.toplevel).as_posix()
