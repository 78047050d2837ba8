"""``cairn fleet prune``. STAND-IN (helper A): helper B's module replaces this file."""

from __future__ import annotations

from pathlib import Path


def prune(
    ticket: str | None, all_finished: bool, dry_run: bool, json: bool, workspace: Path
) -> None:
    raise NotImplementedError("cairn fleet prune comes with helper B's branch")
