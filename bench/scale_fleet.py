"""The pieces of ``bench/scale_out.py``: the shared bare repository and the user's clone with a
queue, ``cairn worker`` processes (each its own workspace root: a machine), killing a machine.

A worker given a ``host`` runs in a UTS namespace of its own (``unshare --uts``) with that host
name: cairn judges a run's owner by host and pid, so a retry on another "machine" of this one
does not stop the runs of the first (it could, on one host, which no fleet of machines can).

The shared remote counts its pushes: a ``post-receive`` hook appends the time and the number of
refs of each push to ``pushes.log`` beside it.

A killed machine is the worker's process group, the run groups its ``<root>/.pids/*.json``
name, and every process whose working directory is under its root (the agents and what they
started: they have process groups of their own). All get SIGKILL, as when the machine dies.
"""

from __future__ import annotations

import argparse
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
from typing import Any

from common import git

HERE = Path(__file__).resolve().parent
AGENT = HERE / "scale_agent.py"
START_TIMEOUT = 90.0


def config(
    engine: str, address: str, heartbeat: str, concurrency: int, jitter: str | None = None
) -> str:
    """cairn.toml: the bench agent, one phase, and the engine's settings (``jitter``: the
    ``[temporal] retry_jitter``, else cairn's default)."""
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
        if jitter is not None:
            text += f'retry_jitter = "{jitter}"\n'
    return text


def plan(ticket: str, tasks: int) -> str:
    body = "".join(f"### Task {n}: Step {n}\n\nDo step {n}.\n\n" for n in range(1, tasks + 1))
    return f"# Plan: {ticket}\n\n{body}"


HOOK = """#!/bin/sh
refs=$(wc -l)
echo "$(date +%s.%N) $refs" >> {log}
"""


def make_user_repo(
    where: Path, toml: str, tickets: list[str], tasks: int, files: int = 0
) -> tuple[Path, Path]:
    """A bare repository (the shared remote, counting its pushes) and the user's clone of it
    with the queue; ``files`` more files in the repository (100 a directory)."""
    seed, bare, user = where / "seed", where / "shared.git", where / "user"
    seed.mkdir(parents=True)
    git(seed, "init", "-q", "-b", "main")
    (seed / "README.md").write_text("# scale bench\n")
    (seed / "cairn.toml").write_text(toml)
    for n in range(files):
        path = seed / "tree" / f"d{n // 100:03d}" / f"f{n:05d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"file {n}\n")
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "initial")
    git(where, "clone", "-q", "--bare", str(seed), str(bare))
    git(bare, "config", "core.logAllRefUpdates", "always")  # when each ref moved: post-mortems
    hook = bare / "hooks" / "post-receive"
    hook.write_text(HOOK.format(log=pushes_log(bare)))
    hook.chmod(0o755)
    git(where, "clone", "-q", str(bare), str(user))
    queue = user / "cairn-queue"
    queue.mkdir()
    for ticket in tickets:
        (queue / f"{ticket}.md").write_text(plan(ticket, tasks))
    return bare, user


def pushes_log(bare: Path) -> Path:
    return bare.with_name("pushes.log")


def pushes(bare: Path) -> list[tuple[float, int]]:
    """(time, refs) of each push the shared remote received."""
    try:
        lines = pushes_log(bare).read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        at, _, refs = line.partition(" ")
        with contextlib.suppress(ValueError):
            found.append((float(at), int(refs)))
    return found


def can_unshare() -> bool:
    """Whether this user may give a process a host name of its own (root, or user namespaces)."""
    done = subprocess.run(
        ["unshare", "--uts", "--fork", "hostname", "bench-probe"], capture_output=True, check=False
    )
    return done.returncode == 0


def disk_kib(path: Path) -> int:
    """``du -sk`` of ``path`` (0 when it does not exist)."""
    done = subprocess.run(["du", "-sk", str(path)], capture_output=True, check=False)
    head = done.stdout.split(b"\t", 1)[0]
    return int(head) if head.isdigit() else 0


@dataclass
class Worker:
    """One ``cairn worker --json`` in the user's clone, with its own workspace root."""

    name: str
    user: Path
    root: Path
    env: dict[str, str]
    concurrency: int
    host: str = ""  # a host name of its own (unshare --uts), else this machine's
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    out: Path = field(init=False)

    def __post_init__(self) -> None:
        self.out = self.root.with_suffix(".out")

    def spawn(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.out.write_bytes(b"")
        command = [
            *(sys.executable, "-m", "cairn", "worker", "--json"),
            *("--concurrency", str(self.concurrency)),
            *("--workspace-root", str(self.root)),
        ]
        if self.host:
            named = 'hostname "$0" && exec "$@"'
            command = ["unshare", "--uts", "--fork", "sh", "-c", named, self.host, *command]
        with self.out.open("ab") as out, self.root.with_suffix(".log").open("ab") as err:
            self.process = subprocess.Popen(
                command,
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

    def groups(self) -> set[int]:
        """The worker's process group and its runs' (not the agents': groups of their own)."""
        assert self.process is not None
        found = {self.process.pid}
        for pid_file in (self.root / ".pids").glob("*.json"):
            with contextlib.suppress(OSError, ValueError, KeyError):
                pid = int(json.loads(pid_file.read_text())["pid"])
                if _alive(pid):
                    found.add(pid)
        return found

    def signal(self, groups: set[int], sig: signal.Signals) -> None:
        for group in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, sig)

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
        # to the group: `unshare --fork` ignores SIGTERM while it waits for the worker
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
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


def bench_env(logs: Path, args: argparse.Namespace) -> dict[str, str]:
    logs.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "BENCH_AGENT_DIR": str(logs),
        "BENCH_AGENT_SEED": str(args.seed),
        "BENCH_AGENT_SLEEP": args.sleep,
        "BENCH_AGENT_COMMIT_FIRST": "1" if args.commit_first else "0",
    }


def fleet_events(out: Path) -> list[dict[str, Any]]:
    lines = out.read_text(errors="replace").splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def run_fleet(
    user: Path, env: dict[str, str], extra: list[str], out: Path
) -> subprocess.Popen[bytes]:
    with out.open("wb") as stdout, out.with_suffix(".err").open("wb") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "cairn", "fleet", "start", "--once", "--json", *extra],
            cwd=user,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )


def start_workers(workers: list[Worker]) -> None:
    for worker in workers:
        worker.spawn()
    for worker in workers:
        worker.wait_ready()
