"""A worker's workspace for one ticket: its clone of the shared remote, the ticket's worktree
rebuilt from what the remote holds (branch, snapshot, run state), and the checkpoint that puts
them back on the remote before a heartbeat names them."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import socket
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cairn.config import load
from cairn.git import Git, base_runner
from cairn.remote import checkpoint as pushing
from cairn.remote import refs as remote_refs
from cairn.remote import statecommit
from cairn.scale import shared
from cairn.scale.messages import Progress, TicketInput
from cairn.util import durable, procs

log = logging.getLogger(__name__)
STOP_GRACE = 10.0  # seconds a stopped run has to snapshot and exit before its group is killed


def clone_dir(root: Path, remote: str) -> Path:
    """The worker's clone of ``remote``: one per remote, beside the tickets' worktrees."""
    return root / f"repo-{hashlib.sha256(remote.encode()).hexdigest()[:12]}"


@dataclass
class Workspace:
    root: Path
    clone: Path
    ticket: str
    attempt: int
    git: Git  # in the clone
    worktree: Path
    refs: remote_refs.TicketRefs
    leases: dict[str, str | None]  # what the remote held when this attempt last looked or pushed
    generation: int = 1  # this attempt's fencing token: the remote's generation + 1 (its claim)
    segment: str = ""  # the activity this attempt is one of (its workflow run and activity ids)
    remote: str = remote_refs.REMOTE  # the shared remote's name in the clone

    @property
    def claim(self) -> statecommit.Claim:
        return statecommit.Claim(self.generation, self.attempt, self.segment)

    @property
    def state_dir(self) -> Path:
        return self.clone / ".git" / "cairn" / "tickets" / self.ticket

    def plan_path(self, task: TicketInput) -> Path:
        return self.root / ".plans" / self.ticket / Path(task.plan_name).name

    def pid_file(self) -> Path:
        return self.root / ".pids" / f"{self.ticket}.json"


CLONE_LOCK = ".clone.lock"  # shared by rebuilds, exclusive for the clone's creation and gc


def base_ref(ticket: str) -> str:
    """Where a ticket's rebuild fetches the base branch: a ref of its own, so rebuilds running
    at once never lock the same ref."""
    return f"refs/cairn-base/{ticket}"


def prepare(
    root: Path,
    task: TicketInput,
    attempt: int,
    env: dict[str, str] | None = None,
    segment: str = "",
) -> Workspace:
    """The ticket's worktree in ``root``, rebuilt from the remote: always, so a worker never
    continues from a local copy older than what another worker pushed. Rebuilds of different
    tickets run at once (the clone is held shared); ``env`` goes to every git process.
    ``segment`` names the activity (``<workflow run id>/<activity id>``) of which this is
    attempt ``attempt``."""
    clone = clone_dir(root, task.remote)
    with shared.ticket_locked(f"{root}:{task.ticket}"):
        if not (clone / ".git").is_dir():
            with shared.locked(root / CLONE_LOCK):
                shared.ensure_clone(task.remote, clone)
        with shared.locked(root / CLONE_LOCK, exclusive=False):
            space = _rebuild(root, clone, task, attempt, env or {}, segment)
        if space.leases.get(space.refs.wip):
            _restore_snapshot(space, str(space.leases[space.refs.wip]))
    plan = space.plan_path(task)
    plan.parent.mkdir(parents=True, exist_ok=True)
    durable.atomic_write(plan, task.plan, fsync=False)
    return space


def _claimable(git: Git, state: str, space: Workspace) -> int:
    """The generation this attempt claims, one above the remote's state commit's; Fenced when
    that commit is a later attempt's of the same activity (this one started late)."""
    remote = statecommit.claim_of(git, state)
    if space.segment and remote.segment == space.segment and remote.attempt > space.attempt:
        raise remote_refs.Fenced(
            f"attempt {remote.attempt} of ticket {space.ticket} owns its refs; attempt "
            f"{space.attempt} stops"
        )
    return remote.generation + 1


def _rebuild(
    root: Path, clone: Path, task: TicketInput, attempt: int, env: dict[str, str], segment: str
) -> Workspace:
    git = base_runner(clone)
    git = git.replace(env={**git.env, **env})
    config = load(clone)
    refs = remote_refs.TicketRefs.of(task.ticket, config.snapshot.ref_prefix)
    space = Workspace(
        root, clone, task.ticket, attempt, git, root / task.ticket, refs, {}, segment=segment
    )
    stop_leftovers(space)
    if space.worktree.exists() or _registered(git, space.worktree):
        # a git killed while it made the worktree (a stall, a kill) leaves it locked
        # 'initializing', which remove and prune both leave alone
        git.run(["worktree", "unlock", str(space.worktree)], check=False)
        git.run(["worktree", "remove", "--force", str(space.worktree)], check=False)
        shutil.rmtree(space.worktree, ignore_errors=True)
        git.run(["worktree", "prune"])
    base = f"refs/heads/{task.base}"
    found = remote_refs.remote_refs(git, (*refs.all(), base))
    specs = [f"+{base}:{base_ref(task.ticket)}"]
    specs += [f"+{ref}:{ref}" for ref in refs.all() if ref in found]
    remote_refs.fetch(git, specs)
    if base in found:  # the usual tracking ref, for whoever reads it: one short ref update
        with shared.locked(root / ".refs.lock"):
            git.run(["update-ref", f"refs/remotes/{remote_refs.REMOTE}/{task.base}", found[base]])
    space.leases = {ref: found.get(ref) for ref in refs.all()}
    if refs.state in found:
        space.generation = _claimable(git, found[refs.state], space)
    if refs.branch not in found:
        git.run(["branch", "-f", f"cairn/{task.ticket}", base_ref(task.ticket)])
    git.run(["worktree", "add", "-q", str(space.worktree), f"cairn/{task.ticket}"])
    if refs.state in found:
        statecommit.checkout(git, found[refs.state], space.state_dir)
        stop_earlier_run(space)
    elif space.state_dir.exists():
        shutil.rmtree(space.state_dir)
    return space


def _registered(git: Git, path: Path) -> bool:
    listing = git.out(["worktree", "list", "--porcelain"])
    return f"worktree {path}" in listing.splitlines()


def _restore_snapshot(space: Workspace, sha: str) -> None:
    """The ticket's snapshot restored when it was taken on the branch's tip
    (``checkpoint.restore_snapshot``)."""
    branch = f"cairn/{space.ticket}"
    pushing.restore_snapshot(space.git, space.worktree, branch, sha, space.ticket)


def stop_leftovers(space: Workspace) -> None:
    """Kill the process group an earlier attempt in this workspace root left behind (a SIGKILLed
    worker does not kill its children), when it is still the same process."""
    stop_recorded(space.pid_file())


def stop_recorded(path: Path) -> None:
    """Kill the process group a pid file of the root names, if it is still the same process,
    and remove the file."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    pid = int(record["pid"])
    if _same_process(pid, record.get("started"), record.get("started_since_boot")):
        procs.kill_group(pid)
    path.unlink(missing_ok=True)


def stop_earlier_run(space: Workspace) -> None:
    """Stop the run, and its agent, that the ticket's marker names when they live on this host:
    an earlier attempt of another worker here (a worker that crashed leaves them running). The
    run gets SIGTERM first, so it stops its agent; what it saves then stays local."""
    stop_marked(space.state_dir)


def stop_marked(state_dir: Path) -> None:
    """Stop the run and agent the marker in ``state_dir`` names, when they live on this host."""
    from cairn.state import marker, owner
    from cairn.state.layout import MARKER

    try:
        found = marker.read(state_dir / MARKER)
    except Exception:  # a marker the state commit caught half-written: nothing to judge by
        return
    if found is None or found.owner is None or found.owner.host != owner.this_host():
        return
    run = found.owner
    if _same_process(run.pid, run.pid_started_at, run.pid_started_since_boot):
        procs.stop_group(found.owner.pid, STOP_GRACE)
    agent = found.dispatch
    if (
        agent is not None
        and agent.pid is not None
        and _same_process(agent.pid, agent.pid_started_at, agent.pid_started_since_boot)
    ):
        procs.kill_group(agent.pid)


def _same_process(pid: int, started: datetime | str | None, since_boot: float | None) -> bool:
    """Whether ``pid`` is alive and provably the process recorded (never kill a stranger)."""
    if pid == os.getpid() or not procs.pid_alive(pid):
        return False
    if isinstance(started, str):
        try:
            started = datetime.fromisoformat(started)
        except ValueError:
            started = None
    return procs.started_as(pid, started, since_boot) is True


def remember_child(space: Workspace, pid: int) -> None:
    start = procs.process_start(pid)
    path = space.pid_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "pid": pid,
        "started": start.at.isoformat() if start else None,
        "started_since_boot": start.since_boot if start else None,
    }
    durable.atomic_write(path, json.dumps(record))


LEFTOVERS = (
    "cairn: commit what {ticket}'s run left uncommitted\n\n"
    "The run ended with these changes in its worktree (a machine lost between the agent's\n"
    "last report and its commit, or an agent that does not commit). The worktree is thrown\n"
    "away after the segment, so the branch takes them; they are also in the last snapshot.\n"
)


def commit_leftovers(space: Workspace) -> bool:
    """Commit what the ended run left uncommitted in the worktree onto the ticket branch (the
    worktree does not outlive the segment); False when there was nothing."""
    git = base_runner(space.worktree)
    if not git.out(["status", "--porcelain", "--untracked-files=all"]).strip():
        return False
    git.run(["add", "-A"])
    git.run(["commit", "-q", "--no-verify", "-m", LEFTOVERS.format(ticket=space.ticket)])
    return True


def checkpoint(space: Workspace, reason: str) -> Progress:
    """Snapshot the worktree, commit the run state, push branch, snapshot and state to the
    remote (fenced by the leases: ``cairn.remote.checkpoint``), and say what was pushed."""
    pushed = pushing.checkpoint(space, reason)
    return Progress(
        attempt=space.attempt,
        generation=space.generation,
        branch=pushed.branch,
        snapshot=pushed.snapshot,
        state=pushed.state,
        marker=_marker_facts(space.state_dir),
        worker=f"{socket.gethostname()}:{os.getpid()}",
    )


def _marker_facts(state_dir: Path) -> dict[str, str]:
    from cairn.state import marker
    from cairn.state.layout import MARKER

    try:
        found = marker.read(state_dir / MARKER)
    except Exception:  # a marker half-written this instant: the next heartbeat has it
        return {}
    if found is None:
        return {}
    facts = {"phase": found.phase, "run": found.run or ""}
    if found.task is not None:
        facts["task"] = str(found.task)
    return facts
