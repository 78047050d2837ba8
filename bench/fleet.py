"""The fleet's targets (issue 13): ``cairn fleet status --json`` over 1,000 tickets in at most
1 s, and the supervisor's overhead over 50 tickets of a no-op command agent at concurrency 8.

    .venv/bin/python bench/fleet.py                 # both parts
    .venv/bin/python bench/fleet.py --status-only   # the status part (about 30 s)

**Status.** A repository with 1,000 fleet tickets (``bench/.work/fleet-1000``, built in a few
seconds, rebuilt with ``--rebuild``): each has a fleet record spread over the eight fleet
states, a run with a change summary and a journal (the templates of ``bench/state.py``), a
marker when it is running or interrupted, and one in five a snapshot ref. The real CLI is
timed, round robin, against two baselines measured in the same run: ``python -c pass`` (the
interpreter's start) and ``cairn status --json`` (the same files, without the fleet's joins).

**Supervisor.** 50 plans in ``cairn-queue/`` of a fresh repository, each one task, run by a
command agent that only marks its task done (``cairn task done 1``) and logs its own start and
end. ``cairn fleet start --once --concurrency 8`` runs them; the same 50 ``cairn run``s, 8 at a
time from a plain Python pool, are the baseline. Reported: the supervisor's overhead per
ticket, (fleet wall - pool wall) / 50; the wall time beyond the agents' own per ticket,
(fleet wall - the agents' time on the critical path) / 50; and the supervisor's own CPU
(user + system of its process, read from /proc every 20 ms) as a share of one core while
agents run (from the first agent's end to the last agent's end, as the agents' log shows
them: the target's window), and over its whole life (start-up included, printed beside it).
Skipped, saying so, when ``cairn fleet start`` does not exist yet.

Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import state as statebench
from cairn.terms import FINISHED
from common import WORK, Stat, git, git_env, log, machine, ms, new_repo, run_cmd

TICKETS = 1000
STATUS_LIMIT = 1.0  # seconds
FLEET_TICKETS, CONCURRENCY = 50, 8
OVERHEAD_LIMIT = 0.150  # seconds per ticket
CPU_LIMIT = 0.05  # of one core
LAYOUT_VERSION = 1
STATES = (
    "completed",
    "completed",
    "completed",
    "running",
    "retrying",
    "interrupted",
    "needs_review",
    "needs_input",
    "queued",
    "failed",
)


def cairn_cmd() -> list[str]:
    return [sys.executable, "-m", "cairn"]


# --- status over 1,000 tickets -----------------------------------------------------------------


def build_status_repo(rebuild: bool) -> Path:
    from cairn.fleet import fleetstate
    from cairn.fleet.fleetstate import FleetTicket
    from cairn.state.layout import Layout

    path = WORK / f"fleet-{TICKETS}"
    info = path / ".git" / "cairn-bench-fleet.json"
    wanted = {"layout": LAYOUT_VERSION, "tickets": TICKETS}
    if not rebuild and info.exists() and json.loads(info.read_text()) == wanted:
        return path
    started = new_repo(path, f"{TICKETS:,} fleet tickets")
    (path / "README.md").write_text("# bench\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "initial")
    tpl = statebench.Templates(WORK / "fleet-scratch")
    layout = Layout(path / ".git" / "cairn")
    tickets_dir = layout.root / "tickets"
    tickets_dir.mkdir(parents=True)
    now = datetime.now(UTC)
    refs = []
    tree = git(path, "rev-parse", "HEAD^{tree}").decode().strip()
    snapshot = git(path, "commit-tree", tree, "-p", "HEAD", "-m", "cairn wip").decode().strip()
    for i in range(TICKETS):
        ticket = f"FLEET-{i:04d}"
        state = STATES[i % len(STATES)]
        run = statebench.run_id_of(i)
        ticket_dir = tickets_dir / ticket
        if state != "queued":
            ticket_dir.mkdir()
            done = state in FINISHED
            summary = tpl.finished_summary if done else tpl.midway_summary
            journal = tpl.finished_journal if done else tpl.midway_journal
            statebench.write_run(ticket_dir, ticket, run, summary, journal)
            if state in ("running", "interrupted", "retrying", "needs_input"):
                statebench.write_file(
                    ticket_dir / ".in-progress.yaml",
                    statebench.Templates.fill(tpl.dead_marker, ticket, run),
                )
        if i % 5 == 0:
            refs.append(f"create refs/cairn/wip/{ticket} {snapshot}\n")
        record = FleetTicket(
            ticket=ticket,
            plan=f"cairn-queue/{ticket}.md",
            state=state,  # type: ignore[arg-type]
            attempt=0 if state == "queued" else 1 + i % 3,
            next_attempt_at=now + timedelta(seconds=30) if state == "retrying" else None,
            worktree=None if state == "queued" else f"{path}.cairn/{ticket}",
            branch=None if state == "queued" else f"cairn/{ticket}",
            last_exit=3 if state in ("interrupted", "retrying") else None,
            last_reason="stall" if state == "retrying" else None,
            detail="after_create hook failed: exit 1" if state == "failed" else None,
            updated=now,
        )
        fleetstate.write(layout, record)
    git(path, "update-ref", "--stdin", data="".join(refs).encode())
    info.write_text(json.dumps(wanted))
    log(f"built in {time.monotonic() - started:.1f} s")
    return path


def check_rows(path: Path) -> Counter[str]:
    """A wrong benchmark is worse than none: every ticket, in the state it was given."""
    out = run_cmd([*cairn_cmd(), "fleet", "status", "--json", "-C", str(path)])
    rows = json.loads(out)
    if len(rows) != TICKETS:
        raise RuntimeError(f"cairn fleet status printed {len(rows)} rows, expected {TICKETS}")
    with_snapshot = sum(1 for row in rows if row["snapshot"])
    if with_snapshot != TICKETS // 5:
        raise RuntimeError(f"{with_snapshot} rows have a snapshot, expected {TICKETS // 5}")
    return Counter(row["state"] for row in rows)


def measure_status(path: Path, runs: int) -> tuple[dict[str, Stat], Counter[str]]:
    states = check_rows(path)
    where = str(path)
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "cairn status --json": [*cairn_cmd(), "status", "--json", "-C", where],
        "cairn fleet status --json": [*cairn_cmd(), "fleet", "status", "--json", "-C", where],
        "cairn fleet status (table)": [*cairn_cmd(), "fleet", "status", "-C", where],
    }
    for argv in commands.values():  # warm-up: page cache, pyc files
        run_cmd(argv)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    log(f"fleet status over {TICKETS:,} tickets: {runs} runs…")
    for _ in range(runs):
        for name, argv in commands.items():
            started = time.perf_counter()
            run_cmd(argv)
            samples[name].append(time.perf_counter() - started)
    return {name: Stat(times) for name, times in samples.items()}, states


def status_part(rebuild: bool, runs: int) -> bool:
    path = build_status_repo(rebuild)
    stats, states = measure_status(path, runs)
    base = stats["python -c pass"].median
    print(f"### `cairn fleet status --json` over {TICKETS:,} tickets ({runs} runs each)\n")
    print("rows by state: " + ", ".join(f"{k} {v}" for k, v in sorted(states.items())) + "\n")
    print("| command | median | min | max | × python -c pass |")
    print("|---|---:|---:|---:|---:|")
    for name, stat in stats.items():
        print(
            f"| {name} | {ms(stat.median)} ms | {ms(stat.min)} ms | {ms(max(stat.samples))} ms | "
            f"{stat.median / base:.1f}x |"
        )
    fleet = stats["cairn fleet status --json"].median
    ok = fleet <= STATUS_LIMIT
    print(
        f"\ntarget: ≤ {STATUS_LIMIT:g} s — median {fleet:.3f} s: {'pass' if ok else 'FAIL'} "
        f"({fleet / stats['cairn status --json'].median:.2f}x `cairn status --json`)\n"
    )
    return ok


# --- supervisor overhead -------------------------------------------------------------------------

AGENT = """#!/bin/sh
start=$(date +%s.%N)
"{python}" -m cairn task done 1 >/dev/null
end=$(date +%s.%N)
echo "$start $end" >> "{log}"
"""


def fleet_available() -> bool:
    probe = subprocess.run(
        [*cairn_cmd(), "fleet", "start", "--help"], capture_output=True, check=False
    )
    return probe.returncode == 0


def build_fleet_repo(root: Path) -> tuple[Path, Path]:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    shutil.rmtree(Path(f"{root}/repo.cairn"), ignore_errors=True)
    agent_log = root / "agent-times.log"
    agent = root / "noop-agent"
    agent.write_text(AGENT.format(python=sys.executable, log=agent_log))
    agent.chmod(0o755)
    repo = root / "repo"
    new_repo(repo, f"{FLEET_TICKETS} queued plans")
    config = (
        "[agent]\n"
        'kind = "command"\n'
        f"command = [{json.dumps(str(agent))}]\n"
        "max_continuations = 0\n"
        '\n[loop]\nphases = ["implement"]\n'
        f'\n[fleet]\nconcurrency = {CONCURRENCY}\nmin_free_memory = "16MiB"\n'
        'poll_interval = "1s"\n'
    )
    (repo / "cairn.toml").write_text(config)
    (repo / "README.md").write_text("# fleet bench\n")
    queue = repo / "cairn-queue"
    queue.mkdir()
    for n in range(FLEET_TICKETS):
        (queue / f"Q-{n:03d}.md").write_text(f"# Plan Q-{n:03d}\n\n### Task 1: Nothing\n\nNo-op.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "queue")
    return repo, agent_log


def cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def agent_times(agent_log: Path) -> list[tuple[float, float]]:
    if not agent_log.exists():
        return []
    return [
        (float(a), float(b))
        for a, b in (line.split() for line in agent_log.read_text().splitlines() if line)
    ]


class FleetRun:
    """What ``cairn fleet start --once`` cost: wall time, exit code, the supervisor's CPU over
    its whole life, and over the window while agents run (from the first agent's end to the
    last agent's end: the issue's "while agents run", without the supervisor's start-up)."""

    def __init__(self, wall: float, code: int, cpu: float, window: float, window_cpu: float):
        self.wall, self.code, self.cpu = wall, code, cpu
        self.window, self.window_cpu = window, window_cpu


def run_fleet(repo: Path, agent_log: Path) -> FleetRun:
    env = git_env()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [*cairn_cmd(), "fleet", "start", "--once", "--concurrency", str(CONCURRENCY), "--json"],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    cpu = 0.0
    first: tuple[float, float] | None = None  # (instant, cpu) when the first agent had ended
    last = (started, 0.0)  # (instant, cpu) at the latest agent end seen
    ends_seen = 0
    while proc.poll() is None:
        seen = cpu_seconds(proc.pid)
        if seen is not None:
            cpu = seen
        now = time.perf_counter()
        if agent_log.exists():
            lines = agent_log.read_text().splitlines()
            if first is None and lines:
                first = (now, cpu)
            if len(lines) > ends_seen:
                ends_seen, last = len(lines), (now, cpu)
        time.sleep(0.02)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        log(f"cairn fleet start exited {proc.returncode}: {err[-2000:]}")
    if first is None:
        return FleetRun(wall, proc.returncode, cpu, 0.0, 0.0)
    return FleetRun(wall, proc.returncode, cpu, last[0] - first[0], last[1] - first[1])


def run_pool(repo: Path) -> float:
    """The same plans, each `cairn run --ticket` in its own worktree, 8 at a time."""
    plans = sorted((repo / "cairn-queue").iterdir())
    trees = repo.parent / "pool"
    for plan in plans:
        git(repo, "worktree", "add", "-q", "-b", f"pool/{plan.stem}", str(trees / plan.stem))

    def one(plan: Path) -> int:
        return subprocess.run(
            [*cairn_cmd(), "run", str(plan), "--ticket", f"P-{plan.stem}"],
            cwd=trees / plan.stem,
            env=git_env(),
            capture_output=True,
            check=False,
        ).returncode

    started = time.perf_counter()
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        codes = list(pool.map(one, plans))
    wall = time.perf_counter() - started
    if any(codes):
        log(f"pool runs exited {Counter(codes)}")
    return wall


def supervisor_part() -> bool:
    if not fleet_available():
        print(
            "### Supervisor overhead: skipped — `cairn fleet start` is not available in this "
            "build (the supervisor is not merged yet)\n"
        )
        return True
    root = WORK / "fleet-supervisor"
    repo, agent_log = build_fleet_repo(root)
    log(f"cairn fleet start --once: {FLEET_TICKETS} tickets at concurrency {CONCURRENCY}…")
    fleet = run_fleet(repo, agent_log)
    wall, cpu, code = fleet.wall, fleet.cpu, fleet.code
    spans = agent_times(agent_log)
    agent_log.unlink(missing_ok=True)
    log("the same runs from a plain pool…")
    pool = run_pool(repo)
    own = sum(b - a for a, b in spans) / len(spans) if spans else 0.0
    critical = math.ceil(FLEET_TICKETS / CONCURRENCY) * own
    beyond_agents = (wall - critical) / FLEET_TICKETS
    beyond_pool = (wall - pool) / FLEET_TICKETS
    share = cpu / wall
    running_share = fleet.window_cpu / fleet.window if fleet.window > 0 else 1.0
    ok = code == 0 and beyond_pool <= OVERHEAD_LIMIT and running_share <= CPU_LIMIT
    print(f"### Supervisor: {FLEET_TICKETS} tickets, no-op command agent, concurrency 8\n")
    print("| measure | value | target |")
    print("|---|---:|---|")
    print(f"| `cairn fleet start --once` exit | {code} | 0 |")
    print(f"| fleet wall time | {wall:.2f} s | |")
    print(f"| same runs from a plain pool of 8 | {pool:.2f} s | |")
    print(f"| agents' own time, mean (n={len(spans)}) | {ms(own)} ms | |")
    print(
        f"| supervisor overhead per ticket (fleet - pool) / 50 | {ms(beyond_pool)} ms | ≤ 150 ms |"
    )
    beyond = ms(beyond_agents)
    print(f"| wall beyond the agents' own per ticket | {beyond} ms | (with cairn run's own) |")
    print(
        f"| supervisor CPU while agents run | {fleet.window_cpu:.2f} s over {fleet.window:.2f} s"
        f" = {running_share:.1%} of a core | ≤ 5% |"
    )
    print(f"| supervisor CPU, whole life (start-up included) | {cpu:.2f} s = {share:.1%} | |")
    print(f"\nsupervisor targets: {'pass' if ok else 'FAIL'}\n")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--status-only", action="store_true")
    args = parser.parse_args(argv)
    info: dict[str, Any] = machine()
    print(
        f"{info['cairn']}, {info['git']}, Python {info['python']}, {info['cpus']} CPUs, "
        f"load average {info['load'][0]}\n"
    )
    ok = status_part(args.rebuild, args.runs)
    if not args.status_only:
        ok = supervisor_part() and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
