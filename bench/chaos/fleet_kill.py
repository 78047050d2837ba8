"""SIGKILL the fleet supervisor (``cairn fleet start --once``) at random instants and at every
named crash point, alone or with the whole machine (or a reboot: the machine, and its temp dir
emptied), then start it again, until its queue is drained; every ticket must complete, no task
may be done twice, no byte the agent wrote may be lost, and every effect outside the repository
(pull request, comment, label, notification) must happen exactly once.

    .venv/bin/python bench/chaos/fleet_kill.py --quick      # CI: 6 kills, 35-60 s
    .venv/bin/python bench/chaos/fleet_kill.py              # 500 kills, about 45-90 minutes
    .venv/bin/python bench/chaos/fleet_kill.py --replay SEED --tracker github --keep  # one again
    .venv/bin/python bench/chaos/fleet_kill.py --self-test  # inject each fault; must exit 1

Fleet after fleet, each a fresh repository (300 tracked files, so a checkout takes a while)
with a queue of 2 to 4 plans of 1 to 3 tasks, worked through two at a time by the instrumented
agent ``agent.py`` (kind ``command``: one task a turn, as the prompt asks; every task started and
every file written goes to its log, fsynced). A fleet's tracker is ``dir`` (its queue directory)
or ``github`` (``--tracker``; mixed by default, github two fleets in three and always the first):
its plans are the bodies of issues labelled ``cairn`` on the fake GitHub REST server of
``tests/fleet/fake_github.py``, a bare repository is its remote (``fleet.remote``), so completed
tickets are pushed and their pull requests opened; in half of them the fake does one POST (a
comment, labels, a pull request or a review) and loses its answer, dropping the connection, so
cairn does not know whether it was done. Every fleet notifies a webhook receiver
(``[fleet] notify``). Both servers are threads of the campaign on 127.0.0.1 (``outside.py``):
they outlive every kill and count every request. The supervisors' ``TMPDIR`` is the fleet's own.
Each fleet takes 1 to 5 kills; after each, ``cairn fleet start --once`` is started again (at once,
or up to 1.5 s later), and after the last it runs until it exits by itself. A kill's instant is
one of (``fleets.pick_instant``):

- a named crash point (``cairn.terms.CRASH_POINTS``, 40 % of the kills): the supervisor is
  started with ``CAIRN_FAULT_INJECTION=1 CAIRN_CRASH_AT=<point>@<n>`` (``n`` 1 to 3) and kills
  itself the n-th time it gets there (a ``fleet.*`` point: the kill is counted when it exits by
  SIGKILL; one it never reaches is counted as not reached); for a ``run.*`` point its runs
  inherit the variables and each kills itself there, and the supervisor is killed alone at a
  random instant, so the runs it leaves die at the point with no one armed to start them again;

- inside `git worktree add`: held before it sets the new worktree's HEAD, held before its
  checkout, or a random instant into its checkout. The supervisors' `git` is a wrapper
  (``fleets.GIT_SHIM``) that runs the real one at once, except that `git worktree add` runs its
  own inner gits through it, and the one at the step chosen for the kill announces itself and
  waits to be killed, so these kills land every time;
- right after the k-th fleet record the supervisor writes (plus 0-2 ms);
- anywhere in the fleet's usual length.

and kills one of three things: the supervisor alone (its runs must live on, and the next
supervisor adopt them), the machine (the supervisor, its runs, their agents, their gits and every
run an earlier kill left running, all stopped first and then killed at one instant), or, for 40 %
of the machine's kills, a reboot: the machine, and the fleet's temp dir emptied.

Violations:

- ``not_completed``: once the queue is drained, a ticket is not ``completed`` (interrupted with
  its attempts spent, still queued or retrying) or its journals do not record every task done;
- ``ticket_failed``: a ticket ended ``failed``, ``needs_input`` or ``needs_review``: never
  retried, failed for good;
- ``task_redone``: the agent started a task after a journal of the ticket recorded it completed;
- ``bytes_lost``: a file the agent wrote (its last bytes) is neither on the ticket's branch nor
  in any snapshot of the ticket;
- ``base_damaged``: the ticket's branch lost or changed a file of the commit it started from
  (what a commit in a half-made checkout does);
- ``worktree_incomplete``: at the end, a ticket's worktree is locked, has no HEAD, is not on its
  branch, has a stale ``index.lock``, or differs from its branch outside the agent's own files;
- ``run_died_with_supervisor``: a run alive when its supervisor alone was killed did not live on:
  it exited with an error or died of a signal the campaign did not send (a run that carries a
  crash point and dies of SIGKILL killed itself there: counted, not a violation);
- ``run_not_adopted``: a supervisor started a run or resume of a ticket whose run, left by the
  supervisor before it, was still alive (it should have adopted it);
- ``supervisor_failed``: a supervisor the campaign did not kill exited 2, or with a traceback or
  an internal error, or did not finish in time;
- ``unreadable_state``: a fleet record does not parse, or ``cairn fleet status`` fails;
- ``duplicate_pr``: more than one pull request for a head branch;
- ``duplicate_comment``: two comments on an issue with the same ``<!-- cairn:… -->`` key;
- ``unkeyed_comment``: a comment without such a key (only cairn comments on the fake's issues);
- ``duplicate_notification``: one ticket event (ticket, state, attempt) that a receiver honouring
  ``Idempotency-Key`` would accept twice: delivered under two keys, or twice without one. Raw
  re-deliveries under one key (what a supervisor killed after a delivery and before recording
  it sends again: a webhook cannot be asked what it got) are counted, shown, and not violations;
- ``lost_transition``: a state change that never reached the tracker: an attempt N started
  without its ``Started attempt N`` comment (key ``cairn:<ticket>:<N>:running:comment``), a
  completed ticket without its ``completed`` comment, with labels other than ``cairn:done``
  (and no ``cairn:running``), without its pull request, or whose completion the receiver never
  got (key ``cairn:<ticket>:<attempt>:completed[:…]``), or an approved ticket's pull request
  without its approving review;
- ``duplicate_review``: a pull request approved twice.

After the checks, a github fleet's first completed ticket is approved (``cairn review
--approve``), then every finished ticket's worktree pruned (``cairn fleet prune
--all-finished``), each armed 30 % of the time with its crash point (``fleet.approve``,
``fleet.worktree_removed``); one killed there is finished by the next ``cairn fleet start
--once`` (the approval in the outbox) or prune. A worktree prune did not remove whole, or a
ticket branch it lost, is ``worktree_incomplete``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import checks
import msgspec
import processes
from fleets import (
    CRASH_POINTS,
    ENV_CRASH_AT,
    ENV_FAULT_INJECTION,
    HALF_MADE,
    TRACKERS,
    Calibration,
    Fleet,
    Instant,
    Runs,
    Supervisor,
    Trigger,
    child_runs,
    crash_machine,
    half_made,
    kill_supervisor,
    make_fleet,
    pick_instant,
    run_git,
    settle,
    tail,
    wait_for,
)
from outside import check_github, check_notifications, deliver

from cairn.terms import ENV_RUN_DIR, ENV_TICKET, SETTLED_STATES
from common import HERE, Done, Sizes, Tally, case_seeds, cli, git, log, parse_args, scratch

SIZES = Sizes(quick=6, full=500, unit="kills")
MAX_KILLS_PER_FLEET = 5
EXTRA_STARTS = 3  # supervisors started after a fleet's last kill before it is given up
SUPERVISOR_TIMEOUT = 300.0
RESTART_PAUSE = 1.5

KINDS = {
    "not_completed": "a ticket is not completed once the queue is drained (or a task not done)",
    "ticket_failed": "a ticket ended failed, needs_input or needs_review: failed for good",
    "task_redone": "a task was started again after a journal recorded it completed",
    "bytes_lost": "a file the agent wrote is neither on the ticket branch nor in a snapshot",
    "base_damaged": "the ticket branch lost or changed a file of the commit it started from",
    "worktree_incomplete": "a worktree locked, without HEAD, off its branch, or missing files",
    "run_died_with_supervisor": "a run alive when its supervisor alone was killed did not live on",
    "run_not_adopted": "a supervisor started a ticket whose earlier run was still alive",
    "supervisor_failed": "a supervisor not killed exited 2, with a traceback, or hung",
    "unreadable_state": "a fleet record does not parse, or cairn fleet status fails",
    "duplicate_pr": "more than one pull request for a ticket's head branch",
    "duplicate_comment": "two comments on an issue with the same <!-- cairn:… --> key",
    "unkeyed_comment": "a comment cairn posted without its <!-- cairn:… --> key",
    "duplicate_notification": "one ticket event accepted twice by a receiver honouring its key",
    "lost_transition": "a state change that never reached the tracker or the receiver",
    "duplicate_review": "a pull request approved twice",
}

HOW = {
    "head": "kills in git worktree add, before it set the HEAD",
    "checkout": "kills in git worktree add, before its checkout",
    "in checkout": "kills in git worktree add, in its checkout",
    "record": "kills right after a fleet record write",
    "timed": "kills at a random instant",
    "point": "kills at a named crash point (the process kills itself)",
    "armed": "kills of a supervisor whose runs carry a run.* crash point (at a random instant)",
}

FIGURES = [
    "fleets",
    "fleets against the fake GitHub",
    "tickets",
    "tasks planned",
    "kills",
    "kills of the supervisor alone",
    "kills of the machine",
    "kills of the machine with its temp dir emptied (reboot)",
    "kills of cairn review --approve or cairn fleet prune (after the queue)",
    "temp dir entries a reboot removed",
    *HOW.values(),
    *(f"  at {point}" for point in CRASH_POINTS),
    "crash points armed but not reached (the supervisor finished first)",
    "runs that killed themselves at their crash point (after their supervisor's kill)",
    "half-made worktrees left by a kill",
    "half-made worktrees without a HEAD",
    "half-made worktrees in their checkout",
    "supervisors started",
    "supervisors that finished by themselves",
    "supervisors that exited before their kill",
    "runs alive at a kill of their supervisor alone",
    "runs that lived on after their supervisor (exited 0 or 3)",
    "runs adopted (ticket_adopted)",
    "tickets recovered (ticket_recovered)",
    "tickets completed",
    "tasks started",
    "tasks redone",
    "files written",
    "bytes written",
    "bytes lost",
    "processes left running at a fleet's end (killed)",
    "tickets approved",
    "worktrees pruned",
    "GitHub requests answered",
    "answers the fake GitHub lost (request done, connection dropped)",
    "comments posted",
    "pull requests opened",
    "notifications delivered",
    "notifications without an Idempotency-Key header",
    "notification re-deliveries under one key (dropped by the receiver)",
    "faults injected",
    "faults missed",
]


# --- one fleet ----------------------------------------------------------------------------------


def run_fleet(
    fleet: Fleet, rng: random.Random, calibration: Calibration, kills: int, tally: Tally
) -> None:
    """Kill ``kills`` supervisors of ``fleet`` (fewer when the queue drains first), then start
    one more until a supervisor exits by itself."""
    runs = Runs()
    failures = 0
    for _ in range(kills + EXTRA_STARTS):
        instant = pick_instant(rng, fleet, calibration) if kills else None
        trigger = Trigger(fleet)
        pause, crash_at = (instant.pause, instant.crash_at) if instant else (None, None)
        sup = Supervisor(fleet, runs, SUPERVISOR_TIMEOUT, pause, crash_at)
        tally.count("supervisors started")
        landed = False
        try:
            if instant is not None and wait_for(sup, instant, trigger):
                landed = kill(fleet, sup, instant, trigger, runs, tally)
            elif instant is not None and instant.how == "point" and not instant.run_point:
                landed = crashed(fleet, sup, instant, trigger, runs, tally)
        finally:
            trigger.close()
        if landed:
            kills -= 1
            read_lines(fleet, sup, tally)
            time.sleep(rng.choice([0.0, 0.0, rng.uniform(0, RESTART_PAUSE)]))
            continue
        code = sup.finish()
        if instant is not None:
            tally.count("supervisors that exited before their kill")
            if instant.how == "point":
                tally.count("crash points armed but not reached (the supervisor finished first)")
        tally.count("supervisors that finished by themselves")
        if judge_supervisor(fleet, sup, code, tally):
            break  # the queue is drained
        failures += 1
        if failures == 2:
            break
    tally.count("processes left running at a fleet's end (killed)", settle(runs, 30))
    judge_runs(fleet, runs, tally)


def kill(
    fleet: Fleet, sup: Supervisor, instant: Instant, trigger: Trigger, runs: Runs, tally: Tally
) -> bool:
    """Kill at ``instant`` and count it; False when the supervisor had exited just before."""
    number = int(tally.figures.get("kills", 0)) + 1
    label = f"kill {number}: {instant.describe()}"
    if instant.machine:
        crash_machine(runs)
        sup.join()
        processes.wait_descendants_gone(10)
        runs.reap(set())
        alive = 0
        if instant.reboot:
            tally.count("temp dir entries a reboot removed", fleet.empty_tmp())
    else:
        alive = kill_supervisor(sup, runs, label)
    if sup.proc.returncode != -signal.SIGKILL:
        return False
    tally.count("runs alive at a kill of their supervisor alone", alive)
    counted(fleet, instant, label, tally)
    after_kill(fleet, trigger, label, tally)
    return True


def crashed(
    fleet: Fleet, sup: Supervisor, instant: Instant, trigger: Trigger, runs: Runs, tally: Tally
) -> bool:
    """Whether the supervisor, armed with a ``fleet.*`` crash point, killed itself there (else it
    finished, or hung); its runs live on, followed as orphans like those of a kill."""
    if sup.alive():  # it hung: finish() says so
        return False
    sup.join()
    if sup.proc.returncode != -signal.SIGKILL:
        return False
    number = int(tally.figures.get("kills", 0)) + 1
    label = f"kill {number}: {instant.describe()}"
    known = set(runs.runs)
    orphans = [r for r in child_runs(os.getpid()) if r[0] not in known]
    for pid, ticket, command in orphans:
        runs.add(pid, ticket, command, label, sup.crash_at)
    tally.count("runs alive at a kill of their supervisor alone", len(orphans))
    counted(fleet, instant, label, tally)
    after_kill(fleet, trigger, label, tally)
    return True


def counted(fleet: Fleet, instant: Instant, label: str, tally: Tally) -> None:
    fleet.kills.append(label)
    tally.count("kills")
    tally.count("kills of the machine" if instant.machine else "kills of the supervisor alone")
    if instant.reboot:
        tally.count("kills of the machine with its temp dir emptied (reboot)")
    if instant.run_point:  # its runs die at the point: counted as they are reaped
        tally.count(HOW["armed"])
        return
    tally.count(HOW[instant.how])
    if instant.how == "point":
        tally.count(f"  at {instant.point}")


def after_kill(fleet: Fleet, trigger: Trigger, label: str, tally: Tally) -> None:
    for gitdir in trigger.new_locks:
        if not half_made(gitdir):
            continue
        tally.count("half-made worktrees left by a kill")
        head = (gitdir / "HEAD").read_text() if (gitdir / "HEAD").exists() else ""
        if not head.strip().strip("0"):
            tally.count("half-made worktrees without a HEAD")
        elif not (gitdir / "index").exists():
            tally.count("half-made worktrees in their checkout")
    for problem in unreadable_records(fleet):
        tally.violation("unreadable_state", f"{fleet.where()} after {label}", problem)


def judge_supervisor(fleet: Fleet, sup: Supervisor, code: int | None, tally: Tally) -> bool:
    """Whether a supervisor that exited by itself (``code``; None: it hung) did so as it may:
    exit 0, or 1 or 3 with tickets left for a person (the checks at the end judge those)."""
    read_lines(fleet, sup, tally)
    problem = "did not finish in time" if code is None else sup.problem()
    if problem is not None:
        tally.violation("supervisor_failed", fleet.where(), problem)
    return problem is None


def read_lines(fleet: Fleet, sup: Supervisor, tally: Tally) -> None:
    tally.count("runs adopted (ticket_adopted)", len(sup.events("ticket_adopted")))
    tally.count("tickets recovered (ticket_recovered)", len(sup.events("ticket_recovered")))
    for found in sup.unadopted:
        tally.violation(
            "run_not_adopted",
            fleet.where(),
            f"{found.ticket}: the supervisor started `cairn {found.command}` while run pid "
            f"{found.orphan}, left by the supervisor before it, was alive (before that it said "
            f"{', '.join(found.before) or 'nothing'} of {found.ticket})",
        )


def judge_runs(fleet: Fleet, runs: Runs, tally: Tally) -> None:
    for run in runs.runs.values():
        if run.killed or run.status is None:  # killed by the campaign, or never reaped by it
            continue
        if run.status in (0, 3):
            tally.count("runs that lived on after their supervisor (exited 0 or 3)")
            continue
        if run.armed is not None and run.status == -signal.SIGKILL:
            tally.count(
                "runs that killed themselves at their crash point (after their supervisor's kill)"
            )
            tally.count(f"  at {run.armed.partition('@')[0]}")
            continue
        how = (
            f"died of {signal.Signals(-run.status).name}"
            if run.status < 0
            else f"exited {run.status}"
        )
        tally.violation(
            "run_died_with_supervisor",
            fleet.where(),
            f"{run.ticket}: `cairn {run.command}` pid {run.pid}, orphaned at {run.kill}, {how}"
            f"{last_interruption(fleet, run.ticket)}",
        )


def last_interruption(fleet: Fleet, ticket: str) -> str:
    events = journal_events(fleet, ticket)
    reasons = [e.get("reason") for e in events if e.get("event") == "run_interrupted"]
    return f"; its journal's last interruption: reason {reasons[-1]}" if reasons else ""


# --- the checks once the queue is drained ------------------------------------------------------


def journal_events(fleet: Fleet, ticket: str) -> list[dict[str, Any]]:
    ticket_dir = checks.state_root(fleet.repo) / "tickets" / ticket
    runs = checks.run_dirs(ticket_dir) if ticket_dir.is_dir() else []
    return [e for d in runs for e in checks.read_journal(d / "run-log.jsonl").events]


def completed_at(fleet: Fleet, ticket: str) -> dict[int, float]:
    ticket_dir = checks.state_root(fleet.repo) / "tickets" / ticket
    return checks.completed_at(checks.run_dirs(ticket_dir) if ticket_dir.is_dir() else [])


def unreadable_records(fleet: Fleet) -> list[str]:
    from cairn.fleet import fleetstate

    problems = []
    if fleet.records.is_dir():
        for path in sorted(fleet.records.glob("*.json")):
            try:
                if fleetstate.load(path) is None:
                    problems.append(f"{path.name} vanished")
            except Exception as exc:
                problems.append(f"{path.name}: {exc}")
    return problems


def check_fleet(fleet: Fleet, tally: Tally) -> None:
    where = fleet.where()
    for problem in unreadable_records(fleet):
        tally.violation("unreadable_state", where, problem)
    status = cli("fleet", "status", "--json", cwd=fleet.repo, env=fleet.env, timeout=60)
    if status.returncode != 0 or status.traceback():
        tally.violation(
            "unreadable_state",
            where,
            f"cairn fleet status --json exited {status.returncode}: {status.error_line()}",
        )
    for ticket, tasks in fleet.tickets.items():
        tally.count("tickets")
        tally.count("tasks planned", tasks)
        check_state(fleet, ticket, tasks, tally)
        check_redone(fleet, ticket, tally)
        check_bytes(fleet, ticket, tally)
        check_branch(fleet, ticket, tally)
        check_worktree(fleet, ticket, tally)
    records = {}
    for ticket in fleet.tickets:
        try:
            records[ticket] = fleet.record(ticket)
        except ValueError:
            records[ticket] = None  # reported as unreadable
    if fleet.outside.github is not None:
        tally.count("fleets against the fake GitHub")
        check_github(fleet.outside, where, records, tally)
    check_notifications(fleet.outside, where, records, tally)


def check_state(fleet: Fleet, ticket: str, tasks: int, tally: Tally) -> None:
    where = f"{fleet.where()}, {ticket}"
    try:
        record = fleet.record(ticket)
    except ValueError:
        return  # reported as unreadable
    if record is None:
        tally.violation("not_completed", where, "no fleet record")
        return
    state, detail = record.get("state"), record.get("detail")
    if state in SETTLED_STATES - {"completed"}:
        tally.violation("ticket_failed", where, f"{state}: {detail}")
        return
    if state != "completed":
        tally.violation(
            "not_completed", where, f"{state} (attempt {record.get('attempt')}): {detail}"
        )
        return
    missing = sorted(set(range(tasks)) - set(completed_at(fleet, ticket)))
    if missing:
        tally.violation("not_completed", where, f"completed, but tasks {missing} are not done")
        return
    tally.count("tickets completed")


def check_redone(fleet: Fleet, ticket: str, tally: Tally) -> None:
    done = completed_at(fleet, ticket)
    started, redone = checks.tasks_redone(fleet.agent_records(ticket), done)
    tally.count("tasks started", started)
    tally.count("tasks redone", len(redone))
    for line in redone:
        tally.violation("task_redone", f"{fleet.where()}, {ticket}", line)


def blobs_at(repo: Path, revs: Sequence[str]) -> set[tuple[str, str]]:
    """(path, blob) of every file under ``work/`` in each of ``revs``."""
    found: set[tuple[str, str]] = set()
    for rev in revs:
        listing = run_git(repo, "ls-tree", "-r", rev, "--", "work")
        for line in listing.stdout.splitlines():
            meta, _, path = line.partition("\t")
            found.add((path, meta.split()[2]))
    return found


def check_bytes(fleet: Fleet, ticket: str, tally: Tally) -> None:
    """The last bytes the agent wrote to each file are on the ticket's branch or in one of its
    snapshots (``refs/cairn/wip/<ticket>`` and what it descends from)."""
    latest: dict[str, dict[str, Any]] = {}
    for record in fleet.agent_records(ticket):
        if record.get("event") == "wrote":
            latest[record["path"]] = record
    tally.count("files written", len(latest))
    tally.count("bytes written", sum(r["bytes"] for r in latest.values()))
    if not latest:
        return
    snapshots = run_git(fleet.repo, "log", "--format=%H", f"refs/cairn/wip/{ticket}", "--")
    kept = blobs_at(fleet.repo, [f"refs/heads/cairn/{ticket}", *snapshots.stdout.split()])
    for rel, record in sorted(latest.items()):
        if (rel, record["blob"]) in kept:
            continue
        tally.count("bytes lost", record["bytes"])
        tally.violation(
            "bytes_lost",
            f"{fleet.where()}, {ticket}",
            f"{rel} ({record['bytes']} bytes) is neither on cairn/{ticket} nor in a snapshot",
        )


def check_branch(fleet: Fleet, ticket: str, tally: Tally) -> None:
    branch = f"refs/heads/cairn/{ticket}"
    if run_git(fleet.repo, "rev-parse", "--verify", "-q", branch).returncode != 0:
        return  # no branch: the ticket is reported as not completed
    diff = run_git(
        fleet.repo, "diff", "--name-status", fleet.base, branch, "--", ".", ":(exclude)work"
    )
    changed = diff.stdout.split("\n")
    changed = [line.replace("\t", " ") for line in changed if line.strip()]
    if diff.returncode != 0 or changed:
        tally.violation(
            "base_damaged",
            f"{fleet.where()}, {ticket}",
            f"cairn/{ticket} changed {len(changed)} files of its base: {changed[:3]}"
            f"{diff.stderr.strip()[:200]}",
        )


def check_worktree(fleet: Fleet, ticket: str, tally: Tally) -> None:
    where = f"{fleet.where()}, {ticket}"
    record = fleet.record(ticket) or {}
    path = Path(record.get("worktree") or fleet.worktree(ticket))
    entries = worktree_entries(fleet.repo)
    entry = next(
        (e for e in entries if os.path.realpath(e["worktree"]) == os.path.realpath(path)), None
    )
    problems = []
    if entry is None:
        problems.append("git has no worktree there")
    else:
        if "locked" in entry:
            problems.append(f"it is locked ({entry['locked'] or 'no reason'})")
        if entry.get("branch") != f"refs/heads/cairn/{ticket}":
            problems.append(f"it is on {entry.get('branch') or 'no branch'}")
        if not entry.get("HEAD", "").strip("0"):
            problems.append("it has no HEAD")
    gitfile = path / ".git"
    gitdir = (
        Path(gitfile.read_text().removeprefix("gitdir:").strip()) if gitfile.is_file() else None
    )
    if gitdir is not None and (gitdir / "index.lock").exists():
        problems.append("a stale index.lock is left in its git directory")
    if path.is_dir():
        status = run_git(path, "status", "--porcelain", "--", ".", ":(exclude)work")
        lines = [line for line in status.stdout.splitlines() if line.strip()]
        if status.returncode != 0:
            problems.append(f"git status exited {status.returncode}: {status.stderr.strip()[:200]}")
        elif lines:
            problems.append(f"{len(lines)} paths differ from its branch: {lines[:3]}")
    else:
        problems.append("its directory is missing")
    if problems:
        tally.violation("worktree_incomplete", where, f"{path}: {'; '.join(problems)}")


def worktree_entries(repo: Path) -> list[dict[str, str]]:
    text = run_git(repo, "worktree", "list", "--porcelain").stdout
    entries = []
    for block in text.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            key, _, value = line.partition(" ")
            fields[key] = value
        if "worktree" in fields:
            entries.append(fields)
    return entries


# --- after the queue: an approval and a prune, each killed at its crash point ----------------

ARMED_SHARE = 0.3  # of the approvals and prunes, armed with their crash point


def kills_so_far(tally: Tally) -> int:
    return int(tally.figures.get("kills", 0))


def epilogue(fleet: Fleet, rng: random.Random, runs: Runs, tally: Tally, budget: int) -> None:
    """Once the queue is drained and checked: a github fleet's first completed ticket approved
    (``cairn review --approve``: its pull request approved on GitHub), then every finished
    ticket's worktree pruned (``cairn fleet prune --all-finished``); each is armed with its crash
    point (``fleet.approve``, ``fleet.worktree_removed``) 30 % of the time; when it died there,
    the next ``cairn fleet start --once`` (the approval's outbox) or prune finishes it. Neither
    is armed once the campaign's kills are done (``budget``: how many are left)."""
    limit = kills_so_far(tally) + budget
    if fleet.tracker == "github":
        approve(fleet, rng, runs, tally, limit)
    prune(fleet, rng, tally, limit)


def armed_cli(
    fleet: Fleet, rng: random.Random, point: str, tally: Tally, limit: int, *args: str
) -> tuple[bool, Done]:
    """Run ``cairn args``, armed with ``point`` ``ARMED_SHARE`` of the time while the kills are
    fewer than ``limit``; whether it died there (counted as a kill), and what it did."""
    armed = rng.random() < ARMED_SHARE and kills_so_far(tally) < limit
    env = dict(fleet.env)
    if armed:
        env.update({ENV_FAULT_INJECTION: "1", ENV_CRASH_AT: f"{point}@1"})
    done = cli(*args, cwd=fleet.repo, env=env, timeout=SUPERVISOR_TIMEOUT)
    killed = armed and done.returncode == -signal.SIGKILL
    if killed:
        number = int(tally.figures.get("kills", 0)) + 1
        label = f"kill {number}: crash point {point}@1, `cairn {' '.join(args[:2])}` itself"
        fleet.kills.append(label)
        after = "kills of cairn review --approve or cairn fleet prune (after the queue)"
        for figure in ("kills", after, HOW["point"], f"  at {point}"):
            tally.count(figure)
    elif armed:
        tally.count("crash points armed but not reached (the supervisor finished first)")
    return killed, done


def approve(fleet: Fleet, rng: random.Random, runs: Runs, tally: Tally, limit: int) -> None:
    github = fleet.outside.github
    assert github is not None
    done = [t for t in fleet.tickets if (fleet.record(t) or {}).get("state") == "completed"]
    if not done:
        return
    ticket, where = done[0], f"{fleet.where()}, {done[0]}"
    args = ("review", ticket, "--approve", "--by", "chaos")
    killed, result = armed_cli(fleet, rng, "fleet.approve", tally, limit, *args)
    if killed:  # its approval waits in the outbox: the next supervisor sends it
        sup = Supervisor(fleet, runs, SUPERVISOR_TIMEOUT)
        tally.count("supervisors started")
        judge_supervisor(fleet, sup, sup.finish(), tally)
        settle(runs, 30)
    elif result.returncode != 0 or result.traceback():
        tally.violation(
            "supervisor_failed",
            where,
            f"cairn review --approve exited {result.returncode}: {result.error_line()}",
        )
        return
    tally.count("tickets approved")
    check_approval(fleet, ticket, tally)


def check_approval(fleet: Fleet, ticket: str, tally: Tally) -> None:
    """An approved ticket's pull request has exactly one approving review."""
    github = fleet.outside.github
    assert github is not None
    where = f"{fleet.where()}, {ticket}"
    with github.lock:
        numbers = [p["number"] for p in github.pulls if p.get("head") == f"cairn/{ticket}"]
        approvals = [r for n, r in github.reviews if n in numbers and r["state"] == "APPROVED"]
    if len(approvals) > 1:
        tally.violation("duplicate_review", where, f"{len(approvals)} approving reviews")
    elif numbers and not approvals:
        tally.violation("lost_transition", where, "approved, and its pull request was not")


def prune(fleet: Fleet, rng: random.Random, tally: Tally, limit: int) -> None:
    """Every finished ticket's worktree gone, its branch and snapshot kept; else
    ``worktree_incomplete``."""
    args = ("fleet", "prune", "--all-finished", "--json")
    killed, result = armed_cli(fleet, rng, "fleet.worktree_removed", tally, limit, *args)
    if killed:
        result = cli(*args, cwd=fleet.repo, env=fleet.env, timeout=SUPERVISOR_TIMEOUT)
    where = fleet.where()
    try:
        reports = json.loads(result.stdout)["tickets"]
    except (ValueError, KeyError, TypeError):
        tally.violation(
            "worktree_incomplete",
            where,
            f"cairn fleet prune exited {result.returncode}: {result.error_line()}",
        )
        return
    entries = {os.path.realpath(e["worktree"]) for e in worktree_entries(fleet.repo)}
    for report in reports:
        ticket, action = report.get("ticket"), report.get("action")
        path = Path(report.get("worktree") or fleet.worktree(str(ticket)))
        problems = []
        if action not in ("removed", "absent"):
            problems.append(f"prune said {action}: {report.get('reason') or report}")
        if path.exists():
            problems.append("its directory is left")
        if os.path.realpath(path) in entries:
            problems.append("git still lists it")
        branch = f"refs/heads/cairn/{ticket}"
        if run_git(fleet.repo, "rev-parse", "--verify", "-q", branch).returncode != 0:
            problems.append(f"{branch} is gone")
        if problems:
            tally.violation(
                "worktree_incomplete", f"{where}, {ticket}", f"after prune: {'; '.join(problems)}"
            )
        else:
            tally.count("worktrees pruned")


# --- self-test ------------------------------------------------------------------------------------

# each fault, and the violation kind it must be reported as
FAULTS = {
    "a run that dies after its supervisor was killed": "run_died_with_supervisor",
    "a live run the next supervisor does not know of": "run_not_adopted",
    "a supervisor that refuses to start (a broken cairn.toml)": "supervisor_failed",
    "a ticket whose after_create hook fails": "ticket_failed",
    "a ticket whose before_run hook fails": "not_completed",
    "a task done again": "task_redone",
    "the agent's files gone from the branch and the snapshots": "bytes_lost",
    "a file of the base deleted on a ticket branch": "base_damaged",
    "a worktree left locked initializing": "worktree_incomplete",
    "a fleet record that is not JSON": "unreadable_state",
    "a second pull request for a head branch": "duplicate_pr",
    "a comment posted twice with one key": "duplicate_comment",
    "a comment without a key": "unkeyed_comment",
    "a completion notified under two keys": "duplicate_notification",
    "a completed issue's cairn:done label gone": "lost_transition",
    "a pull request approved twice": "duplicate_review",
}
SELF_TEST_HOOKS = (
    'after_create = "test \\"$CAIRN_TICKET\\" != S5"\n'
    'before_run = "test \\"$CAIRN_TICKET\\" != S6"\n'
)


def self_test(root: Path, tally: Tally) -> None:
    """One fleet of six tickets, two of them with a failing hook (S5's ``after_create``, S6's
    ``before_run``); a run orphaned by a kill of its supervisor alone, whose record then loses
    its pid, and which dies of SIGABRT once the next supervisor has started its ticket again; a
    supervisor started on a broken ``cairn.toml``; and once the queue is drained, the faults
    the end checks must see."""
    import agent

    fleet = Fleet(1, 0, root, {f"S{n}": 2 for n in range(1, 7)}, SELF_TEST_HOOKS)
    runs = Runs()
    orphan = orphan_a_run(fleet, runs)
    sup = Supervisor(fleet, runs, SUPERVISOR_TIMEOUT)
    deadline = time.monotonic() + 60
    while sup.alive() and not sup.unadopted and time.monotonic() < deadline:
        time.sleep(0.02)
    for sig in (signal.SIGABRT, signal.SIGCONT):
        processes.kill(orphan, sig)
    judge_supervisor(fleet, sup, sup.finish(), tally)
    toml = fleet.repo / "cairn.toml"
    saved = toml.read_bytes()
    toml.write_text("[fleet\n")
    broken = Supervisor(fleet, runs, 60)
    judge_supervisor(fleet, broken, broken.finish(), tally)
    toml.write_bytes(saved)
    last = Supervisor(fleet, runs, SUPERVISOR_TIMEOUT)
    judge_supervisor(fleet, last, last.finish(), tally)
    settle(runs, 30)
    judge_runs(fleet, runs, tally)
    redo_a_task(fleet, "S1")
    lose_bytes(fleet, "S2")
    for args in (["rm", "-q", "vendor/f0000.txt"], ["commit", "-qm", "delete a base file"]):
        env = {**os.environ, **agent.IDENTITY}
        subprocess.run(["git", *args], cwd=fleet.worktree("S3"), env=env, check=False)
    (fleet.gitdirs / "S4" / "locked").write_bytes(HALF_MADE + b"\n")
    (fleet.records / "S9.json").write_text("{not json")
    check_fleet(fleet, tally)
    self_test_github(root, runs, tally)


def self_test_github(root: Path, runs: Runs, tally: Tally) -> None:
    """A github fleet of two tickets run to its end undisturbed; then a second pull request, a
    comment twice, one without a key, a completion notified under a second key, and a label
    taken off what the fake GitHub and the receiver hold."""
    fleet = Fleet(2, 0, root, {"GH-1": 1, "GH-2": 1}, tracker="github")
    sup = Supervisor(fleet, runs, SUPERVISOR_TIMEOUT)
    judge_supervisor(fleet, sup, sup.finish(), tally)
    settle(runs, 30)
    github = fleet.outside.github
    assert github is not None
    with github.lock:
        github.pulls.append({"head": "cairn/GH-1", "base": "main", "number": 999})
        key = "<!-- cairn:GH-2:9:running:comment -->"
        github.comments += [(2, f"Again.\n\n{key}"), (2, f"Again.\n\n{key}")]
        github.comments.append((1, "Said without a key.\n\n— cairn"))
        labels = github.issues[2]["labels"]
        github.issues[2]["labels"] = [lab for lab in labels if lab["name"] != "cairn:done"]
    record = fleet.record("GH-1") or {}
    body = {"ticket": "GH-1", "state": "completed", "attempt": record.get("attempt")}
    for key in ("cairn:self-test:one", "cairn:self-test:two"):
        deliver(fleet.outside.receiver.url, {**body, "key": key}, key)
    check_fleet(fleet, tally)
    with github.lock:
        [number] = [p["number"] for p in github.pulls if p["head"] == "cairn/GH-2"]
        github.reviews += [(number, {"state": "APPROVED", "body": "ok"})] * 2
    check_approval(fleet, "GH-2", tally)
    fleet.remove()


def orphan_a_run(fleet: Fleet, runs: Runs) -> int:
    """Start a supervisor, and once a run of it is working, freeze that run and SIGKILL the
    supervisor; forget the run's pid in its record (the fault). Returns the run's pid."""
    from cairn.fleet import fleetstate
    from cairn.state.layout import discover

    sup = Supervisor(fleet, runs, SUPERVISOR_TIMEOUT)
    deadline = time.monotonic() + 60
    while not child_runs(sup.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    pid, ticket, _ = child_runs(sup.proc.pid)[0]
    processes.kill(pid, signal.SIGSTOP)  # it cannot see its supervisor die
    deadline = time.monotonic() + 10
    while (fleet.record(ticket) or {}).get("pid") != pid and time.monotonic() < deadline:
        time.sleep(0.01)
    kill_supervisor(sup, runs, "the self-test's kill")
    _, _, layout = discover(fleet.repo)
    record = fleetstate.read(layout, ticket)
    assert record is not None
    fleetstate.write(layout, msgspec.structs.replace(record, pid=None, pid_started_at=None))
    return pid


def redo_a_task(fleet: Fleet, ticket: str) -> None:
    """What a resume that dispatched a completed task again would make the agent do."""
    ticket_dir = checks.state_root(fleet.repo) / "tickets" / ticket
    run_dir = checks.run_dirs(ticket_dir)[-1]
    prompt = f"Continue with ticket {ticket}: turn 2 of 2.\nIn progress\nRemaining tasks:\n"
    prompt += f"- Task 0: Step 0 of {ticket}\n"
    env = {**os.environ, **fleet.env, ENV_RUN_DIR: str(run_dir), ENV_TICKET: ticket}
    subprocess.run(
        [sys.executable, str(HERE / "agent.py")],
        input=prompt.encode(),
        cwd=fleet.worktree(ticket),
        env=env,
        capture_output=True,
        check=False,
    )


def lose_bytes(fleet: Fleet, ticket: str) -> None:
    """The ticket's branch back at its base, its snapshots and its worktree's files gone."""
    git(fleet.repo, "update-ref", f"refs/heads/cairn/{ticket}", fleet.base)
    git(fleet.repo, "update-ref", "-d", f"refs/cairn/wip/{ticket}")
    subprocess.run(["rm", "-rf", str(fleet.worktree(ticket) / "work")], check=False)


# --- main -----------------------------------------------------------------------------------------


CALIBRATION_FLEET = {"T1": 2, "T2": 2}


def calibrate(root: Path) -> Calibration:
    """An undisturbed fleet (``CALIBRATION_FLEET``): how long a task takes (two at once), how
    many records the supervisor writes per ticket, how long `git worktree add` holds its lock."""
    fleet = Fleet(0, 0, root, CALIBRATION_FLEET)
    runs = Runs()
    trigger = Trigger(fleet)
    sup = Supervisor(fleet, runs, SUPERVISOR_TIMEOUT)
    while sup.alive() and time.monotonic() < sup.deadline:
        trigger.look(0.005)
    code = sup.finish()
    trigger.close()
    seconds = time.monotonic() - sup.started
    if code != 0:
        raise SystemExit(f"calibration fleet exited {code}: {tail(sup.stderr)}")
    lives = trigger.lock_lives or [0.1]
    tasks, tickets = sum(CALIBRATION_FLEET.values()), len(CALIBRATION_FLEET)
    found = Calibration(
        seconds_per_task=seconds * 2 / tasks,
        records_per_ticket=trigger.records / tickets,
        worktree_add=sum(lives) / len(lives),
    )
    log(
        f"calibrated: a fleet of {tickets} tickets, {tasks} tasks takes {seconds:.1f} s, "
        f"{trigger.records} record writes, git worktree add {found.worktree_add * 1000:.0f} ms"
    )
    fleet.remove()
    return found


# --tracker: the trackers a fleet's is drawn from (mixed: github twice as often as dir)
TRACKERS_OF = {"mixed": ("github", "github", "dir"), **{t: (t,) for t in TRACKERS}}


def replay_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tracker",
        choices=sorted(TRACKERS_OF),
        default="mixed",
        help="each fleet's tracker: dir (its queue directory), github (issues on the fake "
        "GitHub, branches pushed to a bare remote, pull requests), or mixed (default: github "
        "two fleets in three)",
    )
    parser.add_argument(
        "--replay",
        type=int,
        metavar="SEED",
        help="run only the fleet with this seed (printed with each violation), making the same "
        "choices: the same queue, the same kinds of kill",
    )


def fleets(args: argparse.Namespace) -> Iterator[tuple[int, int]]:
    """(number, seed) of each fleet: derived from the campaign's seed, or the one replayed."""
    if args.replay is not None:
        yield 1, args.replay
        return
    yield from enumerate(case_seeds(args.seed, args.cases * 3), start=1)


def campaign(root: Path, args: argparse.Namespace, tally: Tally) -> None:
    calibration = calibrate(root)
    runs_of_epilogue = Runs()
    for number, seed in fleets(args):
        left = args.cases - kills_so_far(tally)
        if left <= 0:
            break
        rng = random.Random(seed)
        # a mixed campaign's first fleet is a github one, so that even --quick has one
        first = (
            "github" if number == 1 and args.replay is None and args.tracker == "mixed" else None
        )
        fleet = make_fleet(root, number, seed, rng, TRACKERS_OF[args.tracker], first)
        tally.count("fleets")
        kills = rng.randint(1, MAX_KILLS_PER_FLEET)
        run_fleet(fleet, rng, calibration, kills if args.replay else min(left, kills), tally)
        check_fleet(fleet, tally)
        budget = 10**9 if args.replay is not None else args.cases - kills_so_far(tally)
        epilogue(fleet, rng, runs_of_epilogue, tally, budget)
        if args.keep:
            fleet.outside.close()
        else:
            fleet.remove()
        log(
            f"{fleet.where()}: {int(tally.figures.get('kills', 0))} kills so far, "
            f"{sum(tally.violations.values())} violations"
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(__doc__ or "", SIZES, argv, replay_option)
    if args.self_test:
        args.cases = len(FAULTS)
    log(f"fleet_kill: seed {args.seed}, {args.cases} {'faults' if args.self_test else 'kills'}")
    processes.become_subreaper()
    tally = Tally("fleet_kill", args.seed, KINDS)
    with scratch("fleet-kill", args.keep) as root:
        try:
            if args.self_test:
                self_test(root, tally)
                for name, kind in FAULTS.items():
                    tally.count("faults injected")
                    if not tally.violations[kind]:
                        tally.count("faults missed")
                        log(f"SELF-TEST: {name!r} was not caught")
            else:
                campaign(root, args, tally)
                if args.replay is not None:
                    args.cases = int(tally.figures.get("kills", 0))
        finally:
            crash_machine(Runs())
            processes.quiesce(5)
    return tally.report(args, FIGURES)


if __name__ == "__main__":
    sys.exit(main())
