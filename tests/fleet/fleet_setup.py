"""Helpers shared by the tests in tests/fleet/ (not a test module)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from cairn import config as config_module
from cairn.fleet import fleetstate
from cairn.fleet.trackers import GitHubTracker, open_tracker
from cairn.git import Repo
from cairn.state.layout import Layout
from cairn.util import clock
from fleet.fake_github import FakeGitHub
from helpers import git, make_repo

AGENT = Path(__file__).with_name("fleet_agent.py")
FLEET_DEFAULTS = {
    "concurrency": 3,
    "retry_backoff": "1s",
    "stall_timeout": "5s",
    "poll_interval": "1s",
    "min_free_memory": "1MiB",
}


def fleet_repo(
    tmp_path: Path, plans: dict[str, int], max_turns: int = 3, hooks: str = "", **fleet: Any
) -> Path:
    """A repository whose cairn.toml runs the fleet agent (implement only, ``max_turns`` a
    dispatch, no continuations) and a queue of plans: ticket → number of tasks."""
    keys = {**FLEET_DEFAULTS, **fleet}
    config = (
        "[agent]\n"
        'kind = "command"\n'
        f"command = {json.dumps([sys.executable, str(AGENT)])}\n"
        f"max_turns = {max_turns}\n"
        "budget_pressure_turns = 1\n"
        "max_continuations = 0\n"
        "cutoff_timeout_ms = 3000\n\n"
        '[loop]\nphases = ["implement"]\n\n[fleet]\n'
        + "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items())
        + (f"\n[fleet.hooks]\n{hooks}" if hooks else "")
    )
    repo = make_repo(tmp_path / "repo", {"README.md": "hello\n", "cairn.toml": config})
    for ticket, tasks in plans.items():
        body = "".join(f"### Task {n}: Step {n}\n\nDo step {n}.\n\n" for n in range(1, tasks + 1))
        queued = repo / "cairn-queue" / f"{ticket}.md"
        queued.parent.mkdir(exist_ok=True)
        queued.write_text(f"# Plan: {ticket}\n\n{body}")
    return repo


def agent_env(tmp_path: Path, **lists: str) -> dict[str, str]:
    logs = tmp_path / "agent-log"
    logs.mkdir(exist_ok=True)
    return {
        "FLEET_AGENT_DIR": str(logs),
        **{f"FLEET_AGENT_{k.upper()}": v for k, v in lists.items()},
    }


def agent_log(env: dict[str, str], ticket: str) -> list[dict[str, Any]]:
    path = Path(env["FLEET_AGENT_DIR"]) / f"{ticket}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def record(repo: Path, ticket: str) -> dict[str, Any]:
    path = repo / ".git" / "cairn" / "fleet" / "tickets" / f"{ticket}.json"
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def supervisor(repo: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cairn", "fleet", "start", "--json", *args],
        cwd=repo,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_for(check: Any, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def wait_line(proc: subprocess.Popen[str], event: str) -> dict[str, Any]:
    assert proc.stdout is not None
    for line in proc.stdout:
        data: dict[str, Any] = json.loads(line)
        if data.get("event") == event:
            return data
    raise AssertionError(f"no {event} event; stderr: {proc.stderr.read() if proc.stderr else ''}")


def finish(proc: subprocess.Popen[str], timeout: float = 120.0) -> tuple[int, list[dict[str, Any]]]:
    out, err = proc.communicate(timeout=timeout)
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert "Traceback" not in err, err
    return proc.returncode, lines


def never_redone(env: dict[str, str], ticket: str) -> None:
    """No task was started again after the agent finished it (``done`` with rc 0)."""
    finished: set[int] = set()
    for entry in agent_log(env, ticket):
        if entry["event"] == "start":
            assert entry["task"] not in finished, f"{ticket}: task {entry['task']} redone"
        if entry["event"] == "done" and entry["rc"] == 0:
            finished.add(entry["task"])


def branch_holds_work(repo: Path, ticket: str, tasks: int) -> None:
    files = git(repo, "ls-tree", "-r", "--name-only", f"cairn/{ticket}", "work").split()
    assert files == sorted(f"work/{ticket}-task-{n}.txt" for n in range(1, tasks + 1)), files
    for n in range(1, tasks + 1):
        text = git(repo, "show", f"cairn/{ticket}:work/{ticket}-task-{n}.txt")
        assert text == f"{ticket} task {n}\n"


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (any depth), from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes()
            except OSError:
                continue
            parents[int(entry)] = int(stat[stat.rfind(b")") + 2 :].split()[1])
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


def kill_everything(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the supervisor and every process under it at one instant (frozen first, so
    nothing reacts to the others dying)."""
    pids = [proc.pid, *descendants(proc.pid)]
    for pid in pids:
        with_suppressed(os.kill, pid, signal.SIGSTOP)
    pids += [p for p in descendants(proc.pid) if p not in pids]
    for pid in pids:
        with_suppressed(os.kill, pid, signal.SIGKILL)
    proc.wait()


def with_suppressed(fn: Any, *args: Any) -> None:
    with contextlib.suppress(ProcessLookupError):
        fn(*args)


SLEEP_B2 = 'if [ "$CAIRN_TICKET" = b2 ]; then sleep 3; fi'


def turn(n: int, cost: float) -> list[dict[str, Any]]:
    return [
        {"usage": {"input_tokens": 1000, "output_tokens": 100, "cost_usd": cost}},
        {"write": {"path": f"work-{n}.txt", "content": f"task {n}\n"}},
        {"cairn": ["task", "done", str(n), "--files", f"work-{n}.txt"]},
        {"run": SLEEP_B2},
    ]


def scripted_fleet(
    tmp_path: Path,
    plans: dict[str, int],
    script: dict[str, Any] | None = None,
    root: Path | None = None,
    **fleet: Any,
) -> Path:
    """A repository (in ``root``, else ``tmp_path``) whose cairn.toml runs the scripted agent on
    ``script`` (by default one task a turn, each turn costing $0.30, ticket b2's turns taking
    3 s) and a queue of plans: ticket → number of tasks."""
    path = tmp_path / "agent-script.json"
    default = {"coder": [turn(1, 0.3), turn(2, 0.3), turn(3, 0.3)]}
    path.write_text(json.dumps(script or default))
    keys = {**FLEET_DEFAULTS, **fleet}
    config = (
        f'[agent]\nkind = "scripted"\nscript = "{path}"\nmax_turns = 5\n'
        "budget_pressure_turns = 1\nmax_continuations = 0\ncutoff_timeout_ms = 3000\n\n"
        '[loop]\nphases = ["implement"]\n\n[fleet]\n'
        + "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items())
    )
    repo = make_repo((root or tmp_path) / "repo", {"README.md": "hello\n", "cairn.toml": config})
    for ticket, tasks in plans.items():
        body = "".join(f"### Task {n}: Step {n}\n\nDo step {n}.\n\n" for n in range(1, tasks + 1))
        queued = repo / "cairn-queue" / f"{ticket}.md"
        queued.parent.mkdir(exist_ok=True)
        queued.write_text(f"# Plan: {ticket}\n\n{body}")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the queue")
    return repo


def summary_of(repo: Path, ticket: str) -> str:
    found = sorted((repo / ".git/cairn/tickets" / ticket).glob("*/*_coder_change-summary.md"))
    return found[-1].read_text()


def read_until(proc: Any, done: Any) -> list[dict[str, Any]]:
    """The supervisor's JSON lines up to the one ``done`` accepts."""
    seen: list[dict[str, Any]] = []
    for line in proc.stdout:
        seen.append(json.loads(line))
        if done(seen):
            return seen
    raise AssertionError(f"the supervisor ended early: {seen}")


def started(seen: list[dict[str, Any]]) -> dict[str, int]:
    return {e["ticket"]: e["pid"] for e in seen if e["event"] == "ticket_started"}


TWO_TASKS = "## Task 1: Step 1\r\n\r\nDo step 1.\r\n\r\n## Task 2: Step 2\r\n\r\nDo step 2.\r\n"


def project(
    tmp_path: Path,
    github: FakeGitHub,
    notify: list[str] | None = None,
    poll_interval: str = "1s",
) -> Path:
    """A repository whose fleet reads ``github``'s issues (every ``poll_interval``), runs the
    fleet agent (one task a turn, committed), and pushes to a bare ``origin``."""
    config = (
        "[agent]\n"
        'kind = "command"\n'
        f"command = {json.dumps([sys.executable, str(AGENT)])}\n"
        "max_turns = 3\nbudget_pressure_turns = 1\nmax_continuations = 0\n"
        "cutoff_timeout_ms = 3000\n\n"
        '[loop]\nphases = ["implement"]\n\n'
        '[fleet]\ntracker = "github"\nconcurrency = 2\nmax_attempts = 2\nretry_backoff = "1s"\n'
        f'poll_interval = "{poll_interval}"\nmin_free_memory = "1MiB"\n'
        f"notify = {json.dumps(notify or [])}\n\n"
        f'[fleet.github]\nrepo = "octo/app"\napi_url = "{github.url}"\n'
    )
    repo = make_repo(tmp_path / "repo", {"README.md": "hello\n", "cairn.toml": config})
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(tmp_path / "origin.git"))
    git(repo, "remote", "add", "origin", str(tmp_path / "origin.git"))
    git(repo, "push", "-q", "origin", "main")
    return repo


def tracker_for(repo: Path) -> tuple[GitHubTracker, Layout]:
    found = Repo.discover(repo)
    cfg = config_module.load(found.toplevel)
    layout = Layout.for_repo(found, cfg)
    tracker = open_tracker(found, cfg, layout)
    assert isinstance(tracker, GitHubTracker)
    tracker.api.backoff = 0.05  # the retries' pace, not their number, is shortened
    return tracker, layout


def queued(layout: Layout, ticket: str, state_after: str = "queued", **fields: Any) -> None:
    record = msgspec.convert(
        {"ticket": ticket, "plan": f"{ticket}.md", "state": state_after, "updated": clock.now()}
        | fields,
        fleetstate.FleetTicket,
    )
    fleetstate.write(layout, record)
