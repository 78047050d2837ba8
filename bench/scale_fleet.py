"""The pieces of ``bench/scale_out.py``: the shared bare repository and the user's clone with a
queue, ``cairn worker`` processes (each its own workspace root: a machine), killing a machine.

A killed machine is the worker's process group, the run groups its ``<root>/.pids/*.json``
name, and every process whose working directory is under its root (the agents and what they
started: they have process groups of their own). All get SIGKILL, as when the machine dies.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from common import git

HERE = Path(__file__).resolve().parent
AGENT = HERE / "scale_agent.py"
START_TIMEOUT = 90.0


def config(engine: str, address: str, heartbeat: str, concurrency: int) -> str:
    """cairn.toml: the bench agent, one phase, and the engine's settings."""
    text = (
        '[agent]\nkind = "command"\n'
        f"command = {json.dumps([sys.executable, str(AGENT)])}\n"
        "max_turns = 6\nmax_continuations = 2\ncutoff_timeout_ms = 3000\n\n"
        '[loop]\nphases = ["implement"]\n\n'
        f'[fleet]\nengine = "{engine}"\npoll_interval = "1s"\nconcurrency = {concurrency}\n'
        'min_free_memory = "16MiB"\n'
    )
    if engine == "temporal":
        text += (
            f'\n[temporal]\naddress = "{address}"\ntask_queue = "bench-{uuid.uuid4().hex[:10]}"\n'
            f'heartbeat_timeout = "{heartbeat}"\n'
        )
    return text


def plan(ticket: str, tasks: int) -> str:
    body = "".join(f"### Task {n}: Step {n}\n\nDo step {n}.\n\n" for n in range(1, tasks + 1))
    return f"# Plan: {ticket}\n\n{body}"


def make_user_repo(where: Path, toml: str, tickets: list[str], tasks: int) -> tuple[Path, Path]:
    """A bare repository (the shared remote) and the user's clone of it with the queue."""
    seed, bare, user = where / "seed", where / "shared.git", where / "user"
    seed.mkdir(parents=True)
    git(seed, "init", "-q", "-b", "main")
    (seed / "README.md").write_text("# scale bench\n")
    (seed / "cairn.toml").write_text(toml)
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "initial")
    git(where, "clone", "-q", "--bare", str(seed), str(bare))
    git(bare, "config", "core.logAllRefUpdates", "always")  # when each ref moved: post-mortems
    git(where, "clone", "-q", str(bare), str(user))
    queue = user / "cairn-queue"
    queue.mkdir()
    for ticket in tickets:
        (queue / f"{ticket}.md").write_text(plan(ticket, tasks))
    return bare, user


@dataclass
class Worker:
    """One ``cairn worker --json`` in the user's clone, with its own workspace root."""

    name: str
    user: Path
    root: Path
    env: dict[str, str]
    concurrency: int
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    out: Path = field(init=False)

    def __post_init__(self) -> None:
        self.out = self.root.with_suffix(".out")

    def spawn(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.out.write_bytes(b"")
        with self.out.open("ab") as out, self.root.with_suffix(".log").open("ab") as err:
            self.process = subprocess.Popen(
                [
                    *(sys.executable, "-m", "cairn", "worker", "--json"),
                    *("--concurrency", str(self.concurrency)),
                    *("--workspace-root", str(self.root)),
                ],
                cwd=self.user,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        self.starts += 1

    def wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if b"worker_started" in self.out.read_bytes():
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        log = self.root.with_suffix(".log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"worker {self.name} did not start: {log}")

    def running_tickets(self) -> list[str]:
        """The tickets whose run (named in ``.pids``) is alive right now."""
        found = []
        for pid_file in (self.root / ".pids").glob("*.json"):
            with contextlib.suppress(OSError, ValueError, KeyError):
                pid = int(json.loads(pid_file.read_text())["pid"])
                if _alive(pid):
                    found.append(pid_file.stem)
        return sorted(found)

    def kill(self) -> int:
        """SIGKILL the machine: the worker, its runs, and every process working under its
        root. Returns how many process groups were killed."""
        assert self.process is not None
        groups = {self.process.pid}
        for pid_file in (self.root / ".pids").glob("*.json"):
            with contextlib.suppress(OSError, ValueError, KeyError):
                groups.add(int(json.loads(pid_file.read_text())["pid"]))
        own = os.getpgid(0)
        killed: set[int] = set()
        for _ in range(10):  # a process may fork while the others die: look again
            for pid in pids_under(self.root):
                with contextlib.suppress(ProcessLookupError):
                    groups.add(os.getpgid(pid))
            fresh = groups - killed - {own}
            if not fresh and not pids_under(self.root):
                break
            for group in fresh:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(group, signal.SIGKILL)
            killed |= fresh
            for pid in pids_under(self.root):  # a process that left its group
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        self.process.wait()
        return len(killed)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            self.kill()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return False
    return raw[raw.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def pids_under(root: Path) -> list[int]:
    """Live processes whose working directory is ``root`` or below it."""
    prefix = str(root.resolve())
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if (cwd == prefix or cwd.startswith(prefix + "/")) and _alive(int(entry)):
            found.append(int(entry))
    return found


def start_workers(workers: list[Worker]) -> None:
    for worker in workers:
        worker.spawn()
    for worker in workers:
        worker.wait_ready()
