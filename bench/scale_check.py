"""What ``bench/scale_out.py`` checks after a fleet: the agents' logs (tasks done twice, tasks
continued after a kill, files found restored) and the final branches (a task's file missing or
wrong: lost work; or kept only in the ticket's snapshot ref, uncommitted).

A redone task is explained: when the run state the shared remote held records the task's
completion twice, resume handed out a task whose completion was on the remote (a defect of
resume); once, the completion never reached the remote before the machine died (it was done in
the window between two checkpoints)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import git
from scale_agent import content


@dataclass
class Redone:
    ticket: str
    task: int
    first_done: float  # time.time() of the agent's first `done`
    completions_on_remote: int  # `task … completed` events in the final run state
    kill_after: float | None = None  # seconds from the first done to the kill that followed
    worker: str = ""  # the worker that was killed

    @property
    def durable(self) -> bool:
        """The first completion was on the remote: resume gave a completed task again."""
        return self.completions_on_remote >= 2


@dataclass
class Work:
    redone: list[Redone] = field(default_factory=list)
    continued: int = 0  # tasks started again (the one in progress at a kill)
    found: int = 0  # task files found restored from a snapshot
    lost: dict[str, list[int]] = field(default_factory=dict)  # ticket → tasks lost
    # ticket → tasks whose file is not on the branch but only in the snapshot ref (uncommitted)
    uncommitted: dict[str, list[int]] = field(default_factory=dict)

    def redone_tasks(self) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {}
        for r in self.redone:
            found.setdefault(r.ticket, []).append(r.task)
        return found


def agent_log(directory: Path, ticket: str) -> list[dict[str, Any]]:
    path = directory / f"{ticket}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def check_work(
    repo: Path, logs: Path, tickets: list[str], tasks: int, ended: set[str] | None = None
) -> Work:
    """Read the agents' logs and the final branch ``cairn/<ticket>`` (and run state) of
    ``repo``. Of a ticket not in ``ended`` (when given: one that did not complete) only the
    tasks its agents reported done must be there."""
    work = Work()
    for ticket in tickets:
        events = agent_log(logs, ticket)
        done = [e for e in events if e["event"] == "done"]
        numbers = [e["task"] for e in done]
        for n in sorted({n for n in numbers if numbers.count(n) > 1}):
            first = next(e["t"] for e in done if e["task"] == n)
            work.redone.append(Redone(ticket, n, first, completions(repo, ticket, n)))
        starts = [e["task"] for e in events if e["event"] == "start"]
        work.continued += len(starts) - len(set(starts))
        work.found += sum(1 for e in events if e["event"] == "found")
        for n in range(1, tasks + 1):
            if ended is not None and ticket not in ended and n not in numbers:
                continue
            if _file(repo, f"cairn/{ticket}", ticket, n) == content(ticket, n):
                continue
            wip = f"refs/cairn/wip/{ticket}"
            kept = _file(repo, wip, ticket, n) == content(ticket, n)
            (work.uncommitted if kept else work.lost).setdefault(ticket, []).append(n)
    return work


def _file(repo: Path, ref: str, ticket: str, task: int) -> str | None:
    try:
        return git(repo, "show", f"{ref}:work/{ticket}-task-{task}.txt").decode()
    except RuntimeError:
        return None


def completions(repo: Path, ticket: str, task: int) -> int:
    """How many times the run state on ``repo`` records ``task`` completed (0 without one)."""
    ref = f"refs/cairn/state/{ticket}"
    try:
        names = git(repo, "ls-tree", "-r", "--name-only", ref).decode().split()
    except RuntimeError:
        return 0  # the embedded fleet keeps its run state in the repository's .git/cairn
    count = 0
    for name in names:
        if name.endswith("run-log.jsonl"):
            for line in git(repo, "show", f"{ref}:{name}").decode().splitlines():
                event = json.loads(line)
                if event.get("event") == "task" and event.get("task") == task:
                    count += event.get("status") == "completed"
    return count


def explain(redone: list[Redone], kills: list[Any]) -> None:
    """Line each redone task up with the kill that followed its first completion."""
    for r in redone:
        after = [k for k in kills if k.clock >= r.first_done and r.ticket in k.running]
        if after:
            r.kill_after, r.worker = round(after[0].clock - r.first_done, 2), after[0].worker
