"""Typed results of the snapshot API; each serialises to the documented ``--json`` shape."""

from __future__ import annotations

from typing import Literal

from msgspec import Struct, field

from cairn.wip.proof import unchanged_line

SkipReason = Literal["too_large", "nested_repo", "over_budget", "special_file"]


class Skipped(Struct, frozen=True, kw_only=True):
    """An untracked path the snapshot does not hold. ``files`` is set for skipped directories."""

    path: str
    reason: SkipReason
    bytes: int | None = None
    files: int | None = None


class SaveResult(Struct, frozen=True, kw_only=True):
    ref: str
    commit: str | None
    created: bool
    base: str | None
    branch: str | None
    files_changed: int
    skipped: list[Skipped]
    elapsed_ms: int
    ticket: str
    reason: str
    conflicted: list[str] = field(default_factory=list)
    previous: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        if self.created:
            from cairn.util.text import counted

            files = counted(self.files_changed, "changed file")
            return f"saved {files} to {self.ref} ({self.commit:.12})"
        return unchanged_line(self.ref, self.commit)


class SnapshotInfo(Struct, frozen=True, kw_only=True):
    """One snapshot commit, read back from its trailers."""

    ticket: str
    ref: str | None
    commit: str
    tree: str
    time: str
    reason: str
    base: str | None
    branch: str | None
    index_tree: str | None
    files_changed: int
    skipped_count: int
    skipped: list[Skipped]
    conflicted: list[str]
    run: str | None
    seq: int
    cairn_version: str


class DiffStat(Struct, frozen=True, kw_only=True):
    path: str
    added: int | None
    deleted: int | None


class ShowResult(Struct, frozen=True, kw_only=True):
    snapshot: SnapshotInfo
    against: str
    diffstat: list[DiffStat]


class RestoreResult(Struct, frozen=True, kw_only=True):
    commit: str
    target: str
    to: str | None
    dry_run: bool
    safety_commit: str | None
    written: list[str]
    deleted: list[str]
    obstacles: list[str]
    skipped_in_snapshot: list[Skipped]
    warnings: list[str] = field(default_factory=list)


class PrunedTicket(Struct, frozen=True, kw_only=True):
    ticket: str
    ref: str
    commit: str
    last_snapshot: str


class PruneResult(Struct, frozen=True, kw_only=True):
    dry_run: bool
    older_than_seconds: float
    pruned: list[PrunedTicket]
    kept: int
    disk_bytes_before: int
    disk_bytes_after: int


class PushResult(Struct, frozen=True, kw_only=True):
    remote: str
    refspec: str
    pushed: list[str]
    up_to_date: list[str]
