"""The embedded engine of ``cairn fleet``: the supervisor and the files on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cairn.cli.handlers import fleet_run

if TYPE_CHECKING:
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
    ) -> int:
        if port is not None:
            from cairn.cli.handlers import fleet_dashboard

            return fleet_dashboard.start(once, concurrency, json, workspace, port, host)
        return fleet_run.start(once, concurrency, json, workspace)

    def stop(self, tickets: list[str], wait: bool, json: bool, workspace: Path) -> None:
        if tickets:
            self.control("stop", tickets, wait, json, workspace)
        else:
            fleet_run.stop(wait, json, workspace)

    def control(
        self, action: FleetAction, tickets: list[str], wait: bool, json: bool, workspace: Path
    ) -> None:
        from cairn.cli.handlers import fleet_control

        fleet_control.control(action, tickets, wait, json, workspace)

    def retry(self, tickets: list[str], fresh_config: bool, json: bool, workspace: Path) -> None:
        from cairn.cli.handlers import fleet_control

        fleet_control.retry(tickets, fresh_config, json, workspace)

    def status(self, json: bool, workspace: Path) -> None:
        from cairn.cli.handlers import fleet_status

        fleet_status.embedded(json, workspace)

    def dashboard(self, json: bool, workspace: Path, port: int, host: str | None) -> None:
        from cairn.cli.handlers import fleet_dashboard

        fleet_dashboard.dashboard(json, workspace, port, host)
