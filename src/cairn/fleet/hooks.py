"""Workspace hooks: ``[fleet.hooks]`` shell commands run in a ticket's worktree.

``after_create`` runs once a worktree is made (or rebuilt), ``before_run`` before each attempt,
``after_run`` after each attempt, ``before_remove`` before prune removes a worktree. Each runs as
``sh -c <command>`` in the worktree, in its own process group, with ``CAIRN_TICKET``,
``CAIRN_WORKTREE`` and ``CAIRN_HOOK`` set, for at most ``fleet.hooks.timeout``; on timeout the
whole group is killed. What a failure means (docs/fleet.md): ``after_create``
failing fails the ticket with the hook's output; ``before_run`` failing ends the attempt
before the agent starts (the ticket is failed, like ``after_create``); ``after_run`` failing
is reported and changes nothing; ``before_remove`` failing keeps the worktree.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Literal, NamedTuple

from cairn.config.records import Config
from cairn.terms import ENV_HOOK, ENV_TICKET, ENV_WORKTREE
from cairn.util import durable
from cairn.util.durations import format_duration, parse_duration
from cairn.util.procs import kill_group

HookName = Literal["after_create", "before_run", "after_run", "before_remove"]
HOOKS: tuple[HookName, ...] = ("after_create", "before_run", "after_run", "before_remove")
OUTPUT_LIMIT = 64 * 1024  # the tail kept of a hook's output
# Written into the worktree's own git directory once ``after_create`` succeeded there: it goes
# away with the worktree, so a rebuilt worktree runs the hook again.
CREATED_MARK = "cairn-after-create"


class HookResult(NamedTuple):
    ok: bool
    output: str  # stdout and stderr together, the last OUTPUT_LIMIT bytes
    timed_out: bool
    ran: bool = True  # False: no command is configured for this hook
    returncode: int | None = None
    seconds: float = 0.0

    def describe(self, name: str, timeout: str | None = None) -> str:
        """One line for a ticket's ``detail``: which hook, how it ended, its last output line."""
        if self.timed_out:
            how = f"timed out after {timeout}" if timeout else "timed out"
        else:
            how = f"exited {self.returncode}"
        last = next((ln.strip() for ln in reversed(self.output.splitlines()) if ln.strip()), "")
        return f"hook {name} {how}" + (f": {last[:200]}" if last else "")


def run_hook(
    name: str, workspace: Path, config: Config, *, ticket: str | None = None
) -> HookResult:
    """Run hook ``name`` in ``workspace``; a hook with no command is ok and did not run."""
    if name not in HOOKS:
        raise ValueError(f"unknown hook {name!r}")
    command: str | None = getattr(config.fleet.hooks, name)
    if command is None:
        return HookResult(ok=True, output="", timed_out=False, ran=False)
    timeout = parse_duration(config.fleet.hooks.timeout)
    env = {**os.environ, ENV_WORKTREE: str(workspace), ENV_HOOK: name}
    if ticket is not None:
        env[ENV_TICKET] = ticket
    started = time.monotonic()
    # Output goes to a file, not a pipe: a grandchild that escaped the group and keeps the
    # pipe open can never make the hook's caller wait.
    with tempfile.TemporaryFile() as sink:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        except BaseException:
            kill_group(proc.pid)
            proc.wait()
            raise
        kill_group(proc.pid)  # on timeout the hook; otherwise what it left running in its group
        proc.wait()
        size = sink.seek(0, os.SEEK_END)
        sink.seek(max(0, size - OUTPUT_LIMIT))
        output = sink.read().decode("utf-8", "replace")
    code = None if timed_out else proc.returncode
    return HookResult(
        ok=code == 0,
        output=output,
        timed_out=timed_out,
        returncode=code,
        seconds=time.monotonic() - started,
    )


def timeout_text(config: Config) -> str:
    return format_duration(parse_duration(config.fleet.hooks.timeout))


def after_create_done(git_dir: Path) -> bool:
    """Whether ``after_create`` succeeded in the worktree whose own git directory is
    ``git_dir``."""
    return (git_dir / CREATED_MARK).exists()


def set_up(workspace: Path, created: bool, config: Config, ticket: str) -> HookResult:
    """Run ``after_create`` when the worktree is new or rebuilt (``Workspace.created``), or
    when it has not yet succeeded there (an earlier attempt failed); success is marked so that
    a reused worktree skips it. A failed result fails the ticket with ``describe()``."""
    from cairn.git import Repo

    git_dir = Repo.discover(workspace).git_dir
    if not created and after_create_done(git_dir):
        return HookResult(ok=True, output="", timed_out=False, ran=False)
    result = run_hook("after_create", workspace, config, ticket=ticket)
    if result.ok:
        durable.atomic_write(git_dir / CREATED_MARK, f"{time.time():.0f}\n")
    return result
