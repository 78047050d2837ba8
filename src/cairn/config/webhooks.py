"""``[fleet] notify`` and ``notify_attention`` entries: a webhook URL, its message format found
from its host (``detect``), or a table ``{url = "…", format = "slack|discord|teams|json"}``.
An entry that is not one is bad input naming it and the formats (docs/fleet.md
"Notifications")."""

from __future__ import annotations

import re
from typing import NamedTuple
from urllib.parse import urlsplit

from msgspec import Struct

from cairn.terms import CHAT_FORMATS, ChatFormat

FORMATS_SAID = ", ".join(CHAT_FORMATS)
# Microsoft Teams' Workflows (Power Automate) webhook hosts: these, and any under these domains.
DISCORD_PATH = re.compile(r"/api/(?:v\d+/)?webhooks/")  # /api/v10/webhooks/{id}/{token}
TEAMS_HOSTS = ("api.powerautomate.com", "flow.microsoft.com")
TEAMS_DOMAINS = (".logic.azure.com", ".environment.api.powerplatform.com")


class NotifyTable(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An entry written as a table: the URL and, to set it rather than detect it, its format."""

    url: str = ""
    format: str | None = None

    def __post_init__(self) -> None:
        if not self.url:
            raise ValueError(
                'a table without url; write {url = "https://…", format = "slack"} '
                f"(formats: {FORMATS_SAID})"
            )
        if self.format is not None and self.format not in CHAT_FORMATS:
            raise ValueError(f"format {self.format!r} is not one of {FORMATS_SAID}")
        if why := url_problem(self.url):
            raise ValueError(why)


NotifyEntry = str | NotifyTable


class Target(NamedTuple):
    url: str
    format: ChatFormat


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a webhook's; None when it can."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return (
            f"{url!r} is not an http(s) URL; give a webhook URL, or a table "
            f'{{url = "https://…", format = "…"}} (formats: {FORMATS_SAID})'
        )
    return None


def detect(url: str) -> ChatFormat:
    """The message format a webhook URL takes, from its host (and Discord's path)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if host == "hooks.slack.com":
        return "slack"
    discord = host in ("discord.com", "discordapp.com") or host.endswith(
        (".discord.com", ".discordapp.com")
    )
    if discord and DISCORD_PATH.match(parts.path):
        return "discord"
    if host in TEAMS_HOSTS or host.endswith(TEAMS_DOMAINS):
        return "teams"
    return "json"


def target(entry: NotifyEntry) -> Target:
    """The URL and the format of ``entry``."""
    if isinstance(entry, str):
        return Target(entry, detect(entry))
    for known in CHAT_FORMATS:
        if entry.format == known:
            return Target(entry.url, known)
    return Target(entry.url, detect(entry.url))


def check(
    notify: list[NotifyEntry], attention: list[NotifyEntry] | None, dashboard: str | None
) -> None:
    """A URL string that is not http(s): a ValueError naming its key and the entry."""
    keyed = [("notify", entry) for entry in notify]
    keyed += [("notify_attention", entry) for entry in attention or []]
    for key, entry in keyed:
        if isinstance(entry, str) and (why := url_problem(entry)):
            raise ValueError(f"{key}: {why}")
    if dashboard is not None and url_problem(dashboard):
        raise ValueError(
            f"dashboard_url: {dashboard!r} is not an http(s) URL; give the dashboard's address "
            "as people reach it, e.g. https://cairn.example.com"
        )
