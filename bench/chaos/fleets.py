"""The fleets of ``fleet_kill``: a repository with a queue of plans that the instrumented agent
(``agent.py``) works through, its supervisor (``cairn fleet start --once --json``) read line by
line, the instants a kill is timed on, and the two ways of killing: the supervisor alone, or the
machine (the supervisor and every process left on it, all frozen first so that none reacts to
the others dying).

The campaign is a child subreaper (``processes.become_subreaper``): the runs a supervisor killed
alone leaves behind become the campaign's children. ``Runs`` follows them until they exit and
keeps each one's exit status, so a run that died with its supervisor shows.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agent
import processes
from killing import Watch, spawn
from outside import TOKEN, Outside

from cairn.envnames import ENV_CRASH_AT, ENV_FAULT_INJECTION
from cairn.terms import CRASH_POINTS
from common import cairn_argv, git, make_project, plan_text

VENDOR_FILES = 300  # tracked files: a checkout long enough to be killed in
PAUSE = "0.05"  # the agent's pause after each file it writes
HALF_MADE = b"initializing"  # what `git worktree add` writes into its lock while it works
REAP_EVERY = 0.1  # seconds between two looks for exited orphans
# a kill at a run's crash point costs its ticket an attempt (and every run a supervisor armed
# with it may die there once): room for them, so a ticket ends completed as without the kills
MAX_ATTEMPTS = 12
TRACKERS = ("dir", "github")

# the named crash points (cairn.terms.CRASH_POINTS): a dir fleet (no GitHub) reaches only some;
# fleet.approve and fleet.worktree_removed are reached only by `cairn review --approve` and
# `cairn fleet prune`, not by a supervisor: armed in those commands after the queue is drained
# (fleet_kill's epilogue), never in a supervisor
ELSEWHERE = ("fleet.approve", "fleet.worktree_removed")
GITHUB_POINTS = tuple(p for p in CRASH_POINTS if p not in ELSEWHERE)
DIR_POINTS = tuple(
    p
    for p in GITHUB_POINTS
    if p.startswith("run.") or p in ("fleet.record", "fleet.sending", "fleet.notify")
)
RUN_POINTS = tuple(p for p in CRASH_POINTS if p.startswith("run."))


def config(hooks: str = "", fleet: str = "", tables: str = "") -> str:
    """The instrumented agent, implement only (``agent.config``); two tickets at once, retries
    after 1 s, up to ``MAX_ATTEMPTS`` attempts; ``hooks``: a ``[fleet.hooks]`` table's lines;
    ``fleet``: more lines of the ``[fleet]`` table; ``tables``: tables after it."""
    text = agent.config(["implement"]) + (
        "\n[fleet]\n"
        "concurrency = 2\n"
        f"max_attempts = {MAX_ATTEMPTS}\n"
        'retry_backoff = "1s"\n'
        'retry_backoff_cap = "4s"\n'
        'min_free_memory = "1MiB"\n'
    )
    return text + fleet + (f"\n[fleet.hooks]\n{hooks}" if hooks else "") + tables


@dataclass
class Fleet:
    """One repository and its queue: ticket → number of tasks."""

    number: int
    seed: int
    root: Path
    tickets: dict[str, int]
    hooks: str = ""
    tracker: str = "dir"  # or "github": its issues on a fake GitHub, its branches pushed
    repo: Path = field(init=False)
    outside: Outside = field(init=False)
    agent_log: Path = field(init=False)
    base: str = field(init=False)
    kills: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        files = {f"vendor/f{i:04d}.txt": f"vendored file {i}\n" * 8 for i in range(VENDOR_FILES)}
        github = self.tracker == "github"
        self.outside = Outside(self.root / f"fleet-{self.number}-origin.git" if github else None)
        for ticket, tasks in self.tickets.items():
            steps = [f"Step {n} of {ticket}" for n in range(tasks)]
            plan = plan_text(f"ticket {ticket}", steps)
            if github:
                self.outside.add_issue(int(ticket.removeprefix("GH-")), f"ticket {ticket}", plan)
            else:
                files[f"cairn-queue/{ticket}.md"] = plan
        lines, tables = self.outside.config()
        text = config(self.hooks, lines, tables)
        self.repo = make_project(self.root / f"fleet-{self.number}", text, files)
        if github:
            git(self.repo, "remote", "add", "origin", str(self.outside.remote))
            git(self.repo, "push", "-q", "origin", "main")
        self.tmp.mkdir()
        self.agent_log = self.root / f"fleet-{self.number}-agent.jsonl"
        self.git_steps.mkdir()
        if not (self.root / "bin" / "git").exists():
            install_git_shim(self.root / "bin")
        self.base = git(self.repo, "rev-parse", "HEAD").strip()

    @property
    def env(self) -> dict[str, str]:
        return {
            "CHAOS_AGENT_LOG": str(self.agent_log),
            "CHAOS_AGENT_PAUSE": PAUSE,
            "CHAOS_GIT_STEPS": str(self.git_steps),
            "PATH": f"{self.root / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "TMPDIR": str(self.tmp),
            "GITHUB_TOKEN": TOKEN,
        }

    @property
    def tmp(self) -> Path:
        """The system temp dir of the fleet's processes (emptied by a reboot)."""
        return self.root / f"fleet-{self.number}-tmp"

    def empty_tmp(self) -> int:
        """What a reboot does to /tmp: everything in it gone. Returns how many entries."""
        entries = list(self.tmp.iterdir())
        for entry in entries:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        return len(entries)

    @property
    def git_steps(self) -> Path:
        return self.root / f"fleet-{self.number}-git-steps"

    @property
    def records(self) -> Path:
        return self.repo / ".git" / "cairn" / "fleet" / "tickets"

    @property
    def gitdirs(self) -> Path:
        """Where git keeps the worktrees' own git directories."""
        return self.repo / ".git" / "worktrees"

    def worktree(self, ticket: str) -> Path:
        return self.root / f"fleet-{self.number}.cairn" / ticket

    def remove(self) -> None:
        """Its servers, repository, worktrees, remote and temp dir (the agent's log stays)."""
        self.outside.close()
        shutil.rmtree(self.repo, ignore_errors=True)
        shutil.rmtree(self.root / f"fleet-{self.number}.cairn", ignore_errors=True)
        if self.outside.remote is not None:
            shutil.rmtree(self.outside.remote, ignore_errors=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def where(self) -> str:
        kills = "; ".join(self.kills) or "none"
        return f"fleet {self.number} (seed {self.seed}, {self.tracker}; kills: {kills})"

    def record(self, ticket: str) -> dict[str, Any] | None:
        path = self.records / f"{ticket}.json"
        data = json.loads(path.read_text()) if path.exists() else None
        return data if isinstance(data, dict) else None

    def agent_records(self, ticket: str) -> list[dict[str, Any]]:
        if not self.agent_log.exists():
            return []
        out = []
        for line in self.agent_log.read_text().splitlines():
            with contextlib.suppress(ValueError):  # a line torn by a kill of the agent
                entry = json.loads(line)
                if entry.get("ticket") == ticket:
                    out.append(entry)
        return out

    def wanting_worktree(self) -> list[str]:
        """Tickets whose worktree `git worktree add` has still to make (or make again)."""
        return [
            t
            for t in self.tickets
            if not (self.worktree(t) / ".git").exists() or half_made(self.gitdirs / t)
        ]


def make_fleet(
    root: Path,
    number: int,
    seed: int,
    rng: random.Random,
    trackers: Sequence[str] = ("dir",),
    tracker: str | None = None,
) -> Fleet:
    """A fleet of 2 to 4 tickets of 1 to 3 tasks, its tracker ``tracker`` or drawn from
    ``trackers``."""
    drawn = rng.choice(list(trackers))
    tracker = tracker or drawn
    name = "GH-{}" if tracker == "github" else "T{}"
    tickets = {name.format(n): rng.randint(1, 3) for n in range(1, rng.randint(2, 4) + 1)}
    fleet = Fleet(number, seed, root, tickets, tracker=tracker)
    if tracker == "github" and rng.random() < LOST_SHARE:
        fleet.outside.lose_answer("POST", rng.choice(LOSABLE))
    return fleet


LOST_SHARE = 0.5  # of the github fleets, one whose fake GitHub loses the answer to a request
LOSABLE = ("/comments", "/labels", "/pulls", "/reviews")  # of a POST


def half_made(gitdir: Path) -> bool:
    """A worktree that `git worktree add` has not finished: its lock still says so."""
    try:
        return (gitdir / "locked").read_bytes().startswith(HALF_MADE)
    except OSError:
        return False


# --- the runs a killed supervisor leaves behind ----------------------------------------------


@dataclass
class Run:
    """A child ``cairn run|resume`` that was alive when its supervisor alone was killed."""

    pid: int
    ticket: str
    command: str
    kill: str  # which kill orphaned it
    status: int | None = None  # its exit code once reaped (negative: the signal)
    killed: bool = False  # by the campaign, in a later machine crash
    armed: str | None = None  # the crash point it inherited (it may SIGKILL itself there)


def child_runs(pid: int) -> list[tuple[int, str, str]]:
    """The ``python -m cairn run|resume`` processes below ``pid``: (pid, ticket, command). A
    process that is still about to become one (a shell that will exec it) is not one yet."""
    found = []
    for proc in processes.descendants(pid):
        if proc.state == "Z":
            continue
        try:
            argv = Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode().split("\0")
        except (OSError, UnicodeDecodeError):
            continue
        if argv[1:3] != ["-m", "cairn"] or len(argv) < 5:
            continue
        rest = argv[3:]
        if rest[0] == "resume":
            found.append((proc.pid, rest[1], "resume"))
        elif rest[0] == "run" and "--ticket" in rest:
            found.append((proc.pid, rest[rest.index("--ticket") + 1], "run"))
    return found


class Runs:
    """The orphaned runs the campaign follows, and the reaping of every orphan."""

    def __init__(self) -> None:
        self.runs: dict[int, Run] = {}
        self.lock = threading.Lock()

    def add(self, pid: int, ticket: str, command: str, kill: str, armed: str | None = None) -> None:
        with self.lock:
            self.runs[pid] = Run(pid, ticket, command, kill, armed=armed)

    def alive(self, ticket: str) -> list[Run]:
        with self.lock:
            runs = [r for r in self.runs.values() if r.ticket == ticket and r.status is None]
        return [r for r in runs if processes.state_of(r.pid) not in (None, "Z")]

    def reap(self, keep: set[int]) -> None:
        """Wait for every exited child but ``keep`` (the supervisor a ``Popen`` owns, which
        waits for it itself), keeping the exit status of the runs followed. Each child is
        looked at first without being reaped (``WNOWAIT``); a kept one ends the round."""
        while True:
            try:
                found = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if found is None or found.si_pid in keep:
                return
            with contextlib.suppress(ChildProcessError):
                _, status = os.waitpid(found.si_pid, 0)
                with self.lock:
                    if found.si_pid in self.runs:
                        self.runs[found.si_pid].status = os.waitstatus_to_exitcode(status)

    def killed(self, pids: set[int]) -> None:
        with self.lock:
            for pid in pids & set(self.runs):
                self.runs[pid].killed = True


# --- a supervisor, read line by line --------------------------------------------------------


@dataclass
class Unadopted:
    ticket: str
    orphan: int  # the live run the supervisor did not adopt
    command: str  # what it started instead
    before: list[str]  # what the supervisor said of the ticket before it started it


class Supervisor:
    """``cairn fleet start --once --json`` in the fleet's repository. Its JSON lines are read as
    they come; a ``ticket_started`` for a ticket whose orphaned run is still alive is kept in
    ``unadopted`` (judged at that instant: the run is alive then or it is not)."""

    def __init__(
        self,
        fleet: Fleet,
        runs: Runs,
        timeout: float,
        pause: str | None = None,
        crash_at: str | None = None,
    ) -> None:
        self.fleet, self.runs = fleet, runs
        self.started = time.monotonic()
        self.deadline = self.started + timeout
        self.crash_at = crash_at  # <point>@<n>: it (or its runs) SIGKILL itself there
        env = {**fleet.env, "CHAOS_GIT_PAUSE": pause or ""}
        if crash_at is not None:
            env.update({ENV_FAULT_INJECTION: "1", ENV_CRASH_AT: crash_at})
        self.proc = spawn(cairn_argv("fleet", "start", "--once", "--json"), fleet.repo, env)
        self.lines: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self.unadopted: list[Unadopted] = []
        self.readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self.readers:
            reader.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(line, dict):
                continue
            if line.get("event") == "ticket_started":
                ticket = str(line.get("ticket"))
                said = [str(e.get("event")) for e in self.lines if e.get("ticket") == ticket]
                for run in self.runs.alive(ticket):
                    if run.pid == line.get("pid"):
                        # this supervisor's own start of the run, read after a later kill of
                        # it already listed the run as an orphan: not a second start
                        continue
                    found = Unadopted(ticket, run.pid, str(line.get("command")), said)
                    self.unadopted.append(found)
            self.lines.append(line)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.stderr.append(raw.decode("utf-8", "replace").rstrip())

    def alive(self) -> bool:
        return self.proc.poll() is None

    def finish(self) -> int | None:
        """Wait for the end (reaping orphans meanwhile); its exit code, None when it hung
        (then it and everything below it are killed)."""
        while self.alive() and time.monotonic() < self.deadline:
            self.runs.reap({self.proc.pid})
            time.sleep(REAP_EVERY)
        code = self.proc.poll()
        if code is None:
            crash_machine(self.runs)
        self.join()
        return code

    def join(self) -> None:
        self.proc.wait()
        for reader in self.readers:
            reader.join(10)

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line.get("event") == kind]

    def problem(self) -> str | None:
        """Why an exit of its own is wrong: a refusal, a traceback, an internal error."""
        errors = [line["error"] for line in self.lines if isinstance(line.get("error"), dict)]
        text = "\n".join([*self.stderr, *(str(e.get("message")) for e in errors)])
        code = self.proc.returncode
        if "Traceback (most recent call last)" in text:
            return f"exit {code} with a traceback: {tail(self.stderr)}"
        if "internal error" in text:
            return f"exit {code} with an internal error: {tail(self.stderr)}"
        if code not in (0, 1, 3):
            said = errors[-1].get("message") if errors else tail(self.stderr)
            return f"exit {code}: {said}"
        return None


def tail(lines: Sequence[str]) -> str:
    shown = [line for line in lines if line.strip()]
    return shown[-1][:300] if shown else "(nothing on stderr)"


# --- when to kill ------------------------------------------------------------------------------

# The fleet's `git`: first on the supervisors' PATH. `git worktree add` runs the gits it starts
# (`git branch`, `git symbolic-ref HEAD`, `git reset --hard`: the branch, the worktree's HEAD,
# its checkout) through this same script (GIT_EXEC_PATH), which announces each step with a file
# in $CHAOS_GIT_STEPS (``<step>.<ticket>.<pid>``) and holds at the step $CHAOS_GIT_PAUSE names
# until the campaign kills it: so a kill lands before git set the HEAD, or before its checkout,
# every time. Every other git is the real one, at once.
GIT_SHIM = """#!/bin/sh
if [ "$GIT_EXEC_PATH" = "{shim}" ]; then
    case "$1" in
        branch) step=branch ;;
        symbolic-ref|update-ref) step=head ;;
        reset|read-tree|checkout) step=checkout ;;
        *) step=other ;;
    esac
    : > "$CHAOS_GIT_STEPS/$step.${{GIT_WORK_TREE##*/}}.$$"
    if [ "$CHAOS_GIT_PAUSE" = "$step" ]; then
        sleep 300
    fi
    GIT_EXEC_PATH="{exec_path}" exec "{git}" "$@"
fi
case " $* " in
    *" worktree add "*) GIT_EXEC_PATH="{shim}" exec "{git}" "$@" ;;
esac
exec "{git}" "$@"
"""


def install_git_shim(directory: Path) -> Path:
    """Write the fleet's `git` into ``directory``; returns it (to put first on PATH)."""
    real = shutil.which("git")
    assert real is not None, "git is not on PATH"
    exec_path = subprocess.run(
        [real, "--exec-path"], capture_output=True, text=True, check=True
    ).stdout.strip()
    directory.mkdir(parents=True, exist_ok=True)
    shim = directory / "git"
    shim.write_text(GIT_SHIM.format(shim=directory, exec_path=exec_path, git=real))
    shim.chmod(0o755)
    return directory


@dataclass(frozen=True)
class Instant:
    """``how``: ``timed`` (``delay`` after the start), ``record`` (``delay`` after the
    ``after``-th fleet record written), a step of `git worktree add`: ``head`` (held before
    it sets the new worktree's HEAD), ``checkout`` (held before its checkout), ``in checkout``
    (``delay`` after its checkout started), or ``point``: the ``n``-th time the supervisor
    reaches the crash point ``point`` it kills itself there (a ``fleet.*`` point); for a
    ``run.*`` point, each of its runs the ``n``-th time it gets there, and the supervisor is
    killed alone ``delay`` after its start, so that the runs it leaves die at the point and the
    next supervisor (not armed) recovers them. ``machine``: the supervisor and every process
    left on the machine, else the supervisor alone; ``reboot``: the machine, and the fleet's
    temp dir emptied."""

    how: str
    delay: float
    after: int
    machine: bool
    point: str = ""
    n: int = 0
    reboot: bool = False

    @property
    def crash_at(self) -> str | None:
        return f"{self.point}@{self.n}" if self.how == "point" else None

    @property
    def run_point(self) -> bool:
        return self.point in RUN_POINTS

    @property
    def pause(self) -> str | None:
        """The step of `git worktree add` the fleet's git holds at, for this kill."""
        return self.how if self.how in ("head", "checkout") else None

    @property
    def step(self) -> str | None:
        """The step of `git worktree add` that starts the clock."""
        return "checkout" if self.how == "in checkout" else self.pause

    def describe(self) -> str:
        what = {
            "timed": "",
            "record": f"record write {self.after} + ",
            "head": "git worktree add, before HEAD + ",
            "checkout": "git worktree add, before its checkout + ",
            "in checkout": "git worktree add, in its checkout + ",
        }.get(self.how, "")
        if self.how == "point":
            if not self.run_point:
                return f"crash point {self.crash_at}, the supervisor itself"
            return f"crash point {self.crash_at} armed in its runs, supervisor at " + (
                f"{self.delay * 1000:.0f} ms"
            )
        who = "machine, temp dir emptied (reboot)" if self.reboot else "machine"
        who = who if self.machine else "supervisor"
        return f"{what}{self.delay * 1000:.0f} ms, {who}"


@dataclass
class Calibration:
    seconds_per_task: float
    records_per_ticket: float
    worktree_add: float  # seconds `git worktree add` holds its lock


POINT_SHARE = 0.4  # of the kills, at a named crash point
REBOOT_SHARE = 0.4  # of the kills of the machine, a reboot (its temp dir emptied too)


def pick_instant(rng: random.Random, fleet: Fleet, calibration: Calibration) -> Instant:
    tasks = sum(fleet.tickets.values())
    typical = calibration.seconds_per_task * tasks / 2  # two tickets at once
    if rng.random() < POINT_SHARE:
        point = rng.choice(GITHUB_POINTS if fleet.tracker == "github" else DIR_POINTS)
        # how often a fleet gets there: once a run; once a completed ticket; many times
        once = point in ("run.summary", "run.ended")
        n = 1 if once else rng.randint(1, 2 if point in ("fleet.push", "fleet.pull_request") else 3)
        return Instant("point", rng.uniform(0, typical * 1.1), 0, False, point, n)
    roll = rng.random()
    if roll < 0.35 and fleet.wanting_worktree():
        how = rng.choice(["head", "checkout", "in checkout", "in checkout"])
        if how != "in checkout":  # held there: the whole machine, or git would go on
            return Instant(how, rng.uniform(0, 0.002), 0, True, reboot=reboot(rng))
        machine = rng.random() < 0.7
        delay = rng.uniform(0, calibration.worktree_add)
        return Instant(how, delay, 0, machine, reboot=machine and reboot(rng))
    machine = rng.random() < 0.5
    if roll < 0.65:
        writes = max(1, round(calibration.records_per_ticket * len(fleet.tickets)))
        delay = 0.0 if rng.random() < 0.3 else rng.uniform(0, 0.002)
        return Instant(
            "record", delay, rng.randint(1, writes), machine, reboot=machine and reboot(rng)
        )
    delay = rng.uniform(0, typical * 1.1)
    return Instant("timed", delay, 0, machine, reboot=machine and reboot(rng))


def reboot(rng: random.Random) -> bool:
    return rng.random() < REBOOT_SHARE


class Trigger:
    """Watches the fleet records, the steps the fleet's git announces and `.git/worktrees`:
    counts record writes, keeps the steps seen, and sees each new worktree's lock come and go."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.watch = Watch([fleet.records, fleet.git_steps, fleet.gitdirs])
        self.records = 0
        self.steps: list[str] = []
        self.known = self._locks()
        self.new_locks: list[Path] = []
        self.lock_seen: dict[Path, float] = {}
        self.lock_lives: list[float] = []

    def _locks(self) -> set[tuple[Path, int]]:
        found: set[tuple[Path, int]] = set()
        try:
            # git prunes an empty .git/worktrees, so it may vanish between any two looks
            entries = list(self.fleet.gitdirs.iterdir())
        except OSError:
            return found
        for entry in entries:
            with contextlib.suppress(OSError):
                if half_made(entry):
                    found.add((entry, (entry / "locked").stat().st_ino))
        return found

    def look(self, timeout: float) -> None:
        for path, name in self.watch.events(timeout):
            if path.parent == self.fleet.records and name.endswith(".json") and name[0] != ".":
                self.records += 1
            elif path.parent == self.fleet.git_steps:
                self.steps.append(name.split(".", 1)[0])
        now = time.monotonic()
        locks = self._locks()
        for entry, _ in locks - self.known:
            self.new_locks.append(entry)
            self.lock_seen[entry] = now
        for entry, _ in self.known - locks:
            if entry in self.lock_seen:
                self.lock_lives.append(now - self.lock_seen.pop(entry))
        self.known = locks

    def fired(self, instant: Instant) -> bool:
        if instant.how == "timed" or (instant.how == "point" and instant.run_point):
            return True
        if instant.how == "point":
            return False  # the supervisor kills itself: waited for till it exits
        if instant.how == "record":
            return self.records >= instant.after
        return instant.step in self.steps

    def close(self) -> None:
        self.watch.close()


def wait_for(sup: Supervisor, instant: Instant, trigger: Trigger) -> bool:
    """Wait for ``instant``; False when the supervisor exits first."""
    fired_at: float | None = None
    reaped = 0.0
    while sup.alive() and time.monotonic() < sup.deadline:
        now = time.monotonic()
        if now - reaped > REAP_EVERY and (
            fired_at is None or fired_at + instant.delay - now > 0.06
        ):
            sup.runs.reap({sup.proc.pid})
            reaped = now
        if fired_at is None:
            if trigger.fired(instant):
                timed = instant.how in ("timed", "point")
                fired_at = sup.started if timed else time.monotonic()
            else:
                trigger.look(REAP_EVERY)
            continue
        left = fired_at + instant.delay - time.monotonic()
        if left <= 0:
            return sup.alive()
        trigger.look(min(left, REAP_EVERY))
    return False


# --- how to kill ---------------------------------------------------------------------------------


def kill_supervisor(sup: Supervisor, runs: Runs, kill: str) -> int:
    """SIGKILL the supervisor alone; the runs it started live on (or should), followed by
    ``runs`` (armed with its crash point, if it had one). Returns how many were alive."""
    alive = child_runs(sup.proc.pid)
    for pid, ticket, command in alive:
        runs.add(pid, ticket, command, kill, sup.crash_at)
    processes.kill(sup.proc.pid, signal.SIGKILL)
    sup.join()
    return len(alive)


def crash_machine(runs: Runs) -> set[int]:
    """SIGKILL every process below the campaign at one instant: each is stopped first (again
    and again until no new one appears), then all are killed, then reaped."""
    stopped: set[int] = set()
    while True:
        new = [p.pid for p in processes.descendants() if p.state != "Z" and p.pid not in stopped]
        if not new:
            break
        for pid in new:
            processes.kill(pid, signal.SIGSTOP)
        stopped.update(new)
    for pid in stopped:
        processes.kill(pid, signal.SIGKILL)
    runs.killed(stopped)
    return stopped


def settle(runs: Runs, grace: float) -> int:
    """Let what is left below the campaign end for ``grace`` seconds, reaping it; then kill and
    reap the rest (counted as killed by the campaign). Returns how many had to be killed."""
    deadline = time.monotonic() + grace
    killed = 0
    while any(p.state != "Z" for p in processes.descendants()):
        runs.reap(set())
        if time.monotonic() > deadline:
            killed = len(crash_machine(runs))
            processes.wait_descendants_gone(10)
            break
        time.sleep(0.05)
    runs.reap(set())
    return killed


def run_git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
