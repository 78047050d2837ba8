"""The config's tables of the trackers that read an issue system: ``[fleet.github]`` and
``[fleet.linear]`` (docs/fleet.md). Read as ``cairn.config.records`` reads its tables: unknown
keys refused, strictly."""

from __future__ import annotations

import re

from msgspec import Struct, field

__all__ = ["GitHubConfig", "LinearConfig", "LinearStates"]


class Section(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A table of the config file (as ``cairn.config.records.Section``)."""


_GITHUB_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


class GitHubConfig(Section, frozen=True):
    """``[fleet.github]``: the issues the ``github`` tracker reads (docs/fleet.md)."""

    repo: str | None = None  # "owner/name"
    label: str = "cairn"
    api_url: str = "https://api.github.com"

    def __post_init__(self) -> None:
        if self.repo is not None and not _GITHUB_REPO.fullmatch(self.repo):
            raise ValueError(f"repo {self.repo!r} is not owner/name; give one such as octo/app")
        if not self.label.strip():
            raise ValueError('label is empty; give the issues\' label, e.g. "cairn"')
        if not self.api_url.startswith(("https://", "http://")):
            raise ValueError(
                f"api_url {self.api_url!r} is not an http(s) URL; give one such as "
                "https://github.example.com/api/v3"
            )


_LINEAR_TEAM = re.compile(r"[A-Za-z0-9]{1,16}")  # a Linear team key, such as IDE


class LinearStates(Section, frozen=True):
    """``[fleet.linear.states]``: the workflow state (by name) a ticket's issue moves to when it
    starts, needs review, needs input, completes, fails; None: it stays where it is."""

    started: str | None = "In Progress"
    review: str | None = "In Review"
    input: str | None = "In Review"
    completed: str | None = "Done"
    failed: str | None = None

    def __post_init__(self) -> None:
        for name in ("started", "review", "input", "completed", "failed"):
            value = getattr(self, name)
            if value is not None and not value.strip():
                raise ValueError(
                    f"states.{name} is empty; give a workflow state's name (e.g. "
                    '"In Progress") or remove the key'
                )


class LinearConfig(Section, frozen=True):
    """``[fleet.linear]``: the issues the ``linear`` tracker reads (docs/fleet.md)."""

    team: str | None = None  # the team's key, e.g. "IDE"
    label: str = "cairn"
    states: LinearStates = field(default_factory=LinearStates)
    api_url: str = "https://api.linear.app/graphql"
    branch_url: str | None = None  # "https://…/tree/{branch}"; None: from fleet.remote's URL

    def __post_init__(self) -> None:
        if self.team is not None and not _LINEAR_TEAM.fullmatch(self.team):
            raise ValueError(
                f"team {self.team!r} is not a Linear team key; give the key its issue ids "
                'start with, such as "IDE" for IDE-210'
            )
        if not self.label.strip():
            raise ValueError('label is empty; give the issues\' label, e.g. "cairn"')
        if not self.api_url.startswith(("https://", "http://")):
            raise ValueError(
                f"api_url {self.api_url!r} is not an http(s) URL; give one such as "
                "https://api.linear.app/graphql"
            )
        url = self.branch_url
        web = url is not None and url.startswith(("https://", "http://"))
        if url is not None and (not web or "{branch}" not in url):
            raise ValueError(
                f"branch_url {url!r} is not an http(s) URL holding {{branch}}; give one such "
                "as https://github.com/acme/app/tree/{branch}"
            )
