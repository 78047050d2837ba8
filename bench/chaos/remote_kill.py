"""Kill a portable run (``cairn run --remote origin``) on one machine, then resume it on another
(a fresh ``git clone``), and again, until a resume completes; check that the remote loses
nothing a kill should not lose and that no completed task is done again.

    .venv/bin/python bench/chaos/remote_kill.py --quick          # 3 trials, about 1 minute
    .venv/bin/python bench/chaos/remote_kill.py --trials 40      # about 15 minutes
    .venv/bin/python bench/chaos/remote_kill.py --self-test      # CI: 2 trials, 9 faults, 40 s
    .venv/bin/python bench/chaos/remote_kill.py --replay SEED --keep  # one trial again

(``--trials N`` is ``--cases N``.)

Each trial is a bare ``origin`` (``git init --bare -b main``) and a repository pushed to it
("machine A"), a 4-task plan and ``bench/chaos/agent.py`` (kind ``command``: it does what the
prompt asks, one task a turn — ``cairn task start``, two files, ``cairn task done``, a commit
every other task — and logs every task it starts and every file it writes, fsynced, to a log of
the trial's own), with ``[run] push_every = "1s"``. ``cairn run PLAN --ticket RK --remote
origin`` runs on A and is killed at a random instant of a run's usual length, in one of three
ways, taking turns:

- ``sigkill``: a lost machine: SIGKILL to cairn's process group and to every process below it
  (its agent has a group of its own);
- ``cancel``: GitHub Actions cancelling the job: SIGINT to cairn's process group, SIGTERM 7.5 s
  later if it is still alive, SIGKILL 2.5 s after that;
- ``sigterm``: SIGTERM alone to the group (a ``timeout`` or a VM shutting down), SIGKILL after
  30 s.

Whatever a kill leaves running on that machine is then killed: the machine is gone. The next
machine is a fresh ``git clone`` of ``origin`` that runs ``cairn resume RK --remote origin
--takeover`` (``cairn run`` again when the remote holds no run yet), killed the same way, 1 to 3
kills a trial, until one exits 0. A kill's instant is drawn over a run's usual length, or, for a
quarter of the kills, it is during the run's claim (its first push, one generation above
origin's): origin's ``pre-receive`` hook holds that push 1 s, and the kill comes 0.3 s into it.
Every cairn gets a ``HOME`` of the trial and a ``TMPDIR`` of its machine.

Violations:

- ``not_completed``: no exit 0 within 10 machines, or the remote's run state does not say every
  task completed;
- ``task_redone``: the agent started a task after the remote's journal (the run state every
  machine continued) recorded it completed;
- ``completed_twice``: the remote's journal records a task completed more than once;
- ``files_missing``: a task's file (its bytes) is neither on the remote's branch nor in its
  snapshot at the end;
- ``slow_cancel``: cairn had not exited 5 s after the SIGINT of a cancel (or the SIGTERM);
- ``signal_ignored``: the agent started a task more than 2.5 s (cairn gives it 2 s to stop)
  after the SIGINT of a cancel (or the SIGTERM) while cairn was running: the signal was lost;
- ``cancel_lost_work``: after a cancel or a SIGTERM, a file the agent had written, or a task
  completed, before the signal is not on the remote (snapshot or branch; journal), or the run
  said ``NOT pushed``;
- ``stale_remote``: after a SIGKILL, a file written, or a task completed, more than
  ``push_every`` + 2 s before the kill is not on the remote;
- ``generation_decreased``: the remote's state generation went down (between machines, or along
  ``refs/cairn/state/RK``'s history: its ``Cairn-Generation`` trailers);
- ``run_failed``: a run or resume exited 1, printed a traceback, or did not finish in time;
- ``resume_refused``: a resume exited 2 other than for a remote that holds no run yet;
- ``unreadable_state``: a state file of a clone or of the remote's run state does not parse,
  ``git fsck`` of the remote fails, or ``cairn status``/``catchup`` (``--remote`` from a fresh
  clone too) fail;
- ``wrote_outside``: a machine's cairn (or its agent) created or changed a file outside its own
  clone and temp dir, the remote and the agent's log: in another machine's clone or anywhere
  else in the trial, or outside the trial's directory.

``--self-test`` runs two trials with shorter tasks and its own kills, and injects a fault of
every kind: cairn frozen 6 s right after a cancel's SIGINT, and a file written in ``HOME``
meanwhile (``slow_cancel``, ``wrote_outside``); origin refusing pushes once the run's claim is
there, then a SIGTERM (``cancel_lost_work``); origin refusing every push and the agent stopped
after its first file, then a SIGKILL 3.5 s later (``stale_remote``); a SIGTERM that never
reaches cairn (``signal_ignored``); and once a trial is done, a change summary torn, a state
commit of generation 0 pushed on origin's, the agent run on a completed task, origin's branch
and snapshot reset (``unreadable_state``, ``generation_decreased``, ``task_redone``,
``files_missing``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

import agent
import checks
import processes
from killing import spawn

from cairn.run.portable import CANCEL_GRACE
from cairn.terms import ENV_RUN_DIR, ENV_TICKET
from common import (
    HERE,
    Sizes,
    Tally,
    cairn_argv,
    case_seeds,
    cli,
    git,
    log,
    make_project,
    parse_args,
    plan_text,
    scratch,
)

SIZES = Sizes(quick=3, full=40, unit="trials")
TICKET = "RK"
TASKS = ["Parse the input", "Report errors", "Write the index", "Document the format"]
PUSH_EVERY = 1.0  # [run] push_every, seconds
SLACK = 2.0  # a SIGKILL may lose what is younger than push_every + this
CANCEL_LIMIT = 5.0  # seconds from SIGINT (or SIGTERM) to cairn's exit
LATE_START = CANCEL_GRACE + 0.5  # a task started later than this after the signal: ignored
SIGTERM_AFTER = 7.5  # GitHub's runner: SIGINT, SIGTERM 7.5 s later, SIGKILL 2.5 s after that
SIGKILL_AFTER = 2.5
TERM_ALONE_LIMIT = 30.0
MAX_MACHINES = 10
AT_CLAIM = 0.25  # the share of kills sent during the run's claim push
CLAIM_HOLD = 1.0  # seconds origin holds that push (its pre-receive hook)
CLAIM_KILL = 0.3  # seconds into the held push the kill comes
HOP_TIMEOUT = 300.0
PAUSE = "0.3"  # the agent's pause after each file it writes
SELF_TEST_PAUSE = "0.1"  # shorter tasks: the self-test is part of the test suite
KILLS = ["sigkill", "cancel", "sigterm"]
STATE = f"refs/cairn/state/{TICKET}"
BRANCH = f"refs/heads/cairn/{TICKET}"
WIP = f"refs/cairn/wip/{TICKET}"
GENERATION = "Cairn-Generation: "
TIMES: dict[str, list[float]] = {}  # kill → seconds from its signal to cairn's exit

KINDS = {
    "not_completed": f"no exit 0 within {MAX_MACHINES} machines, or a task not completed",
    "task_redone": "a task was started after the remote's journal recorded it completed",
    "completed_twice": "the remote's journal records a task completed more than once",
    "files_missing": "a task's file is on neither the remote's branch nor its snapshot",
    "slow_cancel": f"cairn had not exited {CANCEL_LIMIT:g} s after a cancel's SIGINT (or SIGTERM)",
    "signal_ignored": "the agent started a task after a cancel's SIGINT (or SIGTERM) + its grace",
    "cancel_lost_work": "after a cancel or SIGTERM, work done before the signal is not pushed",
    "stale_remote": f"after a SIGKILL, work older than push_every + {SLACK:g} s is not pushed",
    "generation_decreased": "the remote's state generation went down",
    "run_failed": "run or resume exited 1, printed a traceback or did not finish in time",
    "resume_refused": "resume exited 2 other than for a remote holding no run yet",
    "unreadable_state": "a state file does not parse, git fsck of the remote or a read fails",
    "wrote_outside": "a machine wrote outside its clone, its temp dir, the remote and the log",
}

FIGURES = [
    "trials",
    "completed runs",
    "machines",
    "fresh clones resumed",
    "new runs on a later machine (the remote held no run yet)",
    "kills",
    "kills: sigkill (a lost machine)",
    "kills: cancel (SIGINT, SIGTERM 7.5 s, SIGKILL 2.5 s)",
    "kills: sigterm alone",
    "kills during the claim push (held 1 s by origin)",
    "kills that came after the run had ended",
    "kills not sent (the run had ended first)",
    "cancels that needed the SIGTERM",
    "cancels that needed the SIGKILL",
    "cancel to exit, median (s)",
    "cancel to exit, max (s)",
    "sigterm to exit, median (s)",
    "sigterm to exit, max (s)",
    "oldest work lost at a sigkill (s)",
    "cutoffs without a kill (exit 3)",
    "tasks started",
    "tasks started again (not completed on origin when their machine died)",
    "tasks redone",
    "files written",
    "final generation, max",
    "faults injected",
    "faults missed",
]


# --- a trial and its machines --------------------------------------------------------------------


@dataclass
class Hop:
    """One machine's cairn: how it ended and what was done to it."""

    machine: str
    argv: list[str]
    kill: str | None = None
    started: float = 0.0  # wall clock
    signalled: float | None = None  # wall clock of the kill's (first) signal
    to_exit: float | None = None  # seconds from that signal to cairn's exit
    code: int | None = None  # None: killed by SIGKILL
    output: str = ""
    at_claim: bool = False  # killed during its claim (its first push), held by origin
    ended: float = 0.0  # wall clock

    def describe(self) -> str:
        what = f"{self.machine} {self.argv[3]}"
        if self.kill is None:
            return f"{what} → {self.code}"
        assert self.signalled is not None
        at = self.signalled - self.started
        exit_ = f", exit {self.code} after {self.to_exit:.2f} s" if self.to_exit else ""
        claim = " (in its claim push)" if self.at_claim else ""
        return f"{what} {self.kill} at {at:.2f} s{claim}{exit_}"


@dataclass
class Trial:
    """A bare origin, the machines that continue its ticket, and the agent's log."""

    number: int
    seed: int
    root: Path
    pause: str = PAUSE
    dir: Path = field(init=False)
    origin: Path = field(init=False)
    plan: Path = field(init=False)
    agent_log: Path = field(init=False)
    machines: list[Path] = field(default_factory=list)
    hops: list[Hop] = field(default_factory=list)
    generations: list[int] = field(default_factory=list)  # the remote's after each machine

    def __post_init__(self) -> None:
        self.dir = self.root / f"trial-{self.number}"
        self.dir.mkdir(parents=True)
        (self.dir / "home").mkdir()
        self.origin = self.dir / "origin.git"
        git(self.dir, "init", "-q", "--bare", "-b", "main", str(self.origin))
        self.plan = self.dir / "plan.md"
        self.plan.write_text(plan_text("portable runs", TASKS))
        self.agent_log = self.dir / "agent.jsonl"

    def where(self) -> str:
        hops = "; ".join(h.describe() for h in self.hops) or "none"
        return f"trial {self.number} (seed {self.seed}; {hops})"

    def new_machine(self) -> Path:
        """Machine A: a repository pushed to origin; every later one a fresh clone of origin."""
        name = chr(ord("A") + len(self.machines))
        path = self.dir / name
        if not self.machines:
            make_project(path, config())
            git(path, "remote", "add", "origin", str(self.origin))
            git(path, "push", "-q", "origin", "main")
        else:
            # --no-local: objects copied, not hard-linked (a machine of its own shares no inode)
            git(self.dir, "clone", "-q", "--no-local", str(self.origin), str(path))
        (self.dir / f"{name}.tmp").mkdir()
        self.machines.append(path)
        return path

    def env(self, machine: Path) -> dict[str, str]:
        return {
            "CHAOS_AGENT_LOG": str(self.agent_log),
            "CHAOS_AGENT_PAUSE": self.pause,
            "HOME": str(self.dir / "home"),
            "TMPDIR": str(self.dir / f"{machine.name}.tmp"),
        }

    def agent_records(self) -> list[dict[str, Any]]:
        if not self.agent_log.exists():
            return []
        out = []
        for line in self.agent_log.read_text().splitlines():
            with contextlib.suppress(ValueError):  # a line torn by a kill of the agent
                out.append(json.loads(line))
        return out


def config() -> str:
    command = json.dumps([sys.executable, str(HERE / "agent.py")])
    return (
        "[agent]\n"
        'kind = "command"\n'
        f"command = {command}\n"
        "max_turns = 8\n"
        "max_continuations = 1\n"
        "budget_pressure_turns = 1\n"
        "cutoff_timeout_ms = 2000\n\n"
        "[loop]\n"
        'phases = ["implement"]\n\n'
        "[run]\n"
        f'push_every = "{PUSH_EVERY:g}s"\n'
    )


# --- what the remote holds ------------------------------------------------------------------------


@dataclass
class Remote:
    """The remote's refs of the ticket at one instant."""

    state: str | None
    files: set[tuple[str, str]]  # (path, blob) on the branch or in the snapshot
    journal: list[dict[str, Any]]
    generation: int

    def completed(self) -> set[int]:
        return {
            int(e["task"])
            for e in self.journal
            if e.get("event") == "task" and e.get("status") == "completed"
        }


def _out(repo: Path, *args: str) -> str | None:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, check=False)
    return done.stdout.decode("utf-8", "surrogateescape") if done.returncode == 0 else None


def tree_blobs(repo: Path, ref: str) -> set[tuple[str, str]]:
    listing = _out(repo, "ls-tree", "-r", "-z", ref) or ""
    out = set()
    for record in listing.split("\0"):
        if "\t" in record:
            meta, path = record.split("\t", 1)
            _, kind, sha = meta.split()
            if kind == "blob":
                out.add((path, sha))
    return out


def generation_of(repo: Path, sha: str) -> int:
    body = _out(repo, "log", "-1", "--format=%B", sha) or ""
    for line in body.splitlines():
        if line.startswith(GENERATION) and line[len(GENERATION) :].strip().isdigit():
            return int(line[len(GENERATION) :])
    return 0


def remote_now(origin: Path) -> Remote:
    state = (_out(origin, "rev-parse", "--verify", "-q", STATE) or "").strip() or None
    files = tree_blobs(origin, BRANCH) | tree_blobs(origin, WIP)
    journal: list[dict[str, Any]] = []
    if state is not None:
        listing = (_out(origin, "ls-tree", "--name-only", state) or "").split()
        for run in sorted(n for n in listing if n[:1].isdigit()):
            text = _out(origin, "show", f"{state}:{run}/run-log.jsonl") or ""
            for line in text.splitlines():
                with contextlib.suppress(ValueError):
                    journal.append(json.loads(line))
    return Remote(state, files, journal, generation_of(origin, state) if state else 0)


def local_completed(machine: Path) -> dict[int, float]:
    """When this machine's journals recorded each task completed (epoch seconds)."""
    ticket_dir = checks.state_root(machine) / "tickets" / TICKET
    return checks.completed_at(checks.run_dirs(ticket_dir) if ticket_dir.is_dir() else [])


# --- nothing written outside ----------------------------------------------------------------------


def listing(root: Path, skip: set[Path]) -> dict[str, tuple[int, int]]:
    """Every file and directory below ``root`` but ``skip``: size and mtime of each file."""
    out: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if here / d not in skip]
        for name in dirnames:
            out[str((here / name).relative_to(root)) + "/"] = (0, 0)
        for name in filenames:
            path = here / name
            if path in skip:
                continue
            with contextlib.suppress(OSError):
                stat = path.lstat()
                out[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return out


def changed(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def outside_of(trial: Trial, machine: Path) -> set[Path]:
    """What a machine may write: its clone, its temp dir, the remote, the agent's log."""
    return {machine, trial.dir / f"{machine.name}.tmp", trial.origin, trial.agent_log}


# --- one machine ----------------------------------------------------------------------------------


class Reader:
    """Drains a process's output in threads, so a kill's timing never waits on a full pipe."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.chunks: list[bytes] = []
        self.threads = [
            threading.Thread(target=self._read, args=(stream,), daemon=True)
            for stream in (proc.stdout, proc.stderr)
            if stream is not None
        ]
        for thread in self.threads:
            thread.start()

    def _read(self, stream: Any) -> None:
        for chunk in iter(lambda: stream.read1(65536), b""):
            self.chunks.append(chunk)

    def text(self, timeout: float = 5.0) -> str:
        for thread in self.threads:
            thread.join(timeout)
        return b"".join(self.chunks).decode("utf-8", "replace")


def wait_exit(
    proc: subprocess.Popen[bytes], until: float, now: Callable[[], bool] = lambda: False
) -> bool:
    """Poll until the process exits (True), or the monotonic clock reaches ``until`` or ``now``
    says the time has come (False)."""
    while proc.poll() is None:
        if time.monotonic() >= until or now():
            return False
        time.sleep(0.005)
    return True


def group_signal(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def lose_machine(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL cairn's group and every process below it: nothing of the machine runs on."""
    processes.kill_descendants(proc.pid)
    group_signal(proc, signal.SIGKILL)
    processes.kill(proc.pid)


def hook(trial: Trial) -> Path:
    return trial.origin / "hooks" / "pre-receive"


def refuse_pushes(trial: Trial) -> None:
    hook(trial).write_text("#!/bin/sh\necho 'the remote is down' >&2\nexit 1\n")
    hook(trial).chmod(0o755)


def accept_pushes(trial: Trial) -> None:
    hook(trial).unlink(missing_ok=True)


def hold_claim(trial: Trial, machine: Path) -> Callable[[], bool]:
    """origin holds the machine's first push (its claim) ``CLAIM_HOLD`` seconds, announcing it
    in a file; says when the push has been held ``CLAIM_KILL`` seconds."""
    held = trial.origin / f"claim-held-{machine.name}"
    hook(trial).write_text(
        f"#!/bin/sh\nif [ ! -e {held} ]; then touch {held}; sleep {CLAIM_HOLD:g}; fi\nexit 0\n"
    )
    hook(trial).chmod(0o755)

    def now() -> bool:
        with contextlib.suppress(OSError):
            return time.time() - held.stat().st_mtime >= CLAIM_KILL
        return False

    return now


def machine_run(
    trial: Trial,
    machine: Path,
    argv: list[str],
    kill: str | None,
    kill_after: float,
    fault: HopFault | None = None,
    at_claim: bool = False,
) -> Hop:
    """Run ``argv`` on ``machine``; ``kill`` it ``kill_after`` seconds in (None: let it end),
    during its claim push (``at_claim``), or when the self-test's ``fault`` says."""
    hop = Hop(machine.name, argv, started=time.time())
    now = hold_claim(trial, machine) if at_claim else (lambda: False)
    if at_claim:
        hop.at_claim, kill_after = True, HOP_TIMEOUT
    env = trial.env(machine)
    if fault is not None and fault.pause is not None:
        env["CHAOS_AGENT_PAUSE"] = fault.pause
    proc = spawn(argv, machine, env)
    reader = Reader(proc)
    if fault is not None:
        now = fault.during(trial, hop, proc)
    start = time.monotonic()
    if kill is None:
        if not wait_exit(proc, start + HOP_TIMEOUT):
            lose_machine(proc)
            proc.wait()
            hop.code = -1
        else:
            hop.code = proc.returncode
        hop.output = reader.text()
        return hop
    if wait_exit(proc, start + kill_after, now):  # it ended before its kill
        hop.code = proc.returncode
        hop.output = reader.text()
        return hop
    hop.kill = kill
    hop.signalled = time.time()
    sent = time.monotonic()
    if kill == "sigkill":
        lose_machine(proc)
        proc.wait()
    else:
        first = signal.SIGINT if kill == "cancel" else signal.SIGTERM
        group_signal(proc, signal.SIGCONT if fault is not None and fault.lost else first)
        if fault is not None and fault.after_signal is not None:
            fault.after_signal(proc)
        steps = [(SIGTERM_AFTER, signal.SIGTERM), (SIGKILL_AFTER, signal.SIGKILL)]
        if kill == "sigterm":
            steps = [(TERM_ALONE_LIMIT, signal.SIGKILL)]
        deadline = sent
        for wait, sig in steps:
            deadline += wait
            if wait_exit(proc, deadline):
                break
            hop.output += f"\n[campaign: {signal.Signals(sig).name} sent]\n"
            if sig == signal.SIGKILL:
                lose_machine(proc)
            else:
                group_signal(proc, sig)
        proc.wait()
        hop.ended = time.time()
        hop.to_exit = time.monotonic() - sent
        hop.code = None if proc.returncode == -signal.SIGKILL else proc.returncode
    hop.output = reader.text() + hop.output
    return hop


def end_machine() -> None:
    """The machine is gone: whatever it left running dies, every orphan is reaped."""
    processes.kill_descendants()
    processes.wait_descendants_gone(10)
    processes.reap_orphans()


# --- the checks at a kill -------------------------------------------------------------------------


def on_remote(remote: Remote, record: dict[str, Any]) -> bool:
    return (record["path"], record["blob"]) in remote.files


def writes_of(trial: Trial, hop: Hop, before: float) -> list[dict[str, Any]]:
    return [
        r
        for r in trial.agent_records()
        if r.get("event") == "wrote" and hop.started <= r["t"] < before
    ]


def check_sigkill(trial: Trial, hop: Hop, machine: Path, remote: Remote, tally: Tally) -> None:
    """What the remote holds is at most push_every + SLACK older than the kill."""
    assert hop.signalled is not None
    limit = hop.signalled - (PUSH_EVERY + SLACK)
    where = trial.where()
    oldest = 0.0
    for record in writes_of(trial, hop, hop.signalled):
        if not on_remote(remote, record):
            oldest = max(oldest, hop.signalled - record["t"])
            if record["t"] < limit:
                age = hop.signalled - record["t"]
                detail = f"{record['path']} written {age:.2f} s before the kill is not on origin"
                tally.violation("stale_remote", where, detail)
    figure = "oldest work lost at a sigkill (s)"
    tally.figures[figure] = max(tally.figures.get(figure, 0.0), round(oldest, 2))
    done_remote = remote.completed()
    for task, when in local_completed(machine).items():
        if when < limit and task not in done_remote:
            age = hop.signalled - when
            detail = f"task {task} completed {age:.2f} s before the kill is not completed on origin"
            tally.violation("stale_remote", where, detail)


def check_cancel(trial: Trial, hop: Hop, machine: Path, remote: Remote, tally: Tally) -> None:
    """cairn exited within CANCEL_LIMIT of the signal, and pushed what was done before it."""
    assert hop.signalled is not None and hop.to_exit is not None
    where = trial.where()
    if hop.to_exit > CANCEL_LIMIT or hop.code is None:
        how = "killed by the SIGKILL" if hop.code is None else f"exited {hop.code}"
        if hop.code == 0:
            how = "ran on to its end: exited 0"
        tally.violation("slow_cancel", where, f"{hop.kill}: {how} {hop.to_exit:.2f} s after")
    late = [
        r
        for r in trial.agent_records()
        if r.get("event") == "start" and hop.signalled + LATE_START < r["t"] <= hop.ended
    ]
    if late:
        after = late[0]["t"] - hop.signalled
        detail = f"the agent started task {late[0]['task']} {after:.2f} s after the {hop.kill}"
        tally.violation("signal_ignored", where, detail)
    if "SIGTERM sent" in hop.output:
        tally.count("cancels that needed the SIGTERM")
    if "SIGKILL sent" in hop.output:
        tally.count("cancels that needed the SIGKILL")
    if "NOT pushed" in hop.output:
        line = next(line for line in hop.output.splitlines() if "NOT pushed" in line)
        tally.violation("cancel_lost_work", where, line.strip()[:300])
    for record in writes_of(trial, hop, hop.signalled):
        if not on_remote(remote, record):
            detail = f"{record['path']}, written before the {hop.kill}, is not on origin"
            tally.violation("cancel_lost_work", where, detail)
    done_remote = remote.completed()
    for task, when in local_completed(machine).items():
        if when < hop.signalled and task not in done_remote:
            detail = f"task {task}, completed before the {hop.kill}, is not completed on origin"
            tally.violation("cancel_lost_work", where, detail)


# --- one trial ------------------------------------------------------------------------------------


def run_trial(
    trial: Trial,
    rng: random.Random,
    typical: float,
    tally: Tally,
    faults: Sequence[HopFault] = (),
) -> None:
    """Machine after machine until one completes the run; ``faults``: the self-test's, one
    for each of the first machines (killed when the fault says), no other kill."""
    kills_left = rng.randint(1, 3)
    first_kill = rng.randrange(len(KILLS))  # then they take turns
    started = False
    outer = trial.root
    outside_trial = listing(outer, {trial.dir})
    for number in range(MAX_MACHINES):
        machine = trial.new_machine()
        tally.count("machines")
        if started:
            argv = cairn_argv("resume", TICKET, "--remote", "origin", "--takeover")
            tally.count("fresh clones resumed")
        else:
            argv = cairn_argv("run", str(trial.plan), "--ticket", TICKET, "--remote", "origin")
            if number:
                tally.count("new runs on a later machine (the remote held no run yet)")
        kill = KILLS[(first_kill + len(trial.hops)) % len(KILLS)] if kills_left else None
        kill_after = rng.uniform(0.2, typical * 0.9)
        at_claim = kill is not None and rng.random() < AT_CLAIM
        fault = faults[number] if number < len(faults) else None
        if faults:
            kill, kill_after = (fault.kill, HOP_TIMEOUT) if fault else (None, 0.0)
        skip = outside_of(trial, machine)
        before = listing(trial.dir, skip)
        hop = machine_run(trial, machine, argv, kill, kill_after, fault, at_claim and not faults)
        trial.hops.append(hop)
        end_machine()
        accept_pushes(trial)
        if fault is not None and fault.after_hop is not None:
            fault.after_hop(trial)
        remote = remote_now(trial.origin)
        check_hop(trial, hop, machine, remote, tally)
        wrote = changed(before, listing(trial.dir, skip))
        if wrote:
            detail = f"machine {machine.name} changed {wrote[:5]}"
            tally.violation("wrote_outside", trial.where(), detail)
        if remote.state is not None:
            started = True
        if hop.kill is not None and hop.signalled is not None:
            kills_left -= 1
            if hop.code == 0:
                tally.count("kills that came after the run had ended")
                tally.count("completed runs")
                break
            continue
        if hop.code == 0:
            tally.count("completed runs")
            if kill is not None:
                tally.count("kills not sent (the run had ended first)")
            break
        if hop.code == 3:
            tally.count("cutoffs without a kill (exit 3)")
            continue
        if hop.code == 2 and "holds no run of ticket" in hop.output:
            continue  # killed before its claim reached origin: the next machine runs it anew
        if hop.code == 2:
            tally.violation("resume_refused", trial.where(), f"exit 2: {tail(hop.output)}")
            continue
        if hop.code not in (0, 3):
            return  # run_failed, counted by check_hop
    else:
        tally.violation("not_completed", trial.where(), f"no exit 0 on {MAX_MACHINES} machines")
    wrote = changed(outside_trial, listing(outer, {trial.dir}))
    if wrote:
        tally.violation("wrote_outside", trial.where(), f"outside the trial: {wrote[:5]}")


def check_hop(trial: Trial, hop: Hop, machine: Path, remote: Remote, tally: Tally) -> None:
    where = trial.where()
    if hop.kill is not None and hop.signalled is not None:
        tally.count("kills")
        figure = {
            "sigkill": "kills: sigkill (a lost machine)",
            "cancel": "kills: cancel (SIGINT, SIGTERM 7.5 s, SIGKILL 2.5 s)",
            "sigterm": "kills: sigterm alone",
        }[hop.kill]
        tally.count(figure)
        if hop.at_claim:
            tally.count("kills during the claim push (held 1 s by origin)")
        if hop.kill == "sigkill":
            check_sigkill(trial, hop, machine, remote, tally)
        else:
            TIMES.setdefault(hop.kill, []).append(hop.to_exit or 0.0)
            check_cancel(trial, hop, machine, remote, tally)
    if "Traceback (most recent call last)" in hop.output or hop.code in (1, -1):
        tally.violation("run_failed", where, f"{hop.argv[3]} exited {hop.code}: {tail(hop.output)}")
        (trial.dir / f"{hop.machine}.tmp" / "cairn-output.txt").write_text(hop.output)  # --keep
    if remote.state is not None:
        previous = trial.generations[-1] if trial.generations else 0
        if remote.generation < previous:
            detail = f"generation {remote.generation} after {previous} on machine {hop.machine}"
            tally.violation("generation_decreased", where, detail)
        trial.generations.append(remote.generation)


def tail(output: str) -> str:
    """cairn's last three lines (not the campaign's notes), on one line."""
    lines = [
        line.strip()
        for line in output.strip().splitlines()
        if line.strip() and not line.startswith("[campaign")
    ]
    return " | ".join(lines[-3:])[:600] if lines else "(no output)"


# --- the checks after a trial ---------------------------------------------------------------------


def remote_view(trial: Trial) -> Path:
    """The remote's run state checked out as a state tree (``<view>/.git/cairn/tickets/RK``)."""
    view = trial.dir / "remote-view"
    ticket_dir = checks.state_root(view) / "tickets" / TICKET
    ticket_dir.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "archive", STATE], cwd=trial.origin, capture_output=True, check=False
    )
    if archive.returncode == 0:
        subprocess.run(["tar", "-x", "-C", str(ticket_dir)], input=archive.stdout, check=True)
    return view


def check_completed(trial: Trial, view: Path, tally: Tally) -> list[Path]:
    where = trial.where()
    ticket_dir = checks.state_root(view) / "tickets" / TICKET
    runs = checks.run_dirs(ticket_dir)
    if not runs:
        tally.violation("not_completed", where, "origin holds no run state")
        return runs
    counts: dict[int, int] = {}
    for run in runs:
        for event in checks.read_journal(run / "run-log.jsonl").events:
            if event.get("event") == "task" and event.get("status") == "completed":
                counts[int(event["task"])] = counts.get(int(event["task"]), 0) + 1
    for task in range(len(TASKS)):
        if counts.get(task, 0) == 0:
            tally.violation("not_completed", where, f"task {task} is not completed on origin")
        elif counts[task] > 1:
            detail = f"task {task} recorded completed {counts[task]} times"
            tally.violation("completed_twice", where, detail)
    return runs


def check_redone(trial: Trial, runs: list[Path], tally: Tally) -> None:
    records = trial.agent_records()
    done = checks.completed_at(runs)
    started, redone = checks.tasks_redone(records, done)
    tally.count("tasks started", started)
    tally.count("tasks redone", len(redone))
    for line in redone:
        tally.violation("task_redone", trial.where(), line)
    starts = [int(r["task"]) for r in records if r.get("event") == "start"]
    again = sum(starts.count(task) - 1 for task in set(starts))
    figure = "tasks started again (not completed on origin when their machine died)"
    tally.count(figure, again - len(redone))


def check_files(trial: Trial, tally: Tally) -> None:
    files = tree_blobs(trial.origin, BRANCH) | tree_blobs(trial.origin, WIP)
    for number in range(len(TASKS)):
        for rel in (f"work/task-{number}.txt", f"work/task-{number}-notes.md"):
            blob = agent.blob_id(agent.content(TICKET, rel))
            tally.count("files written")
            if (rel, blob) not in files:
                detail = f"{rel} is on neither {BRANCH} nor {WIP} of origin"
                tally.violation("files_missing", trial.where(), detail)


def check_generations(trial: Trial, tally: Tally) -> None:
    shas = (_out(trial.origin, "rev-list", "--first-parent", "--reverse", STATE) or "").split()
    generations = [generation_of(trial.origin, sha) for sha in shas]
    for before, after in itertools.pairwise(generations):
        if after < before:
            detail = f"{STATE}'s history goes from generation {before} to {after}"
            tally.violation("generation_decreased", trial.where(), detail)
            break
    if generations:
        figure = "final generation, max"
        tally.figures[figure] = max(tally.figures.get(figure, 0), generations[-1])


def check_state(trial: Trial, view: Path, tally: Tally) -> None:
    problems: list[checks.Problem] = []
    for repo in [*trial.machines, view]:
        problems += checks.unreadable_state(repo)
    problems += [p for p in checks.git_health(trial.origin) if p.kind == "git_unhealthy"]
    if trial.machines and trial.hops and trial.hops[-1].code == 0:
        problems += checks.cli_reads(trial.machines[-1], [TICKET])
    reader = trial.dir / "reader"
    git(trial.dir, "clone", "-q", "--no-local", str(trial.origin), str(reader))
    seen = cli("catchup", TICKET, "--remote", "origin", "--json", cwd=reader)
    if seen.returncode != 0 or seen.traceback():
        problems.append(checks.Problem("cli_read_failed", f"catchup --remote: {seen.error_line()}"))
    elif json.loads(seen.stdout).get("state") != "done":
        state = json.loads(seen.stdout).get("state")
        tally.violation("not_completed", trial.where(), f"catchup --remote says {state}")
    for problem in problems[:3]:
        tally.violation("unreadable_state", trial.where(), f"{problem.kind}: {problem.detail}")


def after_trial(trial: Trial, tally: Tally) -> None:
    view = remote_view(trial)
    runs = check_completed(trial, view, tally)
    check_redone(trial, runs, tally)
    check_files(trial, tally)
    check_generations(trial, tally)
    check_state(trial, view, tally)


# --- self-test ------------------------------------------------------------------------------------


@dataclass
class HopFault:
    """A fault the self-test puts on one machine: ``during`` (given the trial, the hop and
    cairn's process) does its harm and says when to ``kill``; ``after_signal`` follows the
    kill's signal, ``after_hop`` undoes the harm; it must be reported as each of ``kinds``."""

    name: str
    kinds: tuple[str, ...]
    kill: str
    during: Callable[[Trial, Hop, subprocess.Popen[bytes]], Callable[[], bool]]
    after_signal: Callable[[subprocess.Popen[bytes]], None] | None = None
    after_hop: Callable[[Trial], None] | None = None
    lost: bool = False  # the kill's signal never reaches cairn (SIGCONT is sent instead)
    pause: str | None = None  # the agent's pause on this machine, when not the trial's


@dataclass
class SelfTest:
    """One trial of the self-test: a fault on each of its first machines, then faults done once
    the trial is (each with the kind it must be reported as)."""

    hops: list[HopFault]
    after: list[tuple[Callable[[Trial], None], str]]


def every(seconds: float, look: Callable[[], bool]) -> Callable[[], bool]:
    """``look``, but at most once every ``seconds`` (False in between)."""
    last = [0.0]

    def throttled() -> bool:
        if time.monotonic() - last[0] < seconds:
            return False
        last[0] = time.monotonic()
        return look()

    return throttled


def since(trial: Trial, hop: Hop, event: str) -> list[dict[str, Any]]:
    return [r for r in trial.agent_records() if r.get("event") == event and r["t"] >= hop.started]


def stray_in_home(trial: Trial, hop: Hop, proc: subprocess.Popen[bytes]) -> Callable[[], bool]:
    """A file in the machines' HOME while the run goes on (as a cairn writing there would);
    the kill once a task is done."""

    def now() -> bool:
        stray = trial.dir / "home" / ".cairn-stray"
        if not stray.exists():
            stray.write_text("outside the clone\n")
        return bool(since(trial, hop, "done"))

    return every(0.05, now)


def freeze(proc: subprocess.Popen[bytes]) -> None:
    """cairn's group stopped for 6 s right after the SIGINT (a machine too slow to cancel)."""
    group_signal(proc, signal.SIGSTOP)
    time.sleep(CANCEL_LIMIT + 1)
    group_signal(proc, signal.SIGCONT)


def refused_once_claimed(
    trial: Trial, hop: Hop, proc: subprocess.Popen[bytes]
) -> Callable[[], bool]:
    """Once the run's claim is on origin, origin refuses every push (a remote gone down); the
    kill once a task is done."""

    def now() -> bool:
        if not hook(trial).exists() and _out(trial.origin, "rev-parse", "-q", "--verify", STATE):
            refuse_pushes(trial)
        return bool(since(trial, hop, "done"))

    return every(0.05, now)


def refused_and_stalled(
    trial: Trial, hop: Hop, proc: subprocess.Popen[bytes]
) -> Callable[[], bool]:
    """origin refuses every push from the start, the agent is stopped after its first file;
    the kill once that file is push_every + SLACK + 0.5 s old."""
    refuse_pushes(trial)

    def now() -> bool:
        wrote = since(trial, hop, "wrote")
        if not wrote:
            return False
        for found in processes.descendants(proc.pid):
            if found.pgid != proc.pid:  # the agent's own group
                processes.kill(found.pid, signal.SIGSTOP)
        return time.time() - wrote[0]["t"] > PUSH_EVERY + SLACK + 0.5

    return every(0.05, now)


def at_once(trial: Trial, hop: Hop, proc: subprocess.Popen[bytes]) -> Callable[[], bool]:
    """The kill as soon as cairn has started."""
    return lambda: True


def redo_a_task(trial: Trial) -> None:
    """What a resume that re-dispatched a completed task would make the agent do."""
    machine = trial.machines[-1]
    run_dir = checks.run_dirs(checks.state_root(machine) / "tickets" / TICKET)[-1]
    prompt = f"Continue with ticket {TICKET}: turn 2 of 2.\nIn progress\nRemaining tasks:\n"
    prompt += f"- Task 0: {TASKS[0]}\n"
    env = {**trial.env(machine), ENV_RUN_DIR: str(run_dir), ENV_TICKET: TICKET}
    subprocess.run(
        [sys.executable, str(HERE / "agent.py")],
        input=prompt.encode(),
        cwd=machine,
        env={**os.environ, **env},
        capture_output=True,
        check=False,
    )


def lose_the_files(trial: Trial) -> None:
    """origin's branch back at main, its snapshot ref gone."""
    main = (_out(trial.origin, "rev-parse", "main") or "").strip()
    git(trial.origin, "update-ref", BRANCH, main)
    git(trial.origin, "update-ref", "-d", WIP)


def lower_generation(trial: Trial) -> None:
    """A state commit of generation 0 on top of origin's."""
    tip = (_out(trial.origin, "rev-parse", STATE) or "").strip()
    message = f"cairn state {TICKET}\n\nCairn-Generation: 0\nCairn-Attempt: 0\n"
    sha = git(trial.origin, "commit-tree", f"{tip}^{{tree}}", "-p", tip, "-m", message).strip()
    git(trial.origin, "update-ref", STATE, sha)


def tear_a_file(trial: Trial) -> None:
    """Half of a change summary in the last machine's state."""
    run_dir = checks.run_dirs(checks.state_root(trial.machines[-1]) / "tickets" / TICKET)[-1]
    summary = sorted(run_dir.glob("*_coder_change-summary.md"))[-1]
    data = summary.read_bytes()
    summary.write_bytes(data[: len(data) // 3] + b"\n---\nstatus: [\n")


SELF_TESTS = [
    SelfTest(
        [
            HopFault(
                "cairn frozen 6 s after a cancel's SIGINT, a file written in HOME",
                ("slow_cancel", "wrote_outside"),
                "cancel",
                stray_in_home,
                after_signal=freeze,
            )
        ],
        [
            (tear_a_file, "unreadable_state"),
            (lower_generation, "generation_decreased"),
            (redo_a_task, "task_redone"),
        ],
    ),
    SelfTest(
        [
            HopFault(
                "pushes refused once claimed, then a sigterm",
                ("cancel_lost_work",),
                "sigterm",
                refused_once_claimed,
                after_hop=accept_pushes,
            ),
            HopFault(
                "pushes refused and the agent stopped, then a sigkill",
                ("stale_remote",),
                "sigkill",
                refused_and_stalled,
                after_hop=accept_pushes,
            ),
            HopFault(
                "a sigterm lost at the start",
                ("signal_ignored",),
                "sigterm",
                at_once,
                lost=True,
                pause="0.5",  # its tasks take a while: some start after the grace
            ),
        ],
        [(lose_the_files, "files_missing")],
    ),
]


def self_test_trial(trial: Trial, rng: random.Random, tally: Tally, test: SelfTest) -> None:
    """The trial with its faults; each must be reported as its kind."""
    before = tally.violations.copy()
    run_trial(trial, rng, 0.0, tally, test.hops)
    injected = [(fault.name, kind) for fault in test.hops for kind in fault.kinds]
    for inject, kind in test.after:
        inject(trial)
        injected.append((inject.__name__, kind))
    after_trial(trial, tally)
    for name, kind in injected:
        tally.count("faults injected")
        if tally.violations[kind] == before[kind]:
            tally.count("faults missed")
            log(f"SELF-TEST: {name!r} was not caught")


# --- main -----------------------------------------------------------------------------------------


def calibrate(root: Path, pause: str) -> float:
    """How long an undisturbed run takes on machine A."""
    trial = Trial(0, 0, root, pause)
    machine = trial.new_machine()
    argv = cairn_argv("run", str(trial.plan), "--ticket", TICKET, "--remote", "origin")
    started = time.monotonic()
    hop = machine_run(trial, machine, argv, None, 0.0, None)
    seconds = time.monotonic() - started
    if hop.code != 0:
        raise SystemExit(f"calibration run exited {hop.code}: {tail(hop.output)}")
    log(f"calibrated: an undisturbed run takes {seconds:.1f} s")
    return seconds


def trials_option(parser: Any) -> None:
    parser.add_argument("--trials", dest="cases", type=int, help="the same as --cases")
    parser.add_argument(
        "--replay",
        type=int,
        metavar="SEED",
        help="run only the trial with this seed (printed with each violation), making the same "
        "choices: the same kills, of the same kinds, at the same instants of the usual run",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(__doc__ or "", SIZES, argv, trials_option)
    if args.self_test:
        args.cases = len(SELF_TESTS)
    if args.replay is not None:
        args.cases = 1
    log(f"remote_kill: seed {args.seed}, {args.cases} trials")
    # a campaign started in the background by a shell without job control ignores SIGINT, and
    # cairn would inherit that: its cancels would never land before cairn's own handlers
    signal.signal(signal.SIGINT, signal.default_int_handler)
    processes.become_subreaper()
    tally = Tally("remote_kill", args.seed, KINDS)
    with scratch("remote-kill", args.keep) as root:
        pause = SELF_TEST_PAUSE if args.self_test else PAUSE
        typical = 0.0 if args.self_test else calibrate(root, pause)  # the self-test's own kills
        seeds = [args.replay] if args.replay is not None else case_seeds(args.seed, args.cases)
        for number, seed in enumerate(seeds, start=1):
            trial = Trial(number, seed, root, pause)
            rng = random.Random(seed)
            tally.count("trials")
            try:
                if args.self_test:
                    self_test_trial(trial, rng, tally, SELF_TESTS[number - 1])
                else:
                    run_trial(trial, rng, typical, tally)
                    after_trial(trial, tally)
            finally:
                end_machine()
            log(f"{trial.where()}")
    for kill, label in (("cancel", "cancel"), ("sigterm", "sigterm")):
        times = TIMES.get(kill)
        if times:
            tally.figures[f"{label} to exit, median (s)"] = round(median(times), 2)
            tally.figures[f"{label} to exit, max (s)"] = round(max(times), 2)
    return tally.report(args, FIGURES)


if __name__ == "__main__":
    sys.exit(main())
