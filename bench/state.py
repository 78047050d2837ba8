"""Benchmark cairn's run state: durable writes, ``cairn status`` and ``cairn catchup``.

Run with the project's interpreter, so that the in-process API can be imported::

    .venv/bin/python bench/state.py            # the full run (about 1–2 minutes)
    .venv/bin/python bench/state.py --quick    # a smoke run: 1,000 tickets, fewer iterations

Three parts, each against baselines measured in the same run:

1. **Durable write latency** (median and p99 of ``--iterations`` calls, round-robin so that
   background noise spreads evenly): ``marker.write`` of a realistic marker (owner, dispatch,
   snapshot), ``summary.save`` of an 8-task and a 50-task change summary, and one full progress
   transition (``runstate.change_summary`` with ``summary.complete_task``: lock, read, parse,
   render, atomic write, marker rewrite, journal append) on each plan. Every operation is also
   timed with ``os.fsync`` turned into a no-op (its CPU and file-system cost without
   durability). Baselines: a plain ``open/write/close`` of the same bytes without fsync, and
   one ``os.fsync`` of a freshly dirtied 4 KiB file.
2. **``cairn status`` over ``--tickets`` tickets** (target: ≤ 1 s for the CLI at 10,000): a
   repository whose state root holds that many ticket directories, about 90% finished (no
   marker; one run with a Completed summary, a journal, the lease and lock files), 8%
   interrupted (a marker whose owner is dead, an In progress summary), 1% owned by this live
   process and 1% by another host. One summary, marker and journal per kind is rendered with
   cairn's own renderers and written with the ticket and run ids substituted. 100 snapshot
   refs: one real ``cairn.wip.save``, and 99 more refs at the same commit (94 on tickets with
   state, 5 on tickets with none). Timed: the CLI (``cairn status --json``), the API
   (``cairn.state.status.status``), ``git status`` and ``python -c pass`` (median of ``--runs``).
   ``--profile`` (or a CLI over the target) adds a cProfile of the API call.
3. **``cairn catchup``** on a ticket (of the same repository) with ``--catchup-runs`` runs, the
   last one interrupted: CLI ``--json`` and API, against ``git status``.

The repository is cached under ``bench/.work/`` keyed by ticket count; ``--rebuild`` rebuilds it.
The markers of live owners are rewritten at every run (their owner is this process). Results:
docs/performance.md.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec

from common import (
    WORK,
    Stat,
    add_cairn_argument,
    dump_json,
    git,
    log,
    ms,
    new_repo,
    print_header,
    ratio,
    run_cmd,
    start,
    table,
    timed,
)

LAYOUT_VERSION = 1  # bump when the generated state changes, to invalidate cached repositories

STATUS_TARGET_S = 1.0
TARGET_TICKETS = 10_000
SNAPSHOT_REFS = 100
REF_ONLY = 5  # of the snapshot refs, tickets without any state directory
FLOOR = "floor: the same reads in plain Python"
REMOTE_HOST = "ci-runner-7.example.internal"
TEMPLATE_TICKET = "TEMPLATE-0"
TEMPLATE_RUN = "20000101-000000Z"
BASE_TIME = datetime(2025, 6, 2, 9, 0, 0, tzinfo=UTC)

TITLES = (
    "Add the settings loader and its schema",
    "Validate ticket ids at the command line",
    "Write the marker atomically at each transition",
    "Record dispatches in the run journal",
    "Render the change summary from the model",
    "Parse hand-edited summaries back",
    "Report progress from the agent's shell",
    "Document the state layout",
)


# --- realistic state, built with cairn's own code ----------------------------------------------


def plan(count: int) -> list[tuple[int, str]]:
    return [
        (n, f"{TITLES[(n - 1) % len(TITLES)]} (part {(n - 1) // 8 + 1})")
        for n in range(1, count + 1)
    ]


def files_of(n: int) -> list[str]:
    return [f"src/cairn/module_{n:02d}.py", f"tests/test_module_{n:02d}.py", "docs/state.md"]


def summary_midway(ticket: str, run: str, tasks: int, now: datetime) -> Any:
    """A summary half-way through a plan: half the tasks completed, the next one in progress."""
    from cairn import summary

    s = summary.scaffold_tasks(ticket, run, plan(tasks), now)
    for n in range(1, tasks // 2 + 1):
        s = summary.start_task(s, n, now)
        s = summary.complete_task(
            s,
            n,
            now,
            files=files_of(n),
            outcome=f"Implemented part {n} as planned; all tests pass.",
            notes="Kept the old entry point for one release." if n % 3 == 0 else None,
        )
    s = summary.set_gate(s, "tests", "pass", now, command=".venv/bin/pytest -q")
    s = summary.set_gate(s, "lint", "pass", now, command=".venv/bin/ruff check .")
    s = summary.add_deferred(s, "Benchmark the status command over many tickets", now)
    return summary.start_task(s, tasks // 2 + 1, now)


def summary_finished(ticket: str, run: str, tasks: int, now: datetime) -> Any:
    from cairn import summary

    s = summary_midway(ticket, run, tasks, now)
    for n in range(tasks // 2 + 1, tasks + 1):
        s = summary.complete_task(s, n, now, files=files_of(n), outcome=f"Part {n} done.")
    return summary.finalise(s, now)


def realistic_marker(ticket: str, run: str, owner: Any, now: datetime, task: int = 5) -> Any:
    from cairn.state import marker

    return marker.Marker(
        skill="impl",
        phase="implement",
        round=1,
        task=task,
        started_at=now - timedelta(minutes=42),
        last_updated=now,
        ticket=ticket,
        run=run,
        owner=owner,
        dispatch=marker.DispatchRecord(role="coder", turn=37, max_turns=150),
        snapshot=marker.SnapshotRef(
            ref=f"refs/cairn/wip/{ticket}", commit="3f5e" * 10, at=now - timedelta(minutes=3)
        ),
    )


def journal_bytes(scratch: Path, ticket: str, run: str, tasks: int, finished: bool) -> bytes:
    """A run's journal written by ``cairn.state.journal.record`` (about 25 + 2 × tasks events)."""
    from cairn.state import journal, owner

    run_dir = scratch / f"journal-{tasks}-{finished}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    me = msgspec.to_builtins(owner.me())
    journal.record(run_dir, "run_started", ticket=ticket, run=run, skill="impl", owner=me)
    journal.record(run_dir, "phase", phase="implement", round=1)
    journal.record(run_dir, "dispatch_started", role="coder", max_turns=150)
    last = tasks if finished else tasks // 2
    for n in range(1, last + 1):
        journal.record(run_dir, "turn", turn=2 * n)
        journal.record(run_dir, "task", task=n, status="in progress")
        journal.record(run_dir, "task", task=n, status="completed", files=files_of(n))
    if not finished:
        journal.record(run_dir, "task", task=last + 1, status="in progress")
        return (run_dir / "run-log.jsonl").read_bytes()
    journal.record(run_dir, "gate", gate="tests", result="pass", command=".venv/bin/pytest -q")
    journal.record(run_dir, "dispatch_finished", role="coder", turns=2 * tasks)
    journal.record(run_dir, "run_finished", status="completed")
    return (run_dir / "run-log.jsonl").read_bytes()


# --- part 1: durable write latency --------------------------------------------------------------


@contextlib.contextmanager
def fsync_disabled() -> Iterator[None]:
    original = os.fsync
    os.fsync = lambda fd: None  # type: ignore[assignment]
    try:
        yield
    finally:
        os.fsync = original


def count_fsyncs(fn: Callable[[], object]) -> int:
    original = os.fsync
    calls = 0

    def counting(fd: int) -> None:
        nonlocal calls
        calls += 1
        original(fd)

    os.fsync = counting  # type: ignore[assignment]
    try:
        fn()
    finally:
        os.fsync = original
    return calls


def plain_write(path: Path, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)


def plain_append(path: Path, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)


@dataclass
class WriteOp:
    name: str
    run: Callable[[], object]
    plain: Callable[[], object]
    size: int = 0  # bytes written, filled in after a first call
    fsyncs: int = 0


def write_ops(root: Path, plans: Sequence[int]) -> tuple[list[WriteOp], Callable[[], None]]:
    """The measured operations and a function that releases their leases."""
    from cairn import summary
    from cairn.state import marker, owner, runstate
    from cairn.state.layout import Layout
    from cairn.util import clock

    shutil.rmtree(root, ignore_errors=True)
    (root / "plain").mkdir(parents=True)
    (root / "standalone").mkdir()
    now = clock.now()
    ops: list[WriteOp] = []

    marker_path = root / "standalone" / ".in-progress.yaml"
    the_marker = realistic_marker("PROJ-1234", "20250602-090000Z", owner.me(), now)
    marker_bytes = marker.render(the_marker).encode()
    ops.append(
        WriteOp(
            "marker.write",
            lambda: marker.write(marker_path, the_marker),
            lambda: plain_write(root / "plain" / "marker", marker_bytes),
            len(marker_bytes),
        )
    )
    for tasks in plans:
        s = summary_midway("PROJ-1234", "20250602-090000Z", tasks, now)
        path = root / "standalone" / f"01_coder_change-summary-{tasks}.md"
        data = summary.render(s).encode()
        target = root / "plain" / f"summary-{tasks}"
        ops.append(
            WriteOp(
                f"summary.save, {tasks} tasks",
                lambda path=path, s=s: summary.save(path, s),
                lambda target=target, data=data: plain_write(target, data),
                len(data),
            )
        )

    layout = Layout(root / "state")
    leases = []
    for tasks in plans:
        ticket = f"PROJ-{tasks}"

        def scaffold(run_id: str, ticket: str = ticket, tasks: int = tasks) -> Any:
            return summary_midway(ticket, run_id, tasks, clock.now())

        ref, lease = runstate.begin(layout, ticket, scaffold, stale_after=86400)
        leases.append(lease)
        done = list(range(1, tasks // 2 + 1))
        turn = iter(range(10**9))

        def transition(ref: Any = ref, done: list[int] = done, turn: Iterator[int] = turn) -> None:
            n = done[next(turn) % len(done)]
            runstate.edit_summary(
                ref,
                lambda s, n=n: summary.complete_task(
                    s, n, clock.now(), files=files_of(n), outcome=f"Part {n} done again."
                ),
                "task",
                task=n,
                status="completed",
                files=files_of(n),
            )

        transition()  # so that the baseline below writes the bytes a transition writes
        summary_path = ref.summary_path()
        assert summary_path is not None
        summary_bytes = summary_path.read_bytes()
        marker_now = ref.marker_path.read_bytes()
        journal_line = (ref.run_dir / "run-log.jsonl").read_bytes().splitlines(keepends=True)[-1]
        base = root / "plain" / f"transition-{tasks}"

        def plain_transition(
            base: Path = base,
            s: bytes = summary_bytes,
            m: bytes = marker_now,
            j: bytes = journal_line,
        ) -> None:
            plain_write(base.with_suffix(".md"), s)
            plain_write(base.with_suffix(".yaml"), m)
            plain_append(base.with_suffix(".jsonl"), j)

        ops.append(
            WriteOp(
                f"transition, {tasks} tasks",
                transition,
                plain_transition,
                len(summary_bytes) + len(marker_now) + len(journal_line),
            )
        )

    def release() -> None:
        for lease in leases:
            lease.release()

    return ops, release


def fsync_4k(path: Path) -> Callable[[], float]:
    """Dirty a 4 KiB file (untimed), then time one fsync of it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    block = bytearray(os.urandom(4096))
    counter = 0

    def run() -> float:
        nonlocal counter
        counter += 1
        block[:8] = counter.to_bytes(8, "little")
        os.pwrite(fd, block, 0)
        started = time.perf_counter()
        os.fsync(fd)
        return time.perf_counter() - started

    return run


def measure_writes(iterations: int) -> dict[str, Any]:
    root = WORK / "state-writes"
    ops, release = write_ops(root, (8, 50))
    try:
        for op in ops:  # warm-up; also counts the fsyncs of one call
            op.fsyncs = count_fsyncs(op.run)
            op.plain()
        fsync = fsync_4k(root / "plain" / "fsync-4k")
        fsync()
        durable: dict[str, list[float]] = {op.name: [] for op in ops}
        no_fsync: dict[str, list[float]] = {op.name: [] for op in ops}
        plain: dict[str, list[float]] = {op.name: [] for op in ops}
        fsyncs: list[float] = []
        for i in range(iterations):
            if i % max(1, iterations // 4) == 0:
                log(f"durable writes: round {i + 1} of {iterations}…")
            fsyncs.append(fsync())
            for op in ops:
                durable[op.name].append(timed(op.run))
                plain[op.name].append(timed(op.plain))
            with fsync_disabled():
                for op in ops:
                    no_fsync[op.name].append(timed(op.run))
    finally:
        release()
    return {
        "iterations": iterations,
        "fsync_4k": Stat(fsyncs),
        "ops": [
            {
                "name": op.name,
                "bytes": op.size,
                "fsyncs": op.fsyncs,
                "durable": Stat(durable[op.name]),
                "no_fsync": Stat(no_fsync[op.name]),
                "plain": Stat(plain[op.name]),
            }
            for op in ops
        ],
    }


# --- part 2 and 3: a repository with many tickets ----------------------------------------------


def kind_of(i: int) -> str:
    """About 90% finished, 8% interrupted, 1% live on this host, 1% live on another host."""
    slot = i % 100
    if slot == 50:
        return "live"
    if slot == 99:
        return "remote"
    if slot % 12 == 1:  # 1, 13, 25, 37, 61, 73, 85, 97
        return "interrupted"
    return "finished"


def ticket_name(i: int) -> str:
    return f"PROJ-{i:05d}"


def run_id_of(i: int, k: int = 0) -> str:
    when = BASE_TIME - timedelta(minutes=7 * i) + timedelta(hours=3 * k)
    return when.strftime("%Y%m%d-%H%M%SZ")


@dataclass
class StateRepo:
    path: Path
    tickets: int
    kinds: dict[str, int]
    catchup_ticket: str
    catchup_runs: int
    refs: int

    @property
    def state_root(self) -> Path:
        return self.path / ".git" / "cairn"

    def expected_states(self) -> dict[str, int]:
        return {
            "done": self.kinds["finished"],
            "interrupted": self.kinds["interrupted"],
            "in_progress": self.kinds["live"] + self.kinds["remote"],
            "none": REF_ONLY,
        }


class Templates:
    """One rendered file per kind, with placeholders for the ticket and the run id."""

    def __init__(self, scratch: Path) -> None:
        from cairn import summary
        from cairn.state import marker, owner
        from cairn.util import clock

        now = clock.now()
        t, r = TEMPLATE_TICKET, TEMPLATE_RUN
        self.finished_summary = summary.render(summary_finished(t, r, 8, now))
        self.midway_summary = summary.render(summary_midway(t, r, 8, now))
        self.finished_journal = journal_bytes(scratch, t, r, 8, finished=True).decode()
        self.midway_journal = journal_bytes(scratch, t, r, 8, finished=False).decode()
        dead = subprocess.Popen(["true"])
        self.dead_owner = owner.of(dead.pid)
        dead.wait()  # the pid is gone; a reuse is caught by its start time
        dead_marker = realistic_marker(t, r, self.dead_owner, now - timedelta(hours=5), task=5)
        self.dead_marker = marker.render(dead_marker)
        self.lease = msgspec.json.encode(self.dead_owner).decode()

    @staticmethod
    def fill(template: str, ticket: str, run: str) -> bytes:
        return template.replace(TEMPLATE_TICKET, ticket).replace(TEMPLATE_RUN, run).encode()


def write_file(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def write_run(ticket_dir: Path, ticket: str, run: str, summary: str, journal: str) -> None:
    run_dir = ticket_dir / run
    run_dir.mkdir()
    write_file(run_dir / "01_coder_change-summary.md", Templates.fill(summary, ticket, run))
    write_file(run_dir / "run-log.jsonl", Templates.fill(journal, ticket, run))


def build_repo(tickets: int, catchup_runs: int, rebuild: bool) -> StateRepo:
    path = WORK / f"state-{tickets}"
    info_path = path / ".git" / "cairn-bench-state.json"
    kinds = Counter(kind_of(i) for i in range(tickets))
    catchup_ticket = ticket_name(1)  # an interrupted slot
    repo = StateRepo(path, tickets, dict(kinds), catchup_ticket, catchup_runs, SNAPSHOT_REFS)
    wanted = {"layout": LAYOUT_VERSION, "tickets": tickets, "catchup_runs": catchup_runs}
    if not rebuild and info_path.exists() and json.loads(info_path.read_text()) == wanted:
        refresh_live(repo)
        return repo
    started = new_repo(path, f"{tickets:,} tickets")
    readme = path / "README.md"
    readme.write_text("# bench\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "initial")

    scratch = WORK / "state-scratch"
    tpl = Templates(scratch)
    tickets_dir = repo.state_root / "tickets"
    tickets_dir.mkdir(parents=True)
    for i in range(tickets):
        kind, ticket = kind_of(i), ticket_name(i)
        ticket_dir = tickets_dir / ticket
        ticket_dir.mkdir()
        write_file(ticket_dir / "lease", tpl.lease.encode())
        write_file(ticket_dir / ".lock", b"")
        runs = catchup_runs if ticket == catchup_ticket else 1
        for k in range(runs - 1):  # earlier, finished runs of the catch-up ticket
            write_run(
                ticket_dir, ticket, run_id_of(i, k), tpl.finished_summary, tpl.finished_journal
            )
        run = run_id_of(i, runs - 1)
        if kind == "finished":
            write_run(ticket_dir, ticket, run, tpl.finished_summary, tpl.finished_journal)
        else:
            write_run(ticket_dir, ticket, run, tpl.midway_summary, tpl.midway_journal)
        if kind == "interrupted":
            write_file(
                ticket_dir / ".in-progress.yaml", Templates.fill(tpl.dead_marker, ticket, run)
            )
    refresh_live(repo)
    add_snapshot_refs(repo)
    git(path, "status", "--porcelain")
    info_path.write_text(json.dumps(wanted))
    log(f"built in {time.monotonic() - started:.1f} s")
    return repo


def refresh_live(repo: StateRepo) -> None:
    """Markers of live owners: this process on this host, or another host updated just now."""
    from cairn.state import marker, owner
    from cairn.state.owner import Owner
    from cairn.util import clock

    now = clock.now()
    me = owner.me()
    remote = Owner(host=REMOTE_HOST, pid=4242, pid_started_at=now - timedelta(hours=1))
    for i in range(repo.tickets):
        kind = kind_of(i)
        if kind in ("live", "remote"):
            ticket = ticket_name(i)
            the_owner = me if kind == "live" else remote
            data = marker.render(realistic_marker(ticket, run_id_of(i), the_owner, now))
            write_file(repo.state_root / "tickets" / ticket / ".in-progress.yaml", data.encode())


def add_snapshot_refs(repo: StateRepo) -> None:
    """One real snapshot of the catch-up ticket; the other refs point at the same commit."""
    from cairn import wip

    readme = repo.path / "README.md"
    original = readme.read_text()
    readme.write_text(original + "work in progress\n")
    try:
        saved = wip.save(
            repo.path,
            ticket=repo.catchup_ticket,
            reason="cutoff",
            run_id=run_id_of(1, repo.catchup_runs - 1),
        )
    finally:
        readme.write_text(original)
    if not saved.created or not saved.commit:
        raise RuntimeError(f"the snapshot of {repo.catchup_ticket} recorded nothing: {saved}")
    step = max(1, repo.tickets // (SNAPSHOT_REFS - REF_ONLY))
    others = [ticket_name(i) for i in range(0, repo.tickets, step) if i != 1]
    others = others[: SNAPSHOT_REFS - REF_ONLY - 1] + [f"SNAP-{k}" for k in range(REF_ONLY)]
    lines = b"".join(
        b"create refs/cairn/wip/%s %s\n" % (t.encode(), saved.commit.encode()) for t in others
    )
    git(repo.path, "update-ref", "--stdin", data=lines)
    count = len(git(repo.path, "for-each-ref", "refs/cairn/wip/").splitlines())
    if count != SNAPSHOT_REFS:
        raise RuntimeError(f"expected {SNAPSHOT_REFS} snapshot refs, found {count}")


def round_robin(methods: dict[str, Callable[[], object]], runs: int) -> dict[str, Stat]:
    for fn in methods.values():  # warm-up: page cache, pyc files
        fn()
    times: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(runs):
        for name, fn in methods.items():
            times[name].append(timed(fn))
    return {name: Stat(samples) for name, samples in times.items()}


def check_status(repo: StateRepo, rows: list[Any]) -> dict[str, int]:
    """A wrong benchmark is worse than none: the rows must match what was built."""
    states = Counter(row.state for row in rows)
    expected = repo.expected_states()
    if dict(states) != expected:
        raise RuntimeError(f"cairn status states {dict(states)}, expected {expected}")
    with_ref = sum(1 for row in rows if row.snapshot)
    if with_ref != SNAPSHOT_REFS:
        raise RuntimeError(f"{with_ref} rows have a snapshot, expected {SNAPSHOT_REFS}")
    return dict(states)


def raw_walk(state_root: Path) -> int:
    """The floor: the same directory scans and reads as a status pass, in plain Python, with no
    validation, no YAML, no models; returns the number of tickets with a marker or a run."""
    run_id = re.compile(r"\d{8}-\d{6}Z(?:-\d+)?")
    found = 0
    with os.scandir(state_root / "tickets") as entries:
        for entry in entries:
            names = os.listdir(entry.path)
            runs = sorted(n for n in names if run_id.fullmatch(n))
            if ".in-progress.yaml" in names:
                with open(os.path.join(entry.path, ".in-progress.yaml"), "rb") as handle:
                    handle.read()
            elif not runs:
                continue
            found += 1
            if runs:
                run_dir = os.path.join(entry.path, runs[-1])
                for name in os.listdir(run_dir):
                    if name.endswith("_coder_change-summary.md"):
                        with open(os.path.join(run_dir, name), "rb") as handle:
                            handle.read(8192)
    return found


def measure_status(repo: StateRepo, cairn: Path, runs: int) -> dict[str, Any]:
    from cairn.state.status import status

    path = str(repo.path)
    states = check_status(repo, status(repo.path))
    cli_rows = json.loads(run_cmd([str(cairn), "status", "--json", "-C", path]))
    if raw_walk(repo.state_root) != repo.tickets:
        raise RuntimeError("the plain-Python walk did not find every ticket")
    if len(cli_rows) != sum(states.values()):
        raise RuntimeError(f"the CLI printed {len(cli_rows)} rows, the API {sum(states.values())}")
    log(f"status over {repo.tickets:,} tickets: {runs} runs…")
    stats = round_robin(
        {
            "git status": lambda: run_cmd(["git", "status"], cwd=repo.path),
            "python -c pass": lambda: run_cmd([sys.executable, "-c", "pass"]),
            "cairn --version": lambda: run_cmd([str(cairn), "--version"]),
            "cairn status --json (CLI)": lambda: run_cmd(
                [str(cairn), "status", "--json", "-C", path]
            ),
            "cairn status, table (CLI)": lambda: run_cmd([str(cairn), "status", "-C", path]),
            "cairn.state.status.status (API)": lambda: status(repo.path),
            FLOOR: lambda: raw_walk(repo.state_root),
        },
        runs,
    )
    return {"rows": sum(states.values()), "states": states, "times": stats}


def measure_catchup(repo: StateRepo, cairn: Path, runs: int) -> dict[str, Any]:
    from cairn.state.catchup import catchup

    ticket, path = repo.catchup_ticket, str(repo.path)
    report = catchup(repo.path, ticket)
    latest = run_id_of(1, repo.catchup_runs - 1)
    if report.state != "interrupted" or report.run != latest or report.snapshot is None:
        raise RuntimeError(f"unexpected catch-up report: {report.state} {report.run}")
    cli = json.loads(run_cmd([str(cairn), "catchup", ticket, "--json", "-C", path]))
    if cli["run"] != latest:
        raise RuntimeError(f"the CLI reported run {cli['run']}, expected {latest}")
    log(f"catchup on a ticket with {repo.catchup_runs} runs: {runs} runs…")
    stats = round_robin(
        {
            "git status": lambda: run_cmd(["git", "status"], cwd=repo.path),
            "python -c pass": lambda: run_cmd([sys.executable, "-c", "pass"]),
            f"cairn catchup {ticket} --json (CLI)": lambda: run_cmd(
                [str(cairn), "catchup", ticket, "--json", "-C", path]
            ),
            "cairn.state.catchup.catchup (API)": lambda: catchup(repo.path, ticket),
        },
        runs,
    )
    return {"ticket": ticket, "runs_of_ticket": repo.catchup_runs, "times": stats}


def profile_status(repo: StateRepo, top: int) -> dict[str, Any]:
    from cairn.state.status import status

    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    status(repo.path)
    profiler.disable()
    total = time.perf_counter() - started
    stats = pstats.Stats(profiler, stream=io.StringIO())
    rows = []
    for (filename, line, name), (_, calls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        short = re.sub(r"^.*/(?:site-packages|src|lib/python3\.\d+)/", "", filename)
        rows.append(
            {
                "function": f"{short}:{line}({name})",
                "calls": calls,
                "tottime_s": tottime,
                "cumtime_s": cumtime,
            }
        )
    by_tot = sorted(rows, key=lambda r: r["tottime_s"], reverse=True)[:top]
    by_cum = sorted(rows, key=lambda r: r["cumtime_s"], reverse=True)[:top]
    return {"total_s": total, "by_tottime": by_tot, "by_cumtime": by_cum}


# --- reporting --------------------------------------------------------------------------------


def writes_tables(data: dict[str, Any]) -> str:
    fsync = data["fsync_4k"]
    rows = [
        [
            "operation",
            "bytes",
            "fsyncs",
            "median (ms)",
            "p99 (ms)",
            "no fsync: median (ms)",
            "plain write: median (ms)",
        ]
    ]
    for op in data["ops"]:
        rows.append(
            [
                op["name"],
                f"{op['bytes']:,}",
                str(op["fsyncs"]),
                ms(op["durable"].median),
                ms(op["durable"].p99),
                ms(op["no_fsync"].median),
                ms(op["plain"].median),
            ]
        )
    rows.append(
        ["os.fsync of a 4 KiB file", "4,096", "1", ms(fsync.median), ms(fsync.p99), "—", "—"]
    )
    ratios = [["operation", "durable / plain write", "durable / no fsync", "durable / one fsync"]]
    for op in data["ops"]:
        d = op["durable"].median
        ratios.append(
            [
                op["name"],
                ratio(d, op["plain"].median),
                ratio(d, op["no_fsync"].median),
                ratio(d, fsync.median),
            ]
        )
    return table(rows) + "\n\n" + table(ratios)


def times_table(stats: dict[str, Stat], baselines: Sequence[str]) -> str:
    rows = [["command", "median (ms)", "min (ms)", *(f"/ {b}" for b in baselines)]]
    for name, stat in stats.items():
        rows.append(
            [
                name,
                ms(stat.median),
                ms(stat.min),
                *(ratio(stat.median, stats[b].median) for b in baselines),
            ]
        )
    return table(rows)


def profile_table(entries: list[dict[str, Any]]) -> str:
    rows = [["function", "calls", "tottime (ms)", "cumtime (ms)"]]
    for e in entries:
        rows.append([e["function"], f"{e['calls']:,}", ms(e["tottime_s"]), ms(e["cumtime_s"])])
    return table(rows)


def as_json(value: Any) -> Any:
    if isinstance(value, Stat):
        return value.as_json()
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_json(v) for v in value]
    return value


# --- main -------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 1,000 tickets, 30 writes"
    )
    parser.add_argument(
        "--tickets", type=int, help=f"tickets in the repository ({TARGET_TICKETS:,})"
    )
    parser.add_argument("--iterations", type=int, help="calls per write operation (200)")
    parser.add_argument("--runs", type=int, help="timed runs per command (5)")
    parser.add_argument("--catchup-runs", type=int, default=100, help="runs of the catch-up ticket")
    parser.add_argument("--profile", action="store_true", help="always profile the status API")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached repository")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    add_cairn_argument(parser)
    args = parser.parse_args(argv)
    args.tickets = args.tickets or (1_000 if args.quick else TARGET_TICKETS)
    args.iterations = args.iterations or (30 if args.quick else 200)
    args.runs = args.runs or (3 if args.quick else 5)
    if args.tickets < 200 or args.iterations < 1 or args.runs < 1 or args.catchup_runs < 1:
        parser.error("need --tickets ≥ 200 and --iterations, --runs, --catchup-runs ≥ 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    ready = start("state.py", argv, args.cairn, "cairn.state.status", with_filesystem=True)
    if ready is None:
        return 2
    info, command = ready
    started = time.monotonic()

    writes = measure_writes(args.iterations)
    repo = build_repo(args.tickets, args.catchup_runs, args.rebuild)
    status_result = measure_status(repo, args.cairn, args.runs)
    catchup_result = measure_catchup(repo, args.cairn, args.runs)
    cli = status_result["times"]["cairn status --json (CLI)"].median
    api = status_result["times"]["cairn.state.status.status (API)"].median
    met = cli <= STATUS_TARGET_S if args.tickets >= TARGET_TICKETS else None
    profile = None
    if args.profile or cli > STATUS_TARGET_S or api > STATUS_TARGET_S:
        log("profiling the status API…")
        profile = profile_status(repo, 15)
    info["load_end"] = [round(x, 2) for x in os.getloadavg()]
    info["elapsed_s"] = round(time.monotonic() - started, 1)

    if args.json:
        dump_json(
            as_json(
                {
                    "command": command,
                    "machine": info,
                    "writes": writes,
                    "status": {
                        "tickets": args.tickets,
                        "snapshot_refs": SNAPSHOT_REFS,
                        "target_s": STATUS_TARGET_S,
                        "target_met": met,
                        **status_result,
                    },
                    "catchup": catchup_result,
                    "profile": profile,
                }
            )
        )
        return 0

    print_header(command, info)
    print(f"# {info['elapsed_s']} s in all (building the repository included when not cached)")
    print(f"\n## Durable writes ({writes['iterations']} calls each, round-robin)\n")
    print(writes_tables(writes))
    print(
        f"\n## cairn status over {args.tickets:,} tickets and {SNAPSHOT_REFS} snapshot refs "
        f"(median of {args.runs})\n"
    )
    states = ", ".join(f"{k} {v:,}" for k, v in status_result["states"].items())
    print(f"rows: {status_result['rows']:,} ({states})\n")
    print(times_table(status_result["times"], ("git status", "python -c pass", FLOOR)))
    verdict = "—" if met is None else ("pass" if met else "FAIL")
    extra = "" if met is not None else f" (the target applies at {TARGET_TICKETS:,} tickets)"
    print(
        f"\ntarget: CLI ≤ {STATUS_TARGET_S:.0f} s at {TARGET_TICKETS:,} tickets: "
        f"{cli:.3f} s{extra} → {verdict}"
    )
    print(
        f"\n## cairn catchup on {catchup_result['ticket']} ({catchup_result['runs_of_ticket']} "
        f"runs; median of {args.runs})\n"
    )
    print(times_table(catchup_result["times"], ("git status", "python -c pass")))
    if profile is not None:
        print(
            f"\n## cProfile of cairn.state.status.status "
            f"({profile['total_s']:.3f} s under the profiler)\n"
        )
        print("By own time:\n")
        print(profile_table(profile["by_tottime"]))
        print("\nBy cumulative time:\n")
        print(profile_table(profile["by_cumtime"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
