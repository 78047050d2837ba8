"""Configuration: ``cairn.toml`` at the repo root, or ``[tool.cairn]`` in ``pyproject.toml``.

Every key has a default, so no file is needed. An unknown key or an invalid value is bad input
(exit 2) and the message names the key and the file.

This module finds and loads the file (``load``; ``found``, which the layout uses, builds nothing
when there is no file). The records (``Config`` and its sections) and their checks live in
``cairn.config.records`` and are loaded on first use: they are named here too.
"""

from __future__ import annotations

import os

from cairn.defaults import CONFIG_FILE, CONFIG_FILES

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from cairn.config.records import DEFAULT_MAX_COST_USD as DEFAULT_MAX_COST_USD
    from cairn.config.records import DEFAULT_PRESSURE_TURNS as DEFAULT_PRESSURE_TURNS
    from cairn.config.records import DEFAULT_ROLES as DEFAULT_ROLES
    from cairn.config.records import FLEET_ID as FLEET_ID
    from cairn.config.records import AgentConfig as AgentConfig
    from cairn.config.records import Config as Config
    from cairn.config.records import Duration as Duration
    from cairn.config.records import FleetConfig as FleetConfig
    from cairn.config.records import FleetHooks as FleetHooks
    from cairn.config.records import GitHubConfig as GitHubConfig
    from cairn.config.records import LoopConfig as LoopConfig
    from cairn.config.records import MarkerConfig as MarkerConfig
    from cairn.config.records import MiB as MiB
    from cairn.config.records import Ms as Ms
    from cairn.config.records import RoleConfig as RoleConfig
    from cairn.config.records import Seconds as Seconds
    from cairn.config.records import Section as Section
    from cairn.config.records import Size as Size
    from cairn.config.records import SnapshotConfig as SnapshotConfig
    from cairn.config.records import TemporalConfig as TemporalConfig
    from cairn.config.records import pressure_for as pressure_for
    from cairn.config.records import pressure_given as pressure_given

MAX_CONFIG_BYTES = 1024 * 1024
RECORDS = frozenset(
    {
        "DEFAULT_MAX_COST_USD",
        "DEFAULT_PRESSURE_TURNS",
        "DEFAULT_ROLES",
        "FLEET_ID",
        "AgentConfig",
        "Config",
        "Duration",
        "FleetConfig",
        "FleetHooks",
        "GitHubConfig",
        "LoopConfig",
        "MarkerConfig",
        "MiB",
        "Ms",
        "RoleConfig",
        "Seconds",
        "Section",
        "Size",
        "SnapshotConfig",
        "TemporalConfig",
        "pressure_for",
        "pressure_given",
    }
)  # in cairn.config.records


def __getattr__(name: str) -> Any:
    if name in RECORDS:
        from cairn.config import records

        return getattr(records, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load(toplevel: Path, warnings: list[str] | None = None) -> Config:
    """The effective config for the work tree at ``toplevel``; without a file, the defaults.
    A file that does not load is bad input, or, given ``warnings``, the defaults and a line
    there saying so: what saves or recovers work (snapshots, restores, catch-up, status) never
    depends on the config."""
    config = found(toplevel, warnings)
    if config is None:
        from cairn.config.records import Config

        return Config()
    return config


def found(toplevel: Path, warnings: list[str] | None = None) -> Config | None:
    """``load``, but None when no file holds a config (two stats: nothing parsed, no record
    built), for what needs no setting then (the layout: the default state root)."""
    from cairn.errors import BadInput

    try:
        table = _table(toplevel)
        if table is None:
            return None
        from cairn.config.records import validate

        return validate(*table)
    except BadInput as exc:
        if warnings is None:
            raise
        warnings.append(f"{exc} (the default settings were used)")
        from cairn.config.records import Config

        return Config()


def _table(toplevel: Path) -> tuple[dict[str, Any], Path] | None:
    """The config file's table and its path; None when there is no config file."""
    path = toplevel / CONFIG_FILE
    if os.path.lexists(path):  # a directory or a dangling link is reported, not skipped
        return _read_table(path), path
    path = toplevel / CONFIG_FILES[1]
    if not os.path.lexists(path):
        return None
    tool = _read_table(path).get("tool", {})
    if not isinstance(tool, dict) or "cairn" not in tool:
        return None
    data = tool["cairn"]
    if not isinstance(data, dict):
        from cairn.errors import BadInput

        raise BadInput(f"{path}: [tool.cairn] must be a table; put its keys under [tool.cairn]")
    return data, path


def _read_table(path: Path) -> dict[str, Any]:
    from cairn.util.tomlfile import read_table

    return read_table(path, MAX_CONFIG_BYTES)
