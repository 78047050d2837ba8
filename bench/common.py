"""What the benchmark scripts share: git and subprocess helpers, timing, statistics, Markdown
tables, the description of the machine and the start of ``main``.

The scripts import it as ``common`` (they run as ``python bench/<script>.py``, so this folder is
first on ``sys.path``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"

# A fixed identity for every git command the benchmarks run themselves. cairn sets its own.
IDENTITY = {
    "GIT_AUTHOR_NAME": "cairn bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "cairn bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- processes ----------------------------------------------------------------------------------


def run_cmd(
    args: Sequence[str],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    data: bytes | None = None,
) -> bytes:
    """Run a command and return its stdout; a RuntimeError with its stderr when it fails."""
    proc = subprocess.run(
        list(args), cwd=cwd, env=env, input=data, capture_output=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout


def git_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(IDENTITY, LC_ALL="C", **extra)
    return env


def git(
    repo: Path, *args: str, env: dict[str, str] | None = None, data: bytes | None = None
) -> bytes:
    return run_cmd(["git", *args], cwd=repo, env=env or git_env(), data=data)


def new_repo(path: Path, what: str) -> float:
    """An empty repository at ``path`` (whatever was there is removed) with no background gc;
    returns when the build started, for its log line."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    log(f"building {path} ({what})…")
    started = time.monotonic()
    git(path, "init", "-q", "-b", "main")
    for key, value in (("gc.auto", "0"), ("maintenance.auto", "false")):
        git(path, "config", key, value)  # no background gc while timing
    return started


# --- timing -------------------------------------------------------------------------------------


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


@dataclass
class Stat:
    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p99(self) -> float:
        if len(self.samples) < 2:
            return self.samples[0]
        return statistics.quantiles(self.samples, n=100, method="inclusive")[98]

    @property
    def min(self) -> float:
        return min(self.samples)

    def as_json(self) -> dict[str, float]:
        return {"median_s": self.median, "p99_s": self.p99, "min_s": self.min, "n": len(self)}

    def __len__(self) -> int:
        return len(self.samples)


# --- reporting ----------------------------------------------------------------------------------


def ms(seconds: float, below_1: int = 3) -> str:
    """Milliseconds: no decimals from 100 ms, one from 1 ms, ``below_1`` below 1 ms."""
    value = seconds * 1000
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 1 else f"{value:.{below_1}f}"


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}×" if a is not None and b else "—"


def table(rows: list[list[str]], text_columns: int = 1) -> str:
    """A Markdown table; the first ``text_columns`` columns are left-aligned, the rest right."""
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]

    def line(row: list[str]) -> str:
        cells = [
            cell.ljust(w) if c < text_columns else cell.rjust(w)
            for c, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "| " + " | ".join(cells) + " |"

    rule = "|".join(
        "-" * (w + 1) + ("-" if c < text_columns else ":") for c, w in enumerate(widths)
    )
    return "\n".join([line(rows[0]), "|" + rule + "|", *(line(r) for r in rows[1:])])


def dump_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2)
    print()


# --- the machine --------------------------------------------------------------------------------


def cairn_source() -> str:
    """The version of cairn measured: package version, and commit when run from a checkout."""
    import cairn

    where = Path(cairn.__file__).resolve().parent
    try:
        head = git(where, "rev-parse", "--short", "HEAD").decode().strip()
        dirty = git(where, "status", "--porcelain", "--untracked-files=all", "--", ".")
    except (RuntimeError, OSError):
        return f"cairn {cairn.__version__}"
    return f"cairn {cairn.__version__} at {head}" + (" + uncommitted changes" if dirty else "")


def filesystem(path: Path) -> str:
    fs = subprocess.run(
        ["df", "--output=source,fstype", str(path)],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    return " ".join(fs[-2:]) if len(fs) >= 2 else "unknown"


def machine(with_filesystem: bool = False) -> dict[str, Any]:
    """What was measured on: cairn, git, CPUs, Python, platform, (the file system of the work
    folder,) and the load average."""
    info: dict[str, Any] = {
        "cairn": cairn_source(),
        "git": subprocess.run(
            ["git", "--version"], capture_output=True, text=True, check=True
        ).stdout.strip(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    if with_filesystem:
        info["filesystem"] = filesystem(WORK)
    info["load"] = [round(x, 2) for x in os.getloadavg()]
    return info


def print_header(command: str, info: dict[str, Any]) -> None:
    """The first lines of a report: command, machine, cairn, load average at start and end."""
    where = f"filesystem {info['filesystem']} · " if "filesystem" in info else ""
    print(f"# {command}")
    print(f"# {info['git']} · {info['cpus']} CPUs · Python {info['python']} · {info['platform']}")
    print(f"# {where}{info['cairn']}")
    print(f"# load average at start {info['load']}, at end {info['load_end']}")


# --- main ---------------------------------------------------------------------------------------


def add_cairn_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cairn",
        type=Path,
        default=Path(sys.executable).parent / "cairn",
        help="the cairn executable (default: next to this interpreter)",
    )


def start(
    script: str,
    argv: Sequence[str] | None,
    cairn: Path,
    module: str,
    with_filesystem: bool = False,
) -> tuple[dict[str, Any], str] | None:
    """Check that ``module`` of cairn imports and that the ``cairn`` executable exists, make
    the work folder, and log the machine; returns its description and the command line, or
    None (after saying why) when the benchmark cannot run."""
    try:
        importlib.import_module(module)
    except ImportError:
        log("cannot import cairn: run this with the project's interpreter (.venv/bin/python)")
        return None
    if not cairn.exists():
        log(f"{cairn} not found; pass --cairn")
        return None
    WORK.mkdir(parents=True, exist_ok=True)
    info = machine(with_filesystem)
    command = f"python bench/{script} " + " ".join(sys.argv[1:] if argv is None else argv)
    log(f"{info['git']} · {info['cpus']} CPUs · Python {info['python']} · load {info['load']}")
    return info, command
