"""The load run of ``bench/scale_out.py --minutes M`` (issue 23): ``--tickets`` (1,000) tickets
of a quick command agent on ``--workers`` (8) ``cairn worker --concurrency 1`` processes, each
with a host name of its own, against the dev server, for at most M minutes; ``--kills`` times
(evenly over the limit) a busy worker's machine is SIGKILLed and started again 1-2 s later.
Then the same tickets on the embedded fleet at ``--concurrency`` = workers, for at most
``--embedded-minutes`` (default M).

Measured, not extrapolated, over what ran: tickets completed and tickets a minute (when not
all completed within the limit, the time for all of them at that rate is given and called an
extrapolation); Temporal history events per completed ticket (every run of its workflow);
pushes a minute (the shared remote's ``post-receive`` hook counts them); each worker root's
disk (``du``), every 20 s and at the end; and from each SIGKILL to the next
``ActivityTaskStarted`` of every segment the killed machine ran (its retry starting on a
worker), from the workflows' histories."""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import log, table
from scale_check import check_work
from scale_fleet import (
    Worker,
    bench_env,
    can_unshare,
    config,
    disk_kib,
    fleet_events,
    make_user_repo,
    pushes,
    run_fleet,
    start_workers,
)
from scale_temporal import Ticket, percentile, running, tickets


@dataclass
class Load:
    engine: str
    tickets: int
    limit: float  # seconds
    wall: float = 0.0
    completed: int = 0
    ended_other: dict[str, str] = field(default_factory=dict)  # ticket → state, not completed
    lost: int = 0
    redone: int = 0
    events: list[int] = field(default_factory=list)  # history events per completed ticket
    pushes: int = 0
    disk_end: dict[str, int] = field(default_factory=dict)  # worker → KiB
    disk_peak: dict[str, int] = field(default_factory=dict)
    kills: list[dict[str, Any]] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)  # the 1-minute load average, every 20 s
    recoveries: list[float] = field(default_factory=list)  # kill → its segment started again
    waiting: list[float] = field(default_factory=list)  # kill → the end, not started again
    queued: int = 0  # of those, segments the server had waiting in the task queue at the end

    @property
    def per_minute(self) -> float:
        return self.completed / self.wall * 60 if self.wall else 0.0

    @property
    def all_done(self) -> bool:
        return self.completed == self.tickets


def temporal(where: Path, args: argparse.Namespace, names: list[str]) -> Load:
    import temporal_server

    load = Load("temporal", len(names), args.minutes * 60)
    server = temporal_server.start(where / "temporal")
    workers: list[Worker] = []
    stop = threading.Event()
    try:
        toml = config("temporal", server.address, args.heartbeat, args.workers, args.retry_jitter)
        bare, user = make_user_repo(where, toml, names, args.tasks)
        env = bench_env(where / "agent-log", args)
        hosts = can_unshare()
        workers = [
            Worker(f"w{n}", user, where / "workers" / f"w{n}", env, 1, f"bench-w{n}" * hosts)
            for n in range(1, args.workers + 1)
        ]
        log(f"starting {len(workers)} workers…")
        start_workers(workers)
        sampler = threading.Thread(target=sample_disk, args=(workers, load, stop), daemon=True)
        sampler.start()
        log(f"cairn fleet start --once: {len(names)} tickets, at most {args.minutes:g} min")
        began, clock = time.monotonic(), time.time()
        fleet = run_fleet(user, env, [], where / "fleet.out")
        deadline = began + load.limit
        every = load.limit / (args.kills + 1) if args.kills else float("inf")
        rng = random.Random(args.seed)
        next_kill = began + every
        while time.monotonic() < deadline:
            seen = running(server.address)
            if time.monotonic() >= next_kill and len(load.kills) < args.kills:
                kill_one(workers, load, rng, began, seen[1] if seen else None)
                next_kill += every
            if seen is not None and seen[0] >= len(names) and seen[1] == 0:
                break
            time.sleep(5.0)
        load.wall = min(time.monotonic(), deadline) - began
        end = clock + load.wall
        stop.set()
        sampler.join()
        for worker in workers:
            load.disk_end[worker.name] = disk_kib(worker.root)
            load.disk_peak[worker.name] = max(
                load.disk_peak.get(worker.name, 0), load.disk_end[worker.name]
            )
        fleet.kill()
        fleet.wait()
        for worker in workers:
            worker.stop()
        workers = []
        load.pushes = sum(1 for at, _ in pushes(bare) if clock <= at <= end)
        log("reading the histories…")
        found = tickets(server.address, histories=True)
        done = [t for t in found.values() if t.state == "completed" and (t.closed_at or end) <= end]
        load.completed = len(done)
        if load.all_done:  # the last one's close, not the poll that saw it
            load.wall = max(t.closed_at or end for t in done) - clock
        load.ended_other = {
            t.ticket: t.state for t in found.values() if t.ended and t.state != "completed"
        }
        load.events = [t.events for t in done]
        recoveries(load, found, end)
        work = check_work(bare, where / "agent-log", [t.ticket for t in done], args.tasks)
        load.lost = sum(map(len, work.lost.values())) + sum(map(len, work.uncommitted.values()))
        load.redone = len(work.redone)
        return load
    finally:
        stop.set()
        for worker in workers:
            worker.stop()
        server.stop()


def kill_one(
    workers: list[Worker], load: Load, rng: random.Random, began: float, backlog: int | None
) -> None:
    """SIGKILL a busy worker's machine (``backlog``: tickets not ended then, for the record)."""
    busy = [w for w in workers if w.running_tickets()]
    if not busy:
        return
    victim = rng.choice(busy)
    running_now = victim.running_tickets()
    clock = time.time()
    victim.kill()
    load.kills.append(
        {
            "at": round(time.monotonic() - began, 1),
            "worker": victim.name,
            "running": running_now,
            "clock": clock,
            "tickets_open": backlog,
        }
    )
    log(f"  {load.kills[-1]['at']:7.1f} s  killed {victim.name} ({', '.join(running_now)})")
    time.sleep(rng.uniform(1.0, 2.0))
    victim.spawn()
    victim.wait_ready()


def recoveries(load: Load, found: dict[str, Ticket], end: float) -> None:
    """Seconds from each kill to the next start of every segment it killed: of the attempt that
    ran to the end, or of the one running at the end. A segment not started again by the end
    (its retry waits in the task queue) is counted in ``waiting`` as the time to the end."""
    for kill in load.kills:
        for ticket in kill["running"]:
            one = found.get(ticket)
            starts = [s.started for s in one.segments] if one else []
            if one and one.current:
                starts.append(one.current)
            later = [at for at in starts if at > kill["clock"]]
            if later:
                load.recoveries.append(round(min(later) - kill["clock"], 2))
            else:
                load.waiting.append(round(end - kill["clock"], 2))
                load.queued += bool(one and one.waits)


def sample_disk(workers: list[Worker], load: Load, stop: threading.Event) -> None:
    while not stop.wait(20.0):
        load.loads.append(round(os.getloadavg()[0], 2))
        for worker in workers:
            load.disk_peak[worker.name] = max(
                load.disk_peak.get(worker.name, 0), disk_kib(worker.root)
            )


def embedded(where: Path, args: argparse.Namespace, names: list[str]) -> Load:
    minutes = args.embedded_minutes or args.minutes
    load = Load("embedded", len(names), minutes * 60)
    toml = config("embedded", "", args.heartbeat, args.workers)
    bare, user = make_user_repo(where, toml, names, args.tasks)
    env = bench_env(where / "agent-log", args)
    log(
        f"cairn fleet start --once --concurrency {args.workers} (embedded): at most {minutes:g} min"
    )
    began = time.monotonic()
    out = where / "fleet.out"
    fleet = run_fleet(user, env, ["--concurrency", str(args.workers)], out)
    stop = threading.Event()
    sampler = threading.Thread(target=sample_disk, args=([], load, stop), daemon=True)
    sampler.start()
    with contextlib.suppress(subprocess.TimeoutExpired):
        fleet.wait(timeout=load.limit)
    stop.set()
    load.wall = min(time.monotonic() - began, load.limit)
    finished = [e for e in fleet_events(out) if e["event"] == "ticket_finished"]
    if fleet.poll() is None:
        fleet.send_signal(signal.SIGTERM)
        try:
            fleet.wait(timeout=60)
        except subprocess.TimeoutExpired:
            fleet.kill()
            fleet.wait()
    done = [e["ticket"] for e in finished if e["state"] == "completed"]
    load.completed = len(done)
    load.ended_other = {e["ticket"]: e["state"] for e in finished if e["state"] != "completed"}
    load.pushes = len(pushes(bare))
    load.disk_end["user"] = disk_kib(user)
    work = check_work(user, where / "agent-log", done, args.tasks)
    load.lost = sum(map(len, work.lost.values())) + sum(map(len, work.uncommitted.values()))
    load.redone = len(work.redone)
    return load


def main(where: Path, args: argparse.Namespace, names: list[str]) -> tuple[dict[str, Any], Any]:
    runs = [temporal(where / "temporal-fleet", args, names)]
    if not args.no_embedded:
        runs.append(embedded(where / "embedded", args, names))
    problems = [
        f"{r.engine}: {what}"
        for r in runs
        for what, bad in (
            (f"lost {r.lost}", r.lost),
            (f"redone {r.redone}", r.redone),
            (f"failed for good {r.ended_other}", r.ended_other),
        )
        if bad
    ]
    dump = {"load": [as_json(r) for r in runs], "failures": problems}
    return dump, lambda: report(runs, args)


def mib(kib: int) -> str:
    return f"{kib / 1024:.0f} MiB"


def as_json(r: Load) -> dict[str, Any]:
    return {
        "engine": r.engine,
        "tickets": r.tickets,
        "limit_s": r.limit,
        "wall_s": round(r.wall, 1),
        "completed": r.completed,
        "tickets_per_min": round(r.per_minute, 2),
        "extrapolated_min_for_all": None
        if r.all_done or not r.per_minute
        else round(r.tickets / r.per_minute, 1),
        "ended_not_completed": r.ended_other,
        "lost": r.lost,
        "redone": r.redone,
        "history_events": r.events,
        "pushes": r.pushes,
        "pushes_per_min": round(r.pushes / r.wall * 60, 1) if r.wall else None,
        "disk_end_kib": r.disk_end,
        "disk_peak_kib": r.disk_peak,
        "kills": r.kills,
        "kill_to_restart_s": r.recoveries,
        "kill_to_end_not_restarted_s": r.waiting,
        "not_restarted_queued": r.queued,
        "load_average": r.loads,
    }


def report(runs: list[Load], args: argparse.Namespace) -> None:
    t = runs[0]
    rows = [
        [
            "",
            *(
                f"{r.engine}, {args.workers} {'workers' if r.engine == 'temporal' else 'slots'}"
                for r in runs
            ),
        ]
    ]

    def add(name: str, cells: list[str]) -> None:
        rows.append([name, *cells])

    add(
        "tickets completed (limit)",
        [f"{r.completed}/{r.tickets} ({r.limit / 60:g} min)" for r in runs],
    )
    add("wall time", [f"{r.wall:.0f} s" for r in runs])
    add("tickets a minute", [f"{r.per_minute:.1f}" for r in runs])
    add(
        "time for all (extrapolated)",
        [
            "measured"
            if r.all_done
            else f"{r.tickets / r.per_minute:.0f} min (extrapolated)"
            if r.per_minute
            else "unknown"
            for r in runs
        ],
    )
    add("ended not completed", [str(len(r.ended_other)) for r in runs])
    add("lost / redone tasks", [f"{r.lost} / {r.redone}" for r in runs])
    ev = t.events
    add(
        "history events a ticket (mean, max)",
        [f"{sum(ev) / len(ev):.1f}, {max(ev)}" if ev else "unknown", "—"][: len(runs)],
    )
    add("pushes a minute", [f"{r.pushes / r.wall * 60:.0f}" if r.wall else "unknown" for r in runs])
    peak = max(t.disk_peak.values(), default=0)
    add(
        "worker disk, end (largest, all)",
        [
            f"{mib(max(t.disk_end.values(), default=0))}, {mib(sum(t.disk_end.values()))}",
            mib(sum(runs[-1].disk_end.values())),
        ][: len(runs)],
    )
    add("worker disk, peak (largest)", [mib(peak), "—"][: len(runs)])
    add(
        "load average (mean, max)",
        [
            f"{sum(r.loads) / len(r.loads):.1f}, {max(r.loads):.1f}" if r.loads else "unknown"
            for r in runs
        ],
    )
    rec, wait = t.recoveries, t.waiting

    def at_least(p: float) -> str:
        value = percentile(rec + wait, p)
        return f"{'≥ ' if wait and value is not None and value >= min(wait) else ''}{value} s"

    add(
        f"SIGKILL → segment started again (p50, p99; {len(rec) + len(wait)} segments, "
        f"{len(t.kills)} kills)",
        [f"{at_least(50)}, {at_least(99)}" if rec or wait else "unknown", "—"][: len(runs)],
    )
    print(f"### {t.tickets} tickets × {args.tasks} task(s), agent work {args.sleep} s a task\n")
    print(table(rows))
    if len(runs) > 1 and runs[1].per_minute:
        print(
            f"\ntickets a minute, Temporal with {len(t.kills)} kills / embedded: "
            f"{t.per_minute / runs[1].per_minute:.2f}"
        )
    for kill in t.kills:
        print(
            f"\nkill at {kill['at']} s of {kill['worker']} running {', '.join(kill['running'])}, "
            f"{kill['tickets_open']} workflows open then"
        )
    print(f"\nSIGKILL → started again, each: {sorted(t.recoveries)} s")
    if wait:
        print(
            f"not started again by the end: {sorted(wait)} s "
            f"({t.queued} of them scheduled, waiting in the task queue for a worker)"
        )
