"""The snapshot engine's public API, used by the CLI and by the orchestrator.

save(workspace, ticket, reason, timeout) -> SaveResult
list_snapshots(workspace, ticket) -> [SnapshotInfo]
show(workspace, spec) / diff(workspace, a, b)
restore(workspace, spec, to=None, dry_run=False, force=False) -> RestoreResult
prune(workspace, older_than) / push(workspace, remote)
"""

from cairn.wip.history import diff, list_snapshots, show
from cairn.wip.models import (
    PruneResult,
    PushResult,
    RestoreResult,
    SaveResult,
    ShowResult,
    Skipped,
    SnapshotInfo,
)
from cairn.wip.restore import restore
from cairn.wip.retention import prune, push
from cairn.wip.save import save

__all__ = [
    "PruneResult",
    "PushResult",
    "RestoreResult",
    "SaveResult",
    "ShowResult",
    "Skipped",
    "SnapshotInfo",
    "diff",
    "list_snapshots",
    "prune",
    "push",
    "restore",
    "save",
    "show",
]
