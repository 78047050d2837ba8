"""Trackers feed the fleet supervisor with tickets, chosen by ``fleet.tracker``.

STAND-IN (helper A, branch fleet-sup) of helper B's module; the integrator takes B's version.
"""

from __future__ import annotations

from cairn.config import Config
from cairn.fleet.trackers.base import Candidate, Tracker
from cairn.fleet.trackers.dir import DirTracker
from cairn.git import Repo
from cairn.state.layout import Layout

TRACKERS: dict[str, type[DirTracker]] = {"dir": DirTracker}


def open_tracker(repo: Repo, config: Config, layout: Layout) -> Tracker:
    return TRACKERS[config.fleet.tracker](repo, config, layout)


__all__ = ["TRACKERS", "Candidate", "Tracker", "open_tracker"]
