"""Start two ``cairn run``s and two ``cairn resume``s of one ticket at the same instant, round
after round: exactly one must win, and every loser must exit 2 with one line naming the owner.

    .venv/bin/python bench/chaos/lease_race.py --quick      # CI: 8 rounds, about 15 s
    .venv/bin/python bench/chaos/lease_race.py              # 100 rounds, about 5 minutes
    .venv/bin/python bench/chaos/lease_race.py --self-test  # fake winners and losers: exit 1

One repository whose scripted coder sleeps in every turn, so a winner holds the ticket for as
long as the round needs. Odd rounds race on ticket ``LR``, whose last run was interrupted (its
owner SIGKILLed): two ``cairn run`` (a new run, taking over from the dead owner) and two
``cairn resume`` (continuing the interrupted run). Even rounds race two ``cairn run`` on a
ticket that has never run. The contenders are started first and wait on a pipe; closing it
releases them at once, and each execs ``python -m cairn``.

When every loser has exited, the round checks that:

- exactly one contender is still running, and the marker names it as the owner;
- each loser exited 2 with one line on stderr, ``cairn: error: …``, naming the winner's pid;
- the losers wrote nothing: one ``run_started`` more in the ticket's journals, one new run
  directory when the winner is a ``cairn run``, none when it is a resume;
- every state file parses, ``cairn status`` and ``cairn catchup`` exit 0.

Then the winner and its agent are SIGKILLed, which leaves ``LR`` interrupted for the next
round.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import checks
import processes
from killing import spawn

from common import (
    Sizes,
    Tally,
    cairn_argv,
    case_seeds,
    log,
    make_project,
    parse_args,
    plan_text,
    scratch,
    scripted_config,
)

SIZES = Sizes(quick=8, full=100, unit="rounds")
TICKET = "LR"
HOLD_TIMEOUT = 60.0  # for a winner to take the ticket and start its agent
LOSER_TIMEOUT = 10.0  # for every loser to exit (they take a second or two)

KINDS = {
    "no_winner": "every contender exited: nobody holds the ticket",
    "two_winners": "more than one contender is running the ticket",
    "wrong_owner": "the marker does not name the contender that is running",
    "bad_exit": "a contender exited with a code other than 2, or with a traceback",
    "loser_message": "a loser's stderr is not one line 'cairn: error: …' naming the winner's pid",
    "loser_wrote": "a loser started a run or journalled something",
    "unreadable_state": "after the round a state file does not parse, or catch-up/status fail",
}

FIGURES = [
    "rounds",
    "rounds on an interrupted ticket (2 runs, 2 resumes)",
    "rounds on a new ticket (2 runs)",
    "contenders",
    "rounds won by a run",
    "rounds won by a resume",
    "slowest loser (s)",
    "faults injected",
    "faults missed",
]

SCRIPT = "coder:\n" + "  - - sleep: 60\n" * 50
# Waits for the starting pistol (EOF on the pipe), then becomes the command.
BARRIER = "import os, sys; os.read(int(sys.argv[1]), 1); os.execvp(sys.argv[2], sys.argv[2:])"


@dataclass
class Contender:
    kind: str  # "run" or "resume"
    proc: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.proc.pid


def contender_argv(kind: str, plan: Path, ticket: str) -> list[str]:
    if kind == "run":
        return cairn_argv("run", str(plan), "--ticket", ticket)
    return cairn_argv("resume", ticket)


def start_all(repo: Path, argvs: list[list[str]]) -> list[subprocess.Popen[bytes]]:
    """Start every command held at a barrier, then release them at the same instant."""
    read_end, write_end = os.pipe()
    procs = []
    for argv in argvs:
        wrapped = [sys.executable, "-c", BARRIER, str(read_end), *argv]
        procs.append(spawn_with_fd(wrapped, repo, read_end))
    time.sleep(0.3)  # every wrapper is blocked in os.read by now
    os.close(read_end)
    os.close(write_end)
    return procs


def spawn_with_fd(argv: list[str], repo: Path, fd: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv,
        cwd=repo,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        pass_fds=(fd,),
    )


def run_started_count(repo: Path, ticket: str) -> tuple[int, int]:
    """(run directories, run_started events) of the ticket."""
    ticket_dir = checks.state_root(repo) / "tickets" / ticket
    runs = checks.run_dirs(ticket_dir) if ticket_dir.is_dir() else []
    events = sum(
        1
        for run_dir in runs
        for e in checks.read_journal(run_dir / "run-log.jsonl").events
        if e.get("event") == "run_started"
    )
    return len(runs), events


def owner_pid(repo: Path, ticket: str) -> int | None:
    from cairn.state import marker

    try:
        found = marker.read(checks.state_root(repo) / "tickets" / ticket / ".in-progress.yaml")
    except Exception:
        return None
    return found.owner.pid if found and found.owner else None


def interrupt_ticket(repo: Path, plan: Path, ticket: str) -> None:
    """Start a run of ``ticket`` and SIGKILL it (and its agent) once its agent is working."""
    proc = spawn(cairn_argv("run", str(plan), "--ticket", ticket), repo)
    wait_for_dispatch(repo, ticket, proc.pid)
    processes.kill_descendants(proc.pid)
    processes.kill(proc.pid)
    proc.communicate()
    processes.quiesce(5)


def wait_for_dispatch(
    repo: Path, ticket: str, pid: int, proc: subprocess.Popen[bytes] | None = None
) -> bool:
    """Whether the ticket's marker names ``pid`` with a dispatch within ``HOLD_TIMEOUT``; with
    ``proc`` (that process), False as soon as it exits."""
    from cairn.state import marker

    path = checks.state_root(repo) / "tickets" / ticket / ".in-progress.yaml"
    deadline = time.monotonic() + HOLD_TIMEOUT
    while time.monotonic() < deadline and (proc is None or proc.poll() is None):
        try:
            found = marker.read(path)
        except Exception:
            found = None
        if found and found.owner and found.owner.pid == pid and found.dispatch is not None:
            return True
        time.sleep(0.02)
    return False


@dataclass
class Round:
    number: int
    ticket: str
    kinds: list[str]
    fakes: dict[int, list[str]]  # self-test: contender index → a command that is not cairn

    def where(self) -> str:
        what = " + ".join(self.kinds)
        return f"round {self.number} ({what} on {self.ticket})"


def race(repo: Path, plan: Path, game: Round, tally: Tally) -> None:
    runs_before, started_before = run_started_count(repo, game.ticket)
    argvs = [
        game.fakes.get(i) or contender_argv(kind, plan, game.ticket)
        for i, kind in enumerate(game.kinds)
    ]
    started = time.monotonic()
    procs = start_all(repo, argvs)
    contenders = [Contender(kind, proc) for kind, proc in zip(game.kinds, procs, strict=True)]
    tally.count("contenders", len(contenders))
    deadline = started + LOSER_TIMEOUT
    while time.monotonic() < deadline:
        running = [c for c in contenders if c.proc.poll() is None]
        if len(running) <= 1:
            break
        time.sleep(0.02)
    slowest = time.monotonic() - started
    tally.figures["slowest loser (s)"] = max(tally.figures.get("slowest loser (s)", 0), slowest)
    running = [c for c in contenders if c.proc.poll() is None]
    if len(running) == 1:  # the winner, or a loser slower than the rest (on a loaded machine)
        wait_for_dispatch(repo, game.ticket, running[0].pid, running[0].proc)
        running = [c for c in contenders if c.proc.poll() is None]
    try:
        judge(repo, game, contenders, running, tally, runs_before, started_before)
    finally:
        for contender in contenders:
            processes.kill_descendants(contender.pid)
            processes.kill(contender.pid)
            contender.proc.communicate()
        processes.quiesce(5)


def judge(
    repo: Path,
    game: Round,
    contenders: list[Contender],
    running: list[Contender],
    tally: Tally,
    runs_before: int,
    started_before: int,
) -> None:
    where = game.where()
    if not running:
        tally.violation("no_winner", where, "every contender exited")
        winner = None
    elif len(running) > 1:
        pids = ", ".join(f"{c.kind} pid {c.pid}" for c in running)
        tally.violation("two_winners", where, f"still running: {pids}")
        winner = None
    else:
        winner = running[0]
        tally.count(f"rounds won by a {winner.kind}")
        if not wait_for_dispatch(repo, game.ticket, winner.pid):
            tally.violation(
                "wrong_owner",
                where,
                f"marker names pid {owner_pid(repo, game.ticket)}, "
                f"the {winner.kind} running is pid {winner.pid}",
            )
    for contender in contenders:
        if contender in running:
            continue
        _, err = contender.proc.communicate()
        code = contender.proc.returncode
        stderr = err.decode("utf-8", "replace")
        if code != 2 or "Traceback" in stderr:
            tally.violation("bad_exit", where, f"{contender.kind} exited {code}: {stderr[-300:]}")
            continue
        lines = stderr.strip().splitlines()
        one_line = len(lines) == 1 and lines[0].startswith("cairn: error: ")
        # with no single winner there is no owner to name; the form is still checked
        names = winner is None or (one_line and f"pid {winner.pid} " in lines[0] + " ")
        if not one_line or not names:
            tally.violation("loser_message", where, f"{contender.kind}: {stderr.strip()[:300]}")
    runs_after, started_after = run_started_count(repo, game.ticket)
    new_runs = 1 if winner is not None and winner.kind == "run" else 0
    if winner is not None and (runs_after - runs_before, started_after - started_before) != (
        new_runs,
        1,
    ):
        tally.violation(
            "loser_wrote",
            where,
            f"{runs_after - runs_before} new run directories and "
            f"{started_after - started_before} run_started events for one {winner.kind}",
        )
    problems = checks.unreadable_state(repo) + checks.cli_reads(repo, [game.ticket])
    for problem in problems[:1]:
        tally.violation("unreadable_state", where, problem.detail)


# --- self-test -----------------------------------------------------------------------------------

FAKE_LOSER = ["sh", "-c", "echo 'cairn: error: the ticket is busy' >&2; exit 2"]
FAKE_WINNER = ["sleep", "120"]
FAULTS = {
    "a second winner": ({1: FAKE_WINNER}, "two_winners"),
    "a loser naming nobody": ({1: FAKE_LOSER}, "loser_message"),
    "nobody wins": ({i: FAKE_LOSER for i in range(4)}, "no_winner"),
}


# --- main ---------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(__doc__ or "", SIZES, argv)
    if args.self_test:
        args.cases = len(FAULTS)
    log(f"lease_race: seed {args.seed}, {args.cases} rounds")
    processes.become_subreaper()
    tally = Tally("lease_race", args.seed, KINDS)
    with scratch("lease-race", args.keep) as root:
        script = root / "script.yaml"
        script.write_text(SCRIPT)
        repo = make_project(root / "repo", scripted_config(script, ["implement"], max_turns=100))
        plan = root / "plan.md"
        plan.write_text(plan_text("race", ["Hold the ticket"]))
        interrupt_ticket(repo, plan, TICKET)
        faults = list(FAULTS.items())
        for number, seed in enumerate(case_seeds(args.seed, args.cases), start=1):
            rng = random.Random(seed)
            interrupted = args.self_test or number % 2 == 1
            kinds = ["run", "run", "resume", "resume"] if interrupted else ["run", "run"]
            rng.shuffle(kinds)
            ticket = TICKET if interrupted else f"NEW-{number}"
            fakes: dict[int, list[str]] = {}
            if args.self_test:
                fakes = faults[number - 1][1][0]
            game = Round(number, ticket, kinds, fakes)
            tally.count("rounds")
            tally.count(
                "rounds on an interrupted ticket (2 runs, 2 resumes)"
                if interrupted
                else "rounds on a new ticket (2 runs)"
            )
            before = dict(tally.violations)
            race(repo, plan, game, tally)
            if args.self_test:
                name, (_, kind) = faults[number - 1]
                tally.count("faults injected")
                if tally.violations[kind] == before.get(kind, 0):
                    tally.count("faults missed")
                    log(f"SELF-TEST: {name!r} was not caught")
            if number % 10 == 0:
                log(f"{number} rounds, {sum(tally.violations.values())} violations")
    return tally.report(args, FIGURES)


if __name__ == "__main__":
    sys.exit(main())
