"""The shared git remote: a worker's clone of it, a ticket's refs there, and pushing them with a
lease so an attempt never overwrites refs a newer attempt pushed (fencing)."""

from __future__ import annotations

import fcntl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cairn.errors import CairnError
from cairn.git import Git, base_runner

REMOTE = "origin"  # the name of the shared remote in a worker's clone


class Fenced(CairnError):
    """A push was refused because the remote's refs moved: a newer attempt owns the ticket."""


@dataclass(frozen=True)
class TicketRefs:
    branch: str  # refs/heads/cairn/<ticket>
    wip: str  # refs/cairn/wip/<ticket> (snapshot.ref_prefix)
    state: str  # refs/cairn/state/<ticket>: the ticket's run directory, as a commit

    @classmethod
    def of(cls, ticket: str, wip_prefix: str = "refs/cairn/wip/") -> TicketRefs:
        return cls(
            f"refs/heads/cairn/{ticket}",
            f"{wip_prefix.rstrip('/')}/{ticket}",
            f"refs/cairn/state/{ticket}",
        )

    def all(self) -> tuple[str, str, str]:
        return (self.branch, self.wip, self.state)


@contextmanager
def locked(path: Path, exclusive: bool = True) -> Iterator[None]:
    """An flock on ``path``: exclusive, or shared with other shared holders. A worker's clone
    is held shared by each rebuild (several at once) and exclusively by its creation and its
    garbage collection, which never run beside a rebuild."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def locked_if_free(path: Path) -> Iterator[bool]:
    """An exclusive flock on ``path`` when nobody holds one of any kind: True, else False at
    once (the caller skips its work)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_TICKETS: dict[str, tuple[threading.Lock, int]] = {}
_TICKETS_GUARD = threading.Lock()


@contextmanager
def ticket_locked(key: str) -> Iterator[None]:
    """One holder at a time per ticket of a worker root (an attempt's rebuild or cleanup and a
    newer attempt's on the same worker). In-process: one worker owns a root (its flock)."""
    with _TICKETS_GUARD:
        lock, users = _TICKETS.get(key, (threading.Lock(), 0))
        _TICKETS[key] = (lock, users + 1)
    try:
        with lock:
            yield
    finally:
        with _TICKETS_GUARD:
            lock, users = _TICKETS[key]
            if users == 1:
                del _TICKETS[key]
            else:
                _TICKETS[key] = (lock, users - 1)


def ensure_clone(url: str, clone: Path) -> Git:
    """The worker's clone of ``url`` at ``clone`` (made on first use), as a git runner."""
    if not (clone / ".git").is_dir():
        clone.parent.mkdir(parents=True, exist_ok=True)
        base_runner(clone.parent).run(["clone", "-q", "--origin", REMOTE, "--", url, str(clone)])
    return base_runner(clone)


def remote_refs(git: Git, refs: tuple[str, ...]) -> dict[str, str]:
    """The shas of those of ``refs`` the remote has."""
    text = git.out(["ls-remote", REMOTE, *refs])
    found: dict[str, str] = {}
    for line in text.splitlines():
        sha, _, name = line.partition("\t")
        if name in refs:
            found[name] = sha
    return found


def fetch(git: Git, refspecs: list[str]) -> None:
    if refspecs:
        # several rebuilds fetch into one clone at once: no shared FETCH_HEAD to fight over
        git.run(["fetch", "-q", "--no-tags", "--no-write-fetch-head", REMOTE, *refspecs])


def push(git: Git, updates: dict[str, str], leases: dict[str, str | None]) -> None:
    """Set each ref of ``updates`` on the remote to its sha, all or none, only where the remote
    still holds what ``leases`` says (None: the ref must not exist). Raises Fenced otherwise."""
    args = ["push", "--porcelain", "--atomic", REMOTE]
    for ref in updates:
        args.append(f"--force-with-lease={ref}:{leases.get(ref) or ''}")
    args += [f"{sha}:{ref}" for ref, sha in updates.items()]
    result = git.run(args, check=False)
    if not result.ok:
        text = (result.stdout + result.stderr).decode(errors="replace")
        if "stale info" in text or "rejected" in text or "atomic" in text:
            raise Fenced(f"the remote's refs moved (a newer attempt owns them): {text.strip()}")
        raise CairnError(f"git push to the shared remote failed: {text.strip()[-500:]}")
