"""The command agent of ``bench/scale_out.py`` (``agent.kind = "command"``): one task a turn, as
cairn's prompt asks. Per task it writes the task's file (``work/<ticket>-task-<n>.txt``, bytes
that depend only on the ticket and the task), works for a while (a sleep drawn from
``$BENCH_AGENT_SLEEP`` = ``lo,hi`` seconds, seeded by ``$BENCH_AGENT_SEED``, the ticket and the
task, so the fleet on Temporal and the embedded fleet get the same work), marks the task done
with ``cairn task done N`` and commits (commits, then marks it done, with
``$BENCH_AGENT_COMMIT_FIRST=1``).

Every action goes to ``$BENCH_AGENT_DIR/<ticket>.jsonl``, fsynced before it goes on: ``start``,
``found`` (the task's file was already there: restored from a snapshot after a kill), ``wrote``,
``done`` (``cairn task done`` exited 0), or ``refused`` (it did not: the agent stops, exit 1).
It follows the prompt only: a task cairn hands it again after it logged ``done`` is done
again, and the log shows two ``done``.

A hold, for the frozen-worker fault: when ``$BENCH_AGENT_HOLD/<ticket>-<n>.hold`` exists, the
agent that reaches ``cairn task done N`` of that task first renames it ``.ready`` (its pid and
working directory in it) and waits for ``<ticket>-<n>.go`` before it calls the command.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from cairn.terms import ENV_TICKET

# how a stand-in agent reads cairn's prompt: the chaos campaigns' agent knows it
sys.path.insert(0, str(Path(__file__).resolve().parent / "chaos"))
from agent import task_to_do

IDENTITY = {
    "GIT_AUTHOR_NAME": "bench agent",
    "GIT_AUTHOR_EMAIL": "agent@example.invalid",
    "GIT_COMMITTER_NAME": "bench agent",
    "GIT_COMMITTER_EMAIL": "agent@example.invalid",
}


def content(ticket: str, task: int) -> str:
    return f"{ticket} task {task}\n"


def log(ticket: str, **record: object) -> None:
    path = Path(os.environ["BENCH_AGENT_DIR"]) / f"{ticket}.jsonl"
    line = json.dumps({"t": time.time(), "pid": os.getpid(), "cwd": os.getcwd(), **record})
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def work_seconds(ticket: str, task: int) -> float:
    low, high = (float(x) for x in os.environ.get("BENCH_AGENT_SLEEP", "0.5,1.5").split(","))
    seed = os.environ.get("BENCH_AGENT_SEED", "0")
    return random.Random(f"{seed}:{ticket}:{task}").uniform(low, high)


def cairn(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "cairn", *args], capture_output=True, check=False)


def commit(ticket: str, number: int) -> None:
    env = {**os.environ, **IDENTITY}
    subprocess.run(["git", "add", "-A", "work"], env=env, capture_output=True, check=False)
    subprocess.run(
        ["git", "commit", "-qm", f"{ticket} task {number}"], env=env, capture_output=True
    )


def hold(ticket: str, number: int) -> None:
    where = os.environ.get("BENCH_AGENT_HOLD")
    if not where:
        return
    base = Path(where) / f"{ticket}-{number}"
    try:
        os.rename(f"{base}.hold", f"{base}.ready")  # only the first agent here is held
    except OSError:
        return
    Path(f"{base}.ready").write_text(json.dumps({"pid": os.getpid(), "cwd": os.getcwd()}))
    deadline = time.monotonic() + 600
    while not Path(f"{base}.go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    log(ticket, event="held", task=number)


def main() -> int:
    prompt = sys.stdin.read()
    ticket = os.environ[ENV_TICKET]
    number = task_to_do(prompt)
    if number is None:
        print("nothing left to do")
        return 0
    log(ticket, event="start", task=number)
    cairn("task", "start", str(number))
    path = Path("work") / f"{ticket}-task-{number}.txt"
    if path.exists():
        log(ticket, event="found", task=number, content=path.read_text())
    else:
        path.parent.mkdir(exist_ok=True)
        path.write_text(content(ticket, number))
        log(ticket, event="wrote", task=number)
    time.sleep(work_seconds(ticket, number))
    first = os.environ.get("BENCH_AGENT_COMMIT_FIRST") == "1"
    if first:
        commit(ticket, number)
    hold(ticket, number)
    asked = time.time()
    told = cairn("task", "done", str(number), "--files", str(path), "--outcome", "done")
    rc, waited = told.returncode, round(time.time() - asked, 2)
    if rc != 0:
        said = told.stderr.decode(errors="replace").strip()[-300:]
        log(ticket, event="refused", task=number, rc=rc, waited=waited, said=said)
        print(f"cairn task done {number} failed (exit {rc}): stopping")
        return 1
    if not first:
        commit(ticket, number)
    log(ticket, event="done", task=number, rc=rc, waited=waited)
    print(f"task {number} done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
