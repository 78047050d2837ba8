"""A run with ``--remote``: the ticket's branch (``cairn/<ticket>``), its snapshot ref and its run
state pushed to a remote of the user's repository, so the run moves between machines (a CI
runner, a cloud VM, a laptop that sleeps) the way a segment of the fleet on Temporal moves
between workers, without Temporal: the same refs, the same state commits, the same fencing
(docs/ci.md).

Everything is checked before anything is written: the remote is a remote of the repository and
answers, and what it holds of the ticket is this clone's (its ``refs/cairn/state/<ticket>`` is
the state commit this clone last pushed or took) or older. A new run never takes a ticket whose
state the remote already holds; a resume in a clone without the ticket's run rebuilds it from
the remote: the branch checked out, the run state checked out, the snapshot restored."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cairn.errors import BadInput, GitError, SaveTimeout
from cairn.git import Git, Repo
from cairn.git.process import Deadline
from cairn.remote import checkpoint, statecommit
from cairn.remote.refs import QUIET, Fenced, TicketRefs, fetch, remote_refs
from cairn.state.layout import Layout
from cairn.util import clock

LOOK_SECONDS = 60.0  # an ls-remote or a fetch of the ticket's refs
PUSH_SECONDS = 30.0  # one checkpoint's push; a cancelled CI job is killed 10 s after its SIGINT
SCRATCH = "refs/cairn/fetched"  # where a look at the remote's refs fetches them first
KEPT = "refs/cairn/kept"  # a local ref an adoption would have dropped, kept here


@dataclass
class Portable:
    """This process's hold on its ticket on the remote (a ``checkpoint.Side``)."""

    git: Git
    remote: str
    url: str
    ticket: str
    worktree: Path
    refs: TicketRefs
    state_dir: Path
    leases: dict[str, str | None] = field(default_factory=dict)
    generation: int = 1  # the claim: the remote's generation + 1
    branch_from: str | None = None  # the branch HEAD was on, when the run takes cairn/<ticket>
    notes: list[str] = field(default_factory=list)  # what the opening did, for the run's output

    @property
    def claim(self) -> statecommit.Claim:
        return statecommit.Claim(self.generation, 0, f"{socket.gethostname()} pid {os.getpid()}")

    @property
    def branch(self) -> str:
        return self.refs.branch.removeprefix("refs/heads/")

    def push(self, reason: str, *, save: bool) -> checkpoint.Pushed:
        """A checkpoint (``cairn.remote.checkpoint``) within ``PUSH_SECONDS``; the local state
        ref follows what was pushed. Raises refs.Fenced, refs.PushFailed, SaveTimeout."""
        before = self.leases.get(self.refs.state)
        deadline = Deadline(PUSH_SECONDS)
        pushed = checkpoint.checkpoint(self, reason, save=save, deadline=deadline)
        if pushed.state == before:  # nothing to push: is the remote's state still this run's?
            found = remote_refs(self.git, (self.refs.state,), self.remote, deadline)
            if found.get(self.refs.state) != before:
                raise Fenced(f"{self.refs.state} moved on {self.remote}")
        if pushed.state:
            self.git.run(["update-ref", self.refs.state, pushed.state])
        return pushed

    def next_command(self) -> str:
        return f"cairn resume {self.ticket} --remote {self.remote}"


def for_run(repo: Repo, layout: Layout, ticket: str, remote: str, wip_prefix: str) -> Portable:
    """The hold of a new run: refused (BadInput, nothing written) when the remote holds the
    ticket's state of another clone's run, or a ``cairn/<ticket>`` this HEAD does not contain.
    ``take_branch`` then puts the work tree on ``cairn/<ticket>``."""
    side = _open(repo, layout, ticket, remote, wip_prefix)
    found = dict(side.leases)
    state = found.get(side.refs.state)
    if state is not None and state != checkpoint.sha_of(side.git, side.refs.state):
        raise BadInput(
            f"{remote} already holds a run of ticket {ticket} ({_describe(side, state)}); "
            f"continue it: cairn resume {ticket} --remote {remote} (nothing was overwritten)"
        )
    if state is not None:
        side.generation = statecommit.claim_of(side.git, state).generation + 1
    branch = found.get(side.refs.branch)
    if branch is not None and not _contains(side, "HEAD", branch):
        raise BadInput(
            f"{remote} has a branch {side.branch} that this work tree's HEAD does not contain; "
            f"a --remote run pushes there, so start from it (git fetch {remote} {side.branch} && "
            f"git switch {side.branch}) or pick another ticket"
        )
    _on_branch(repo, side)
    return side


def _on_branch(repo: Repo, side: Portable) -> None:
    """Check that the work tree can take ``cairn/<ticket>`` (``take_branch``): it is on it, or
    the branch is absent here or at HEAD. BadInput otherwise."""
    current = repo.current_branch()
    if current != side.branch:
        local = checkpoint.sha_of(side.git, side.refs.branch)
        head = checkpoint.sha_of(side.git, "HEAD")
        if head is None:
            raise BadInput(f"{repo.toplevel} has no commit yet; commit once, then run again")
        if local is not None and local != head:
            raise BadInput(
                f"a branch {side.branch} exists here at {local[:12]}, not at HEAD; switch to it "
                f"(git switch {side.branch}) or delete it, then run again"
            )
        side.branch_from = current or f"detached HEAD {head[:12]}"


def take_branch(side: Portable) -> None:
    """Put the work tree on ``cairn/<ticket>`` (made at HEAD; the files are not touched)."""
    if side.branch_from is None:
        return
    exists = checkpoint.sha_of(side.git, side.refs.branch) is not None
    side.git.run(["switch", "-q", *([] if exists else ["-c"]), side.branch])
    side.notes.append(
        f"working on branch {side.branch} (from {side.branch_from}): the branch {side.remote} "
        "and every other machine know the ticket's work by"
    )


def for_resume(
    repo: Repo,
    layout: Layout,
    ticket: str,
    remote: str,
    wip_prefix: str,
    vet: Callable[[Layout], None] | None = None,
) -> Portable:
    """The hold of a resume: this clone's run when the remote's state is its own (or older, or
    none), else the work tree and the run state rebuilt from the remote (``_adopt``). Refused
    (BadInput, nothing written) when neither has a run, or when this clone has a run of the
    ticket the remote's state does not come from. ``vet`` judges the remote's state before it
    is taken (raising BadInput: a run another machine may still own), given a state root that
    holds only it (``pushed_state``'s)."""
    side = _open(repo, layout, ticket, remote, wip_prefix)
    state = side.leases.get(side.refs.state)
    mine = checkpoint.sha_of(side.git, side.refs.state)
    here = layout.latest_run(ticket) is not None
    if state is None:
        if not here:
            raise BadInput(
                f"{remote} holds no run of ticket {ticket} ({side.refs.state}) and there is "
                f"none here; start one: cairn run PLAN --ticket {ticket} --remote {remote}"
            )
        _on_branch(repo, side)
        return side
    if here and mine is not None and (mine == state or _contains(side, mine, state)):
        _on_branch(repo, side)
        side.generation = statecommit.claim_of(side.git, state).generation + 1
        return side
    _fetch(side)
    described = _describe(side, state)
    if here and (mine is None or not _contains(side, state, mine)):
        raise BadInput(
            f"ticket {ticket} has a run here that is not on {remote}, and {remote} holds "
            f"another ({described}); nothing was overwritten: continue this one without "
            f"--remote (cairn resume {ticket}), or move {layout.ticket_dir(ticket)} away to "
            f"continue {remote}'s"
        )
    if vet is not None:
        vet(_seen(repo, side, state))
    _adopt(side, described)
    side.generation = statecommit.claim_of(side.git, state).generation + 1
    return side


def pushed_state(repo: Repo, layout: Layout, ticket: str, remote: str, wip_prefix: str) -> Layout:
    """A state root holding only what ``remote`` holds of the ticket's run state (``cairn
    catchup --remote``): its state commit checked out under the git directory
    (``<git dir>/cairn-remote/<remote>/``); the work tree and this clone's own state untouched.
    Its ticket directory is empty when the remote holds no run of the ticket."""
    side = _open(repo, layout, ticket, remote, wip_prefix)
    return _seen(repo, side, side.leases.get(side.refs.state))


def _seen(repo: Repo, side: Portable, state: str | None) -> Layout:
    """``pushed_state``'s state root with state commit ``state`` (None: none) checked out."""
    seen = Layout(repo.common_dir / "cairn-remote" / side.remote.replace("/", "_"))
    where = seen.ticket_dir(side.ticket)
    if state is None:
        statecommit.clear(where)
        return seen
    if not _has(side.git, state):
        _fetch(side)
    statecommit.checkout(side.git, state, where)
    return seen


def url_of(repo: Repo, name: str) -> str:
    """The URL of remote ``name``; BadInput when the repository has no such remote."""
    found = repo.git.run(["remote", "get-url", "--", name], check=False) if name else None
    if found is None or not found.ok or not found.text:
        raise BadInput(
            f"--remote {name!r} names no remote of {repo.toplevel}; add it (git remote add "
            f"{name or 'origin'} <url>) or name one of: {_remotes(repo) or 'none yet'}"
        )
    return found.text.strip()


def _remotes(repo: Repo) -> str:
    return ", ".join(repo.git.out(["remote"]).split())


def _open(repo: Repo, layout: Layout, ticket: str, remote: str, wip_prefix: str) -> Portable:
    url = url_of(repo, remote)
    git = repo.git.replace(env={**repo.git.env, **QUIET})
    refs = TicketRefs.of(ticket, wip_prefix)
    side = Portable(git, remote, url, ticket, repo.toplevel, refs, layout.ticket_dir(ticket))
    try:
        found = remote_refs(git, refs.all(), remote, Deadline(LOOK_SECONDS))
    except (GitError, SaveTimeout) as exc:
        raise BadInput(
            f"{remote} ({url}) cannot be reached: {_problem(exc)}; check the URL, the "
            "network and the credentials, or run without --remote"
        ) from None
    side.leases = {ref: found.get(ref) for ref in refs.all()}
    return side


def _problem(exc: Exception) -> str:
    """git's own line of why it failed (``git ls-remote failed: <line>``: the line)."""
    return str(exc).partition(" failed: ")[2] or str(exc)


def _fetch(side: Portable) -> None:
    """The objects of the remote's refs of the ticket, fetched here (through refs under
    ``SCRATCH``, removed at once)."""
    specs = {
        ref: f"{SCRATCH}/{side.ticket}/{kind}"
        for kind, ref in zip(("branch", "wip", "state"), side.refs.all(), strict=True)
        if side.leases.get(ref)
    }
    try:
        fetch(side.git, [f"+{ref}:{local}" for ref, local in specs.items()], side.remote)
    except GitError as exc:
        raise BadInput(
            f"the refs of ticket {side.ticket} could not be fetched from {side.remote}: "
            f"{_problem(exc)}; check the network and the credentials, then run again"
        ) from None
    finally:  # their objects are what was wanted: the refs go at once
        for local in specs.values():
            side.git.run(["update-ref", "-d", local], check=False)


def _describe(side: Portable, state: str) -> str:
    """``run R, generation G, pushed by H at T`` of the remote's state commit ``state``."""
    if not _has(side.git, state):
        _fetch(side)
    claim = statecommit.claim_of(side.git, state)
    when = side.git.out(["log", "-1", "--format=%cI", state]).strip()
    listing = side.git.out(["ls-tree", "--name-only", state]).split()
    runs = sorted(name for name in listing if name[:1].isdigit())
    parts = [f"run {runs[-1]}" if runs else "no run yet", f"generation {claim.generation}"]
    if claim.segment:
        parts.append(f"pushed by {claim.segment}")
    return ", ".join(parts) + (f" at {when}" if when else "")


def _has(git: Git, sha: str) -> bool:
    return git.run(["cat-file", "-e", f"{sha}^{{commit}}"], check=False).ok


def _contains(side: Portable, tip: str, ancestor: str) -> bool:
    """Whether ``tip`` contains ``ancestor`` (fetched first when it is not here)."""
    if not _has(side.git, ancestor):
        _fetch(side)
    args = ["merge-base", "--is-ancestor", ancestor, tip]
    return side.git.run(args, check=False).ok


def _adopt(side: Portable, described: str) -> None:
    """Rebuild this clone's hold on the ticket from the remote: its branch checked out (the work
    tree must be clean), its run state checked out, its snapshot restored when it was taken on
    the branch's tip. A local snapshot ref the remote's does not contain is kept under
    ``KEPT``."""
    git, refs = side.git, side.refs
    status = git.out(["status", "--porcelain", "--untracked-files=normal"])
    if status.strip():
        raise BadInput(
            f"the work tree has uncommitted changes, and continuing {side.remote}'s run of "
            f"{side.ticket} rebuilds it; commit or stash them (or cairn wip save), then run again"
        )
    branch, wip, state = (side.leases.get(ref) for ref in refs.all())
    assert state is not None
    local = checkpoint.sha_of(git, refs.branch)
    if branch is not None and local is not None and not _contains(side, branch, local):
        raise BadInput(
            f"the branch {side.branch} here has commits {side.remote}'s does not; push or move "
            f"them (git branch -m {side.branch} <name>), then run again"
        )
    mine = checkpoint.sha_of(git, refs.wip)
    if wip is not None and mine is not None and not _contains(side, wip, mine):
        stamp = clock.now().strftime("%Y%m%d-%H%M%S")
        git.run(["update-ref", f"{KEPT}/{side.ticket}/wip-{stamp}", mine])
        side.notes.append(f"this clone's snapshots of {side.ticket} kept at {KEPT}/{side.ticket}")
    if branch is not None:
        git.run(["switch", "-q", "-C", side.branch, branch])
    statecommit.checkout(git, state, side.state_dir)
    if wip is not None:
        git.run(["update-ref", refs.wip, wip])
    git.run(["update-ref", refs.state, state])
    restored = wip is not None and checkpoint.restore_snapshot(
        git, side.worktree, side.branch, wip, side.ticket
    )
    side.notes.append(
        f"rebuilt from {side.remote} ({described}): branch {side.branch}"
        + (", the snapshot's files restored" if restored else "")
    )
