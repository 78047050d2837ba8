"""The kill mode's figures of ``bench/scale_out.py``: a fleet's outcome, the kills, and the
table of Temporal with kills beside the embedded fleet."""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, field
from typing import Any

from common import table
from scale_check import Work


@dataclass
class Kill:
    at: float  # seconds since the fleet started
    worker: str
    running: list[str]  # tickets whose segment it was running
    groups: int
    clock: float  # time.time() of the kill, to line it up with the logs


@dataclass
class Outcome:
    engine: str
    wall: float
    exit_code: int
    states: dict[str, str]
    work: Work
    kills: list[Kill] = field(default_factory=list)
    attempts: dict[str, list[int]] = field(default_factory=dict)  # ticket → attempt per segment

    @property
    def completed(self) -> int:
        return sum(1 for s in self.states.values() if s == "completed")

    @property
    def retries(self) -> int:
        return sum(a - 1 for seen in self.attempts.values() for a in seen)

    @property
    def per_minute(self) -> float:
        return self.completed / self.wall * 60 if self.wall else 0.0


def failures(outcome: Outcome, tickets: int) -> list[str]:
    found = []
    if outcome.completed < tickets:
        found.append(f"{outcome.engine}: {outcome.completed}/{tickets} tickets completed")
    if outcome.work.lost:
        found.append(f"{outcome.engine}: work lost {outcome.work.lost}")
    if outcome.work.uncommitted:
        only = outcome.work.uncommitted
        found.append(f"{outcome.engine}: not on the branch, only in the snapshot {only}")
    if outcome.work.redone:
        found.append(f"{outcome.engine}: tasks redone {outcome.work.redone_tasks()}")
    return found


def report(
    temporal: Outcome, embedded: Outcome | None, args: argparse.Namespace, tickets: int
) -> None:
    both = [temporal] + ([embedded] if embedded else [])

    n = args.workers

    def row(name: str, cells: list[str], target: str = "") -> list[str]:
        return [name, *cells[: len(both)], target]

    hits = [k for k in temporal.kills if k.running]
    segments = sum(len(a) for a in temporal.attempts.values())
    retried = sum(1 for seen in temporal.attempts.values() for a in seen if a >= 2)
    rows = [
        row(
            "",
            [f"Temporal, {args.workers} workers, kills", f"embedded, --concurrency {n}"],
            "target",
        ),
        row(
            "tickets completed", [f"{o.completed}/{tickets}" for o in both], f"{tickets}/{tickets}"
        ),
        row("fleet exit code", [str(o.exit_code) for o in both], "0"),
        row("kills (hit a running segment)", [f"{len(temporal.kills)} ({len(hits)})", "0"]),
        row(
            "activity retries (segments retried / segments)",
            [f"{temporal.retries} ({retried}/{segments})", "—"],
        ),
        row("lost work (tasks)", [str(sum(map(len, o.work.lost.values()))) for o in both], "0"),
        row(
            "task files only in the snapshot ref, not on the branch",
            [str(sum(map(len, o.work.uncommitted.values()))) for o in both],
            "0",
        ),
        row("redone tasks", [str(len(o.work.redone)) for o in both], "0"),
        row("tasks continued after a kill", [str(o.work.continued) for o in both]),
        row("task files found restored", [str(o.work.found) for o in both]),
        row("wall time", [f"{o.wall:.1f} s" for o in both]),
        row("throughput", [f"{o.per_minute:.2f} tickets/min" for o in both]),
    ]
    order = "commits, then `cairn task done`" if args.commit_first else "`task done`, then commits"
    print(f"### {tickets} tickets × {args.tasks} tasks, agent work {args.sleep} s a task\n")
    print(f"The agent {order}.\n")
    print(table(rows))
    if embedded is not None and embedded.per_minute:
        ratio = temporal.per_minute / embedded.per_minute
        print(f"\nthroughput, Temporal with kills / embedded: {ratio:.2f}")
    for r in temporal.work.redone:
        where = "on the remote: resume handed it out again" if r.durable else "never pushed"
        kill = f"{r.kill_after:g} s before {r.worker} was killed" if r.worker else "no kill after"
        print(f"\nredone: {r.ticket} task {r.task}, first done {kill}; its completion {where}")
    print(
        f"\nheartbeat timeout {args.heartbeat}; a kill every {args.kill_every[0]:g}-"
        f"{args.kill_every[1]:g} s, restart after {args.pause[0]:g}-{args.pause[1]:g} s; "
        f"seed {args.seed}"
    )


def as_json(outcome: Outcome) -> dict[str, Any]:
    return {
        "engine": outcome.engine,
        "wall_s": round(outcome.wall, 2),
        "exit_code": outcome.exit_code,
        "completed": outcome.completed,
        "states": outcome.states,
        "tickets_per_min": round(outcome.per_minute, 3),
        "retries": outcome.retries,
        "attempts": outcome.attempts,
        "kills": [asdict(k) for k in outcome.kills],
        "lost": outcome.work.lost,
        "uncommitted": outcome.work.uncommitted,
        "redone": [asdict(r) for r in outcome.work.redone],
        "continued": outcome.work.continued,
        "found_restored": outcome.work.found,
    }
