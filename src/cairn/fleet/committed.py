"""What ``cairn fleet start`` checks before it starts anything: that what a ticket's run reads
from its worktree is committed.

Each ticket works in a worktree made from a commit (the main work tree's HEAD, or ``[fleet]
base``), and its ``cairn run`` reads the configuration of that worktree: ``cairn.toml`` (or
``[tool.cairn]`` in ``pyproject.toml``), the scripted agent's ``agent.script``, a file of the
repository named in ``agent.command``, and the prompt overrides under ``.cairn/prompts/``. One
of them changed, added or removed and not committed would be missing from every worktree, so
every ticket would run with what is committed, or fail without it: the fleet refuses to start
and names them. The plans are not among them: a run reads its plan from the queue in the main
work tree.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from cairn.config.records import Config
from cairn.errors import BadInput
from cairn.git import Repo

PROMPTS = ".cairn/prompts"


def run_inputs(repo: Repo, config: Config) -> list[str]:
    """The paths, relative to the top level, that a ticket's run reads from its worktree."""
    top = repo.toplevel
    paths = ["cairn.toml", PROMPTS]
    if config.source is not None and config.source.name == "pyproject.toml":
        paths.append("pyproject.toml")
    command = config.agent.command
    words = shlex.split(command) if isinstance(command, str) else list(command or [])
    named = [config.agent.script] if config.agent.script else []
    for word in named + words[:4]:  # the program and the script it runs come first
        if word.startswith("-") or Path(word).is_absolute():
            continue
        inside = _inside(top, word)
        if inside is not None and (word in named or (top / inside).is_file()):
            paths.append(inside)
    return list(dict.fromkeys(paths))


def _inside(top: Path, word: str) -> str | None:
    try:
        return (top / Path(word).expanduser()).resolve().relative_to(top.resolve()).as_posix()
    except (ValueError, OSError):
        return None


def uncommitted(repo: Repo, config: Config) -> list[str]:
    """Those of ``run_inputs`` that differ from the commit the worktrees start from (changed,
    staged, removed, or not tracked at all, ignored ones included), sorted."""
    start = f"refs/heads/{config.fleet.base}" if config.fleet.base else "HEAD"
    if not repo.git.run(["rev-parse", "-q", "--verify", f"{start}^{{commit}}"], check=False).ok:
        return []  # no commit yet: making the worktree says so
    specs = [f":(literal){path}" for path in run_inputs(repo, config)]
    changed = repo.git.run(["diff", "--name-only", "-z", "--no-renames", start, "--", *specs])
    untracked = repo.git.run(["ls-files", "-z", "--others", "--", *specs])
    names = (changed.stdout + untracked.stdout).decode("utf-8", "surrogateescape").split("\0")
    return sorted({name for name in names if name})


def check(repo: Repo, config: Config) -> None:
    """Refuse, naming the files, when ``uncommitted`` finds any."""
    found = uncommitted(repo, config)
    if not found:
        return
    one = len(found) == 1
    where = f"branch {config.fleet.base}" if config.fleet.base else "HEAD"
    listed = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    it = "it" if one else "them"
    raise BadInput(
        f"{listed}: {'a change' if one else 'changes'} not committed on {where}, and every "
        f"ticket's worktree is made from that commit, so no run would see {it}; commit {it} "
        f"(git add {shlex.join(found[:5])} && git commit) or undo {it}, then start the fleet"
    )
