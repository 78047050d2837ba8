"""``cairn fleet status``. STAND-IN (helper A): helper C's module replaces this file."""

from __future__ import annotations

from pathlib import Path


def status(json: bool, workspace: Path) -> None:
    raise NotImplementedError("cairn fleet status comes with helper C's branch")
