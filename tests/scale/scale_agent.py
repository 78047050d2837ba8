"""A stand-in coding agent for the scale-out tests (``agent.kind = "command"``): one task a
turn, as cairn's prompt asks. It writes the task's file (untracked), then, for the tasks named
in ``$SCALE_AGENT_SLEEP`` (``<ticket>:<task>[:<seconds>]``, comma-separated), sleeps that long
(default ``$SCALE_AGENT_PAUSE``) the first time, so a test can kill the worker mid-task; then
it marks the task done and commits.

For the tasks named in ``$SCALE_AGENT_FAIL`` it fails (exit 1, nothing done) while the file
``$SCALE_AGENT_DIR/failing`` exists: a ticket that fails until a person fixes it.

Everything it does goes to ``$SCALE_AGENT_DIR/<ticket>.jsonl`` (fsynced): ``start`` (with the
agent command's arguments), ``found`` (the task's file was already there: restored from a
snapshot), ``wrote``, ``sleep``, ``fail``, ``done``, ``unconfirmed`` (``cairn task done``
failed: the agent stops there).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cairn.terms import ENV_TICKET

# how a stand-in agent reads cairn's prompt: the fleet tests' agent knows it
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for fleet.fleet_agent
from fleet.fleet_agent import task_to_do

IDENTITY = {
    "GIT_AUTHOR_NAME": "scale agent",
    "GIT_AUTHOR_EMAIL": "agent@example.invalid",
    "GIT_COMMITTER_NAME": "scale agent",
    "GIT_COMMITTER_EMAIL": "agent@example.invalid",
}


def log(ticket: str, **record: object) -> None:
    path = Path(os.environ["SCALE_AGENT_DIR"]) / f"{ticket}.jsonl"
    line = json.dumps({"t": time.time(), "pid": os.getpid(), "cwd": os.getcwd(), **record})
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def cairn(*args: str) -> subprocess.CompletedProcess[bytes]:
    # an agent that reads what its report says: a SIGTERM while it waits (the run stopping
    # its agent) does not cut it off before it has read the answer
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        return subprocess.run([sys.executable, "-m", "cairn", *args], capture_output=True)
    finally:
        signal.signal(signal.SIGTERM, previous)


def main() -> int:
    prompt = sys.stdin.read()
    ticket = os.environ[ENV_TICKET]
    number = task_to_do(prompt)
    if number is None:
        print("nothing left to do")
        return 0
    log(ticket, event="start", task=number, argv=sys.argv[1:])
    failing = os.environ.get("SCALE_AGENT_FAIL", "").split(",")
    if (
        f"{ticket}:{number}" in failing
        and (Path(os.environ["SCALE_AGENT_DIR"]) / "failing").exists()
    ):
        log(ticket, event="fail", task=number)
        print(f"task {number} failed", file=sys.stderr)
        return 1
    cairn("task", "start", str(number))
    path = Path("work") / f"{ticket}-task-{number}.txt"
    if path.exists():
        log(ticket, event="found", task=number, content=path.read_text())
    else:
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"{ticket} task {number}\n")
        log(ticket, event="wrote", task=number)
    flag = Path(os.environ["SCALE_AGENT_DIR"]) / f"{ticket}-{number}.slept"
    pause = float(os.environ.get("SCALE_AGENT_PAUSE", "600"))
    sleepers = {}
    for entry in os.environ.get("SCALE_AGENT_SLEEP", "").split(","):
        name, _, rest = entry.partition(":")
        task, _, seconds = rest.partition(":")
        sleepers[f"{name}:{task}"] = float(seconds) if seconds else pause
    if f"{ticket}:{number}" in sleepers and not flag.exists():
        flag.write_text("slept once\n")
        log(ticket, event="sleep", task=number)
        time.sleep(sleepers[f"{ticket}:{number}"])
    report = cairn("task", "done", str(number), "--files", str(path), "--outcome", "done")
    rc = report.returncode
    if rc != 0:  # not confirmed (cairn.util.barrier): the run stops; so does this agent
        log(ticket, event="unconfirmed", task=number, rc=rc, err=report.stderr.decode().strip())
        print(report.stderr.decode().strip())
        return 1
    env = {**os.environ, **IDENTITY}
    subprocess.run(["git", "add", "-A", "work"], env=env, capture_output=True, check=False)
    subprocess.run(
        ["git", "commit", "-qm", f"{ticket} task {number}"], env=env, capture_output=True
    )
    log(ticket, event="done", task=number, rc=rc)
    print(f"task {number} done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
