"""Keeping snapshots bounded and durable: ``prune`` old tickets, ``push`` refs to a remote.

Neither runs ``git gc``: pruned snapshots become unreachable and the user's own gc reclaims
them after ``gc.pruneExpire``.
"""

from __future__ import annotations

import time
from pathlib import Path

from cairn.config.records import Config
from cairn.errors import BadInput, CairnError
from cairn.git import Repo
from cairn.wip.history import info, open_repo, ticket_refs
from cairn.wip.models import PrunedTicket, PruneResult, PushResult
from cairn.wip.objects import read_commits


def disk_usage(repo: Repo, config: Config) -> int:
    """Bytes of objects reachable only from snapshot refs."""
    prefix = config.snapshot.ref_prefix.rstrip("/")
    result = repo.git.run(
        [
            "rev-list",
            "--objects",
            "--disk-usage",
            f"--glob={prefix}/*",
            "--not",
            "--branches",
            "--tags",
            "--remotes",
        ],
        check=False,
    )
    return int(result.text) if result.ok and result.text.isdigit() else 0


def prune(
    workspace: Path | str = ".",
    older_than: float = 14 * 86400,
    dry_run: bool = False,
    config: Config | None = None,
) -> PruneResult:
    """Delete the refs of tickets whose latest snapshot is older than ``older_than`` seconds."""
    if older_than < 0:
        raise BadInput("--older-than must not be negative")
    repo, config = open_repo(workspace, config)
    refs = ticket_refs(repo, config)
    names = sorted(refs)
    tips = read_commits(repo.git, [refs[n] for n in names])
    before = disk_usage(repo, config)
    cutoff = time.time() - older_than
    pruned: list[PrunedTicket] = []
    for name, tip in zip(names, tips, strict=True):
        if tip is None or tip.committer_time >= cutoff:
            continue
        snap = info(tip, refs[name])
        pruned.append(
            PrunedTicket(
                ticket=name,
                ref=refs[name],
                commit=tip.oid,
                last_snapshot=snap.time if snap else "",
            )
        )
        if not dry_run:
            repo.git.run(
                ["update-ref", "-m", "cairn wip prune", "-d", refs[name], tip.oid], critical=True
            )
            _drop_mirror_branch(repo, name, tip.oid)
    after = before if dry_run else disk_usage(repo, config)
    return PruneResult(
        dry_run=dry_run,
        older_than_seconds=older_than,
        pruned=pruned,
        kept=len(names) - len(pruned),
        disk_bytes_before=before,
        disk_bytes_after=after,
    )


def _drop_mirror_branch(repo: Repo, ticket: str, tip: str) -> None:
    """The optional ``cairn/wip/<ticket>`` branch goes too, but only if it still names the tip."""
    branch = f"refs/heads/cairn/wip/{ticket}"
    repo.git.run(["update-ref", "-d", branch, tip], check=False, critical=True)


def push(
    workspace: Path | str = ".",
    remote: str = "origin",
    force: bool = False,
    config: Config | None = None,
) -> PushResult:
    """Push every snapshot ref to ``remote`` under the same names."""
    if not remote or remote.startswith("-") or any(not c.isprintable() for c in remote):
        raise BadInput(f"{remote!r} is not a remote name or URL")
    repo, config = open_repo(workspace, config)
    refs = ticket_refs(repo, config)
    prefix = config.snapshot.ref_prefix.rstrip("/")
    refspec = f"{'+' if force else ''}{prefix}/*:{prefix}/*"
    if not refs:
        return PushResult(remote=remote, refspec=refspec, pushed=[], up_to_date=[])
    result = repo.git.run(["push", "--porcelain", "--no-verify", remote, refspec], check=False)
    lines = result.stdout.decode("utf-8", "replace").splitlines()
    flagged = [line.split("\t") for line in lines if line[1:2] == "\t" and line.count("\t") >= 2]
    rejected = [f"{fields[1].split(':')[0]} {fields[2]}" for fields in flagged if fields[0] == "!"]
    if rejected:
        hint = "" if force else "; pass --force if the remote chain should be replaced"
        raise CairnError(f"push to {remote} rejected {', '.join(rejected)}{hint}")
    if not result.ok:
        raise CairnError(f"push to {remote} failed: {result.error_line}")
    return PushResult(
        remote=remote,
        refspec=refspec,
        pushed=[f[1].split(":")[0] for f in flagged if f[0] in (" ", "+", "*")],
        up_to_date=[f[1].split(":")[0] for f in flagged if f[0] == "="],
    )
