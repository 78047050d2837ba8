"""The snapshot engine's public API, used by the CLI and by the orchestrator.

save(workspace, ticket, reason, timeout) -> SaveResult
list_snapshots(workspace, ticket) -> [SnapshotInfo]
show(workspace, spec) / diff(workspace, a, b)
restore(workspace, spec, to=None, dry_run=False, force=False) -> RestoreResult
prune(workspace, older_than) / push(workspace, remote)

The names below live in the package's modules (``saving``, ``history``, ``restoring``,
``retention``, ``models``) and are loaded on first use, so that importing a light module of the
package (``cairn.wip.naming``, ``cairn.wip.proof``) does not load the engine.
"""

from __future__ import annotations

from cairn.util.lazy import names_from

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from cairn.wip.history import diff as diff
    from cairn.wip.history import list_snapshots as list_snapshots
    from cairn.wip.history import show as show
    from cairn.wip.models import PruneResult as PruneResult
    from cairn.wip.models import PushResult as PushResult
    from cairn.wip.models import RestoreResult as RestoreResult
    from cairn.wip.models import SaveResult as SaveResult
    from cairn.wip.models import ShowResult as ShowResult
    from cairn.wip.models import Skipped as Skipped
    from cairn.wip.models import SnapshotInfo as SnapshotInfo
    from cairn.wip.restoring import restore as restore
    from cairn.wip.retention import prune as prune
    from cairn.wip.retention import push as push
    from cairn.wip.saving import save as save

# where each name lives: loaded on first use
_HOMES = {
    "PruneResult": "models",
    "PushResult": "models",
    "RestoreResult": "models",
    "SaveResult": "models",
    "ShowResult": "models",
    "Skipped": "models",
    "SnapshotInfo": "models",
    "diff": "history",
    "list_snapshots": "history",
    "show": "history",
    "prune": "retention",
    "push": "retention",
    "restore": "restoring",
    "save": "saving",
}

__all__ = sorted(_HOMES)


__getattr__ = names_from(__name__, _HOMES)
