"""Trackers: where the fleet's tickets come from. ``fleet.tracker`` names one of ``TRACKERS``
(docs/fleet.md: how to add one)."""

from __future__ import annotations

from collections.abc import Callable

from cairn.config.records import Config
from cairn.fleet.trackers.base import Candidate, Rejected, Tracker
from cairn.fleet.trackers.dir import DirTracker
from cairn.fleet.trackers.github import GitHubTracker
from cairn.fleet.trackers.linear import LinearTracker
from cairn.git import Repo
from cairn.state.layout import Layout

TRACKERS: dict[str, Callable[[Repo, Config, Layout], Tracker]] = {
    "dir": DirTracker,
    "github": GitHubTracker,
    "linear": LinearTracker,
}


def open_tracker(repo: Repo, config: Config, layout: Layout) -> Tracker:
    """The tracker ``fleet.tracker`` names, for ``repo`` (config validation already refused
    any other name)."""
    return TRACKERS[config.fleet.tracker](repo, config, layout)


__all__ = [
    "TRACKERS",
    "Candidate",
    "DirTracker",
    "GitHubTracker",
    "LinearTracker",
    "Rejected",
    "Tracker",
    "open_tracker",
]
