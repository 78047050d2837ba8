"""SIGKILL ``cairn run`` (and its agent) mid-run, then ``cairn resume`` until the run completes;
count completed runs, tasks redone and bytes lost.

    .venv/bin/python bench/chaos/kill_resume.py --quick      # CI: 4 trials, about 20 s
    .venv/bin/python bench/chaos/kill_resume.py              # 50 trials, about 8 minutes
    .venv/bin/python bench/chaos/kill_resume.py --self-test  # a redone task, lost bytes: exit 1

Each trial is a fresh repository and a 3-task plan (implement, review, fix) run by the
instrumented agent ``agent.py`` (kind ``command``: one task a turn, as the prompt asks; every
task started and every file written goes to its log, fsynced). The coder's turn cap (2) makes
cairn cut the coder off and hand off once per run, without any kill.

The trial kills ``cairn run``, then each ``cairn resume`` but the last, 1 to 3 times in all, at
a random instant of the run's usual length, in one of two ways:

- ``cairn``: cairn alone; its agent (its own process group) lives on, and resume must stop it;
- ``all``: cairn and every process it started, like a container being killed;

the two take turns from one kill to the next. What happens to the dead is the trial's policy,
the three taking turns from one trial to the next:

- ``reaped``: cairn and every orphan it left are reaped at once (a shell, a systemd init);
- ``orphans unreaped``: cairn is reaped at once, its orphans (the agent) are not: they stay
  zombies until the trial ends, as under a container init that does not reap (this machine's
  does not);
- ``nothing reaped``: cairn too stays a zombie until the trial ends (a supervisor that has not
  called wait yet).

Violations:

- ``not_completed``: the run did not finish after 12 resumes (no exit 0, and catch-up does not
  say it is done: a kill may come after the run finished);
- ``task_redone``: the agent started a task after the journal recorded it completed (the task
  was dispatched again);
- ``bytes_lost``: a file the agent wrote (and logged) is neither in the work tree nor in any
  snapshot of the ticket, with the same bytes;
- ``resume_refused``: ``cairn resume`` exited 2 although the run's owner was dead (a zombie
  counted as alive, say), or named nothing to resume although the run had not finished;
- ``dead_agent_reported_stopped``: resume said it stopped an agent that was already dead;
- ``run_failed``: a run or resume exited 1, or printed a traceback, or did not finish in time;
- ``unreadable_state``: after the run, a state file does not parse, or catch-up or status fail.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agent
import checks
import processes
from killing import spawn

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

SIZES = Sizes(quick=4, full=50, unit="trials")
REAPING = ["reaped", "orphans unreaped", "nothing reaped"]
REAPING_FIGURE = {
    "reaped": "the dead reaped at once",
    "orphans unreaped": "orphans left unreaped",
    "nothing reaped": "nothing reaped",
}
MAX_RESUMES = 12
TICKET = "KR"
TASKS = ["Parse the input", "Report errors with their line", "Document the format"]
PHASES = ["implement", "review", "fix"]

KINDS = {
    "not_completed": f"the run did not complete within {MAX_RESUMES} resumes",
    "task_redone": "a task was started again after the journal recorded it completed",
    "bytes_lost": "a file the agent wrote is in neither the work tree nor a snapshot",
    "resume_refused": "resume exited 2 for a run whose owner was dead and that had not finished",
    "dead_agent_reported_stopped": "resume said it stopped an agent that was already dead",
    "run_failed": "run or resume exited 1, printed a traceback or did not finish in time",
    "unreadable_state": "after the run a state file does not parse, or catch-up/status fail",
}

FIGURES = [
    "trials",
    "completed runs",
    "runs that finished just before their kill",
    "kills",
    "kills of cairn alone",
    "kills of cairn and its agent",
    "trials with the dead reaped at once",
    "trials with orphans left unreaped",
    "trials with nothing reaped",
    "resumes",
    "resumes that stopped a live agent",
    "resumes that asked for a new run (killed before it had a plan)",
    "cutoffs without a kill (exit 3)",
    "tasks started",
    "tasks redone",
    "files written",
    "bytes written",
    "bytes lost",
    "faults injected",
    "faults missed",
]


@dataclass
class Trial:
    """One repository, one ticket, one run to completion."""

    number: int
    seed: int
    root: Path
    repo: Path = field(init=False)
    agent_log: Path = field(init=False)
    plan: Path = field(init=False)
    unreaped: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def reaping(self) -> str:
        return REAPING[self.number % len(REAPING)]

    kills: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.repo = make_project(self.root / f"trial-{self.number}", agent.config(PHASES))
        self.agent_log = self.root / f"trial-{self.number}-agent.jsonl"
        self.plan = self.root / f"trial-{self.number}-plan.md"
        self.plan.write_text(plan_text("kill and resume", TASKS))

    @property
    def env(self) -> dict[str, str]:
        return {"CHAOS_AGENT_LOG": str(self.agent_log), "CHAOS_AGENT_PAUSE": "0.1"}

    def where(self) -> str:
        kills = "; ".join(self.kills) or "none"
        return f"trial {self.number} (seed {self.seed}, {self.reaping}; kills: {kills})"

    def agent_records(self) -> list[dict[str, Any]]:
        if not self.agent_log.exists():
            return []
        out = []
        for line in self.agent_log.read_text().splitlines():
            with contextlib.suppress(ValueError):  # a line torn by a kill of the agent
                out.append(json.loads(line))
        return out

    def run_dir(self) -> Path | None:
        ticket_dir = checks.state_root(self.repo) / "tickets" / TICKET
        runs = checks.run_dirs(ticket_dir) if ticket_dir.is_dir() else []
        return runs[-1] if runs else None

    def reap(self) -> None:
        """Reap everything left unreaped on purpose (its parent finally waits)."""
        for proc in self.unreaped:
            proc.wait()
        self.unreaped.clear()
        processes.reap_orphans()


# --- one trial ------------------------------------------------------------------------------------


def attempt(
    trial: Trial, argv: list[str], kill_after: float | None, tally: Tally
) -> tuple[int | None, str]:
    """Run ``argv``; kill it after ``kill_after`` seconds (None: let it finish). Returns the
    exit code (None when killed) and its output."""
    proc = spawn(argv, trial.repo, trial.env)
    if kill_after is None:
        try:
            out, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            processes.kill_descendants(proc.pid)
            processes.kill(proc.pid)
            out, err = proc.communicate()
            return -1, "did not finish in 300 s"
        return proc.returncode, (out + err).decode("utf-8", "replace")
    deadline = time.monotonic() + kill_after
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    if proc.poll() is not None:
        out, err = proc.communicate()
        return proc.returncode, (out + err).decode("utf-8", "replace")
    everything = (trial.number + len(trial.kills)) % 2 == 1
    if everything:
        processes.kill_descendants(proc.pid)
    processes.kill(proc.pid, signal.SIGKILL)
    trial.kills.append(f"{argv[3]} at {kill_after:.2f} s, {'all' if everything else 'cairn'}")
    tally.count("kills")
    tally.count("kills of cairn and its agent" if everything else "kills of cairn alone")
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    proc.stderr.close()
    if trial.reaping == "nothing reaped":
        trial.unreaped.append(proc)
        return None, ""
    proc.wait()
    if everything:
        processes.wait_descendants_gone(5)
    if trial.reaping == "reaped":
        processes.reap_orphans()
    return None, ""


def agent_pid_named(trial: Trial) -> int | None:
    """The agent pid the marker names (what resume would try to stop)."""
    from cairn.state import marker

    ticket_dir = checks.state_root(trial.repo) / "tickets" / TICKET
    try:
        found = marker.read(ticket_dir / ".in-progress.yaml")
    except Exception:
        return None
    if found is None or found.dispatch is None:
        return None
    return found.dispatch.pid


def run_trial(trial: Trial, rng: random.Random, typical: float, tally: Tally) -> None:
    kills_left = rng.randint(1, 3)
    started = False
    for _ in range(MAX_RESUMES + 1):
        argv = (
            cairn_argv("resume", TICKET)
            if started
            else cairn_argv("run", str(trial.plan), "--ticket", TICKET)
        )
        kill_after = rng.uniform(0.1, typical * 1.1) if kills_left else None
        agent_pid = agent_pid_named(trial) if started else None
        agent_state = processes.state_of(agent_pid) if agent_pid else None
        code, output = attempt(trial, argv, kill_after, tally)
        if argv[3] == "resume":
            tally.count("resumes")
        if code is None:
            kills_left -= 1
            started = started or trial.run_dir() is not None
            check_bytes(trial, tally, "after a kill")
            continue
        if agent_pid is not None and f"stopped agent pid {agent_pid}" in output:
            if agent_state in (None, "Z"):
                what = "a zombie" if agent_state == "Z" else "gone"
                tally.violation(
                    "dead_agent_reported_stopped",
                    trial.where(),
                    f"resume said it stopped agent pid {agent_pid}, which was {what}",
                )
            else:
                tally.count("resumes that stopped a live agent")
        if "Traceback (most recent call last)" in output or code in (1, -1):
            tally.violation("run_failed", trial.where(), f"{argv[3]} exited {code}: {tail(output)}")
            return
        if code == 0:
            tally.count("completed runs")
            return
        if code == 3:
            tally.count("cutoffs without a kill (exit 3)")
            started = True
            continue
        # exit 2: refused
        if "there is nothing to resume" in output and finished(trial):
            # the kill came after the run had finished (summary completed, marker removed)
            tally.count("completed runs")
            tally.count("runs that finished just before their kill")
            return
        if "start a new run with cairn run" in output:
            tally.count("resumes that asked for a new run (killed before it had a plan)")
            started = False
            continue
        tally.violation("resume_refused", trial.where(), f"{argv[3]} exited {code}: {tail(output)}")
        trial.reap()  # the owner may be a zombie: let its parent finally reap it, and go on
        started = trial.run_dir() is not None
    tally.violation("not_completed", trial.where(), f"no exit 0 after {MAX_RESUMES} resumes")


def finished(trial: Trial) -> bool:
    """``cairn catchup`` says the ticket's last run is done, and the journal agrees."""
    done = cli("catchup", TICKET, "--json", cwd=trial.repo)
    if done.returncode != 0 or json.loads(done.stdout).get("state") != "done":
        return False
    run_dir = trial.run_dir()
    events = checks.read_journal(run_dir / "run-log.jsonl").events if run_dir else []
    return any(e.get("event") == "run_finished" for e in events)


def tail(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


# --- the checks after a trial ---------------------------------------------------------------


def check_redone(trial: Trial, tally: Tally) -> None:
    run_dir = trial.run_dir()
    done = checks.completed_at([run_dir] if run_dir else [])
    started, redone = checks.tasks_redone(trial.agent_records(), done)
    tally.count("tasks started", started)
    tally.count("tasks redone", len(redone))
    for line in redone:
        tally.violation("task_redone", trial.where(), line)


def snapshot_blobs(repo: Path, path: str) -> set[str]:
    """Every blob ``path`` has in any snapshot of the ticket."""
    commits = git(repo, "log", "--format=%H", f"refs/cairn/wip/{TICKET}", "--", check=False)
    blobs = set()
    for commit in commits.split():
        found = subprocess.run(
            ["git", "rev-parse", "--verify", "-q", f"{commit}:{path}"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=False,
        )
        if found.returncode == 0:
            blobs.add(found.stdout.strip())
    return blobs


def check_bytes(trial: Trial, tally: Tally, when: str) -> int:
    """Files the agent logged as written that are neither in the work tree nor in a snapshot
    with the same bytes; counts them once, at the end of the trial."""
    lost = 0
    latest: dict[str, dict[str, Any]] = {}
    for record in trial.agent_records():
        if record.get("event") == "wrote":
            latest[record["path"]] = record
    for rel, record in latest.items():
        path = trial.repo / rel
        if path.is_file() and agent.blob_id(path.read_bytes()) == record["blob"]:
            continue
        if record["blob"] in snapshot_blobs(trial.repo, rel):
            continue
        lost += record["bytes"]
        if when == "at the end":
            tally.violation("bytes_lost", trial.where(), f"{rel} ({record['bytes']} bytes) {when}")
    if when == "at the end":
        tally.count("files written", len(latest))
        tally.count("bytes written", sum(r["bytes"] for r in latest.values()))
        tally.count("bytes lost", lost)
    elif lost:
        log(f"{trial.where()}: {lost} bytes missing {when} (checked again at the end)")
    return lost


def check_state(trial: Trial, tally: Tally) -> None:
    problems = checks.unreadable_state(trial.repo) + checks.cli_reads(trial.repo, [TICKET])
    for problem in problems[:1]:
        tally.violation("unreadable_state", trial.where(), problem.detail)


def after_trial(trial: Trial, tally: Tally) -> None:
    processes.wait_descendants_gone(3)
    check_redone(trial, tally)
    check_bytes(trial, tally, "at the end")
    check_state(trial, tally)


# --- self-test -----------------------------------------------------------------------------------


def redo_a_task(trial: Trial) -> None:
    """What a resume that re-dispatched a completed task would make the agent do."""
    run_dir = trial.run_dir()
    assert run_dir is not None
    prompt = f"Continue with ticket {TICKET}: turn 2 of 2.\nIn progress\nRemaining tasks:\n"
    prompt += f"- Task 0: {TASKS[0]}\n"
    env = {**trial.env, ENV_RUN_DIR: str(run_dir), ENV_TICKET: TICKET}
    subprocess.run(
        [sys.executable, str(HERE / "agent.py")],
        input=prompt.encode(),
        cwd=trial.repo,
        env={**os.environ, **env},
        capture_output=True,
        check=False,
    )


def lose_bytes(trial: Trial) -> None:
    """Delete a file the agent wrote, and every snapshot that holds it."""
    (trial.repo / "work" / "fix-F1.txt").unlink()
    git(trial.repo, "update-ref", "-d", f"refs/cairn/wip/{TICKET}")


FAULTS = {"task redone": (redo_a_task, "task_redone"), "bytes lost": (lose_bytes, "bytes_lost")}


# --- main ---------------------------------------------------------------------------------------


def calibrate(root: Path) -> float:
    """How long an undisturbed run takes (with its one cutoff and resume-free handoff)."""
    trial = Trial(0, 0, root)
    started = time.monotonic()
    done = cli("run", str(trial.plan), "--ticket", TICKET, cwd=trial.repo, env=trial.env)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"calibration run exited {done.returncode}: {done.stderr or done.stdout}")
    log(f"calibrated: an undisturbed run takes {seconds:.1f} s")
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(__doc__ or "", SIZES, argv)
    if args.self_test:
        args.cases = len(FAULTS)
    log(f"kill_resume: seed {args.seed}, {args.cases} trials")
    processes.become_subreaper()
    tally = Tally("kill_resume", args.seed, KINDS)
    with scratch("kill-resume", args.keep) as root:
        typical = calibrate(root)
        faults = list(FAULTS.items())
        for number, seed in enumerate(case_seeds(args.seed, args.cases), start=1):
            trial = Trial(number, seed, root)
            rng = random.Random(seed)
            tally.count("trials")
            tally.count(f"trials with {REAPING_FIGURE[trial.reaping]}")
            try:
                run_trial(trial, rng, typical, tally)
                if args.self_test:
                    name, (inject, kind) = faults[number - 1]
                    inject(trial)
                    tally.count("faults injected")
                    before = tally.violations[kind]
                    after_trial(trial, tally)
                    if tally.violations[kind] == before:
                        tally.count("faults missed")
                        log(f"SELF-TEST: {name!r} was not caught")
                else:
                    after_trial(trial, tally)
            finally:
                processes.kill_descendants()
                trial.reap()
                processes.quiesce(5)
            log(f"trial {number} ({trial.reaping}): {'; '.join(trial.kills) or 'no kill'}")
    return tally.report(args, FIGURES)


if __name__ == "__main__":
    sys.exit(main())
