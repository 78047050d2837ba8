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
from cairn.scale import shared, statecommit
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
    refs: shared.TicketRefs
    leases: dict[str, str | None]  # what the remote held when this attempt last looked or pushed
    generation: int = 1  # this attempt's fencing token: the remote's generation + 1 (its claim)
    segment: str = ""  # the activity this attempt is one of (its workflow run and activity ids)

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
        raise shared.Fenced(
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
    refs = shared.TicketRefs.of(task.ticket, config.snapshot.ref_prefix)
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
    found = shared.remote_refs(git, (*refs.all(), base))
    specs = [f"+{base}:{base_ref(task.ticket)}"]
    specs += [f"+{ref}:{ref}" for ref in refs.all() if ref in found]
    shared.fetch(git, specs)
    if base in found:  # the usual tracking ref, for whoever reads it: one short ref update
        with shared.locked(root / ".refs.lock"):
            git.run(["update-ref", f"refs/remotes/{shared.REMOTE}/{task.base}", found[base]])
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
    """cairn's own restore of the ticket's snapshot, when it was taken on the branch's tip (an
    older one would undo later commits: it stays in its ref)."""
    from cairn.wip.meta import SnapshotMeta
    from cairn.wip.restoring import restore

    tip = space.git.out(["rev-parse", f"cairn/{space.ticket}"]).strip()
    meta = SnapshotMeta.parse(space.git.out(["log", "-1", "--format=%B", sha]))
    if meta is not None and meta.base == tip:
        restore(space.worktree, sha, ticket=f"{space.ticket}.restore")


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
    remote (fenced by the leases), and say what was pushed. Raises shared.Fenced; a failed
    snapshot raises too, but for the run's own save holding the ref (logged, the next
    checkpoint catches up)."""
    git, refs = space.git, space.refs
    before = _sha(git, refs.wip)
    snapshot(space, reason)
    updates: dict[str, str] = {}
    wip = _sha(git, refs.wip)
    if wip:
        updates[refs.wip] = wip
    branch = _branch_with(git, _sha(git, refs.branch), wip, before)
    if branch:
        updates[refs.branch] = branch
    parent = space.leases.get(refs.state)
    updates[refs.state] = statecommit.commit(
        git, space.state_dir, parent, space.ticket, space.claim
    )
    changed = {ref: sha for ref, sha in updates.items() if space.leases.get(ref) != sha}
    if changed:
        # the state ref goes with every push, so its lease fences the whole push: each attempt
        # made its own state commit first (its claim), so an older attempt's lease is stale
        changed.setdefault(refs.state, updates[refs.state])
        shared.push(git, changed, space.leases)
        space.leases.update(changed)
    return Progress(
        attempt=space.attempt,
        generation=space.generation,
        branch=updates.get(refs.branch),
        snapshot=updates.get(refs.wip),
        state=updates.get(refs.state),
        marker=_marker_facts(space.state_dir),
        worker=f"{socket.gethostname()}:{os.getpid()}",
    )


def snapshot(space: Workspace, reason: str) -> None:
    """``wip save`` of the worktree. A save that ran out of time (``cutoff_timeout_ms``; the
    expected race: the run's own save held the ticket's ref that long) is skipped with a
    warning in the worker's log; any other failure raises: a checkpoint never hides a snapshot
    that failed."""
    from cairn.errors import SaveTimeout
    from cairn.wip.saving import save

    try:
        save(space.worktree, ticket=space.ticket, reason=reason)
    except SaveTimeout as exc:
        log.warning(
            "cairn: %s: checkpoint (%s) without a new snapshot: %s", space.ticket, reason, exc
        )


def _sha(git: Git, ref: str) -> str | None:
    return git.run(["rev-parse", "--verify", "-q", ref], check=False).text or None


def _branch_with(git: Git, tip: str | None, wip: str | None, before: str | None) -> str | None:
    """The branch sha to push beside snapshot ``wip``: the snapshot's base when the snapshot is
    new this checkpoint and the agent committed since it was taken (its base, an ancestor of
    ``tip``), so the pair on the remote is one a retry restores (``_restore_snapshot``); the
    newer commit goes with the next checkpoint. Else the branch's ``tip``."""
    from cairn.wip.meta import SnapshotMeta

    if tip is None or wip is None or wip == before:
        return tip
    meta = SnapshotMeta.parse(git.out(["log", "-1", "--format=%B", wip]))
    base = meta.base if meta is not None else None
    if base is None or base == tip:
        return tip
    if git.run(["merge-base", "--is-ancestor", base, tip], check=False).ok:
        return base
    return tip  # history rewritten since the snapshot: the retry skips it, as it should


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
