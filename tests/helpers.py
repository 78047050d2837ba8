"""Shared test helpers: real git repositories in temp dirs, the real CLI as a subprocess,
forked children and stand-in agent CLIs. Every test module imports them from here."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from cairn.agents.base import Dispatch, Event, Result
    from cairn.state.lease import Lease
    from cairn.state.runstate import RunRef
    from cairn.summary import Summary

IDENTITY = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}


def isolate_git_env(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """An empty HOME (no global git config) and no inherited GIT_* variables."""
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for key in list(os.environ):
        if key.startswith("GIT_") and key != "GIT_CONFIG_NOSYSTEM":
            monkeypatch.delenv(key)


def git(repo: Path, *args: str, env: dict[str, str] | None = None, check: bool = True) -> str:
    """Run the test's own git (with an identity); returns stdout."""
    full_env = {**os.environ, **IDENTITY, **(env or {})}
    result = subprocess.run(
        ["git", *args], cwd=repo, env=full_env, capture_output=True, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {result.stderr.decode()}")
    return result.stdout.decode("utf-8", "surrogateescape")


def write(root: Path, rel: str, content: str | bytes = "x\n", mode: int | None = None) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    if mode is not None:
        path.chmod(mode)
    return path


def make_repo(path: Path, files: dict[str, str] | None = None, branch: str = "main") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    files = {"README.md": "hello\n", "src/app.py": "print('app')\n"} if files is None else files
    for rel, text in files.items():
        write(path, rel, text)
    if files:
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", "initial")
    return path


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def fresh_repo(prefix: str, files: dict[str, str] | None = None) -> Iterator[Path]:
    """A repository (``make_repo``) in a temp directory of its own, removed after: for the
    examples of a property test, which cannot share a pytest fixture."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield make_repo(root / "repo", files=files)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def cairn(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> CliResult:
    """Run the real ``cairn`` CLI in a subprocess."""
    result = subprocess.run(
        [sys.executable, "-m", "cairn", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        check=False,
    )
    return CliResult(result.returncode, result.stdout.decode(), result.stderr.decode())


def assert_one_line_error(result: CliResult, code: int = 2) -> None:
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("cairn: error: ")
    assert "Traceback" not in result.stderr


def assert_error(result: CliResult, code: int = 2) -> str:
    """The error a command printed, checked for its form: one ``cairn: error:`` line on stderr,
    or under ``--json`` one JSON error object on stdout and nothing on stderr."""
    if result.stdout.startswith('{"error"'):
        assert result.returncode == code, (result.stdout, result.stderr)
        assert result.stderr == "", result.stderr
        (line,) = result.stdout.splitlines()
        error = json.loads(line)["error"]
        assert error["exit_code"] == code
        return str(error["message"])
    assert_one_line_error(result, code)
    return result.stderr


def tree_state(root: Path, skip: set[str] | None = None) -> dict[str, tuple[str, object]]:
    """Every file under ``root`` except ``.git``: kind, exec bit, content or link target."""
    skip = skip or set()
    state: dict[str, tuple[str, object]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if rel in skip or any(rel.startswith(s.rstrip("/") + "/") for s in skip):
                continue
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                state[rel] = ("link", os.readlink(full))
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as handle:
                    content = handle.read()
                state[rel] = ("file", (bool(st.st_mode & 0o100), content))
    return state


def fingerprint(repo: Path) -> dict[str, str]:
    """Hashes of everything a snapshot must leave alone: index bytes, HEAD, branches, config,
    hooks, and every work-tree file."""
    gitdir = Path(git(repo, "rev-parse", "--absolute-git-dir").strip())
    common = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    prints: dict[str, str] = {}
    for label, path in {
        "index": gitdir / "index",
        "HEAD": gitdir / "HEAD",
        "config": common / "config",
        "packed-refs": common / "packed-refs",
    }.items():
        prints[label] = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "-"
    prints["branches"] = git(repo, "for-each-ref", "refs/heads")
    prints["hooks"] = repr(sorted(p.name for p in (common / "hooks").glob("*")))
    digest = hashlib.sha256(repr(sorted(tree_state(repo).items())).encode())
    prints["worktree"] = digest.hexdigest()
    return prints


def without_worktree(prints: dict[str, str]) -> dict[str, str]:
    """The fingerprint minus the work tree: index bytes, HEAD, branches, config, hooks."""
    return {k: v for k, v in prints.items() if k != "worktree"}


def rev(repo: Path, name: str) -> str:
    """The object id ``name`` resolves to in ``repo``."""
    return git(repo, "rev-parse", "--verify", "--end-of-options", name).strip()


def save(repo: Path, ticket: str, reason: str | None = None, **options: Any) -> str:
    """Snapshot ``repo`` into ``ticket``'s chain (in this process); a new snapshot must result.
    Returns its commit."""
    from cairn import wip

    result = wip.save(
        repo, ticket=ticket, reason=f"save {ticket}" if reason is None else reason, **options
    )
    assert result.created and result.commit, result
    return result.commit


def state_root(repo: Path) -> Path:
    """Where run state lives in ``repo`` by default: ``.git/cairn``."""
    return repo / ".git" / "cairn"


def untouched_state(repo: Path) -> tuple[object, ...]:
    """Everything a read-only or refused command must leave exactly as it was: the
    fingerprint, every ref, and the size and mtime of every file under .git."""
    gitdir = repo / ".git"
    files = sorted(
        (str(p.relative_to(gitdir)), p.stat().st_size, p.stat().st_mtime_ns)
        for p in gitdir.rglob("*")
        if p.is_file()
    )
    return fingerprint(repo), git(repo, "for-each-ref"), files


def make_conflict(repo: Path, theirs_only: dict[str, str] | None = None) -> None:
    """Leave ``repo`` (on main) mid-merge with src/app.py conflicted between "ours" and
    "theirs"; ``theirs_only`` files merge cleanly and end up staged."""
    git(repo, "checkout", "-q", "-b", "other")
    write(repo, "src/app.py", "theirs\n")
    for rel, text in (theirs_only or {}).items():
        write(repo, rel, text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "theirs")
    git(repo, "checkout", "-q", "main")
    write(repo, "src/app.py", "ours\n")
    git(repo, "commit", "-q", "-am", "ours")
    git(repo, "merge", "-q", "other", check=False)


def slow_clean_filter(repo: Path, seconds: int) -> None:
    """Make hashing ``*.slow`` files take ``seconds`` (a real clean filter), and add one."""
    git(repo, "config", "filter.slow.clean", f"sleep {seconds}; cat")
    write(repo, ".gitattributes", "*.slow filter=slow\n")
    write(repo, "data.slow", "x")


def snapshot_files(repo: Path, commit: str | None) -> dict[str, bytes]:
    """path → blob bytes of every file in a snapshot commit (a save that made none fails)."""
    assert commit is not None, "no snapshot commit"
    out = subprocess.run(
        ["git", "ls-tree", "-r", "-z", commit], cwd=repo, capture_output=True, check=True
    ).stdout
    files: dict[str, bytes] = {}
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, path = record.split(b"\t", 1)
        _, kind, oid = meta.split()
        if kind == b"blob":
            blob = subprocess.run(
                ["git", "cat-file", "blob", oid.decode()], cwd=repo, capture_output=True, check=True
            ).stdout
            files[os.fsdecode(path)] = blob
    return files


def begin_run(
    repo: Path | str, ticket: str, titles: list[str], review: bool = False, **kwargs: Any
) -> tuple[RunRef, Lease]:
    """Begin a run of ``ticket`` in this process (its lease is held until released)."""
    from cairn import summary
    from cairn.config import load
    from cairn.git import Repo
    from cairn.state.layout import Layout
    from cairn.state.runstate import begin
    from cairn.util import clock

    found = Repo.discover(repo)
    layout = Layout.for_repo(found, load(found.toplevel))

    def scaffold(run_id: str) -> Summary:
        if review:
            pairs = [(f"F{i + 1}", title) for i, title in enumerate(titles)]
            return summary.scaffold_findings(ticket, run_id, 1, pairs, clock.now())
        return summary.scaffold_tasks(ticket, run_id, list(enumerate(titles)), clock.now())

    return begin(layout, ticket, scaffold, stale_after=86400, **kwargs)


def summary_file(ref: RunRef) -> Path:
    """The change-summary file of a run (a run without one fails)."""
    path = ref.summary_path()
    assert path is not None, ref
    return path


def hold_run(repo: Path, ticket: str, titles: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    """A real child process that begins a run and sleeps holding it; returns it and the run id."""
    script = (
        "import sys, time\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from helpers import begin_run\n"
        "ref, lease = begin_run(sys.argv[2], sys.argv[3], sys.argv[4:])\n"
        "print(ref.run_id, flush=True)\n"
        "time.sleep(600)\n"
    )
    tests_dir = str(Path(__file__).parent)
    proc = subprocess.Popen(
        [sys.executable, "-c", script, tests_dir, str(repo), ticket, *titles],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()
    if not line:
        proc.kill()
        raise AssertionError(proc.stderr.read().decode() if proc.stderr else "no run id")
    return proc, line


def state_files(root: Path) -> list[tuple[str, int, int]]:
    """Every file under a state root with its size and mtime: proof that nothing was written."""
    if not root.exists():
        return []
    return sorted(
        (str(p.relative_to(root)), p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in root.rglob("*")
    )


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def fork_child(body: Callable[[], None]) -> int:
    """Run ``body`` in a forked child that never returns into pytest; exit 0 on success."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 0
        try:
            body()
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            os._exit(code)
    return pid


def reap(pid: int, timeout: float = 30.0) -> int:
    """Wait for a forked child and return its exit code (minus the signal that killed it);
    SIGKILL it and fail when it takes longer than ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"child {pid} did not finish")
        time.sleep(0.005)


def wait_ok(pid: int, timeout: float = 60.0) -> None:
    """Reap a forked child and check that it exited 0."""
    assert reap(pid, timeout) == 0, f"child {pid} failed"


FAKE_CLI = r"""
import json, os, sys, time
if sys.argv[1:] == ["--version"]:
    print(os.environ.get("FAKE_VERSION", VERSION))
    sys.exit(0)
log = os.environ["FAKE_CLI_LOG"]
with open(log, "a") as handle:
    handle.write(json.dumps(sys.argv[1:]) + "\n")
calls = sum(1 for _ in open(log))
script = json.load(open(os.environ["FAKE_CLI_SCRIPT"]))
step = script[min(calls, len(script)) - 1]
for line in step.get("lines", []):
    print(line if isinstance(line, str) else json.dumps(line), flush=True)
    time.sleep(step.get("pause", 0))
if step.get("hang"):
    time.sleep(60)
if step.get("kill"):
    os.kill(os.getpid(), 9)
sys.exit(step.get("exit", 0))
"""


class FakeCli:
    """A stand-in agent CLI (a real subprocess): each invocation logs its arguments and plays
    the next step of a script: stream lines (with a pause), then hang, kill itself or exit."""

    def __init__(self, directory: Path, name: str, version: str) -> None:
        self.directory = directory
        self.log = directory / f"{name}-calls.jsonl"
        program = directory / name
        program.write_text(f"#!{sys.executable}\nVERSION = {version!r}\n{FAKE_CLI}")
        program.chmod(0o755)

    def __call__(self, script: list[dict[str, object]]) -> dict[str, str]:
        """Load ``script``; returns the environment that puts this program first on PATH."""
        path = self.directory / "fake-cli-script.json"
        path.write_text(json.dumps(script))
        return {
            "FAKE_CLI_LOG": str(self.log),
            "FAKE_CLI_SCRIPT": str(path),
            "PATH": f"{self.directory}{os.pathsep}{os.environ['PATH']}",
        }

    def calls(self) -> list[list[str]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]


def result_of(session: Dispatch) -> Result:
    """The result of a dispatch whose events have all been read."""
    assert session.result is not None, "the dispatch has not finished"
    return session.result


def play_dispatch(
    kind: str,
    workspace: Path,
    env: dict[str, str],
    prompts: list[str | None],
    max_turns: int,
    pressure_turns: int = 0,
) -> tuple[Dispatch, list[Event], list[int]]:
    """Start a real dispatch of ``kind`` whose n-th prompt request gets ``prompts[n]`` (the last
    one repeats); returns the session, every event, and the turn numbers asked for."""
    from cairn.agents import get
    from cairn.agents.base import DispatchRequest

    asked: list[int] = []

    def next_prompt(turn: int) -> str | None:
        asked.append(turn)
        return prompts[min(len(asked), len(prompts)) - 1]

    request = DispatchRequest(
        role="coder",
        workspace=workspace,
        run_dir=workspace,
        max_turns=max_turns,
        next_prompt=next_prompt,
        env=env,
        pressure_turns=pressure_turns,
    )
    session = get(kind).start(request)
    return session, list(session.events()), asked


def scripted_project(
    root: Path,
    script: dict[str, Any],
    tasks: tuple[str, ...] = ("One", "Two"),
    ticket: str = "T-1",
    tables: str = "",
    **agent: Any,
) -> tuple[Path, Path]:
    """A repository whose committed ``cairn.toml`` runs the scripted agent on ``script``
    (implement phase only, no continuations unless ``agent`` says; ``tables``: more of the
    config, such as ``[agents.NAME]``), and its plan file: ``(repo, plan)``."""
    script_path = root / "agent-script.yaml"
    script_path.write_text(json.dumps(script, indent=1))
    keys = {
        "kind": "scripted",
        "script": str(script_path),
        "max_turns": 5,
        "budget_pressure_turns": 1,
        "max_continuations": 0,
        "cutoff_timeout_ms": 3000,
        **agent,
    }
    config = "[agent]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items())
    config += '\n[loop]\nphases = ["implement"]\n' + tables
    repo = make_repo(root / "repo", {"README.md": "hello\n", "cairn.toml": config})
    git(repo, "config", "user.name", "Scripted Agent")
    git(repo, "config", "user.email", "agent@example.com")
    plan = root / f"{ticket}.md"
    sections = [f"### Task {n}: {title}\n\nDo {title}.\n" for n, title in enumerate(tasks, 1)]
    plan.write_text("# Plan: test plan\n\n" + "\n".join(sections))
    return repo, plan


# --- a small file system to fill (tmpfs, where the machine lets us mount one) ------------------


@contextlib.contextmanager
def small_tmpfs(mount: Path, size: str) -> Iterator[str | None]:
    """Mount a tmpfs of ``size`` (``16m``) at ``mount`` for the block; yields None when mounted,
    else why it could not be (not root, no mount program)."""
    mount.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
            capture_output=True,
            check=False,
        )
    except OSError as exc:  # no mount program
        yield str(exc)
        return
    if done.returncode != 0:
        yield done.stderr.decode().strip() or f"mount exited {done.returncode}"
        return
    try:
        yield None
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill_disk(path: Path, leave: int = 0, limit: int = 1 << 30) -> None:
    """Write ``path`` until its file system has at most ``leave`` bytes free (or refuses):
    1 MiB at a time, then 512 bytes at a time."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for size in (1 << 20, 512):
            try:
                for _ in range(limit // size):
                    info = os.statvfs(path)
                    if info.f_bavail * info.f_frsize - size < leave:
                        break
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


def on_remote(bare: Path, ref: str) -> str:
    """The sha of ``ref`` in the bare repository ``bare`` ("" when it has none)."""
    return git(bare, "rev-parse", "--verify", "-q", ref, check=False).strip()


def pushed_tasks(bare: Path, state: str) -> dict[int, str]:
    """Task number → status in a pushed run state (``state``: a state ref or commit of
    ``bare``, docs/run.md "Portable runs"), from its latest run's latest change summary."""
    from cairn.summary import parse

    listing = git(bare, "ls-tree", "--name-only", state).split()
    run = sorted(n for n in listing if n[:1].isdigit())[-1]
    names = git(bare, "ls-tree", "--name-only", f"{state}:{run}").split()
    newest = sorted(n for n in names if n.endswith("_coder_change-summary.md"))[-1]
    text = git(bare, "show", f"{state}:{run}/{newest}")
    return {task.number: task.status for task in parse(text).tasks}
