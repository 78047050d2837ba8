"""Knowing a limit: ``cairn.agents.limits.classify`` on the agents' real words, and every
adapter's ``Result.failure`` from the streams captured from the real CLIs
(tests/fixtures/README.md, "Limits"), the scripted agent's ``fail`` and a command's stderr."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from agents.test_agents import command, run, scripted
from cairn.agents import get
from cairn.agents.base import DispatchRequest
from cairn.agents.limits import Failure, classify, describe
from cairn.terms import FailureKind
from helpers import FakeCli, play_dispatch, result_of

FIXTURES = Path(__file__).parent.parent / "fixtures"
CLAUDE = FIXTURES / "claude-code-2.1.328"
CODEX = FIXTURES / "codex-0.169.0"
NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)  # a Tuesday, noon UTC
BOGOTA = ZoneInfo("America/Bogota")
LA = ZoneInfo("America/Los_Angeles")


def at(*ymdhms: int, zone: ZoneInfo | None = None) -> datetime:
    """A time, given in ``zone`` (default UTC), in UTC."""
    year, month, day, hour, minute, second = (*ymdhms, 0, 0, 0)[:6]
    return datetime(year, month, day, hour, minute, second, tzinfo=zone or UTC).astimezone(UTC)


CODEX_PLUS = (
    "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit "
    "https://chatgpt.com/settings/usage to purchase more credits or try again at {}."
)
CODEX_429 = (
    '{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached",'
    '"plan_type":"plus","resets_at":1773113950,"eligible_promo":null,"resets_in_seconds":467439}}'
)
ANTHROPIC_429 = (
    '429 {"type":"error","error":{"type":"rate_limit_error","message":"This request would '
    "exceed your account's rate limit. Please try again later.\"}}"
)

# (the agent's words, the HTTP status it reported, kind, reset time) -- all real strings
REAL: list[tuple[str, int | None, FailureKind, datetime | None]] = [
    # Claude Code's subscription usage limit, old to new
    ("Claude AI usage limit reached|1753441200", None, "usage_limit", at(2025, 7, 25, 11)),
    (
        "Claude usage limit reached. Your limit will reset at 3pm (America/Bogota).",
        None,
        "usage_limit",
        at(2026, 3, 10, 15, zone=BOGOTA),
    ),
    ("5-hour limit reached ∙ resets 5am", None, "usage_limit", at(2026, 3, 11, 5)),
    ("5-hour limit reached ∙ resets 12pm", None, "usage_limit", at(2026, 3, 10, 12)),
    (
        "You've hit your session limit · resets 12:50am (America/Los_Angeles)",
        None,
        "usage_limit",
        at(2026, 3, 11, 0, 50, zone=LA),
    ),
    ("Weekly limit reached · resets Aug 20", None, "usage_limit", at(2026, 8, 20)),
    (
        "You've hit your 5-hour limit · resets Dec 5, 5:02pm (UTC)",
        429,
        "usage_limit",
        at(2026, 12, 5, 17, 2),
    ),
    # the Anthropic API's spend limit
    (
        "API Error: 400 You have reached your specified API usage limits. You will regain "
        "access on 2026-04-01 at 00:00 UTC.",
        None,
        "usage_limit",
        at(2026, 4, 1),
    ),
    # Codex's usage limit: local time (here: NOW's zone, UTC)
    (CODEX_PLUS.format("3:42 PM"), None, "usage_limit", at(2026, 3, 10, 15, 42)),
    (CODEX_PLUS.format("9:05 AM"), None, "usage_limit", at(2026, 3, 11, 9, 5)),
    (
        CODEX_PLUS.format("Mar 12th, 2026 3:39 AM"),
        None,
        "usage_limit",
        at(2026, 3, 12, 3, 39),
    ),
    (
        "You've hit your usage limit. To get more access now, send a request to your admin or "
        "try again in 2 days 17 hours 14 minutes.",
        None,
        "usage_limit",
        NOW + timedelta(days=2, hours=17, minutes=14),
    ),
    (
        "You've hit your usage limit. To get more access now, send a request to your admin or "
        "try again later.",
        None,
        "usage_limit",
        None,
    ),
    (f"http 429 Too Many Requests: {CODEX_429}", None, "usage_limit", at(2026, 3, 10, 3, 39, 10)),
    ("Quota exceeded. Check your plan and billing details.", None, "usage_limit", None),
    # rate limits
    (ANTHROPIC_429, None, "rate_limit", None),
    (
        "API Error: Request rejected (429) · This request would exceed your account's rate "
        "limit. Please try again later.",
        429,
        "rate_limit",
        None,
    ),
    (
        "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again "
        "in a moment.",
        529,
        "rate_limit",
        None,
    ),
    (
        '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
        None,
        "rate_limit",
        None,
    ),
    ("exceeded retry limit, last status: 429 Too Many Requests", None, "rate_limit", None),
    # refused credentials
    ("Invalid API key · Fix external API key", 401, "auth", None),
    (
        "unexpected status 401 Unauthorized: Incorrect API key provided, url: "
        "http://127.0.0.1:PORT/v1/responses",
        None,
        "auth",
        None,
    ),
    ("unexpected status 403 Forbidden: forbidden", None, "auth", None),
    ('{"type":"error","error":{"type":"permission_error","message":"no"}}', None, "auth", None),
    ('{"type":"error","error":{"type":"authentication_error","message":"x"}}', None, "auth", None),
    # never a limit
    ("Prompt is too long", 400, "error", None),
    ("API Error: 400 input length and max_tokens exceed context limit", 400, "error", None),
    ("exceeded retry limit, last status: 500 Internal Server Error", None, "error", None),
    (
        "We’re currently experiencing high demand, which may cause temporary errors.",
        None,
        "error",
        None,
    ),
    ("", None, "error", None),
]


@pytest.mark.parametrize(("text", "status", "kind", "resets_at"), REAL)
def test_real_words_are_classified_with_their_reset_time(
    text: str, status: int | None, kind: FailureKind, resets_at: datetime | None
) -> None:
    failure = classify(text, status=status, now=NOW)
    assert (failure.kind, failure.resets_at) == (kind, resets_at)
    assert failure.limit == (kind in ("rate_limit", "usage_limit"))
    assert "\n" not in failure.text and len(failure.text) <= 300


def test_status_comes_from_the_text_and_a_given_reset_time_wins() -> None:
    assert classify("exceeded retry limit, last status: 429 Too Many Requests").status == 429
    assert classify("unexpected status 401 Unauthorized: x").status == 401
    given = at(2026, 3, 10, 17, 0, 5)
    failure = classify(
        "You've hit your 5-hour limit · resets 5pm (UTC)", status=429, resets_at=given, now=NOW
    )
    assert failure == Failure("usage_limit", failure.text, 429, given)
    # a 429 whose reset time the stream gave is the plan's window, whatever the words
    assert classify("API Error: 429", resets_at=given).kind == "usage_limit"


def test_a_clock_time_just_passed_is_this_reset_not_tomorrows() -> None:
    """Claude and Codex print the minute; a reset at 12:00:40 reads as 12:00 after it."""
    failure = classify("5-hour limit reached ∙ resets 11:58am", now=NOW)
    assert failure.resets_at == at(2026, 3, 10, 11, 58)
    assert classify("5-hour limit reached ∙ resets 11:50am", now=NOW).resets_at == at(
        2026, 3, 11, 11, 50
    )


def test_local_time_is_nows_zone_and_a_stderr_tail_names_the_line() -> None:
    tokyo = NOW.astimezone(ZoneInfo("Asia/Tokyo"))  # 21:00 there
    tail = "warning: x\nERROR: You’ve hit your usage limit. Try again at 9:30 PM.\nbye"
    failure = classify(tail, now=tokyo)
    assert failure.resets_at == at(2026, 3, 10, 12, 30)
    assert failure.text == "ERROR: You’ve hit your usage limit. Try again at 9:30 PM."
    assert describe(failure, "codex", NOW) == "usage limit of codex; resets 12:30 UTC"


# --- the adapters, on what the real CLIs printed ------------------------------------------------


def replay(tmp_path: Path, kind: str, lines: list[str], exit_code: int) -> Failure | None:
    name, version = ("claude", "2.1.328 (Claude Code)")
    if kind == "codex":
        name, version = ("codex", "codex-cli 0.169.0")
    env = FakeCli(tmp_path, name, version)([{"lines": lines, "exit": exit_code}])
    session, _events, _ = play_dispatch(kind, tmp_path, env, ["do the plan", None], 5)
    result = result_of(session)
    assert result.reason == "error"
    return result.failure


@pytest.mark.parametrize(
    ("fixture", "kind", "status", "text"),
    [
        ("usage-limit", "usage_limit", 429, "You've hit your 5-hour limit · resets 10:32am (UTC)"),
        ("rate-limit", "rate_limit", 429, "API Error: Request rejected (429)"),
        ("overloaded", "rate_limit", 529, "API Error: 529 Overloaded."),
        ("auth", "auth", 401, "Invalid API key · Fix external API key"),
        ("spend-limit", "usage_limit", 400, "API Error: 400 You have reached your specified"),
    ],
)
def test_claude_captures(tmp_path: Path, fixture: str, kind: str, status: int, text: str) -> None:
    lines = (CLAUDE / f"{fixture}.stream.jsonl").read_text().splitlines()
    failure = replay(tmp_path, "claude-code", lines, 1)
    assert failure is not None
    assert (failure.kind, failure.status) == (kind, status)
    assert failure.text.startswith(text)
    if fixture == "usage-limit":  # the rate_limit_event's resetsAt, to the second
        assert failure.resets_at == datetime.fromtimestamp(1796293979, UTC)
    elif fixture == "spend-limit":
        assert failure.resets_at == at(2026, 4, 1)
    else:
        assert failure.resets_at is None


@pytest.mark.parametrize(
    ("fixture", "kind", "clock"),
    [
        ("usage-limit", "usage_limit", (10, 33)),
        ("usage-limit-days", "usage_limit", (17, 6)),
        ("rate-limit", "rate_limit", None),
        ("auth", "auth", None),
        ("turn-failed", "error", None),
    ],
)
def test_codex_captures(
    tmp_path: Path, fixture: str, kind: str, clock: tuple[int, int] | None
) -> None:
    lines = (CODEX / f"{fixture}.exec.jsonl").read_text().splitlines()
    failure = replay(tmp_path, "codex", lines, 1)
    assert failure is not None and failure.kind == kind
    if clock is None:
        assert failure.resets_at is None
    else:  # Codex's local time, read as this machine's
        assert failure.resets_at is not None
        local = failure.resets_at.astimezone()
        assert (local.hour, local.minute) == clock
        if fixture == "usage-limit-days":
            assert (local.month, local.day) == (12, 5)


def test_codex_human_mode_stderr_is_classified_too() -> None:
    tail = (CODEX / "usage-limit.stderr.txt").read_text()
    failure = classify(tail)
    assert failure.kind == "usage_limit" and failure.text.startswith("ERROR: You’ve hit")


def test_claude_rejected_rate_limit_event_gives_the_reset(tmp_path: Path) -> None:
    """Whatever words follow, a refused ``rate_limit_event`` says when the window reopens."""
    lines = (CLAUDE / "usage-limit.stream.jsonl").read_text().splitlines()
    cut = [line for line in lines if '"type":"result"' not in line]  # crashed before its result
    env = FakeCli(tmp_path, "claude", "2.1.328 (Claude Code)")([{"lines": cut, "exit": 1}])
    session, _events, _ = play_dispatch("claude-code", tmp_path, env, ["go", None], 5)
    failure = result_of(session).failure
    assert failure is not None and failure.kind == "usage_limit"
    assert failure.resets_at == datetime.fromtimestamp(1796293979, UTC)


def test_scripted_fail_text_is_classified(tmp_path: Path) -> None:
    script = 'coder:\n  - - fail: "You\'ve hit your usage limit. Try again at 3:42 PM."\n'
    _events, result = run("scripted", scripted(tmp_path, script))
    assert result.reason == "error" and result.failure is not None
    assert result.failure.kind == "usage_limit" and result.failure.resets_at is not None
    local = result.failure.resets_at.astimezone()
    assert (local.hour, local.minute) == (15, 42)


def test_command_stderr_is_classified(tmp_path: Path) -> None:
    said = "Claude AI usage limit reached|1753441200"
    _events, result = run("command", command(tmp_path, ["sh", "-c", f"echo '{said}' >&2; exit 1"]))
    assert result.reason == "error" and result.failure is not None
    assert result.failure == Failure("usage_limit", said, None, at(2025, 7, 25, 11))
    _events, result = run("command", command(tmp_path, ["sh", "-c", "echo boom >&2; exit 3"]))
    assert result.failure is not None and result.failure.kind == "error"
    assert result.failure.text == "boom"


def test_claude_stopped_while_it_retries_a_429_is_a_rate_limit(tmp_path: Path) -> None:
    """Claude waits out a 429 itself (``api_retry`` lines); a timeout then names the limit."""
    lines = (CLAUDE / "rate-limit-retried.stream.jsonl").read_text().splitlines()[:2]
    assert '"subtype":"api_retry"' in lines[1]
    env = FakeCli(tmp_path, "claude", "2.1.328 (Claude Code)")([{"lines": lines, "hang": True}])
    workspace = tmp_path / "ws"
    workspace.mkdir()
    request = DispatchRequest(
        role="coder",
        workspace=workspace,
        run_dir=tmp_path,
        max_turns=3,
        next_prompt=lambda n: "go" if n == 1 else None,
        env=env,
    )
    session = get("claude-code").start(request)
    timer = threading.Timer(1.0, session.interrupt, ("timeout", 0.5))
    timer.start()
    assert list(session.events()) == []  # no turn: Claude was still waiting
    timer.join()
    result = result_of(session)
    assert result.reason == "timeout" and result.failure is not None
    assert (result.failure.kind, result.failure.status) == ("rate_limit", 429)


def test_a_stderr_tail_with_a_backtrace_names_the_error_above_it() -> None:
    """Codex with ``RUST_BACKTRACE=1`` (seen in the real-agent tests): the error, then frames;
    the detail was ``11: <unknown>``."""
    from cairn.agents.process import reason_line

    tail = (
        "Error: thread/resume failed: no rollout found for thread id 0199\n\n"
        "Stack backtrace:\n   0: std::backtrace::Backtrace::create\n"
        "   1: codex::main\n  11: <unknown>\n"
    )
    assert reason_line(tail) == "Error: thread/resume failed: no rollout found for thread id 0199"
    panic = "thread 'main' panicked at src/main.rs:3:5:\nboom\nstack backtrace:\n   0: x\n"
    assert reason_line(panic) == "boom"
    assert reason_line("warning: x\nthe last line\n") == "the last line"
    assert reason_line("") == ""
