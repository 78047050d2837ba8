"""An instrumented coding agent for ``kill_resume`` and ``fleet_kill``: an ``agent.kind =
"command"`` program that does what cairn's prompt (on stdin) asks, one task a turn, like a real
agent would, and logs every task it starts and every file it writes to ``$CHAOS_AGENT_LOG`` (one
JSON line each, with its ticket, fsynced before it goes on; the agents of a fleet share one log).

- coder: the task to do is the first one the prompt names as in progress, else the first it
  names as remaining (handoff and continuation prompts) or not yet done (the first dispatch);
  it logs ``start``, runs ``cairn task start N``, writes two files (their bytes depend only on
  the ticket, the task and the file, so a redone task writes the same bytes), runs
  ``cairn task done N`` and, every other task, commits;
- reviewer: in round 1 adds one blocking finding, later rounds none;
- fixer: writes a fix file and reports every finding the prompt lists as FIXED.

It follows the prompt only: if cairn ever handed it a task recorded as completed, it would do
that task again, and the log shows it.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cairn.terms import ENV_TICKET, ENV_TURN

TASK_LINE = re.compile(r"^- Task (\d+): .*?(?: \[([a-z ]+)\])?$")
FINDING_LINE = re.compile(r"^- ([A-Z]{1,3}\d+): ")
DONE = ("completed", "skipped", "deferred")
IDENTITY = {
    "GIT_AUTHOR_NAME": "chaos agent",
    "GIT_AUTHOR_EMAIL": "agent@example.invalid",
    "GIT_COMMITTER_NAME": "chaos agent",
    "GIT_COMMITTER_EMAIL": "agent@example.invalid",
}


def config(phases: Sequence[str]) -> str:
    """The ``[agent]`` and ``[loop]`` tables of a ``cairn.toml`` that runs this agent through
    ``phases``: a turn cap of 2 and one continuation, so a 3-task plan is cut off and handed off
    once per run without any kill."""
    command = json.dumps([sys.executable, str(Path(__file__).resolve())])
    return (
        "[agent]\n"
        'kind = "command"\n'
        f"command = {command}\n"
        "max_turns = 2\n"
        "max_continuations = 1\n"
        "budget_pressure_turns = 1\n"
        "cutoff_timeout_ms = 2000\n\n"
        "[loop]\n"
        f"phases = {json.dumps(list(phases))}\n"
    )


def log(record: dict[str, Any]) -> None:
    path = os.environ["CHAOS_AGENT_LOG"]
    ticket = os.environ.get(ENV_TICKET)
    line = json.dumps({"t": time.time(), "pid": os.getpid(), "ticket": ticket, **record}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def blob_id(data: bytes) -> str:
    """The id git gives these bytes as a blob."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def content(ticket: str, name: str) -> bytes:
    rng = random.Random(f"{ticket}/{name}")
    size = rng.randint(200, 20_000)
    return f"{name} for {ticket}\n".encode() + rng.randbytes(size)


def write(rel: str, data: bytes) -> None:
    path = Path(rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    log({"event": "wrote", "path": rel, "blob": blob_id(data), "bytes": len(data)})


def cairn(*args: str) -> int:
    done = subprocess.run(
        [sys.executable, "-m", "cairn", *args], capture_output=True, text=True, check=False
    )
    return done.returncode


def section(prompt: str, heading: str) -> list[str]:
    """The bullet lines under ``heading`` (up to the next blank line)."""
    lines = prompt.splitlines()
    if heading not in lines:
        return []
    out = []
    for line in lines[lines.index(heading) + 1 :]:
        if not line.strip():
            break
        out.append(line)
    return out


def task_to_do(prompt: str) -> int | None:
    """The task the prompt asks for next."""
    if prompt.startswith("You are continuing"):
        candidates = section(prompt, "In progress when it stopped:")
        candidates += section(prompt, "Remaining:")
    elif prompt.startswith("Continue with ticket"):
        candidates = section(prompt, "Remaining tasks:")
    else:
        candidates = prompt.splitlines()
    for line in candidates:
        match = TASK_LINE.match(line)
        if match and (match.group(2) or "pending") not in DONE:
            return int(match.group(1))
    return None


def code(prompt: str, ticket: str, pause: float) -> None:
    number = task_to_do(prompt)
    if number is None:
        print("nothing left to do")
        return
    log({"event": "start", "task": number, "turn": os.environ.get(ENV_TURN)})
    code_start = cairn("task", "start", str(number))
    log({"event": "started", "task": number, "rc": code_start})
    files = [f"work/task-{number}.txt", f"work/task-{number}-notes.md"]
    for rel in files:
        write(rel, content(ticket, rel))
        time.sleep(pause)
    rc = cairn("task", "done", str(number), "--files", ",".join(files), "--outcome", "done")
    log({"event": "done", "task": number, "rc": rc})
    if number % 2 == 0:
        env = {**os.environ, **IDENTITY}
        subprocess.run(["git", "add", "-A"], env=env, capture_output=True, check=False)
        subprocess.run(
            ["git", "commit", "-qm", f"task {number}"], env=env, capture_output=True, check=False
        )
    print(f"task {number} done")


def review(prompt: str) -> None:
    match = re.search(r"review round (\d+)", prompt)
    if match and match.group(1) == "1":
        rc = cairn("finding", "add", "F1", "report() must name the file", "--location", "work")
        log({"event": "finding", "finding": "F1", "rc": rc})
    print("review done")


def fix(prompt: str, ticket: str, pause: float) -> None:
    for line in prompt.splitlines():
        match = FINDING_LINE.match(line)
        if not match:
            continue
        finding = match.group(1)
        write(f"work/fix-{finding}.txt", content(ticket, f"fix-{finding}"))
        time.sleep(pause)
        rc = cairn("finding", finding, "--status", "FIXED", "--action", "named the file")
        log({"event": "fixed", "finding": finding, "rc": rc})
    print("fixes done")


def main() -> int:
    prompt = sys.stdin.read()
    ticket = os.environ.get(ENV_TICKET, "?")
    pause = float(os.environ.get("CHAOS_AGENT_PAUSE", "0.1"))
    if prompt.startswith("You are the reviewer"):
        review(prompt)
    elif "fixing review round" in prompt.split("\n", 1)[0]:
        fix(prompt, ticket, pause)
    else:
        code(prompt, ticket, pause)
    return 0


if __name__ == "__main__":
    sys.exit(main())
