"""Which ``cairn.toml`` a retried ticket's run uses, and ``cairn fleet retry --fresh-config``:
the base branch's ``cairn.toml`` committed onto the ticket branch on the shared remote, so the
resumed run (which reads the configuration of its worktree, the ticket branch) takes it. Plain
git in the user's clone: the commit is made with a scratch index, the user's work tree and
branches are not touched, and it is pushed with a lease on the branch tip it was made on."""

from __future__ import annotations

import tempfile
from pathlib import Path

from cairn.defaults import CONFIG_FILE
from cairn.errors import BadInput
from cairn.fleet.fleetstatus import SHORT_SHA
from cairn.git import Repo
from cairn.remote.refs import TicketRefs


def remote_sha(repo: Repo, remote: str, ref: str) -> str | None:
    listed = repo.git.run(["ls-remote", "--", remote, ref], check=False)
    for line in listed.text.splitlines() if listed.ok else []:
        sha, _, name = line.partition("\t")
        if name == ref:
            return sha
    return None


def check(repo: Repo, remote: str, base: str, refs: TicketRefs, ticket: str) -> None:
    """Refuse ``--fresh-config`` when the ticket's snapshot holds uncommitted work on its
    branch tip: a new commit under it would leave the snapshot unrestored."""
    from cairn.wip.meta import SnapshotMeta

    tip, wip = remote_sha(repo, remote, refs.branch), remote_sha(repo, remote, refs.wip)
    if tip is None or wip is None:
        return
    _fetch(repo, remote, [refs.wip])
    meta = SnapshotMeta.parse(repo.git.out(["log", "-1", "--format=%B", wip]))
    if meta is not None and meta.base == tip and meta.files_changed > 0:
        raise BadInput(
            f"ticket {ticket} has uncommitted work in its snapshot {refs.wip} that a new "
            f"commit would leave behind; retry it without --fresh-config, or commit {base}'s "
            f"{CONFIG_FILE} onto cairn/{ticket} once it is committed"
        )


def used(repo: Repo, remote: str, base: str, refs: TicketRefs, ticket: str) -> str:
    """Which configuration the ticket's next run reads, in words."""
    tip = remote_sha(repo, remote, refs.branch)
    if tip is None:
        return f"{CONFIG_FILE} of {base} (the ticket has no branch yet: it starts there)"
    fresh = f"(--fresh-config takes {base}'s)"
    return f"{CONFIG_FILE} of cairn/{ticket} at {tip[:SHORT_SHA]} {fresh}"


def take(repo: Repo, remote: str, base: str, refs: TicketRefs, ticket: str) -> str:
    """Commit ``base``'s ``cairn.toml`` onto the ticket branch on ``remote``; what was done, in
    words."""
    tip = remote_sha(repo, remote, refs.branch)
    if tip is None:
        return f"{CONFIG_FILE} of {base} (the ticket has no branch yet: it starts there)"
    base_ref = f"refs/heads/{base}"
    _fetch(repo, remote, [refs.branch, base_ref])
    base_sha = remote_sha(repo, remote, base_ref)
    blob = repo.git.run(["rev-parse", "--verify", "-q", f"{base_sha}:{CONFIG_FILE}"], check=False)
    if base_sha is None or not blob.text:
        raise BadInput(
            f"{base} has no {CONFIG_FILE} on {remote} to take; push one there or retry "
            "without --fresh-config"
        )
    with tempfile.TemporaryDirectory(prefix="cairn-fresh-config-") as scratch:
        git = repo.git.with_index(Path(scratch) / "index")
        git.run(["read-tree", tip])
        git.run(["update-index", "--add", "--cacheinfo", f"100644,{blob.text},{CONFIG_FILE}"])
        tree = git.out(["write-tree"]).strip()
    if tree == repo.git.out(["rev-parse", f"{tip}^{{tree}}"]).strip():
        return f"{CONFIG_FILE} of cairn/{ticket} at {tip[:SHORT_SHA]}, the same as {base}'s"
    message = (
        f"cairn: take {base}'s {CONFIG_FILE} for the retry of {ticket}\n\n"
        "cairn fleet retry --fresh-config: the resumed run reads this configuration.\n"
    )
    sha = repo.git.out(["commit-tree", tree, "-p", tip, "-m", message]).strip()
    pushed = repo.git.run(
        [
            "push",
            "-q",
            f"--force-with-lease={refs.branch}:{tip}",
            "--",
            remote,
            f"{sha}:{refs.branch}",
        ],
        check=False,
    )
    if not pushed.ok:
        raise BadInput(
            f"cannot push cairn/{ticket} to {remote} ({pushed.error_line[:200]}); "
            "check the remote and retry"
        )
    return f"{base}'s {CONFIG_FILE} committed onto cairn/{ticket} as {sha[:SHORT_SHA]}"


def _fetch(repo: Repo, remote: str, refs: list[str]) -> None:
    """The objects of ``refs`` into the user's clone (FETCH_HEAD only: no ref of theirs moves)."""
    done = repo.git.run(["fetch", "-q", "--no-tags", "--", remote, *refs], check=False)
    if not done.ok:
        raise BadInput(f"cannot fetch from {remote} ({done.error_line[:200]}); check it")
