"""The checks every kill is followed by. Each returns a list of ``Problem``s (kind, detail);
an empty list means the check passed.

- ``unreadable_state``: every state file parses with cairn's own reader (marker, change
  summaries, reviews, evaluations, plan JSON, the scripted agent's cursors, the lease's owner
  record); every journal line is a JSON event, except a torn last line;
- ``out_of_step``: the change summary, the review and the evaluation are never ahead of the
  journal (everything they record has its journal event), and once the next write is done they
  agree with it exactly;
- ``cli_reads``: ``cairn catchup`` and ``cairn status`` exit 0 without a traceback;
- ``git_health``: ``git fsck`` is clean, every ``refs/cairn`` ref names a commit, no git lock
  file is left behind;
- ``untouched``: HEAD, the index file, the branches, the config and the hooks (and, where no
  agent ran, every work-tree file) are byte for byte what they were;
- ``leftover_temps``: no temp file of a dead writer is left in a directory once the next
  writer has written there.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cairn import summary
from cairn.run import evaluation, review
from cairn.state import marker
from cairn.terms import FINDING_RESOLUTIONS
from cairn.util import procs
from common import cli, fingerprint, tree_state

TEMP_PREFIX = ".tmp."
GIT_LOCKS = ("index.lock", "HEAD.lock", "packed-refs.lock", "config.lock")


@dataclass(frozen=True)
class Problem:
    kind: str
    detail: str


def state_root(repo: Path) -> Path:
    return repo / ".git" / "cairn"


def ticket_dirs(repo: Path) -> list[Path]:
    root = state_root(repo) / "tickets"
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def run_dirs(ticket_dir: Path) -> list[Path]:
    return sorted(p for p in ticket_dir.iterdir() if p.is_dir() and p.name[:1].isdigit())


# --- every state file parses -----------------------------------------------------------------


@dataclass
class JournalLines:
    events: list[dict[str, Any]]
    bad_lines: list[int]  # not a JSON event, and not the torn last line
    torn_tail: bool


def read_journal(path: Path, events_only: bool = True) -> JournalLines:
    """Every line of a JSON-lines file; ``events_only``: each must be a journal event (``t``
    and ``event``), not only a JSON object."""
    data = path.read_bytes() if path.exists() else b""
    lines = data.split(b"\n")
    events: list[dict[str, Any]] = []
    bad: list[int] = []
    torn = False
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            entry = json.loads(raw)
        except ValueError:
            entry = None
        if isinstance(entry, dict) and (not events_only or ("event" in entry and "t" in entry)):
            events.append(entry)
        elif number == len(lines):  # no newline after it: the writer was killed mid-line
            torn = True
        else:
            bad.append(number)
    return JournalLines(events, bad, torn)


def _parse_artifact(path: Path) -> None:
    name = path.name
    if name.endswith("_change-summary.md"):
        if summary.load(path) is None:
            raise ValueError("vanished")
    elif name.endswith("_review.md"):
        review.load(path)
    elif "_eval-round-" in name:
        evaluation.load(path)
    elif name.endswith(".json") or name.endswith(".cursor"):
        json.loads(path.read_bytes())
    elif name.endswith(".md"):
        path.read_bytes().decode("utf-8")


def unreadable_state(repo: Path) -> list[Problem]:
    problems = []
    for ticket_dir in ticket_dirs(repo):
        try:
            marker.read(ticket_dir / ".in-progress.yaml")
        except Exception as exc:
            problems.append(Problem("unreadable_state", f"{ticket_dir.name} marker: {exc}"))
        lease = ticket_dir / "lease"
        if lease.exists() and lease.read_bytes().strip():
            try:
                json.loads(lease.read_bytes())
            except ValueError as exc:
                problems.append(Problem("unreadable_state", f"{lease}: {exc}"))
        for run_dir in run_dirs(ticket_dir):
            files = [p for p in run_dir.rglob("*") if p.is_file()]
            for path in files:
                if path.name.startswith(TEMP_PREFIX):
                    continue
                if path.name.endswith(".jsonl"):
                    bad = read_journal(path, events_only=path.name == "run-log.jsonl").bad_lines
                    if bad:
                        problems.append(
                            Problem("journal_bad_line", f"{path}: lines {bad} are not JSON events")
                        )
                    continue
                try:
                    _parse_artifact(path)
                except Exception as exc:
                    problems.append(Problem("unreadable_state", f"{path}: {exc}"))
    return problems


# --- summary, review and evaluation never ahead of the journal -------------------------------


def _summaries(run_dir: Path) -> list[tuple[Path, summary.Summary]]:
    out = []
    for path in sorted(run_dir.glob("*_coder_change-summary.md")):
        loaded = summary.load(path)
        if loaded is not None:
            out.append((path, loaded))
    return out


def _history(events: Iterable[dict[str, Any]], kind: str, key: str) -> dict[Any, list[str]]:
    history: dict[Any, list[str]] = {}
    for event in events:
        if event.get("event") == kind and event.get("status") in STATUSES[kind]:
            history.setdefault(event.get(key), []).append(event["status"])
    return history


STATUSES = {
    "task": ("in progress", "completed", "skipped", "deferred"),
    "finding": FINDING_RESOLUTIONS,
}


def _compare(
    what: str,
    items: Iterable[tuple[object, str]],
    history: dict[Any, list[str]],
    last: Any,
    exact: bool,
    where: Path,
) -> list[Problem]:
    """Each item's status against its journal history. The summary may lag one event behind on
    the item of the journal's last event (a writer that journals first was killed before it
    rewrote the summary) until the next write; it may never be ahead."""
    problems = []
    for item, status in items:
        seen = history.get(item, [])
        expected = seen[-1] if seen else "pending"
        if status == expected:
            continue
        before = seen[-2] if len(seen) >= 2 else "pending"
        if not exact and item == last and status == before:
            continue
        journal = f"its journal events say {seen}" if seen else "the journal has no event for it"
        problems.append(
            Problem("out_of_step", f"{where.name}: {what} {item} is {status!r}; {journal}")
        )
    return problems


def out_of_step(run_dir: Path, exact: bool) -> list[Problem]:
    """The run's files against its journal. ``exact`` once the next write is done."""
    journal = read_journal(run_dir / "run-log.jsonl")
    events = journal.events
    problems: list[Problem] = []
    task_events = [e for e in events if e.get("event") == "task"]
    last_task = task_events[-1].get("task") if task_events else None
    summaries = _summaries(run_dir)
    implementation = [(p, s) for p, s in summaries if s.mode == "implementation"]
    if implementation:
        path, first = implementation[0]
        items: list[tuple[object, str]] = [
            (t.number, t.status)
            for t in first.tasks
            if not (t.status == "completed" and t.notes == "done in the plan")
        ]
        problems += _compare(
            "task", items, _history(events, "task", "task"), last_task, exact, path
        )
        problems += _named_things(path, first, events)
    reviews = [(p, s) for p, s in summaries if s.mode == "review"]
    if reviews:
        path, latest = reviews[-1]
        since = _after_phase(events, "fix", latest.round)
        finding_events = [e for e in since if e.get("event") == "finding"]
        last = finding_events[-1].get("finding") if finding_events else None
        items = [(f.id, str(f.status)) for f in latest.findings]
        history = _history(since, "finding", "finding")
        problems += _compare("finding", items, history, last, exact, path)
    added = {e.get("finding") for e in events if e.get("event") == "finding"}
    added |= {  # failed acceptance criteria, seeded into the review by the orchestrator
        str(c).replace("-", "")
        for e in events
        if e.get("event") == "phase" and e.get("phase") == "evaluate"
        for c in e.get("failed") or []
    }
    for path in sorted(run_dir.glob("*_reviewer_review.md")):
        for found in review.load(path).findings:
            if found.id not in added:
                problems.append(
                    Problem("out_of_step", f"{path.name}: finding {found.id} has no journal event")
                )
    verdicts = {(e.get("gate"), e.get("result")) for e in events if e.get("event") == "gate"}
    for path in sorted(run_dir.glob("*_evaluator_eval-round-*.md")):
        for criterion in evaluation.load(path).criteria:
            verdict = criterion.result
            if verdict in ("pass", "fail") and (criterion.id, verdict) not in verdicts:
                problems.append(
                    Problem(
                        "out_of_step",
                        f"{path.name}: {criterion.id} {criterion.result} has no journal event",
                    )
                )
    return problems


def _after_phase(
    events: list[dict[str, Any]], phase: str, round_number: int | None
) -> list[dict[str, Any]]:
    for at, event in enumerate(events):
        if (
            event.get("event") == "phase"
            and event.get("phase") == phase
            and event.get("round") == round_number
        ):
            return events[at:]
    return events


def _named_things(
    path: Path, loaded: summary.Summary, events: list[dict[str, Any]]
) -> list[Problem]:
    """Gates and deferred items in the summary each have their journal event (compared with
    whitespace folded, as the summary stores them)."""
    problems = []
    gates = {(_fold(e.get("gate")), e.get("result")) for e in events if e.get("event") == "gate"}
    for gate in loaded.gates or []:
        if (_fold(gate.name), gate.result) not in gates:
            problems.append(
                Problem("out_of_step", f"{path.name}: gate {gate.name} {gate.result} has no event")
            )
    journalled = [_fold(e.get("item")) for e in events if e.get("event") == "deferred"]
    items = [_fold(item) for item in loaded.deferred or []]
    for item in set(items):
        if items.count(item) > journalled.count(item):
            problems.append(
                Problem("out_of_step", f"{path.name}: deferred item {item!r} has no event")
            )
    return problems


def _fold(text: object) -> str:
    return " ".join(str(text).split())


# --- no task done twice ------------------------------------------------------------------------


def completed_at(run_dirs: Iterable[Path]) -> dict[int, float]:
    """When a journal of these runs first recorded each task completed (epoch seconds)."""
    out: dict[int, float] = {}
    for run_dir in run_dirs:
        for event in read_journal(run_dir / "run-log.jsonl").events:
            if event.get("event") == "task" and event.get("status") == "completed":
                when = datetime.fromisoformat(event["t"]).timestamp()
                task = int(event["task"])
                out[task] = min(out.get(task, when), when)
    return out


def tasks_redone(
    records: Iterable[dict[str, Any]], done: dict[int, float]
) -> tuple[int, list[str]]:
    """How many tasks the agent started (its ``start`` records, ``agent.py``), and a line for
    each it started after a journal recorded it completed (``completed_at``)."""
    started = 0
    redone = []
    for record in records:
        if record.get("event") != "start":
            continue
        started += 1
        task = int(record["task"])
        # the journal's time has millisecond precision; a redo comes a dispatch later
        if task in done and record["t"] > done[task] + 0.002:
            redone.append(
                f"task {task} started at {record['t']:.3f}, recorded completed at {done[task]:.3f}"
            )
    return started, redone


# --- the CLI reads it back ----------------------------------------------------------------------


def cli_reads(repo: Path, tickets: Sequence[str]) -> list[Problem]:
    """``cairn status`` and ``cairn catchup`` of each ticket, all at once (they only read)."""
    commands = [("status", "--json"), *(("catchup", t, "--json") for t in tickets)]
    with ThreadPoolExecutor(len(commands)) as pool:
        results = list(pool.map(lambda args: cli(*args, cwd=repo, timeout=60), commands))
    problems = []
    for args, done in zip(commands, results, strict=True):
        if done.returncode != 0 or done.traceback():
            problems.append(
                Problem(
                    "cli_read_failed",
                    f"cairn {' '.join(args)} exited {done.returncode}: {done.error_line()}",
                )
            )
    return problems


# --- git ------------------------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=False)


def git_health(repo: Path) -> list[Problem]:
    problems = []
    fsck = _git(repo, "fsck", "--no-progress", "--no-dangling", "--strict")
    text = (fsck.stdout + fsck.stderr).decode("utf-8", "replace").strip()
    if fsck.returncode != 0 or re.search(r"^(error|missing|broken|bad)", text, re.M):
        problems.append(
            Problem("git_unhealthy", f"git fsck exited {fsck.returncode}: {text[:300]}")
        )
    refs = _git(repo, "for-each-ref", "--format=%(objecttype) %(refname)", "refs/cairn")
    if refs.returncode != 0:
        problems.append(Problem("git_unhealthy", f"for-each-ref: {refs.stderr.decode()[:200]}"))
    for line in refs.stdout.decode().splitlines():
        kind, _, name = line.partition(" ")
        if kind != "commit":
            problems.append(Problem("git_unhealthy", f"{name} names a {kind or 'missing'} object"))
    return problems + git_locks(repo)


def git_locks(repo: Path) -> list[Problem]:
    """Every git lock file in the repository (``git_lock_left``)."""
    gitdir = repo / ".git"
    locks = [gitdir / name for name in GIT_LOCKS if (gitdir / name).exists()]
    locks += list((gitdir / "refs").rglob("*.lock"))
    return [Problem("git_lock_left", f"{lock.relative_to(repo)} is left behind") for lock in locks]


def is_cairn_ref_lock(problem: Problem) -> bool:
    """A ``.lock`` of a ``refs/cairn`` ref: what a SIGKILL inside ``git update-ref`` leaves,
    and the next snapshot of that ticket removes."""
    return problem.kind == "git_lock_left" and problem.detail.startswith(".git/refs/cairn/")


# --- nothing of the user's was touched --------------------------------------------------------


@dataclass(frozen=True)
class Before:
    """What must not change: the fingerprint (index bytes, HEAD, branches, config, hooks,
    work tree) and, separately, every work-tree file."""

    prints: dict[str, str]
    tree: dict[str, tuple[str, object]]


def take(repo: Path) -> Before:
    return Before(fingerprint(repo), tree_state(repo))


def untouched(repo: Path, before: Before, worktree: bool) -> list[Problem]:
    """``worktree``: the work tree must be unchanged too (no agent ran)."""
    after = fingerprint(repo)
    problems = [
        Problem("user_state_changed", f"{key} changed")
        for key in sorted(before.prints)
        if key != "worktree" and before.prints[key] != after.get(key)
    ]
    if worktree and before.prints["worktree"] != after["worktree"]:
        now = tree_state(repo)
        changed = sorted(p for p in set(now) | set(before.tree) if now.get(p) != before.tree.get(p))
        problems.append(Problem("user_state_changed", f"work-tree files changed: {changed[:5]}"))
    return problems


# --- temp files of dead writers ----------------------------------------------------------------


def leftover_temps(directories: Iterable[Path]) -> list[Problem]:
    problems = []
    for directory in directories:
        if not directory.is_dir():
            continue
        for entry in os.scandir(directory):
            if not entry.name.startswith(TEMP_PREFIX):
                continue
            try:
                pid = int(entry.name.rsplit(".", 2)[-2])
            except ValueError:
                pid = 0
            if not procs.pid_alive(pid):
                size = entry.stat(follow_symlinks=False).st_size
                problems.append(
                    Problem("leftover_temp", f"{directory.name}/{entry.name} ({size} bytes)")
                )
    return problems


def abandoned_scratch(repo: Path) -> list[Problem]:
    """Snapshot scratch directories (``<root>/tmp/<purpose>.<host>.<pid>.<rand>``) of dead
    processes, once the next snapshot has run (it removes them)."""
    base = state_root(repo) / "tmp"
    problems = []
    if base.is_dir():
        for entry in base.iterdir():
            parts = entry.name.split(".")
            if len(parts) == 4 and parts[2].isdigit() and not procs.pid_alive(int(parts[2])):
                problems.append(Problem("leftover_temp", f"snapshot scratch {entry.name}"))
    return problems
