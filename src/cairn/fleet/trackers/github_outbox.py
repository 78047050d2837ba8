"""What the ``github`` tracker tells GitHub, through the outbox (``cairn.fleet.outbox``): each
message put with its idempotency key, sent in order, and, when its outcome is unknown, looked
for first — a comment or a review by the key hidden in it, a pull request by its branch — and
adopted when it is there. ``GitHubTracker`` is one (``cairn.fleet.trackers.github``).
"""

from __future__ import annotations

import re
import time
from typing import Any

from cairn.config.records import Config
from cairn.faults import crash_at
from cairn.fleet import pulls
from cairn.fleet.facts import push_branch
from cairn.fleet.github_api import GitHubAPI, GitHubError, RateLimited
from cairn.fleet.outbox import Outbox, hidden
from cairn.fleet.trackers import texts
from cairn.git import Repo
from cairn.remote.refs import PushFailed
from cairn.state.layout import Layout

TICKET_ID = re.compile(r"GH-(\d+)")


def issue_number(ticket: str) -> int:
    match = TICKET_ID.fullmatch(ticket)
    if match is None:
        raise ValueError(f"{ticket!r} is not a GitHub ticket (GH-<number>)")
    return int(match.group(1))


class Sending:
    """The tracker's side that sends; its owner sets these."""

    repo: Repo
    config: Config
    layout: Layout
    api: GitHubAPI
    outbox: Outbox
    warnings: list[str]
    blocked_until: float  # a rate limit: no call before this (epoch seconds)
    _base: str | None  # the repository's default branch, once asked
    _key: str | None  # the transition being told

    # --- the outbox ----------------------------------------------------------------------------

    def _warn(self, message: str) -> None:
        self.warnings.append(f"github: {message}")

    def _told(self) -> None:  # the transition's messages are in the outbox: now sent
        self._key = None
        crash_at("fleet.told")
        self.flush()

    def flush(self) -> None:
        """Send what the outbox holds (``Outbox.flush``): in order, a failing ticket's later
        messages held back, nothing while a rate limit lasts, an unknown outcome looked for."""
        self.outbox.flush(
            self._send,
            (GitHubError, PushFailed),
            blocked=lambda: time.time() < self.blocked_until,
            held=self._held,
            warn=self._warn,
        )

    def _send(self, message: dict[str, Any], looked: bool) -> None:
        """Send ``message``; when ``looked`` (its outcome is unknown), only if it is not there
        already. Labels are set by name and a pull request found by its branch either way."""
        number = issue_number(message["ticket"])
        kind = message["kind"]
        if kind == "comment":
            if looked and self._posted(self.api.comments(number), message):
                self._warn(f"a comment on {message['ticket']} had been posted; adopted")
                return
            self.api.comment(number, message["body"])
            crash_at("fleet.comment")
        elif kind == "labels":
            if message["add"]:
                self.api.add_labels(number, message["add"])
            for label in message["remove"]:
                self.api.remove_label(number, label)
            crash_at("fleet.labels")
        elif kind == "pull_request":
            if self.config.fleet.pushes:
                push_branch(self.repo, self.config, message["ticket"])
                crash_at("fleet.push")
            pull = self.api.find_pull(message["branch"])
            if pull is None:
                if self._base is None:
                    self._base = self.api.default_branch()
                ticket = message["ticket"]
                title = message["title"] or self.api.issue(issue_number(ticket)).get("title")
                pull = self.api.open_pull(
                    title=str(title or f"cairn/{ticket}"),
                    head=message["branch"],
                    base=self._base,
                    body=message["body"],
                    draft=bool(message["draft"]),
                )
            pulls.record(self.layout, message["ticket"], pull)
            crash_at("fleet.pull_request")
        elif kind == "approve":
            pull = self.api.find_pull(message["branch"])
            if pull is None or not isinstance(pull.get("number"), int):
                self._warn(
                    f"{message['ticket']} was approved, but {message['branch']} has no pull "
                    "request to approve on GitHub"
                )
                return
            if looked and self._posted(self.api.reviews(pull["number"]), message):
                self._warn(f"the approval of {message['ticket']} had been posted; adopted")
                return
            self.api.approve_pull(pull["number"], message["body"])
            crash_at("fleet.approve")

    @staticmethod
    def _posted(found: list[dict[str, Any]], message: dict[str, Any]) -> bool:
        """Whether one of ``found`` (comments, reviews) carries ``message``'s key."""
        key = message.get("key")
        if not isinstance(key, str):
            return False
        mark = hidden(key)
        return any(isinstance(c.get("body"), str) and mark in c["body"] for c in found)

    def _put(self, ticket: str, kind: str, **fields: Any) -> None:
        """Keep a message of the transition being told (its key: the transition's and
        ``kind``); a comment or review carries its key hidden at its end."""
        if self._key is not None:
            fields["key"] = f"{self._key}:{kind}"
            if "body" in fields and kind in ("comment", "approve"):
                fields["body"] = f"{fields['body']}\n{hidden(fields['key'])}"
        self.outbox.put({"ticket": ticket, "kind": kind, **fields})

    def _comment(self, ticket: str, text: str) -> None:
        self._put(ticket, "comment", body=texts.signed(text))

    def _labels(self, ticket: str, *, add: list[str], remove: list[str]) -> None:
        self._put(ticket, "labels", add=add, remove=remove)

    def _held(self, exc: Exception) -> None:
        if isinstance(exc, RateLimited) and exc.until is not None:
            self.blocked_until = max(self.blocked_until, exc.until)
