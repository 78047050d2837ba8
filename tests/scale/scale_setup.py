"""The pieces of a fleet on Temporal in a test: a bare repository as the shared remote, the
user's clone with a queue, worker processes with their own workspace roots."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client

from cairn.scale.roots import TICKET_DIRS
from cairn.util import procs
from helpers import cairn, git, make_repo

AGENT = Path(__file__).with_name("scale_agent.py")


def shared_repo(
    tmp_path: Path,
    address: str,
    plans: dict[str, int],
    heartbeat: str = "3s",
    temporal: str = "",
    files: int = 0,
) -> Path:
    """The user's clone, its ``origin`` a bare repository; cairn.toml runs the scale agent
    (one task a turn, every task in one dispatch) on a task queue of its own. ``temporal``:
    more lines of ``[temporal]``; ``files``: that many more files in the repository."""
    config = (
        '[agent]\nkind = "command"\n'
        f"command = {json.dumps([sys.executable, str(AGENT)])}\n"
        "max_turns = 5\nmax_continuations = 2\ncutoff_timeout_ms = 3000\n\n"
        '[loop]\nphases = ["implement"]\n\n'
        '[fleet]\nengine = "temporal"\npoll_interval = "1s"\n\n'
        f'[temporal]\naddress = "{address}"\ntask_queue = "t-{uuid.uuid4().hex[:10]}"\n'
        f'heartbeat_timeout = "{heartbeat}"\n{temporal}'
    )
    if "retry_jitter" not in temporal:  # a retry's jitter, short: the suite's time is tight
        config += 'retry_jitter = "1s"\n'

    many = {f"bulk/d{n % 64}/f{n}.txt": f"file {n}\n" * 8 for n in range(files)}
    seed = make_repo(tmp_path / "seed", {"README.md": "hello\n", "cairn.toml": config, **many})
    bare = tmp_path / "shared.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(bare))
    user = tmp_path / "user"
    git(tmp_path, "clone", "-q", str(bare), str(user))
    for ticket, tasks in plans.items():
        body = "".join(f"### Task {n}: Step {n}\n\nDo step {n}.\n\n" for n in range(1, tasks + 1))
        plan = user / "cairn-queue" / f"{ticket}.md"
        plan.parent.mkdir(exist_ok=True)
        plan.write_text(f"# Plan: {ticket}\n\n{body}")
    return user


def agent_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    logs = tmp_path / "agent-log"
    logs.mkdir(exist_ok=True)
    return {"SCALE_AGENT_DIR": str(logs), **extra}


def agent_log(env: dict[str, str], ticket: str) -> list[dict[str, Any]]:
    path = Path(env["SCALE_AGENT_DIR"]) / f"{ticket}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


@dataclass
class WorkerProcess:
    process: subprocess.Popen[bytes]
    root: Path
    started: dict[str, Any] = field(default_factory=dict)  # its worker_started event

    def kill(self) -> None:
        """SIGKILL the worker and every run it started (their own process groups): a machine
        that died."""
        for pid_file in (self.root / ".pids").glob("*.json"):
            pid = int(json.loads(pid_file.read_text())["pid"])
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def start_worker(user: Path, root: Path, env: dict[str, str], *args: str) -> WorkerProcess:
    """``cairn worker --json [args]`` in ``user``, once it says it polls."""
    log = root.with_suffix(".log")
    root.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        [sys.executable, "-m", "cairn", "worker", "--json", "--workspace-root", str(root), *args],
        cwd=user,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=log.open("wb"),
        start_new_session=True,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + 30
    said = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 0.2)
        if ready:
            line = process.stdout.readline()
            if b"worker_started" in line:
                return WorkerProcess(process, root, json.loads(line))
            said += line
        if process.poll() is not None:
            break
    process.kill()
    said += process.stdout.read()
    raise AssertionError(
        f"the worker did not start: {said.decode(errors='replace')[-1000:]}"
        f"{log.read_text(errors='replace')[-2000:]}"
    )


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def leftovers(root: Path) -> list[str]:
    """Whatever of a finished ticket is still in ``root``: worktrees, refs, state, files."""
    found: list[str] = []
    for entry in sorted(root.iterdir()):
        if entry.name.startswith("repo-"):
            listing = git(entry, "worktree", "list", "--porcelain").splitlines()
            found += [line for line in listing if line.startswith("worktree ")][1:]
            refs = git(entry, "for-each-ref", "--format=%(refname)", "refs/heads/cairn/")
            refs += git(entry, "for-each-ref", "--format=%(refname)", "refs/cairn/")
            refs += git(entry, "for-each-ref", "--format=%(refname)", "refs/cairn-base/")
            found += refs.split()
            found += [str(p) for p in (entry / ".git" / "cairn" / "tickets").glob("*")]
        elif entry.name in TICKET_DIRS:
            found += [str(p) for p in entry.iterdir()]
        elif entry.name not in (".worker.lock", ".clone.lock", ".refs.lock"):
            found.append(str(entry))
    return found


def wait_for(what: str, check: Any, timeout: float = 60, poll: float = 0.05) -> Any:
    """``check()``'s first truthy answer, asked every ``poll`` seconds; fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(poll)
    raise AssertionError(f"timed out waiting for {what}")


async def query_status(address: str, wid: str) -> dict[str, Any]:
    client = await Client.connect(address)
    result: dict[str, Any] = await client.get_workflow_handle(wid).query("status")
    return result


def alive(pid: int) -> bool:
    return procs.pid_alive(pid)  # a zombie has stopped


def status_rows(user: Path, env: dict[str, str]) -> tuple[dict[str, dict[str, Any]], str]:
    result = cairn("fleet", "status", "--json", cwd=user, env=env)
    assert result.returncode == 0, (result.stdout, result.stderr)
    return {row["ticket"]: row for row in json.loads(result.stdout)}, result.stderr


@contextmanager
def dashboard(user: Path, env: dict[str, str]) -> Iterator[str]:
    """``cairn fleet dashboard --port 0 --json`` in ``user``; yields its URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "cairn", "fleet", "dashboard", "--port", "0", "--json"],
        cwd=user,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert b"dashboard_started" in line, (line, process.stderr and process.stderr.read())
        yield json.loads(line)["url"].rstrip("/")
    finally:
        process.terminate()
        process.wait(timeout=20)
    assert process.returncode == 0
