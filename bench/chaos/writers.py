"""The writers ``kill_writes`` kills: five scratch repositories, one per kind of state
writer, each with its ticket, and how to build a valid command line for each target.

- ``impl``: an interrupted run of a 40-task plan (``cairn task start|done|skip|defer``,
  ``cairn gate``, ``cairn defer``); a new run starts when few tasks are left open;
- ``review``: a run interrupted in its fix phase (``cairn finding``, ``cairn finding add``);
- ``eval``: a run interrupted in its evaluate phase (``cairn ac``);
- ``snap``: a work tree the campaign changes before each ``cairn wip save``;
- ``run``: whole ``cairn run`` and ``cairn resume`` of a 3-task plan with the scripted agent.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import checks
from checks import Problem

from cairn import summary
from common import cli, git, make_project, plan_text, scripted_config

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
        self.known: dict[str, set[Problem]] = {}  # each family's problems at its last check

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
                max_idle_dispatches=0,  # its last fix round does nothing: interrupted, exit 3
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
            # a save takes a fraction of a second; 10 s bounds one that cannot finish
            args = ["wip", "save", "--ticket", family.ticket, "--timeout-ms", "10000"]
            return args, [checks.state_root(family.repo) / "tmp"]
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
