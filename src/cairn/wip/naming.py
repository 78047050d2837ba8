"""Where a ticket's snapshots live: ``<snapshot.ref_prefix>/<ticket>``. A module of its own so
that readers of snapshots (``catchup``, ``history``, the dashboard) do not load the save."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from cairn.config.records import Config


def wip_ref(config: Config, ticket: str) -> str:
    return f"{config.snapshot.ref_prefix.rstrip('/')}/{ticket}"
