"""Trackers: where the fleet's tickets come from. ``fleet.tracker`` names one of ``TRACKERS``."""

from __future__ import annotations

from cairn.config import Config
from cairn.fleet.trackers.base import Candidate, Rejected, Tracker
from cairn.fleet.trackers.dir import DirTracker
from cairn.git import Repo
from cairn.state.layout import Layout

TRACKERS: dict[str, type[Tracker]] = {"dir": DirTracker}


def open_tracker(repo: Repo, config: Config, layout: Layout) -> Tracker:
    """The tracker ``fleet.tracker`` names, for ``repo`` (config validation already refused
    any other name)."""
    kind = TRACKERS[config.fleet.tracker]
    if kind is DirTracker:
        return DirTracker(repo, config, layout)
    raise NotImplementedError(config.fleet.tracker)  # pragma: no cover - one tracker so far


__all__ = ["TRACKERS", "Candidate", "DirTracker", "Rejected", "Tracker", "open_tracker"]
