"""SIGKILL cairn at random instants in every command that writes state, and in whole runs; after
every kill, check that nothing is torn, nothing of the user's was touched, and the next write
works and cleans up.

    .venv/bin/python bench/chaos/kill_writes.py --quick      # CI: 15 kills, about 30 s
    .venv/bin/python bench/chaos/kill_writes.py              # 1,000 kills, about 30 minutes
    .venv/bin/python bench/chaos/kill_writes.py --self-test  # inject each fault; must exit 1

Five scratch repositories (``writers.py``), one per kind of writer: an interrupted 40-task run
(``cairn task start|done|skip|defer``, ``cairn gate``, ``cairn defer``), a run interrupted in its
fix phase (``cairn finding``, ``cairn finding add``), one in its evaluate phase (``cairn ac``), a
work tree changed before each ``cairn wip save``, and whole ``cairn run`` and ``cairn resume``
with the scripted agent, so the orchestrator's own marker, summary and journal rewrites are hit.

Each kill picks a target at random and an instant (``killing.pick_instant``: timed, or right
after the k-th change the command makes in the state directories; the process alone, or with
everything it started). Then, with every process it left reaped:

1. every state file parses, the journal has no bad line but a torn last one, the summary,
   review and evaluation are not ahead of the journal (``checks``);
2. ``cairn status`` and ``cairn catchup <ticket>`` exit 0;
3. ``git fsck`` is clean, the ``refs/cairn`` refs name commits, no git lock is left but the
   ``.lock`` of a ``refs/cairn`` ref (a kill inside ``git update-ref`` leaves it; counted);
4. HEAD, the index file, the branches, config and hooks are unchanged, and so is every
   work-tree file where no agent ran;
5. one more write of the same kind (not killed) exits 0, and afterwards no temp file of a dead
   writer is left in the directories it wrote, no git lock at all is left, and the summary
   agrees with the journal.

A violation is counted once per kill and kind; the table lists them, the first examples follow,
and the exit code is 1 if there is any.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import checks
import processes
from checks import Problem
from killing import observe, pick_instant, shoot
from writers import Family, Lab

from cairn import summary
from common import (
    Sizes,
    Tally,
    cairn_argv,
    cli,
    dead_pid,
    git,
    log,
    parse_args,
    scratch,
)

SIZES = Sizes(quick=15, full=1000, unit="kills")

KINDS = {
    "unreadable_state": "a state file does not parse with cairn's own reader",
    "journal_bad_line": "a journal line that is not a JSON event and not a torn last line",
    "out_of_step": "summary, review or evaluation ahead of the journal (or not equal after "
    "the next write)",
    "cli_read_failed": "cairn status or cairn catchup exited non-zero or with a traceback",
    "git_unhealthy": "git fsck not clean, or a refs/cairn ref not naming a commit",
    "git_lock_left": "a git lock file left behind",
    "user_state_changed": "HEAD, index, branches, config, hooks (or, with no agent, a "
    "work-tree file) changed",
    "next_write_failed": "the next write after the kill (not killed) failed",
    "leftover_temp": "a dead writer's temp file left after the next write in its directory",
    "hang": "a command did not finish in time",
}

FIGURES = [
    "kills",
    "kills in commands",
    "kills in whole runs",
    "kills after the first state change",
    "kills whose process tree was killed",
    "temp files left by a kill",
    "commands finished before the kill (not counted)",
    "next writes",
    "ref locks left by a kill (the next snapshot removes them)",
    "stale git locks removed by the campaign",
    "faults injected",
    "faults missed",
]

# --- one kill ---------------------------------------------------------------------------------


@dataclass
class Calibration:
    seconds: dict[str, float] = field(default_factory=dict)
    events: dict[str, int] = field(default_factory=dict)


def calibrate(lab: Lab, rng: random.Random) -> Calibration:
    """How long each target takes and how many state changes it makes, not killed."""
    found = Calibration()
    for target in lab.targets():
        family, args = lab.argv(target, rng)
        lab.prepare(family, rng)
        done = observe(cairn_argv(*args), family.repo, family.watch)
        if done.returncode not in (0, 3):
            raise SystemExit(
                f"calibration: cairn {' '.join(args)} exited {done.returncode}: "
                f"{done.stderr.strip()}"
            )
        found.seconds[target] = done.seconds
        found.events[target] = done.events
        log(f"calibrated {target}: {done.seconds:.2f} s, {done.events} state changes")
    return found


@dataclass
class Kill:
    number: int
    target: str
    instant: str

    def where(self) -> str:
        return f"kill {self.number} ({self.target}, {self.instant})"


Repair = Callable[[], None]


@dataclass(frozen=True)
class Fault:
    """A fault the self-test injects after a kill of ``target`` (or, ``late``, after the next
    write), and the violation kinds the checks must report for it; the returned callable
    undoes it once it has been checked."""

    name: str
    target: str
    inject: Callable[[Family], Repair]
    expect: tuple[str, ...]
    late: bool = False


def one_kill(
    lab: Lab,
    number: int,
    rng: random.Random,
    calibration: Calibration,
    tally: Tally,
    fault: Fault | None = None,
) -> bool:
    """One killed command and every check after it; False when the command finished before
    the kill (it does not count)."""
    target = rng.choice(sorted(lab.targets())) if fault is None else fault.target
    lab.prepare(lab.families[lab.targets()[target][0]], rng)
    family, args = lab.argv(target, rng)
    instant = pick_instant(rng, calibration.seconds[target], calibration.events[target])
    before = checks.take(family.repo)
    temps_before = set(temp_files(family))
    shot = shoot(cairn_argv(*args), family.repo, instant, family.watch)
    processes.quiesce(0 if instant.tree else 5.0)
    if not shot.killed:
        tally.count("commands finished before the kill (not counted)")
        return False
    kill = Kill(number, target, instant.describe())
    tally.count("kills")
    tally.count("kills in whole runs" if family.name == "run" else "kills in commands")
    tally.count("kills after the first state change", shot.events > 0)
    tally.count("kills whose process tree was killed", instant.tree)
    tally.count("temp files left by a kill", len(set(temp_files(family)) - temps_before))

    repair = fault.inject(family) if fault and not fault.late else None
    problems = after_kill(family, before)
    ref_locks = [p for p in problems if checks.is_cairn_ref_lock(p)]
    tally.count("ref locks left by a kill (the next snapshot removes them)", len(ref_locks))
    problems = [p for p in problems if p not in ref_locks]
    if repair is not None:
        repair()
    problems += after_next_write(lab, family, rng, tally, fault if fault and fault.late else None)
    if ref_locks:
        problems += after_next_snapshot(family, ref_locks)
    if fault is not None:
        record_injection(tally, kill, fault, problems)
    report(tally, kill, problems, lab.known.get(family.name, set()))
    lab.known[family.name] = set(problems)
    if any(p.kind == "git_lock_left" for p in problems):
        # counted; now do what git's message advises, so later kills are measured on their own
        tally.count("stale git locks removed by the campaign", remove_git_locks(family.repo))
    return True


def after_next_snapshot(family: Family, ref_locks: list[Problem]) -> list[Problem]:
    """The ``refs/cairn`` locks a kill left are gone after the next snapshot of their ticket
    (the next write, or a ``cairn wip save`` when that write took none)."""
    for lock in ref_locks:
        ticket = Path(lock.detail.split()[0]).name.removesuffix(".lock")
        if (family.repo / lock.detail.split()[0]).exists():
            cli("wip", "save", "--ticket", ticket, "--timeout-ms", "10000", cwd=family.repo)
    return [p for p in checks.git_locks(family.repo) if checks.is_cairn_ref_lock(p)]


def remove_git_locks(repo: Path) -> int:
    gitdir = repo / ".git"
    locks = [gitdir / name for name in checks.GIT_LOCKS if (gitdir / name).exists()]
    locks += list((gitdir / "refs").rglob("*.lock"))
    for lock in locks:
        lock.unlink()
    return len(locks)


def temp_files(family: Family) -> list[Path]:
    directories = []
    for ticket_dir in checks.ticket_dirs(family.repo):
        directories += [ticket_dir, *checks.run_dirs(ticket_dir)]
    return [p for d in directories for p in d.iterdir() if p.name.startswith(checks.TEMP_PREFIX)]


def after_kill(family: Family, before: checks.Before) -> list[Problem]:
    problems = checks.unreadable_state(family.repo)
    for run_dir in checks.run_dirs(family.ticket_dir) if family.ticket_dir.is_dir() else []:
        problems += guarded(partial(checks.out_of_step, run_dir, exact=False))
    problems += checks.cli_reads(family.repo, [family.ticket])
    problems += checks.git_health(family.repo)
    problems += checks.untouched(family.repo, before, worktree=not family.agent_writes_tree)
    return problems


def after_next_write(
    lab: Lab,
    family: Family,
    rng: random.Random,
    tally: Tally,
    fault: Fault | None,
) -> list[Problem]:
    planned = lab.next_write(family, rng)
    if planned is None:
        return []
    args, written = planned
    done = cli(*args, cwd=family.repo, timeout=120)
    tally.count("next writes")
    if done.returncode is None:
        return [Problem("hang", f"next write cairn {' '.join(args)} did not finish")]
    problems = []
    if done.returncode != 0:
        problems.append(
            Problem(
                "next_write_failed",
                f"cairn {' '.join(args)}: exit {done.returncode}: {done.error_line()}",
            )
        )
    repair = fault.inject(family) if fault is not None else None
    problems += checks.leftover_temps(written)
    if repair is not None:
        repair()
    if family.name == "snap":
        problems += checks.abandoned_scratch(family.repo)
    run_dir = family.current_run_dir()
    if run_dir is not None:
        problems += guarded(lambda: checks.out_of_step(run_dir, exact=True))
    problems += [p for p in checks.unreadable_state(family.repo) if p.kind == "journal_bad_line"]
    problems += [p for p in checks.git_locks(family.repo) if not checks.is_cairn_ref_lock(p)]
    return problems


def guarded(check: Callable[[], list[Problem]]) -> list[Problem]:
    """A check that reads state files; one it cannot read is already reported as unreadable."""
    try:
        return check()
    except Exception:
        return []


def report(tally: Tally, kill: Kill, problems: list[Problem], before: set[Problem]) -> None:
    """Count each kind once per kill, and a problem only at the kill that caused it: one the
    previous check of the same repository saw already (a summary left ahead of its journal
    stays so) belongs to an earlier kill; one that was gone and is back is new."""
    seen: dict[str, str] = {}
    for problem in problems:
        if problem not in before:
            seen.setdefault(problem.kind, problem.detail)
    for kind, detail in seen.items():
        tally.violation(kind, kill.where(), detail)


# --- self-test: faults the checks must catch -----------------------------------------------------


def _summary_path(family: Family) -> Path:
    run_dir = family.current_run_dir()
    assert run_dir is not None
    return sorted(run_dir.glob("*_coder_change-summary.md"))[-1]


def _restoring(path: Path) -> Repair:
    saved = path.read_bytes()

    def restore() -> None:
        path.write_bytes(saved)

    return restore


def torn_summary(family: Family) -> Repair:
    path = _summary_path(family)
    restore = _restoring(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return restore


def journal_bad_line(family: Family) -> Repair:
    run_dir = family.current_run_dir()
    assert run_dir is not None
    path = run_dir / "run-log.jsonl"
    restore = _restoring(path)
    with path.open("ab") as handle:
        handle.write(b'{"t": "2026-01-01T00:00:00.000+00:00", "ev\n')
    return restore


def summary_ahead(family: Family) -> Repair:
    path = _summary_path(family)
    restore = _restoring(path)
    loaded = summary.load(path)
    assert loaded is not None
    task = next(t.number for t in loaded.tasks if t.status != "completed")
    summary.save(path, summary.complete_task(loaded, task, loaded.updated))
    return restore


def moved_branch(family: Family) -> Repair:
    git(family.repo, "branch", "chaos-injected")

    def repair() -> None:
        git(family.repo, "branch", "-D", "chaos-injected")

    return repair


def changed_file(family: Family) -> Repair:
    path = family.repo / "README.md"
    restore = _restoring(path)
    path.write_bytes(path.read_bytes() + b"changed\n")
    return restore


def leftover_temp(family: Family) -> Repair:
    temp = family.ticket_dir / f".tmp..in-progress.yaml.{dead_pid()}.0badc0de"
    temp.write_bytes(b"phase: implement\n")
    return lambda: temp.unlink(missing_ok=True)


def git_lock(family: Family) -> Repair:
    lock = family.repo / ".git" / "index.lock"
    lock.write_bytes(b"")
    return lambda: lock.unlink(missing_ok=True)


def newer_marker(family: Family) -> Repair:
    path = family.ticket_dir / ".in-progress.yaml"
    restore = _restoring(path)
    path.write_text(json.dumps({**json.loads(path.read_text()), "version": 99}))  # JSON, as cairn
    return restore


FAULTS = [
    Fault("torn summary", "task start", torn_summary, ("unreadable_state", "cli_read_failed")),
    Fault("journal bad line", "gate", journal_bad_line, ("journal_bad_line",)),
    Fault("summary ahead of the journal", "defer", summary_ahead, ("out_of_step",)),
    Fault("moved branch", "task skip", moved_branch, ("user_state_changed",)),
    Fault("changed work-tree file", "task defer", changed_file, ("user_state_changed",)),
    Fault("leftover temp", "task done", leftover_temp, ("leftover_temp",), late=True),
    Fault("git lock left", "gate", git_lock, ("git_lock_left",)),
    Fault("marker from a newer cairn", "task start", newer_marker, ("cli_read_failed",)),
]


def record_injection(tally: Tally, kill: Kill, fault: Fault, problems: list[Problem]) -> None:
    tally.count("faults injected")
    kinds = {p.kind for p in problems}
    if not set(fault.expect) <= kinds:
        tally.count("faults missed")
        log(f"SELF-TEST: {fault.name!r} at {kill.where()} was not caught (saw {sorted(kinds)})")


# --- main ---------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(__doc__ or "", SIZES, argv)
    rng = random.Random(args.seed)
    if args.self_test:
        args.cases = len(FAULTS)
    log(f"kill_writes: seed {args.seed}, {args.cases} kills")
    processes.become_subreaper()
    tally = Tally("kill_writes", args.seed, KINDS)
    with scratch("kill-writes", args.keep) as root:
        lab = Lab(root)
        lab.set_up(["impl"] if args.self_test else ["impl", "review", "eval", "snap", "run"])
        calibration = calibrate(lab, rng)
        if args.self_test:
            for number, fault in enumerate(FAULTS, start=1):
                while not one_kill(lab, number, rng, calibration, tally, fault):
                    pass
        else:
            number = 0
            while number < args.cases:
                if one_kill(lab, number + 1, rng, calibration, tally):
                    number += 1
                    if number % 25 == 0:
                        log(f"{number} kills, {sum(tally.violations.values())} violations")
        processes.quiesce(5)
    return tally.report(args, FIGURES)


if __name__ == "__main__":
    sys.exit(main())
