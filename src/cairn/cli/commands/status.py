"""``cairn status``: one row per ticket with a marker, a snapshot or a run."""

from __future__ import annotations

from pathlib import Path

from cairn.cli.commands.options import Json, Workspace
from cairn.cli.handlers import status as handler
from cairn.cli.output import guarded


@guarded
def status(json: Json = False, workspace: Workspace = Path(".")) -> None:
    """List tickets: state, phase, round, task N/K, age, owner."""
    handler.status(**locals())
