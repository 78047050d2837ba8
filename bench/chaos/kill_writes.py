"""SIGKILL cairn at random instants in every command that writes state, and in whole runs; after
every kill, check that nothing is torn, nothing of the user's was touched, and the next write
works and cleans up.

    .venv/bin/python bench/chaos/kill_writes.py --quick      # CI: 50 kills, about 1.5 minutes
    .venv/bin/python bench/chaos/kill_writes.py              # 1,000 kills, about 30 minutes
    .venv/bin/python bench/chaos/kill_writes.py --self-test  # inject each fault; must exit 1

Five scratch repositories, one per kind of writer, each with a run of its own ticket:

- ``impl``: an interrupted run of a 40-task plan; targets ``cairn task start|done|skip|defer``,
  ``cairn gate``, ``cairn defer`` (a new run is started when few tasks are left open);
- ``review``: a run interrupted in its fix phase; targets ``cairn finding ID --status`` and
  ``cairn finding add``;
- ``eval``: a run interrupted in its evaluate phase; target ``cairn ac``;
- ``snap``: a work tree the campaign changes (new, modified and staged files) before each
  ``cairn wip save``;
- ``run``: whole ``cairn run`` and ``cairn resume`` of a 3-task plan with the scripted agent
  (evaluate, review and fix included), so the marker, summary and journal rewrites of the
  orchestrator itself are hit.

Each kill picks a target at random and an instant (``killing.pick_instant``: timed, or right
after the k-th change the command makes in the state directories; the process alone, or with
everything it started). Then, with every process it left reaped:

1. every state file parses, the journal has no bad line but a torn last one, the summary,
   review and evaluation are not ahead of the journal (``checks``);
2. ``cairn status`` and ``cairn catchup <ticket>`` exit 0;
3. ``git fsck`` is clean, the ``refs/cairn`` refs name commits, no git lock is left;
4. HEAD, the index file, the branches, config and hooks are unchanged, and so is every
   work-tree file where no agent ran;
5. one more write of the same kind (not killed) exits 0, and afterwards no temp file of a dead
   writer is left in the directories it wrote, and the summary agrees with the journal.

A violation is counted once per kill and kind; the table lists them, the first examples follow,
and the exit code is 1 if there is any.
"""

from __future__ import annotations

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

from cairn import summary
from common import (
    Sizes,
    Tally,
    cairn_argv,
    cli,
    dead_pid,
    git,
    log,
    make_project,
    parse_args,
    plan_text,
    scratch,
    scripted_config,
)

SIZES = Sizes(quick=50, full=1000, unit="kills")

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
    "faults injected",
    "faults missed",
]

IMPL_TASKS = 40
OPEN_TASKS_MIN = 4
TEXT = "The parser now accepts nested lists and reports the line of every error. " * 3


@dataclass
class Family:
    """One scratch repository and the ticket its writers write to."""

    name: str
    repo: Path
    ticket: str
    agent_writes_tree: bool
    watch: list[Path] = field(default_factory=list)

    @property
    def ticket_dir(self) -> Path:
        return checks.state_root(self.repo) / "tickets" / self.ticket

    def current_run_dir(self) -> Path | None:
        from cairn.state import marker

        try:
            found = marker.read(self.ticket_dir / ".in-progress.yaml")
        except Exception:  # unreadable: reported by the checks
            return None
        if found is None or found.run is None:
            return None
        return self.ticket_dir / found.run


class Lab:
    """The five repositories and how to build each target's command line."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.families: dict[str, Family] = {}
        self.counter = 0
        self.known: set[Problem] = set()  # problems reported so far

    # --- setting up -------------------------------------------------------------------------

    def project(
        self,
        name: str,
        ticket: str,
        script: str | None,
        phases: Sequence[str],
        plan: str,
        agent_writes_tree: bool = False,
        **agent: object,
    ) -> Family:
        config = None
        if script is not None:
            script_path = self.root / f"{name}-script.yaml"
            script_path.write_text(script)
            config = scripted_config(script_path, phases, **agent)
        repo = make_project(self.root / name, config)
        (self.root / f"{name}-plan.md").write_text(plan)
        family = Family(name, repo, ticket, agent_writes_tree)
        family.watch = [checks.state_root(repo), repo / ".git" / "refs"]
        self.families[name] = family
        return family

    def start_run(self, family: Family, expect: int = 3) -> None:
        plan = self.root / f"{family.name}-plan.md"
        done = cli("run", str(plan), "--ticket", family.ticket, cwd=family.repo)
        if done.returncode != expect:
            raise SystemExit(
                f"setup: cairn run in {family.name} exited {done.returncode}, not {expect}: "
                f"{done.stderr or done.stdout}"
            )

    def set_up(self, names: Sequence[str]) -> None:
        titles = [f"Change part {n} of the parser" for n in range(IMPL_TASKS)]
        if "impl" in names:
            impl = self.project(
                "impl",
                "IMPL",
                "coder:\n  - - say: idle\n",
                ["implement"],
                plan_text("impl", titles),
            )
            self.start_run(impl)
        if "review" in names:
            script = (
                "coder:\n"
                '  - - cairn: [task, start, "0"]\n'
                '    - cairn: [task, done, "0", --outcome, "done"]\n'
                "  - - say: idle\n"
                "reviewer:\n"
                + "".join(
                    f'  {"- -" if n == 1 else "  -"} cairn: [finding, add, F{n}, "problem {n}"]\n'
                    for n in (1, 2, 3)
                )
            )
            review = self.project(
                "review", "REV", script, ["implement", "review", "fix"], plan_text("r", ["One"])
            )
            self.start_run(review)
        if "eval" in names:
            script = (
                "coder:\n"
                '  - - cairn: [task, start, "0"]\n'
                '    - cairn: [task, done, "0", --outcome, "done"]\n'
                "evaluator:\n  - - exit: 1\n"
                "reviewer:\n  - - say: fine\n"
            )
            evaluate = self.project(
                "eval",
                "EVAL",
                script,
                ["implement", "evaluate", "review", "fix"],
                plan_text("e", ["One"], {0: ["it parses", "it reports errors", "it is fast"]}),
            )
            self.start_run(evaluate)
        if "snap" in names:
            self.project("snap", "SNAP", None, [], "", agent_writes_tree=False)
        if "run" in names:
            script = RUN_SCRIPT
            self.project(
                "run",
                "RUN",
                script,
                ["implement", "evaluate", "review", "fix"],
                plan_text("run", ["Parse", "Report", "Document"], {1: ["errors name the line"]}),
                agent_writes_tree=True,
                max_turns=5,
                max_continuations=1,
            )

    # --- the targets ------------------------------------------------------------------------

    def targets(self) -> dict[str, tuple[str, Callable[[random.Random], list[str]]]]:
        out: dict[str, tuple[str, Callable[[random.Random], list[str]]]] = {}
        if "impl" in self.families:
            out.update(
                {
                    "task start": ("impl", lambda r: ["task", "start", self.open_task(r)]),
                    "task done": ("impl", self.task_done),
                    "task skip": (
                        "impl",
                        lambda r: ["task", "skip", self.open_task(r), "--notes", "not needed"],
                    ),
                    "task defer": (
                        "impl",
                        lambda r: ["task", "defer", self.open_task(r), "--notes", TEXT[:90]],
                    ),
                    "gate": ("impl", self.gate),
                    "defer": (
                        "impl",
                        lambda r: ["defer", f"item {self.next_number()}: {TEXT[:60]}"],
                    ),
                }
            )
        if "review" in self.families:
            out["finding"] = ("review", self.finding)
            out["finding add"] = (
                "review",
                lambda r: [
                    "finding",
                    "add",
                    f"S{self.next_number()}",
                    "a suggestion",
                    "--location",
                    "src/app.py:1",
                    "--details",
                    TEXT[:120],
                ],
            )
        if "eval" in self.families:
            out["ac"] = ("eval", self.ac)
        if "snap" in self.families:
            out["wip save"] = (
                "snap",
                lambda r: ["wip", "save", "--reason", f"kill {self.counter}"],
            )
        if "run" in self.families:
            out["run"] = ("run", lambda r: ["run", str(self.root / "run-plan.md")])
            out["resume"] = ("run", lambda r: ["resume", "RUN"])
        return out

    def next_number(self) -> int:
        self.counter += 1
        return self.counter

    def open_tasks(self) -> list[int]:
        """The impl run's tasks not yet completed; [0] when its summary cannot be read (a
        self-test tore it: the command is then expected to fail)."""
        family = self.families["impl"]
        run_dir = family.current_run_dir()
        assert run_dir is not None
        path = sorted(run_dir.glob("*_coder_change-summary.md"))[0]
        try:
            loaded = summary.load(path)
        except Exception:
            return [0]
        assert loaded is not None
        return [t.number for t in loaded.tasks if t.status != "completed"]

    def open_task(self, rng: random.Random) -> str:
        return str(rng.choice(self.open_tasks()))

    def task_done(self, rng: random.Random) -> list[str]:
        n = self.open_task(rng)
        files = ",".join(f"src/part_{n}_{i}.py" for i in range(3))
        return ["task", "done", n, "--files", files, "--outcome", TEXT, "--notes", "tested"]

    def gate(self, rng: random.Random) -> list[str]:
        name = rng.choice(["Tests", "Lint", "Types", "Build"])
        result = rng.choice(["pass", "fail"])
        return ["gate", name, "--result", result, "--command", f"make {name.lower()}"]

    def finding(self, rng: random.Random) -> list[str]:
        status = rng.choice(["FIXED", "NOT_FIXED", "ALREADY_RESOLVED"])
        return ["finding", f"F{rng.randint(1, 3)}", "--status", status, "--action", TEXT[:100]]

    def ac(self, rng: random.Random) -> list[str]:
        result = rng.choice(["pass", "fail"])
        extra = ["--reason", "it does not"] if result == "fail" else []
        return ["ac", f"AC-{rng.randint(1, 3)}", "--result", result, *extra]

    def argv(self, target: str, rng: random.Random) -> tuple[Family, list[str]]:
        name, build = self.targets()[target]
        family = self.families[name]
        args = build(rng)
        if name in ("impl", "review", "eval", "snap"):
            args += ["--ticket", family.ticket]
        if name == "run" and args[0] == "run":
            args += ["--ticket", family.ticket]
        return family, args

    # --- between kills ------------------------------------------------------------------------

    def prepare(self, family: Family, rng: random.Random) -> None:
        """Before a kill: keep the target valid and give it something to do."""
        if family.name == "impl" and len(self.open_tasks()) < OPEN_TASKS_MIN:
            self.start_run(family)
        elif family.name == "snap":
            dirty(family.repo, rng, self.next_number())

    def next_write(self, family: Family, rng: random.Random) -> tuple[list[str], list[Path]] | None:
        """A write of the same kind, not killed, and the directories it writes to."""
        if family.name == "run":
            run_dir = family.current_run_dir()
            if run_dir is None:
                return None
            args = ["gate", "Chaos", "--result", "pass", "--ticket", family.ticket]
            return args, [family.ticket_dir, run_dir]
        if family.name == "snap":
            dirty(family.repo, rng, self.next_number())
            return ["wip", "save", "--ticket", family.ticket], [
                checks.state_root(family.repo) / "tmp"
            ]
        choices = [t for t, (f, _) in self.targets().items() if f == family.name]
        _, args = self.argv(rng.choice(choices), rng)
        run_dir = family.current_run_dir()
        return args, [family.ticket_dir, *([run_dir] if run_dir else [])]


RUN_SCRIPT = """\
coder:
  - - cairn: [task, start, "0"]
    - write: {path: work/parse.py, content: "def parse(text):\\n    return text.split()\\n"}
    - cairn: [task, done, "0", --files, work/parse.py, --outcome, "parse() splits words"]
    - cairn: [gate, Tests, --result, pass, --command, "pytest -q"]
  - - cairn: [task, start, "1"]
    - write: {path: work/report.py, content: "def report(line):\\n    return f'line {line}'\\n"}
    - cairn: [defer, "colour in the report"]
    - cairn: [task, done, "1", --files, work/report.py, --outcome, "errors name the line"]
  - - cairn: [task, start, "2"]
    - append: {path: work/README.md, content: "parse() and report()\\n"}
    - cairn: [task, done, "2", --files, work/README.md, --outcome, "documented"]
  - - cairn: [finding, F1, --status, FIXED, --action, "report() names the file too"]
    - cairn: [finding, W1, --status, ALREADY_RESOLVED, --action, "already quoted"]
evaluator:
  - - cairn: [ac, AC-1, --result, pass]
reviewer:
  - - cairn: [finding, add, F1, "report() should name the file", --location, "work/report.py:2"]
    - cairn: [finding, add, W1, "quote the path"]
  - - say: "nothing blocking"
"""


def dirty(repo: Path, rng: random.Random, k: int) -> None:
    """Change the work tree the way a person would between snapshots: a new file, an edit, and
    now and then a staged change (the campaign's own edits, made before the fingerprint)."""
    new = repo / "notes" / f"note-{k % 15}.txt"
    new.parent.mkdir(exist_ok=True)
    new.write_bytes(rng.randbytes(rng.randint(10, 40_000)))
    with (repo / "src" / "app.py").open("a") as handle:
        handle.write(f"# edit {k}\n")
    if rng.random() < 0.3:
        git(repo, "add", "--", str(new.relative_to(repo)))


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
    if repair is not None:
        repair()
    problems += after_next_write(lab, family, rng, tally, fault if fault and fault.late else None)
    if fault is not None:
        record_injection(tally, kill, fault, problems)
    report(tally, kill, problems, lab.known)
    return True


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
    done = cli(*args, cwd=family.repo, timeout=60)
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
    return problems


def guarded(check: Callable[[], list[Problem]]) -> list[Problem]:
    """A check that reads state files; one it cannot read is already reported as unreadable."""
    try:
        return check()
    except Exception:
        return []


def report(tally: Tally, kill: Kill, problems: list[Problem], known: set[Problem]) -> None:
    """Count each kind once per kill, and a problem a kill left behind only at the kill that
    caused it (a summary left ahead of its journal stays so; later kills do not own it)."""
    seen: dict[str, str] = {}
    for problem in problems:
        if problem not in known:
            seen.setdefault(problem.kind, problem.detail)
    known.update(problems)
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
    path.write_text(path.read_text().replace("version: 1", "version: 99"))
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
