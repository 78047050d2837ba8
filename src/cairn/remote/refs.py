"""A ticket's refs on a shared remote, and pushing them with a lease so an attempt never
overwrites refs a newer attempt pushed (fencing)."""

from __future__ import annotations

from dataclasses import dataclass

from cairn.errors import CairnError
from cairn.git import Git

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cairn.git.process import Deadline

REMOTE = "origin"  # the name of the shared remote in a worker's clone
QUIET = {"GIT_TERMINAL_PROMPT": "0"}  # a remote that asks for a password fails, never waits


class Fenced(CairnError):
    """A push was refused because the remote's refs moved: a newer attempt owns the ticket."""


class PushFailed(CairnError):
    """A push that did not reach the remote (the network, credentials, the remote's disk)."""


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


def remote_refs(
    git: Git, refs: tuple[str, ...], remote: str = REMOTE, deadline: Deadline | None = None
) -> dict[str, str]:
    """The shas of those of ``refs`` the remote has."""
    text = git.run(["ls-remote", "--", remote, *refs], deadline=deadline).text
    found: dict[str, str] = {}
    for line in text.splitlines():
        sha, _, name = line.partition("\t")
        if name in refs:
            found[name] = sha
    return found


def fetch(git: Git, refspecs: list[str], remote: str = REMOTE) -> None:
    if refspecs:
        # several rebuilds fetch into one clone at once: no shared FETCH_HEAD to fight over
        git.run(["fetch", "-q", "--no-tags", "--no-write-fetch-head", remote, *refspecs])


def push(
    git: Git,
    updates: dict[str, str],
    leases: dict[str, str | None],
    remote: str = REMOTE,
    deadline: Deadline | None = None,
) -> None:
    """Set each ref of ``updates`` on ``remote`` to its sha, all or none, only where the remote
    still holds what ``leases`` says (None: the ref must not exist). Raises Fenced otherwise;
    SaveTimeout when ``deadline`` runs out first."""
    args = ["push", "--porcelain", "--atomic", remote]
    for ref in updates:
        args.append(f"--force-with-lease={ref}:{leases.get(ref) or ''}")
    args += [f"{sha}:{ref}" for ref, sha in updates.items()]
    result = git.run(args, check=False, deadline=deadline)
    if not result.ok:
        text = (result.stdout + result.stderr).decode(errors="replace")
        if "stale info" in text:  # a lease that no longer holds; other refs: atomic push failed
            raise Fenced(f"the remote's refs moved (a newer attempt owns them): {text.strip()}")
        raise PushFailed(f"git push to {remote} failed: {text.strip()[-500:]}")
