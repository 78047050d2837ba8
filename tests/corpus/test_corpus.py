"""The bad-input corpus: every case in ``cases/*.yaml`` through the real CLI.

Each case builds a sandbox (a repository, a plan, an ``outside`` directory; optionally a run of
ticket T-1 that was cut off), lays its input files over it, runs ``python -m cairn`` with its
arguments and checks: the exit code; exactly one line on stderr, ``cairn: error: <problem>; <fix>``,
holding the case's fragment; no traceback; and that nothing was written: every file and link
under the sandbox (the repository with its ``.git``, refs and state tree, and everything outside
it) has the same size and mtime, and the directory holding the sandbox has the same entries.
See README.md for the case format.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import fill_disk, isolate_git_env, make_repo, small_tmpfs

CASES_DIR = Path(__file__).parent / "cases"
TICKET = "T-1"
GOOD_PLAN = "### Task 1: One\n\nDo one.\n\n### Task 2: Two\n\nDo two.\n"
SCRIPT = {
    "coder": [
        [{"cairn": ["task", "start", "1"]}, {"write": {"path": "work.txt", "content": "w"}}],
        [{"say": "thinking"}],
    ]
}
CONFIG = (
    '[agent]\nkind = "scripted"\nscript = "../agent-script.json"\nmax_turns = 2\n'
    'budget_pressure_turns = 1\nmax_continuations = 0\n\n[loop]\nphases = ["implement"]\n'
)
FILL_LIMIT = 64 * 1024 * 1024


@dataclass(frozen=True)
class Case:
    id: str
    args: list[str]
    exit: int
    error: str
    run: bool = False
    files: dict[str, Any] | None = None
    env: dict[str, str] | None = None
    immutable: list[str] | None = None
    disk_full: bool = False


def load_cases() -> list[Case]:
    cases = []
    for path in sorted(CASES_DIR.glob("*.yaml")):
        for raw in yaml.safe_load(path.read_text(encoding="utf-8")):
            cases.append(Case(**{**raw, "id": f"{path.stem}/{raw['id']}"}))
    return cases


CASES = load_cases()


# --- the sandbox ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, Path]:
    """Two sandboxes to copy, built once per worker: a repository, and the same with a run of
    T-1 that was cut off at its turn cap (marker without owner, summary, journal, snapshot)."""
    with pytest.MonkeyPatch.context() as mp:
        isolate_git_env(mp, tmp_path_factory.mktemp("corpus-home"))
        bare = tmp_path_factory.mktemp("corpus-bare") / "sandbox"
        (bare / "outside").mkdir(parents=True)
        (bare / "plan.md").write_text(GOOD_PLAN)
        (bare / "agent-script.json").write_text(json.dumps(SCRIPT))
        make_repo(bare / "repo", {"README.md": "hello\n", "cairn.toml": CONFIG})
        stopped = tmp_path_factory.mktemp("corpus-stopped") / "sandbox"
        shutil.copytree(bare, stopped, symlinks=True)
        done = subprocess.run(
            [sys.executable, "-m", "cairn", "run", str(stopped / "plan.md"), "--ticket", TICKET],
            cwd=stopped / "repo",
            capture_output=True,
            check=False,
        )
        assert done.returncode == 3, done.stdout + done.stderr
    return {False: bare, True: stopped}


def places(sandbox: Path) -> dict[str, str]:
    """The placeholders a case may use in its paths, arguments and environment."""
    repo = sandbox / "repo"
    state = repo / ".git" / "cairn"
    ticket_dir = state / "tickets" / TICKET
    runs = sorted(p for p in ticket_dir.glob("2*")) if ticket_dir.is_dir() else []
    run_dir = runs[-1] if runs else ticket_dir / "20261130-101500Z"
    summaries = sorted(run_dir.glob("*_coder_change-summary.md")) if runs else []
    return {
        "sandbox": str(sandbox),
        "repo": str(repo),
        "outside": str(sandbox / "outside"),
        "plan": str(sandbox / "plan.md"),
        "state": str(state),
        "tickets": str(state / "tickets"),
        "ticket_dir": str(ticket_dir),
        "run_dir": str(run_dir),
        "marker": str(ticket_dir / ".in-progress.yaml"),
        "lease": str(ticket_dir / "lease"),
        "lock": str(ticket_dir / ".lock"),
        "journal": str(run_dir / "run-log.jsonl"),
        "summary": str(summaries[-1] if summaries else run_dir / "02_coder_change-summary.md"),
        "config": str(repo / "cairn.toml"),
    }


def fill(text: str, where: dict[str, str]) -> str:
    return text.format_map(where)


def lay(path: Path, spec: Any, where: dict[str, str]) -> None:
    """Put the case's input at ``path``, replacing what is there."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    if isinstance(spec, dict) and spec.get("remove"):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(spec, str):
        path.write_text(spec, encoding="utf-8")
    elif "text" in spec or "bytes" in spec:
        data = spec.get("text", "").encode("utf-8") + bytes.fromhex(spec.get("bytes", ""))
        path.write_bytes(data * spec.get("repeat", 1))
    elif "sparse" in spec:
        with path.open("wb") as handle:
            handle.truncate(spec["sparse"])
    elif "symlink" in spec:
        path.symlink_to(fill(spec["symlink"], where))
    elif "dir" in spec:
        path.mkdir()
    elif "fifo" in spec:
        os.mkfifo(path)
    else:
        raise AssertionError(f"unknown file spec {spec!r}")


def everything(root: Path) -> list[tuple[str, str, int, int, str]]:
    """Every entry under ``root`` (links not followed): kind, size, mtime, link target;
    directories by name only (a directory's mtime moves when a temp file comes and goes)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            full = os.path.join(dirpath, name)
            info = os.lstat(full)
            rel = os.path.relpath(full, root)
            if stat.S_ISDIR(info.st_mode):
                found.append((rel, "dir", 0, 0, ""))
            elif stat.S_ISLNK(info.st_mode):
                found.append((rel, "link", 0, 0, os.readlink(full)))
            else:
                found.append((rel, "file", info.st_size, info.st_mtime_ns, ""))
    return sorted(found)


def chattr(flag: str, paths: list[Path]) -> None:
    try:
        done = subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True, check=False)
    except OSError as exc:  # no chattr program
        pytest.skip(f"read-only cases need chattr +i (root): {exc}")
    if done.returncode != 0:
        pytest.skip(f"read-only cases need chattr +i (root): {done.stderr.decode().strip()}")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path | None]:
    """A 16 MiB tmpfs to fill, or None where mounting is not allowed (ENOSPC is injected)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.environ.get("CORPUS_INJECT_ENOSPC"):  # to try the injection where tmpfs works
        yield None
        return
    with small_tmpfs(mount, "16m") as refused:
        yield None if refused else mount


# Where no tmpfs can be mounted: every write under the sandbox fails with ENOSPC.
INJECT_ENOSPC = r"""
import builtins, errno, os, runpy, sys
root = os.environ.pop("CORPUS_FULL_DISK")
real_open, real_mkdir = os.open, os.mkdir
def full(path):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
def guarded_open(path, flags, *a, **k):
    name = os.path.abspath(os.fspath(path))
    writes = flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
    if writes and name.startswith(root) and not name.endswith(".lock"):
        full(name)
    return real_open(path, flags, *a, **k)
def guarded_mkdir(path, *a, **k):
    if os.path.abspath(os.fspath(path)).startswith(root):
        full(path)
    return real_mkdir(path, *a, **k)
os.open, os.mkdir = guarded_open, guarded_mkdir
sys.argv = ["cairn", *sys.argv[1:]]
runpy.run_module("cairn", run_name="__main__")
"""


# --- the test ------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_and_writes_nothing(
    case: Case, templates: dict[bool, Path], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    home = tmp_path / "cases"
    home.mkdir()
    inject = False
    small_disk = request.getfixturevalue("small_disk") if case.disk_full else None
    if small_disk is not None:
        home = small_disk
    sandbox = home / "sandbox"
    shutil.copytree(templates[case.run], sandbox, symlinks=True)
    where = places(sandbox)
    for name, spec in (case.files or {}).items():
        lay(Path(fill(name, where)), spec, where)
    where = places(sandbox)  # a case may have replaced a directory the places point into
    args = [fill(a, where) for a in case.args]
    env = {**os.environ, **{k: fill(v, where) for k, v in (case.env or {}).items()}}
    argv = [sys.executable, "-m", "cairn", *args]
    if case.disk_full:
        if small_disk is not None:
            fill_disk(home / "fill", limit=FILL_LIMIT)
        else:
            inject = True
            env["CORPUS_FULL_DISK"] = str(sandbox)
            argv = [sys.executable, "-c", INJECT_ENOSPC, *args]
    immutable = [Path(fill(p, where)) for p in case.immutable or []]
    if immutable:
        chattr("+i", immutable)
    user_home = Path(os.environ["HOME"])
    before, around = everything(home), sorted(os.listdir(home.parent))
    home_before = everything(user_home)
    try:
        result = subprocess.run(
            argv, cwd=sandbox / "repo", env=env, capture_output=True, check=False, timeout=60
        )
    finally:
        if immutable:
            chattr("-i", immutable)
    stderr = result.stderr.decode("utf-8", "replace")
    context = (case.id, result.returncode, result.stdout.decode()[-500:], stderr, inject)
    assert result.returncode == case.exit, context
    lines = stderr.splitlines()
    assert len(lines) == 1, context
    line = lines[0]
    assert line.startswith("cairn: error: ") and "Traceback" not in stderr, context
    assert "internal error" not in line, context
    assert case.error in line, context
    assert "; " in line, ("the line names the problem, then the fix", *context)
    assert everything(home) == before, ("something was written", *context)
    assert sorted(os.listdir(home.parent)) == around, ("something appeared beside", *context)
    assert everything(user_home) == home_before, ("something was written in HOME", *context)


def test_the_corpus_is_large_and_every_case_is_unique() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 150
