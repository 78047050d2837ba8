"""Each ticket's git worktree under ``fleet.workspace_root``, and the workspace hooks.

STAND-IN (helper A, branch fleet-sup) of helper B's module (and its ``hooks``); the
integrator takes B's version.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import NamedTuple

from cairn.config import Config
from cairn.git import Repo
from cairn.util.durations import parse_duration


class Workspace(NamedTuple):
    path: Path
    branch: str
    created: bool
    repaired: bool


class HookResult(NamedTuple):
    ok: bool
    output: str
    timed_out: bool


def workspace_root(repo: Repo, config: Config) -> Path:
    if config.fleet.workspace_root:
        root = Path(config.fleet.workspace_root).expanduser()
        return root if root.is_absolute() else repo.toplevel / root
    return repo.toplevel.parent / f"{repo.toplevel.name}.cairn"


def _registered(repo: Repo) -> set[Path]:
    text = repo.git.out(["worktree", "list", "--porcelain"])
    return {Path(line[9:]) for line in text.splitlines() if line.startswith("worktree ")}


def ensure(repo: Repo, config: Config, ticket: str) -> Workspace:
    path = workspace_root(repo, config) / ticket
    branch = f"cairn/{ticket}"
    if path.is_dir() and path in _registered(repo):
        return Workspace(path, branch, False, False)
    repo.git.run(["worktree", "prune"])
    path.parent.mkdir(parents=True, exist_ok=True)
    exists = repo.git.run(["rev-parse", "--verify", "-q", f"refs/heads/{branch}"], check=False)
    if exists.ok:
        repo.git.run(["worktree", "add", str(path), branch])
    else:
        repo.git.run(["worktree", "add", "-b", branch, str(path), "HEAD"])
    return Workspace(path, branch, True, False)


def run_hook(name: str, workspace: Path, config: Config) -> HookResult:
    command = getattr(config.fleet.hooks, name)
    if not command:
        return HookResult(True, "", False)
    timeout = parse_duration(config.fleet.hooks.timeout)
    try:
        done = subprocess.run(
            command,
            shell=True,
            cwd=workspace,
            capture_output=True,
            timeout=timeout,
            check=False,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout or b""
        return HookResult(
            False, out.decode(errors="replace") if isinstance(out, bytes) else out, True
        )
    output = (done.stdout + done.stderr).decode(errors="replace")
    return HookResult(done.returncode == 0, output, False)
