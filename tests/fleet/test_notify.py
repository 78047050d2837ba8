"""Webhook notifications (``fleet.notify``) against a local receiver on 127.0.0.1: when a ticket
ends (completed, needs review, needs input, failed, interrupted for good), never for a stop
or a retry; a failing receiver is tried again, then given up with a warning, never fatal."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cairn.fleet import notify
from cairn.fleet.endings import Endings
from cairn.fleet.fleetstate import FleetTicket
from cairn.fleet.trackers import open_tracker
from cairn.state.layout import discover
from cairn.util import clock
from fleet.fake_github import Receiver, receive
from helpers import git, make_repo, save


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from receive(Receiver())


def record(ticket: str, state: str, **fields: Any) -> FleetTicket:
    return msgspec.convert(
        {
            "ticket": ticket,
            "plan": f"cairn-queue/{ticket}.md",
            "state": state,
            "updated": clock.now(),
            **fields,
        },
        FleetTicket,
    )


def repo_notifying(tmp_path: Path, urls: list[str], port: int | None = None) -> Path:
    extra = f"dashboard_port = {port}\n" if port else ""
    config = f"[fleet]\nnotify = {json.dumps(urls)}\n{extra}"
    return make_repo(tmp_path / "repo", {"README.md": "hi\n", "cairn.toml": config})


def endings(repo: Path, emitted: list[tuple[str, dict[str, Any]]] | None = None) -> Endings:
    found, config, layout = discover(repo)
    tracker = open_tracker(found, config, layout)

    def emit(kind: str, **fields: Any) -> None:
        if emitted is not None:
            emitted.append((kind, fields))

    made = Endings(found, config, layout, tracker, emit)
    assert made.notifier is not None
    made.notifier.backoff = 0.05
    return made


def sent(made: Endings, rec: FleetTicket) -> None:
    """``finished`` and wait for its deliveries."""
    threads: list[Any] = []
    assert made.notifier is not None
    original = made.notifier.send

    def keep(body: dict[str, Any]) -> Any:
        threads.extend(original(body))
        return threads

    made.notifier.send = keep  # type: ignore[method-assign]
    made.finished(rec)
    for thread in threads:
        thread.join(30)


def test_completed_needs_review_and_interrupted_reach_the_receiver(
    tmp_path: Path, receiver: Receiver
) -> None:
    repo = repo_notifying(tmp_path, [receiver.url], port=8765)
    (repo / "wip.txt").write_text("uncommitted\n")
    commit = save(repo, "PROJ-3")
    made = endings(repo)
    sent(made, record("PROJ-1", "completed", attempt=1, branch="cairn/PROJ-1"))
    sent(made, record("PROJ-2", "needs_review", attempt=1, detail="2 blocking findings"))
    sent(made, record("PROJ-3", "interrupted", attempt=3, last_reason="max_turns"))
    assert [(p["ticket"], p["state"]) for p in receiver.posts] == [
        ("PROJ-1", "completed"),
        ("PROJ-2", "needs_review"),
        ("PROJ-3", "interrupted"),
    ]
    first, second, third = receiver.posts
    assert set(first) == {
        "key",
        "event",
        "ticket",
        "state",
        "status_line",
        "detail",
        "next_attempt_at",
        "attempt",
        "max_attempts",
        "branch",
        "snapshot",
        "run",
        "tokens",
        "cost_usd",
        "dashboard",
        "pull_request",
        "issue",
        "attention",
        "to_do",
        "sent_at",
    }
    assert first["event"] == "ticket_ended" and first["branch"] == "cairn/PROJ-1"
    # one key a transition, in the body and the header, whatever the attempt
    assert receiver.keys == [p["key"] for p in receiver.posts]
    assert first["key"] == "cairn:PROJ-1:1:completed"
    assert third["key"].startswith("cairn:PROJ-3:") and third["key"].endswith(":interrupted")
    assert first["dashboard"] == "http://127.0.0.1:8765/tickets/PROJ-1"
    assert second["detail"] == "2 blocking findings"
    assert third["snapshot"] == {"ref": "refs/cairn/wip/PROJ-3", "commit": commit}
    assert (third["attempt"], third["max_attempts"]) == (3, 3)
    log = (repo / ".git/cairn/fleet/notify.log").read_text().splitlines()
    assert [json.loads(line)["outcome"] for line in log] == ["sent"] * 3


@pytest.mark.parametrize(
    ("state", "reason"),
    [("interrupted", "signal"), ("running", None), ("retrying", "max_turns"), ("queued", None)],
)
def test_no_notification_for_a_stop_a_retry_or_a_start(
    tmp_path: Path, receiver: Receiver, state: str, reason: str | None
) -> None:
    repo = repo_notifying(tmp_path, [receiver.url])
    rec = record("PROJ-1", state, last_reason=reason)
    assert not notify.wanted(rec)
    sent(endings(repo), rec)
    assert receiver.answered == []


@pytest.mark.parametrize("state", ["needs_input", "failed"])
def test_needs_input_and_failed_are_notified(
    tmp_path: Path, receiver: Receiver, state: str
) -> None:
    repo = repo_notifying(tmp_path, [receiver.url])
    sent(endings(repo), record("PROJ-1", state, detail="why"))
    assert [(p["state"], p["detail"]) for p in receiver.posts] == [(state, "why")]


def test_a_failing_receiver_is_tried_again_then_given_up_never_fatal(
    tmp_path: Path, receiver: Receiver, capsys: pytest.CaptureFixture[str]
) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{closed.getsockname()[1]}/nobody"
    closed.close()
    repo = repo_notifying(tmp_path, [receiver.url, dead])
    receiver.failures = [502, 503]
    emitted: list[tuple[str, dict[str, Any]]] = []
    sent(endings(repo, emitted), record("PROJ-1", "completed"))
    assert receiver.answered == [502, 503, 204]  # the third try got through
    assert [p["ticket"] for p in receiver.posts] == ["PROJ-1"]
    assert capsys.readouterr().err == ""
    ((kind, fields),) = emitted  # the supervisor's event, which the command line says
    assert kind == "ticket_warning" and fields["ticket"] is None
    assert fields["message"].startswith(f"notify {dead} of PROJ-1 completed failed")
    assert fields["message"].endswith("after 3 tries; the fleet goes on")
    log = [json.loads(x) for x in (repo / ".git/cairn/fleet/notify.log").read_text().splitlines()]
    outcomes = sorted((entry["url"] == dead, entry["outcome"], entry["tries"]) for entry in log)
    assert outcomes == [(False, "sent", 3), (True, "failed", 3)]

    # a receiver that refuses the message (4xx but 429) is not asked again
    receiver.failures, receiver.answered = [400], []
    made = endings(repo)
    made.notifier.routes = notify.routes(made.config.fleet)[:1]  # type: ignore[union-attr]
    sent(made, record("PROJ-2", "failed"))
    assert receiver.answered == [400]


def test_dir_tracker_with_push_pushes_a_completed_branch(tmp_path: Path) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    repo = make_repo(
        tmp_path / "repo", {"README.md": "hi\n", "cairn.toml": "[fleet]\npush = true\n"}
    )
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "branch", "cairn/PROJ-1")
    emitted: list[tuple[str, dict[str, Any]]] = []

    def emit(kind: str, **fields: Any) -> None:
        emitted.append((kind, fields))

    found, config, layout = discover(repo)
    made = Endings(found, config, layout, open_tracker(found, config, layout), emit)
    assert made.notifier is None  # no webhooks configured
    made.finished(record("PROJ-1", "completed"))
    assert git(origin, "rev-parse", "cairn/PROJ-1") == git(repo, "rev-parse", "cairn/PROJ-1")
    assert emitted == [("ticket_pushed", {"ticket": "PROJ-1", "branch": "cairn/PROJ-1"})]
    made.finished(record("PROJ-2", "completed"))  # no such branch: said, not raised
    assert emitted[-1][0] == "ticket_push_failed"
    assert "git push origin cairn/PROJ-2 failed" in emitted[-1][1]["detail"]
    made.finished(record("PROJ-3", "needs_review"))  # only a completed ticket is pushed
    assert len(emitted) == 2
