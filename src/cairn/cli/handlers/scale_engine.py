"""The temporal engine of ``cairn fleet``: the tickets as Temporal workflows (docs/scale-out.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cairn.cli.handlers import scale

if TYPE_CHECKING:
    from cairn.errors import ExitCode
    from cairn.terms import FleetAction


class Temporal:
    """The temporal engine (``cairn.cli.handlers.engines``): the ticket workflows."""

    def start(
        self,
        once: bool,
        concurrency: int | None,
        json: bool,
        workspace: Path,
        port: int | None,
        host: str | None,
    ) -> ExitCode | int:
        if port is not None:
            from cairn.cli.handlers import scale_status

            return scale_status.start(once, json, workspace, port, host)
        return scale.fleet_start(once, json, workspace)

    def stop(self, tickets: list[str], wait: bool, json: bool, workspace: Path) -> ExitCode | None:
        return scale.fleet_control("stop", tickets, 60.0 if wait else 0.0, json, workspace)

    def control(
        self, action: FleetAction, tickets: list[str], wait: bool, json: bool, workspace: Path
    ) -> ExitCode | None:
        return scale.fleet_control(action, tickets, 60.0 if wait else 0.0, json, workspace)

    def retry(
        self, tickets: list[str], fresh_config: bool, json: bool, workspace: Path
    ) -> ExitCode | None:
        return scale.fleet_retry(tickets, fresh_config, json, workspace)

    def status(self, json: bool, workspace: Path) -> ExitCode | None:
        from cairn.cli.handlers import scale_status

        return scale_status.status(json, workspace)

    def dashboard(
        self, json: bool, workspace: Path, port: int, host: str | None
    ) -> ExitCode | None:
        from cairn.cli.handlers import scale_status

        return scale_status.dashboard(json, workspace, port, host)
