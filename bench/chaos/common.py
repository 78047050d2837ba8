"""What the chaos campaigns share: the command line (``--quick``, ``--cases``, ``--seed``,
``--self-test``, ``--json``), a scratch directory with an isolated git environment, the real CLI
in a subprocess, the tally of cases and violations, and the report.

The campaigns run as scripts (``python bench/chaos/kill_writes.py``), so this folder is first on
``sys.path`` and they import this module as ``common``. The test helpers that campaigns and tests
both need (``tree_state``, ``fingerprint``, ``git``, ``make_repo``) stay in ``tests/helpers.py``
and are imported from there; the Markdown table and the machine description come from
``bench/common.py``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from cairn.terms import ENV_PREFIX

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT / "tests") not in sys.path:
    sys.path.append(str(ROOT / "tests"))

# The test helpers the campaigns use, from their one home; the campaigns import them from here.
from helpers import dead_pid, fingerprint, git, make_repo, tree_state  # noqa: E402

__all__ = ["dead_pid", "fingerprint", "git", "make_repo", "tree_state"]


def _bench_common() -> ModuleType:
    """``bench/common.py`` under another name (this module is ``common`` too)."""
    spec = importlib.util.spec_from_file_location("bench_common", HERE.parent / "common.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_common"] = module
    spec.loader.exec_module(module)
    return module


bench = _bench_common()
table = bench.table
log = bench.log

# --- the command line ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    """How many cases a campaign runs: ``quick`` in CI, ``full`` for the published figures."""

    quick: int
    full: int
    unit: str  # "kills", "trials", "rounds", "trees"


def parse_args(
    doc: str, sizes: Sizes, argv: Sequence[str] | None, extra: Any = None
) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help=f"CI size: {sizes.quick} {sizes.unit}")
    parser.add_argument(
        "--cases",
        type=int,
        help=f"number of {sizes.unit} (default {sizes.full}, or the quick size)",
    )
    parser.add_argument("--seed", type=int, help="the random seed (default: a new one, printed)")
    parser.add_argument(
        "--self-test",
        action="store_true",
        help="inject one fault of every kind the checker looks for; the campaign must report "
        "each one and exit 1",
    )
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    if extra is not None:
        extra(parser)
    args = parser.parse_args(argv)
    if args.cases is None:
        args.cases = sizes.quick if args.quick else sizes.full
    if args.seed is None:
        args.seed = random.randrange(2**32)
    args.unit = sizes.unit
    return args


# --- the scratch directory and the environment -----------------------------------------------


def isolate_environment(home: Path) -> None:
    """An empty HOME (no global git config), no inherited ``GIT_*`` or ``CAIRN_*`` variables,
    so every git and cairn process the campaign starts sees only the scratch repositories."""
    home.mkdir(parents=True, exist_ok=True)
    for key in list(os.environ):
        if key.startswith(("GIT_", ENV_PREFIX)):
            del os.environ[key]
    os.environ.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        GIT_CONFIG_NOSYSTEM="1",
        LC_ALL="C.UTF-8",
        PYTHONDONTWRITEBYTECODE="1",
    )


@contextmanager
def scratch(name: str, keep: bool) -> Iterator[Path]:
    """A fresh temp directory for everything the campaign writes; removed at the end unless
    ``keep``. The process's environment is isolated to it for the duration."""
    root = Path(tempfile.mkdtemp(prefix=f"cairn-chaos-{name}-"))
    saved = dict(os.environ)
    isolate_environment(root / "home")
    try:
        yield root
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if keep:
            log(f"scratch directory kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


# --- the real CLI ---------------------------------------------------------------------------------


def cairn_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "cairn", *args]


@dataclass
class Done:
    """A finished (or timed-out) command: exit code (None on timeout), output, wall time."""

    returncode: int | None
    stdout: str
    stderr: str
    seconds: float

    def error_line(self) -> str:
        lines = self.stderr.strip().splitlines()
        return lines[-1] if lines else ""

    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.stderr


def run(
    argv: Sequence[str],
    cwd: Path,
    env: dict[str, str] | None = None,
    timeout: float = 120.0,
) -> Done:
    """Run a command to completion; on timeout kill its process group and return None."""
    started = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        code = None
    return Done(
        code,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
        time.monotonic() - started,
    )


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> Done:
    """The real ``cairn`` CLI (``python -m cairn``) in a subprocess."""
    return run(cairn_argv(*args), cwd, env, timeout)


def scripted_config(script: Path, phases: Sequence[str], **agent: object) -> str:
    """A ``cairn.toml`` that plays ``script`` with the scripted agent through ``phases``."""
    settings = {
        "max_turns": 4,
        "max_continuations": 0,
        "budget_pressure_turns": 1,
        "cutoff_timeout_ms": 3000,
        **agent,
    }
    lines = ["[agent]", 'kind = "scripted"', f"script = {json.dumps(str(script))}"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    lines += ["", "[loop]", f"phases = {json.dumps(list(phases))}", ""]
    return "\n".join(lines)


def make_project(path: Path, config: str | None, files: dict[str, str] | None = None) -> Path:
    """A repository with ``files`` (and ``cairn.toml``) in its first commit."""
    everything = {"README.md": "# project\n", "src/app.py": "print('app')\n", **(files or {})}
    if config is not None:
        everything["cairn.toml"] = config
    return make_repo(path, everything)


def plan_text(
    title: str, tasks: Sequence[str], criteria: dict[int, list[str]] | None = None
) -> str:
    lines = [f"# Plan: {title}", ""]
    for number, task in enumerate(tasks):
        lines += [f"### Task {number}: {task}", "", f"Do {task.lower()} carefully.", ""]
        if criteria and number in criteria:
            lines += ["Acceptance criteria:", *(f"- {c}" for c in criteria[number]), ""]
    return "\n".join(lines)


# --- the tally ------------------------------------------------------------------------------------

EXAMPLES_PER_KIND = 20  # kept in the JSON; the table prints the first 5
PRINTED_EXAMPLES = 5


@dataclass
class Tally:
    """Cases run, figures measured, and every violation by kind with its first examples."""

    campaign: str
    seed: int
    kinds: dict[str, str]  # violation kind → what it means
    figures: dict[str, float] = field(default_factory=dict)
    violations: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    def count(self, figure: str, by: float = 1) -> None:
        self.figures[figure] = self.figures.get(figure, 0) + by

    def violation(self, kind: str, where: str, detail: str) -> None:
        if kind not in self.kinds:
            raise KeyError(f"unknown violation kind {kind!r}")
        self.violations[kind] += 1
        examples = self.examples.setdefault(kind, [])
        if len(examples) < EXAMPLES_PER_KIND:
            examples.append(f"{where}: {detail}")
        log(f"VIOLATION {kind} at {where}: {detail}")

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def exit_code(self) -> int:
        return 1 if self.violations else 0

    def report(self, args: argparse.Namespace, figures_order: Sequence[str]) -> int:
        """Print the tables (and write the JSON); returns the exit code."""
        info = bench.machine()
        command = "python bench/chaos/" + self.campaign + ".py " + " ".join(sys.argv[1:])
        print(f"# {command.strip()}")
        print(f"# seed {self.seed} · {args.cases} {args.unit} · {self.elapsed:.0f} s")
        print(f"# {info['git']} · {info['cpus']} CPUs · Python {info['python']}")
        print(f"# {info['platform']} · {info['cairn']} · load {info['load']}\n")
        rows = [["figure", "value"]]
        rows += [[name, _number(self.figures.get(name, 0))] for name in figures_order]
        rows += [["seconds", f"{self.elapsed:.0f}"]]
        print(table(rows))
        print()
        rows = [["violation", "count", "what it means"]]
        rows += [[kind, str(self.violations[kind]), what] for kind, what in self.kinds.items()]
        rows += [["total", str(sum(self.violations.values())), ""]]
        print(table(rows, text_columns=1))
        for kind, examples in self.examples.items():
            shown = examples[:PRINTED_EXAMPLES]
            print(f"\n{kind}, first {len(shown)}:")
            for example in shown:
                print(f"  - {example}")
        verdict = "FAIL" if self.violations else "ok"
        print(
            f"\n{verdict}: {sum(self.violations.values())} violations in {args.cases} {args.unit}"
        )
        if args.json:
            args.json.write_text(json.dumps(self.as_json(args, info), indent=2) + "\n")
        return self.exit_code()

    def as_json(self, args: argparse.Namespace, info: dict[str, Any]) -> dict[str, Any]:
        return {
            "campaign": self.campaign,
            "seed": self.seed,
            "cases": args.cases,
            "unit": args.unit,
            "self_test": args.self_test,
            "seconds": round(self.elapsed, 1),
            "figures": self.figures,
            "violations": dict(self.violations),
            "examples": self.examples,
            "machine": info,
        }


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def case_seeds(seed: int, n: int) -> list[int]:
    """One seed per case, derived from the campaign's seed: a case replays from its own."""
    rng = random.Random(seed)
    return [rng.randrange(2**32) for _ in range(n)]
