"""Configuration: ``cairn.toml`` at the repo root, or ``[tool.cairn]`` in ``pyproject.toml``.

Every key has a default, so no file is needed. An unknown key or an invalid value is bad input
(exit 2) and the message names the key and the file.

This module finds and loads the file (``load``; ``found``, which the layout uses, builds nothing
when there is no file). The records (``Config`` and its sections) and their checks are
``cairn.config.records``, imported from there, and loaded only when a file exists or a command
reads a setting.
"""

from __future__ import annotations

import os

from cairn.defaults import CONFIG_FILE, CONFIG_FILES

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from cairn.config.records import Config

MAX_CONFIG_BYTES = 1024 * 1024


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
