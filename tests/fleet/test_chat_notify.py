"""Chat notifications (``[fleet] notify`` entries of Slack, Discord and Microsoft Teams) against
a receiver on 127.0.0.1 checking each service's documented payload shape (``chat_shapes``) for
every notified state; the format found from the URL; what needs a person routed to
``notify_attention`` with what to do, once per need, through ``Endings.tell``; the limits
(a huge status line cut); each service's 429 and gone-webhook answers; and bad entries."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cairn.config.records import Config, validate
from cairn.config.webhooks import detect
from cairn.errors import BadInput
from cairn.fleet import chatformats, notify, pulls
from cairn.fleet.endings import Endings
from cairn.fleet.fleetstate import FleetTicket
from cairn.fleet.trackers import open_tracker
from cairn.state.layout import discover
from cairn.terms import CHAT_FORMATS
from cairn.util import clock
from fleet.chat_shapes import VALIDATE, ChatReceiver, serve
from helpers import git, make_repo

RESET = datetime(2026, 12, 3, 14, 0, tzinfo=UTC)
USAGE = "waiting: every agent is at a limit; usage limit of claude; resets 14:00 UTC"
RATE = "waiting: every agent is at a limit; rate limit of claude; resets 14:00 UTC"
# every notified state, and whether it needs a person
NOTIFIED: list[tuple[str, dict[str, Any], str]] = [
    ("completed", {}, "news"),
    ("needs_review", {"detail": "2 blocking findings"}, "needs_you"),
    ("needs_input", {"detail": "no progress in 3 dispatches"}, "needs_you"),
    ("failed", {"detail": "the plan has no tasks"}, "needs_you"),
    ("interrupted", {"last_reason": "max_turns", "attempt": 3}, "needs_you"),
    ("waiting", {"next_attempt_at": RESET, "detail": USAGE}, "needs_you"),
    ("waiting", {"next_attempt_at": RESET, "detail": RATE}, "news"),
    ("budget", {"detail": "the fleet spent $5.10 of its $5.00"}, "needs_you"),
]


@pytest.fixture
def chat() -> Iterator[ChatReceiver]:
    yield from serve()


def record(ticket: str, state: str, **fields: Any) -> FleetTicket:
    base = {"ticket": ticket, "plan": f"cairn-queue/{ticket}.md", "state": state, "attempt": 1}
    return msgspec.convert({**base, "updated": clock.now(), **fields}, FleetTicket)


def toml_list(entries: list[Any]) -> str:
    def one(entry: Any) -> str:
        if isinstance(entry, str):
            return json.dumps(entry)
        return "{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in entry.items()) + "}"

    return "[" + ", ".join(one(entry) for entry in entries) + "]"


def fleet_repo(tmp_path: Path, notify_: list[Any], attention: list[Any] | None = None) -> Path:
    lines = ["[fleet]", f"notify = {toml_list(notify_)}", 'dashboard_url = "https://cairn.x/"']
    if attention is not None:
        lines.append(f"notify_attention = {toml_list(attention)}")
    files = {"README.md": "hi\n", "cairn.toml": "\n".join(lines) + "\n"}
    return make_repo(tmp_path / "repo", files)


def endings(repo: Path, emitted: list[tuple[str, dict[str, Any]]] | None = None) -> Endings:
    found, config, layout = discover(repo)

    def emit(kind: str, **fields: Any) -> None:
        if emitted is not None:
            emitted.append((kind, fields))

    made = Endings(found, config, layout, open_tracker(found, config, layout), emit)
    assert made.notifier is not None
    made.notifier.backoff = 0.01
    original = made.notifier.send

    def waited(body: dict[str, Any]) -> Any:  # the deliveries joined before tell returns
        threads = original(body)
        for thread in threads:
            thread.join(30)
        return threads

    made.notifier.send = waited  # type: ignore[method-assign]
    return made


def formats(chat: ChatReceiver) -> list[dict[str, str]]:
    return [{"url": chat.url(name), "format": name} for name in ("slack", "discord", "teams")]


@pytest.mark.parametrize(("state", "fields", "kind"), NOTIFIED)
def test_every_notified_state_in_every_format_is_in_its_service_shape(
    tmp_path: Path, chat: ChatReceiver, state: str, fields: dict[str, Any], kind: str
) -> None:
    repo = fleet_repo(tmp_path, [*formats(chat), {"url": chat.url("json"), "format": "json"}])
    made = endings(repo)
    pulls.record(made.layout, "PROJ-1", {"html_url": "https://github.com/o/r/pull/7", "number": 7})
    made.tell(record("PROJ-1", state, **fields))
    (plain,) = chat.at("json")
    assert (plain["state"], plain["attention"]) == (state, kind)
    assert plain["dashboard"] == "https://cairn.x/tickets/PROJ-1"
    assert plain["pull_request"] == "https://github.com/o/r/pull/7"
    assert plain["cost_usd"] is None and plain["issue"] is None
    for name, validator in VALIDATE.items():
        (body,) = chat.at(name)
        assert validator(body) == [], name
        said = json.dumps(body, ensure_ascii=False)
        assert "PROJ-1" in said and "https://cairn.x/tickets/PROJ-1" in said
        assert "https://github.com/o/r/pull/7" in said and "unknown" in said  # the cost
        assert ("What to do" in said) == (kind == "needs_you")
    # every format carries the transition's key in its header; the JSON in its body too
    keys = {post.headers["Idempotency-Key"] for post in chat.posts}
    assert keys == {plain["key"]}
    slack = chat.at("slack")[0]
    assert [block["type"] for block in slack["blocks"]][:2] == ["header", "section"]
    buttons = slack["blocks"][-1]["elements"]
    assert [button["text"]["text"] for button in buttons] == ["Dashboard", "Pull request"]
    embed = chat.at("discord")[0]["embeds"][0]
    assert embed["url"] == "https://cairn.x/tickets/PROJ-1"
    card = chat.at("teams")[0]["attachments"][0]["content"]
    assert [a["type"] for a in card["actions"]] == ["Action.OpenUrl"] * 2


def test_needs_go_to_notify_attention_with_what_to_do_once_news_to_notify(
    tmp_path: Path, chat: ChatReceiver
) -> None:
    news, needs, both = chat.url("json", "news"), chat.url("json", "needs"), chat.url("slack")
    repo = fleet_repo(tmp_path, [news, {"url": both, "format": "slack"}], [needs, both])
    made = endings(repo)
    made.tell(record("PROJ-1", "completed"))
    made.tell(record("PROJ-2", "needs_input", detail="no progress"))
    made.tell(record("PROJ-2", "needs_input", detail="no progress"))  # told again: once
    made.tell(record("PROJ-3", "budget", detail="spent"))
    made.tell(record("PROJ-4", "needs_review"))
    made.tell(record("PROJ-5", "retrying", last_reason="max_turns"))  # not notified
    assert [b["ticket"] for b in chat.at("json", "news")] == ["PROJ-1"]
    told = chat.at("json", "needs")
    assert [(b["ticket"], b["attention"]) for b in told] == [
        ("PROJ-2", "needs_you"),
        ("PROJ-3", "needs_you"),
        ("PROJ-4", "needs_you"),
    ]
    assert [b["to_do"] for b in told] == [
        'answer in cairn: cairn answer PROJ-2 "…" / cairn resume PROJ-2',
        "raise the budget: [fleet] max_cost_usd in cairn.toml, then cairn fleet start",
        "approve or request changes: cairn review PROJ-4 --approve | --request-changes",
    ]
    # the URL in both lists: each transition once, news and needs alike
    assert [b["text"].split(" ")[0] for b in chat.at("slack")] == [
        "PROJ-1",
        "PROJ-2",
        "PROJ-3",
        "PROJ-4",
    ]


def test_without_notify_attention_notify_gets_news_and_needs(
    tmp_path: Path, chat: ChatReceiver
) -> None:
    made = endings(fleet_repo(tmp_path, [chat.url("json")]))
    made.tell(record("PROJ-1", "completed"))
    made.tell(record("PROJ-2", "failed", detail="boom"))
    told = chat.at("json")
    assert [(b["ticket"], b["attention"]) for b in told] == [
        ("PROJ-1", "news"),
        ("PROJ-2", "needs_you"),
    ]
    assert told[0]["to_do"] is None
    assert told[1]["to_do"] == "see why: cairn catchup PROJ-2, then cairn fleet retry PROJ-2"


@pytest.mark.parametrize(
    ("url", "format"),
    [
        ("https://hooks.slack.com/services/T0/B0/xyz", "slack"),
        ("https://discord.com/api/webhooks/1/tok", "discord"),
        ("https://discordapp.com/api/webhooks/1/tok", "discord"),
        ("https://ptb.discord.com/api/v10/webhooks/1/tok", "discord"),
        ("https://discord.com/channels/1/2", "json"),  # not a webhook's path
        ("https://prod-12.westus.logic.azure.com:443/workflows/ab/triggers/manual?sig=x", "teams"),
        ("https://default1.environment.api.powerplatform.com/powerautomate/x", "teams"),
        ("https://api.powerautomate.com/x", "teams"),
        ("https://flow.microsoft.com/x", "teams"),
        ("https://logic.azure.com.evil.example/x", "json"),
        ("https://hooks.slack.com.evil.example/services/x", "json"),
        ("https://example.com/hooks/cairn", "json"),
        ("http://127.0.0.1:9000/slack/hook", "json"),
    ],
)
def test_the_format_is_found_from_the_url(url: str, format: str) -> None:
    assert detect(url) == format


def test_a_table_sets_the_format_and_a_string_is_detected() -> None:
    text = (
        '[fleet]\nnotify = ["https://hooks.slack.com/services/a", '
        '{url = "https://hooks.slack.com/services/b", format = "json"}, '
        '{url = "http://127.0.0.1:1/x", format = "teams"}]\n'
    )
    config = validate(tomllib.loads(text), Path("cairn.toml"))
    found = [(route.format, route.kinds) for route in notify.routes(config.fleet)]
    assert found == [("slack", notify.ALL), ("json", notify.ALL), ("teams", notify.ALL)]
    from cairn.cli.commands.config import effective  # config show: a table shown as one

    shown = dict((key, value) for key, value, _ in effective(config))["fleet.notify"]
    assert shown[1] == {"url": "https://hooks.slack.com/services/b", "format": "json"}


def body_of(**changes: Any) -> dict[str, Any]:
    base = {
        "key": "cairn:PROJ-1:1:failed",
        "event": "ticket_ended",
        "ticket": "PROJ-1",
        "state": "failed",
        "status_line": "Interrupted — stall",
        "detail": "why",
        "attempt": 1,
        "max_attempts": 3,
        "branch": "cairn/PROJ-1",
        "tokens": 1200,
        "cost_usd": 0.5,
        "dashboard": "https://cairn.x/tickets/PROJ-1",
        "attention": "needs_you",
        "to_do": "see why",
        "sent_at": clock.now().isoformat(),
    }
    return {**base, **changes}


def test_a_huge_status_line_is_cut_within_every_service_limit() -> None:
    huge = "x" * 200_000
    body = body_of(status_line=huge, detail="é<&>" * 50_000, to_do="y" * 5000, branch="b" * 2000)
    for format in ("slack", "discord", "teams"):
        posted = chatformats.render(format, body)
        assert VALIDATE[format](posted) == [], format
        assert chatformats.ELLIPSIS in json.dumps(posted, ensure_ascii=False)
    assert chatformats.card(body_of(cost_usd=None)).fields[1] == ("Cost", "unknown")
    assert chatformats.card(body_of(cost_usd=0.5)).fields[1] == ("Cost", "$0.50")
    assert chatformats.render("json", body) is body


def test_issue_links_of_github_tickets() -> None:
    text = '[fleet]\ntracker = "github"\n[fleet.github]\nrepo = "octo/app"\n'
    config = validate(tomllib.loads(text), Path("cairn.toml"))
    assert notify.issue_link(config, "GH-12") == "https://github.com/octo/app/issues/12"
    assert notify.issue_link(config, "PROJ-12") is None
    assert notify.issue_link(Config(), "GH-12") is None  # the dir tracker has no issues
    enterprise = text + 'api_url = "https://ghe.example.com/api/v3"\n'
    config = validate(tomllib.loads(enterprise), Path("cairn.toml"))
    assert notify.issue_link(config, "GH-3") == "https://ghe.example.com/octo/app/issues/3"


def test_429_waits_for_retry_after_and_a_gone_webhook_is_given_up_warned_once(
    tmp_path: Path, chat: ChatReceiver
) -> None:
    slack_gone, discord = chat.url("slack", "gone"), chat.url("discord")
    chat.answers = {
        "/slack/hook": [(429, {"Retry-After": "0"}, b"rate_limited")],
        "/discord/hook": [(429, {}, b'{"message": "slow", "retry_after": 0.05, "global": false}')],
        "/slack/gone": [(404, {}, b"no_service"), (404, {}, b"no_service")],
    }
    entries = [chat.url("slack"), slack_gone, discord]
    repo = fleet_repo(tmp_path, [{"url": url, "format": url.split("/")[3]} for url in entries])
    emitted: list[tuple[str, dict[str, Any]]] = []
    made = endings(repo, emitted)
    made.tell(record("PROJ-1", "completed"))
    made.tell(record("PROJ-2", "completed"))
    assert len(chat.at("slack")) == len(chat.at("discord")) == 2  # each got through again
    assert chat.asked.count("/slack/gone") == 1  # gone: not asked again, not tried twice
    warnings = [fields["message"] for kind, fields in emitted if kind == "ticket_warning"]
    assert warnings == [
        f"notify {slack_gone}: slack says the webhook is gone (HTTP 404); no more messages to "
        "it until the next fleet start; fix [fleet] notify"
    ]
    assert notify.retry_after(type("R", (), {"headers": {"Retry-After": "900"}})()) == 60.0


@pytest.mark.parametrize(
    ("entries", "said"),
    [
        ('[{url = "https://a.example/x", format = "telegram"}]', "'telegram' is not one of"),
        ('[{format = "slack"}]', "a table without url"),
        ('["ftp://a.example/x"]', "'ftp://a.example/x' is not an http(s) URL"),
        ('[{url = "hooks.slack.com/x"}]', "is not an http(s) URL"),
    ],
)
def test_a_bad_entry_is_named_with_the_formats(entries: str, said: str) -> None:
    for key in ("notify", "notify_attention"):
        with pytest.raises(BadInput) as caught:
            validate(tomllib.loads(f"[fleet]\n{key} = {entries}\n"), Path("cairn.toml"))
        message = str(caught.value)
        assert f"fleet.{key}" in message and said in message
        assert ", ".join(CHAT_FORMATS) in message and "\n" not in message


def test_the_waiting_reset_is_said_and_a_rate_limit_is_news() -> None:
    usage = record("PROJ-1", "waiting", next_attempt_at=RESET, detail=USAGE)
    rate = record("PROJ-1", "waiting", next_attempt_at=RESET + timedelta(hours=1), detail=RATE)
    assert (notify.attention(usage), notify.attention(rate)) == ("needs_you", "news")
    # the detail says the limit waited for now; without it, the run's cutoff reason
    stale = record("PROJ-1", "waiting", detail=RATE, last_reason="usage_limit")
    bare = record("PROJ-1", "waiting", detail="usage_limit", last_reason="usage_limit")
    assert (notify.attention(stale), notify.attention(bare)) == ("news", "needs_you")
    told = chatformats.card(notify.payload(usage, _facts(), Config()))
    assert ("Starts again", RESET.isoformat()) in told.fields
    assert told.to_do is not None and "fallback agent" in told.to_do


def _facts() -> Any:
    from cairn.fleet.facts import Facts

    return Facts("PROJ-1", "cairn/PROJ-1", None, None, None, None, "refs/cairn/wip/PROJ-1", None)


def test_a_fleet_start_sends_the_news_to_slack_and_the_need_to_notify_attention(
    tmp_path: Path, chat: ChatReceiver
) -> None:
    from fleet.fleet_setup import agent_env, finish, supervisor
    from fleet.fleet_setup import fleet_repo as queue_repo

    repo = queue_repo(tmp_path, {"DONE-1": 1, "LONG-1": 5}, max_turns=2, max_attempts=1)
    with (repo / "cairn.toml").open("a") as toml:
        toml.write(f'notify = [{{url = "{chat.url("slack")}", format = "slack"}}]\n')
        toml.write(f'notify_attention = ["{chat.url("json", "needs")}"]\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the fleet")
    _, lines = finish(supervisor(repo, agent_env(tmp_path), "--once"), timeout=120)
    ended = {e["ticket"]: e["state"] for e in lines if e.get("event") == "ticket_finished"}
    assert ended == {"DONE-1": "completed", "LONG-1": "interrupted"}, lines
    (news,) = chat.at("slack")  # the supervisor waited for its deliveries before it exited
    assert VALIDATE["slack"](news) == [] and news["text"].startswith("DONE-1 completed")
    (need,) = chat.at("json", "needs")
    assert (need["ticket"], need["state"], need["attention"]) == (
        "LONG-1",
        "interrupted",
        "needs_you",
    )
    assert need["to_do"] == "see why: cairn catchup LONG-1, then cairn fleet retry LONG-1"
