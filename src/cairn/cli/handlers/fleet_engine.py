"""The embedded engine of ``cairn fleet``: the supervisor and the files on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cairn.cli.handlers import fleet_run

if TYPE_CHECKING:
    from cairn.errors import ExitCode
    from cairn.terms import FleetAction


class Embedded:
    """The embedded engine (``cairn.cli.handlers.engines``): the supervisor on this machine."""

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
            from cairn.cli.handlers import fleet_dashboard

            return fleet_dashboard.start(once, concurrency, json, workspace, port, host)
        return fleet_run.start(once, concurrency, json, workspace)

    def stop(self, tickets: list[str], wait: bool, json: bool, workspace: Path) -> ExitCode | None:
        if tickets:
            return self.control("stop", tickets, wait, json, workspace)
        fleet_run.stop(wait, json, workspace)
        return None

    def control(
        self, action: FleetAction, tickets: list[str], wait: bool, json: bool, workspace: Path
    ) -> ExitCode | None:
        from cairn.cli.handlers import fleet_control

        fleet_control.control(action, tickets, wait, json, workspace)
        return None

    def retry(
        self, tickets: list[str], fresh_config: bool, json: bool, workspace: Path
    ) -> ExitCode | None:
        from cairn.cli.handlers import fleet_control

        fleet_control.retry(tickets, fresh_config, json, workspace)
        return None

    def status(self, json: bool, workspace: Path) -> ExitCode | None:
        from cairn.cli.handlers import fleet_status

        return fleet_status.embedded(json, workspace)

    def dashboard(
        self, json: bool, workspace: Path, port: int, host: str | None
    ) -> ExitCode | None:
        from cairn.cli.handlers import fleet_dashboard

        fleet_dashboard.dashboard(json, workspace, port, host)
        return None
