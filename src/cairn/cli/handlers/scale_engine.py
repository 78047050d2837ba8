"""The temporal engine of ``cairn fleet``: the tickets as Temporal workflows (docs/scale-out.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cairn.cli.handlers import scale

if TYPE_CHECKING:
    from cairn.terms import FleetAction


class Temporal:
    """The temporal engine (``cairn.cli.handlers.engines``): every method leaves the process."""

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
            from cairn.cli.handlers import scale_status

            scale_status.start(once, json, workspace, port, host)
        scale.fleet_start(once, json, workspace)

    def stop(self, tickets: list[str], wait: bool, json: bool, workspace: Path) -> None:
        scale.fleet_control("stop", tickets, 60.0 if wait else 0.0, json, workspace)

    def control(
        self, action: FleetAction, tickets: list[str], wait: bool, json: bool, workspace: Path
    ) -> None:
        scale.fleet_control(action, tickets, 60.0 if wait else 0.0, json, workspace)

    def retry(self, tickets: list[str], fresh_config: bool, json: bool, workspace: Path) -> None:
        scale.fleet_retry(tickets, fresh_config, json, workspace)

    def status(self, json: bool, workspace: Path) -> None:
        from cairn.cli.handlers import scale_status

        scale_status.status(json, workspace)

    def dashboard(self, json: bool, workspace: Path, port: int, host: str | None) -> None:
        from cairn.cli.handlers import scale_status

        scale_status.dashboard(json, workspace, port, host)
