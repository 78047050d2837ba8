"""The fleet's engines, listed in one explicit table: ``embedded`` runs the tickets on this
machine (``cairn.fleet``), ``temporal`` on Temporal workers (``cairn.scale``,
docs/scale-out.md). Each is one class with the methods of ``Engine``; its module is imported
only when a command chooses it, so the embedded fleet never loads temporalio."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Protocol

from cairn.errors import BadInput, ExitCode
from cairn.terms import FleetAction

ENGINES: dict[str, str] = {
    "embedded": "cairn.cli.handlers.fleet_engine:Embedded",
    "temporal": "cairn.cli.handlers.scale_engine:Temporal",
}


class Engine(Protocol):
    """What the ``cairn fleet`` commands ask of an engine; each returns the command's exit
    code (None: 0)."""

    def start(
        self,
        once: bool,
        concurrency: int | None,
        json: bool,
        workspace: Path,
        port: int | None,
        host: str | None,
    ) -> ExitCode | int: ...

    def stop(
        self, tickets: list[str], wait: bool, json: bool, workspace: Path
    ) -> ExitCode | None: ...

    def control(
        self, action: FleetAction, tickets: list[str], wait: bool, json: bool, workspace: Path
    ) -> ExitCode | None: ...

    def retry(
        self, tickets: list[str], fresh_config: bool, json: bool, workspace: Path
    ) -> ExitCode | None: ...

    def status(self, json: bool, workspace: Path) -> ExitCode | None: ...

    def dashboard(
        self, json: bool, workspace: Path, port: int, host: str | None
    ) -> ExitCode | None: ...


def name_of(asked: str | None, configured: str) -> str:
    """The engine ``--engine`` names, else the configured one; BadInput for an unknown name."""
    engine = asked or configured
    if engine not in ENGINES:
        known = " or ".join(ENGINES)
        raise BadInput(f"--engine {engine!r} is not an engine; give {known}")
    return engine


def configured(asked: str | None, workspace: Path) -> str:
    """The engine ``--engine`` names, else ``[fleet] engine`` of the repository's config."""
    if asked is not None:
        return name_of(asked, "embedded")
    from cairn.config import load
    from cairn.git import Repo

    return name_of(None, load(Repo.discover(workspace).toplevel).fleet.engine)


def engine(asked: str | None, workspace: Path) -> Engine:
    """The engine of the ``cairn fleet`` command run in ``workspace`` with ``--engine asked``."""
    module, _, name = ENGINES[configured(asked, workspace)].partition(":")
    made: Engine = getattr(importlib.import_module(module), name)()
    return made
