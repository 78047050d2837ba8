"""What ``fleet_kill``'s fleets do outside their repository, and the checks of it: the fake GitHub
REST server and the webhook receiver of ``tests/fleet/fake_github.py``, served on 127.0.0.1 by
threads of the campaign's own process (so they outlive every kill and count every request), and
once the queue is drained, what reached them.

Every comment cairn posts carries a hidden key, ``<!-- cairn:<ticket>:<attempt>:<state>:<kind>
-->``; every notification its ``key`` (in the body and the ``Idempotency-Key`` header,
``cairn:<ticket>:<attempt>:<state>[:…]``). A receiver that honours the header accepts a key once
and drops its re-deliveries: those are counted as a figure, not a violation. What it would accept
twice (the same ticket, attempt and state under two keys, or without a key) is a violation.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import Tally, git  # common puts tests/ on sys.path: fleet.fake_github below
from fleet.fake_github import LOST, TOKEN, FakeGitHub, Receiver, receive, serve

__all__ = ["TOKEN", "Outside"]

OWNER_REPO = "octo/app"
LABEL = "cairn"
RUNNING, DONE, REVIEW = "cairn:running", "cairn:done", "cairn:needs-review"
MARKER = re.compile(r"<!--\s*(cairn:\S*?)\s*-->")
SIGNATURE = "— cairn"
REDELIVERED = "notification re-deliveries (not violations: dropped by the receiver)"


@dataclass
class Outside:
    """A fleet's fake GitHub (when its tracker is ``github``; ``remote`` the bare repository
    its branches are pushed to) and its webhook receiver, both serving until ``close``."""

    remote: Path | None
    github: FakeGitHub | None = None
    receiver: Receiver = field(default_factory=Receiver)
    servers: list[Iterator[Any]] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # requests whose answer the fake will lose

    def __post_init__(self) -> None:
        if self.remote is not None:
            git(self.remote.parent, "init", "-q", "--bare", "-b", "main", str(self.remote))
            self.github = FakeGitHub(repo=OWNER_REPO, remote=self.remote)
            self.servers.append(serve(self.github))
        self.servers.append(receive(self.receiver))
        for server in self.servers:
            next(server)  # serving from here on

    def close(self) -> None:
        for server in self.servers:
            server.close()  # the generator's finally: shutdown
        self.servers.clear()

    def config(self) -> tuple[str, str]:
        """Lines of the ``[fleet]`` table, and the tables after it."""
        lines = f"notify = {json.dumps([self.receiver.url])}\n"
        if self.github is None:
            return lines, ""
        lines += 'tracker = "github"\n'
        table = (
            f"\n[fleet.github]\nrepo = {json.dumps(OWNER_REPO)}\n"
            f"api_url = {json.dumps(self.github.url)}\nlabel = {json.dumps(LABEL)}\n"
        )
        return lines, table

    def lose_answer(self, method: str, path_part: str) -> None:
        """The next such request is done and its answer lost (the connection dropped): its
        outcome is unknown to cairn, which must look before it sends it again."""
        assert self.github is not None
        self.github.lose_answer_once(method, path_part)
        self.lost.append(f"{method} …{path_part}")

    def answers_lost(self) -> int:
        assert self.github is not None
        with self.github.lock:
            left = sum(1 for fault in self.github.faults if fault.status == LOST)
        return len(self.lost) - left

    def add_issue(self, number: int, title: str, body: str) -> None:
        assert self.github is not None
        self.github.add_issue(number, title, body, labels=(LABEL,))


# --- the checks ---------------------------------------------------------------------------------


def comment_key(body: str) -> str | None:
    found = MARKER.search(body)
    return found.group(1) if found else None


def post_key(post: dict[str, Any], header: str | None) -> str | None:
    """A delivery's key: its ``Idempotency-Key`` header, else its body's ``key``."""
    key = header or post.get("key")
    return key if isinstance(key, str) and key else None


def key_matches(key: str | None, ticket: str, attempt: int, state: str) -> bool:
    prefix = f"cairn:{ticket}:{attempt}:{state}"
    return key is not None and (key == prefix or key.startswith(prefix + ":"))


def check_github(
    outside: Outside, where: str, tickets: dict[str, dict[str, Any] | None], tally: Tally
) -> None:
    """The issues, comments, labels and pull requests of a github fleet once its queue is
    drained; ``tickets``: ticket → its fleet record (None: none)."""
    github = outside.github
    assert github is not None
    tally.count("GitHub requests answered", len(github.seen))
    tally.count("comments posted", len(github.comments))
    tally.count("pull requests opened", len(github.pulls))
    tally.count(
        "answers the fake GitHub lost (request done, connection dropped)", outside.answers_lost()
    )
    heads = Counter(str(p.get("head")) for p in github.pulls)
    for head, count in sorted(heads.items()):
        if count > 1:
            tally.violation("duplicate_pr", where, f"{count} pull requests for head {head}")
    for ticket, record in tickets.items():
        number = int(ticket.removeprefix("GH-"))
        with github.lock:  # as posted, their hidden keys in them (comments_on strips those)
            bodies = [body for n, body in github.comments if n == number]
        keys: Counter[str] = Counter()
        for body in bodies:
            key = comment_key(body)
            if key is None:
                first = body.strip().splitlines()[0][:80] if body.strip() else "(empty)"
                tally.violation("unkeyed_comment", f"{where}, {ticket}", f"comment {first!r}")
            else:
                keys[key] += 1
        for key, count in sorted(keys.items()):
            if count > 1:
                tally.violation(
                    "duplicate_comment", f"{where}, {ticket}", f"{count} comments keyed {key}"
                )
        if record is None:
            continue
        lost = lost_on_github(ticket, record, keys, github.labels(number), heads)
        for what in lost:
            tally.violation("lost_transition", f"{where}, {ticket}", what)


def lost_on_github(
    ticket: str,
    record: dict[str, Any],
    keys: Counter[str],
    labels: list[str],
    heads: Counter[str],
) -> list[str]:
    state, attempt = str(record.get("state")), int(record.get("attempt") or 0)
    lost = []
    for n in range(1, attempt + 1):
        if not keys[f"cairn:{ticket}:{n}:running:comment"]:
            lost.append(f"attempt {n} started, and no comment keyed cairn:{ticket}:{n}:running")
    final = f"cairn:{ticket}:{attempt}:{state}:comment"
    if state == "completed":
        if not keys[final]:
            lost.append(f"completed, and no comment keyed {final}")
        if DONE not in labels or RUNNING in labels or REVIEW in labels:
            lost.append(f"completed, and its labels are {labels}")
        if heads[f"cairn/{ticket}"] == 0:
            lost.append(f"completed, and no pull request for cairn/{ticket}")
    return lost


def check_notifications(
    outside: Outside, where: str, tickets: dict[str, dict[str, Any] | None], tally: Tally
) -> None:
    """What the receiver got: every ended ticket's final state under one key; the same event
    accepted twice by a receiver honouring ``Idempotency-Key`` is a duplicate, its raw
    re-deliveries under one key a figure."""
    receiver = outside.receiver
    with receiver.lock:
        deliveries = list(zip(receiver.posts, receiver.keys, strict=True))
    tally.count("notifications delivered", len(deliveries))
    by_key: Counter[str] = Counter()
    accepted: dict[tuple[str, str, str], list[str]] = {}
    headless = 0
    for post, header in deliveries:
        key = post_key(post, header)
        if header is None:
            headless += 1
        event = (str(post.get("ticket")), str(post.get("state")), str(post.get("attempt")))
        if key is not None:
            by_key[key] += 1
            if by_key[key] > 1:
                continue  # dropped by the receiver
        accepted.setdefault(event, []).append(key or "(no key)")
    tally.count("notifications without an Idempotency-Key header", headless)
    again = sum(count - 1 for count in by_key.values())
    tally.count("notification re-deliveries under one key (dropped by the receiver)", again)
    for key, count in sorted(by_key.items()):
        if count > 1:  # shown with the violations' examples, though not one
            shown = tally.examples.setdefault(REDELIVERED, [])
            if len(shown) < 20:
                shown.append(f"{where}: {key} delivered {count} times")
    for (ticket, state, attempt), keys in sorted(accepted.items()):
        if len(keys) > 1:
            tally.violation(
                "duplicate_notification",
                f"{where}, {ticket}",
                f"{state} (attempt {attempt}) accepted {len(keys)} times, keys {keys}",
            )
    for ticket, record in tickets.items():
        if record is None or record.get("state") != "completed":
            continue
        attempt = int(record.get("attempt") or 0)
        if not any(
            key_matches(post_key(post, header), ticket, attempt, "completed")
            for post, header in deliveries
        ):
            tally.violation(
                "lost_transition",
                f"{where}, {ticket}",
                f"completed (attempt {attempt}), and the receiver never got "
                f"cairn:{ticket}:{attempt}:completed",
            )


def deliver(url: str, body: dict[str, Any], key: str | None) -> None:
    """Post a notification to a receiver, as cairn would (the self-test's faults)."""
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        answer.read()
