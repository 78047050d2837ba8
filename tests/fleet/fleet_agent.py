"""A stand-in coding agent for the fleet tests: an ``agent.kind = "command"`` program that does
one task a turn, as cairn's prompt (on stdin) asks, and commits it on the ticket's branch.

It logs every task it starts and finishes to ``$FLEET_AGENT_DIR/<ticket>.jsonl`` (fsynced), so
a test can tell a task done twice. A ticket named in ``$FLEET_AGENT_STALL`` hangs in its first
turn the first time (a stall); one named in ``$FLEET_AGENT_SLOW`` sleeps in each turn; one
named in ``$FLEET_AGENT_GATE`` waits in each turn until ``$FLEET_AGENT_DIR/<ticket>.go`` exists;
one named in ``$FLEET_AGENT_FAIL`` exits 1 at once (an agent error); one named in
``$FLEET_AGENT_ASK`` asks a question and does nothing until its prompt carries a person's answer
(``cairn answer``), which it logs.

In a fix round (a review's findings, ``- R1: title (path:line)``) it appends `` # fixed R1`` to
each finding's line, answers it FIXED (NOT_FIXED when the comment says ``wontfix``) with
``cairn finding``, and commits. A land's finding (``- L1: rebase cairn/T onto BASE and resolve
the conflicts``) it fixes by merging BASE into the branch, each conflicting file resolved as
both sides' lines (the branch's first), and answers FIXED.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from cairn.terms import ENV_TICKET

FINDING_LINE = re.compile(r"^- ([A-Z]{1,3}\d+): .*? \((.+):(\d+)\)$")
ANSWER = re.compile(r"^> (.+)$", re.MULTILINE)  # the first line of a person's answer
LAND_LINE = re.compile(r"^- (L\d+): rebase \S+ onto (\S+) and resolve the conflicts$")
TASK_LINE = re.compile(r"^- Task (\d+): .*?(?: \[([a-z ]+)\])?$")
DONE = ("completed", "skipped", "deferred")
IDENTITY = {
    "GIT_AUTHOR_NAME": "fleet agent",
    "GIT_AUTHOR_EMAIL": "agent@example.invalid",
    "GIT_COMMITTER_NAME": "fleet agent",
    "GIT_COMMITTER_EMAIL": "agent@example.invalid",
}


def log(ticket: str, **record: object) -> None:
    path = Path(os.environ["FLEET_AGENT_DIR"]) / f"{ticket}.jsonl"
    line = json.dumps({"t": time.time(), "pid": os.getpid(), **record}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def section(prompt: str, heading: str) -> list[str]:
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


def fix_round(ticket: str, prompt: str) -> int:
    """Answer every finding of a fix round's prompt, fixing its line; commit."""
    lines = prompt.splitlines()
    for n, line in enumerate(lines):
        landing = LAND_LINE.match(line)
        if landing is not None:
            merge_base(ticket, landing.group(1), landing.group(2))
        found = FINDING_LINE.match(line)
        if found is None:
            continue
        ident, path, number = found.group(1), found.group(2), int(found.group(3))
        details = lines[n + 1] if n + 1 < len(lines) else ""
        log(ticket, event="finding", finding=ident, path=path, line=number)
        if "wontfix" in details:
            cairn("finding", ident, "--status", "NOT_FIXED", "--action", "left as it is")
            continue
        text = Path(path).read_text().splitlines(keepends=True)
        text[number - 1] = text[number - 1].rstrip("\n") + f" # fixed {ident}\n"
        Path(path).write_text("".join(text))
        cairn("finding", ident, "--status", "FIXED", "--action", f"changed {path}:{number}")
    env = {**os.environ, **IDENTITY}
    subprocess.run(["git", "add", "-A"], env=env, capture_output=True, check=False)
    subprocess.run(
        ["git", "commit", "-qm", f"{ticket} review fixes"],
        env=env,
        capture_output=True,
        check=False,
    )
    print("findings answered")
    return 0


def merge_base(ticket: str, ident: str, base: str) -> None:
    """Merge ``base`` into the branch, resolving each conflict as both sides' lines."""
    env = {**os.environ, **IDENTITY}
    merged = subprocess.run(["git", "merge", "-q", "--no-edit", base], env=env, check=False)
    if merged.returncode != 0:
        found = subprocess.run(
            ["git", "diff", "--name-only", "--diff-filter=U"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        for path in found.stdout.split():
            ours, theirs = (
                subprocess.run(
                    ["git", "show", f":{stage}:{path}"],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                for stage in (2, 3)
            )
            Path(path).write_text(ours + theirs)
            log(ticket, event="resolved", finding=ident, path=path)
    cairn("finding", ident, "--status", "FIXED", "--action", f"merged {base}")


def cairn(*args: str) -> int:
    done = subprocess.run([sys.executable, "-m", "cairn", *args], capture_output=True, check=False)
    return done.returncode


def named(variable: str, ticket: str) -> bool:
    return ticket in os.environ.get(variable, "").split(",")


def main() -> int:
    prompt = sys.stdin.read()
    ticket = os.environ[ENV_TICKET]
    directory = Path(os.environ["FLEET_AGENT_DIR"])
    flag = directory / f"{ticket}.stalled"
    if named("FLEET_AGENT_STALL", ticket) and not flag.exists():
        flag.write_text("stalled once\n")
        log(ticket, event="stall")
        time.sleep(600)
    if named("FLEET_AGENT_FAIL", ticket):
        log(ticket, event="fail")
        print("the agent fails", file=sys.stderr)
        return 1
    if named("FLEET_AGENT_ASK", ticket):  # it needs an answer before it can work
        said = ANSWER.search(prompt)
        if said is None:
            log(ticket, event="asked")
            print("I need to know which endpoint to call; I cannot continue without it.")
            return 0
        log(ticket, event="answered", answer=said.group(1))
    if " fixing review round " in prompt.split("\n", 1)[0]:
        return fix_round(ticket, prompt)
    number = task_to_do(prompt)
    if number is None:
        print("nothing left to do")
        return 0
    log(ticket, event="start", task=number)
    cairn("task", "start", str(number))
    if named("FLEET_AGENT_SLOW", ticket):
        time.sleep(float(os.environ.get("FLEET_AGENT_PAUSE", "1")))
    while named("FLEET_AGENT_GATE", ticket) and not (directory / f"{ticket}.go").exists():
        time.sleep(0.1)
    rel = f"work/{ticket}-task-{number}.txt"
    Path(rel).parent.mkdir(exist_ok=True)
    Path(rel).write_text(f"{ticket} task {number}\n")
    rc = cairn("task", "done", str(number), "--files", rel, "--outcome", "done")
    log(ticket, event="done", task=number, rc=rc)
    env = {**os.environ, **IDENTITY}
    subprocess.run(["git", "add", "-A", "work"], env=env, capture_output=True, check=False)
    subprocess.run(
        ["git", "commit", "-qm", f"{ticket} task {number}"],
        env=env,
        capture_output=True,
        check=False,
    )
    print(f"task {number} done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
