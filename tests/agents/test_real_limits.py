"""The real Claude Code and Codex CLIs answered a usage limit, a rate limit and refused
credentials by cairn's scripted model server: each dispatch ends as ``error`` with the
``Result.failure`` the orchestrator acts on (``usage_limit`` with its reset time,
``rate_limit``, ``auth``). One model request each; Claude's own retries are off
(``CLAUDE_CODE_MAX_RETRIES=0``; it would otherwise wait out a 429 for minutes) and Codex's too
(``request_max_retries=0``). The captured streams are in tests/fixtures/ (README: "Limits")."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agents.real_agents import CLAUDE_COMMAND, FOREIGN, agent_env, codex_command
from cairn import agents
from cairn.agents.base import DispatchRequest, Result
from cairn.modelserver import ModelServer

pytestmark = pytest.mark.slow

RESETS_IN = 7200
# Claude Code reads a subscription's usage window (the anthropic-ratelimit-unified-* headers)
# only when it is logged in to one: an OAuth token, not an API key.
SUBSCRIPTION = {"CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-fake"}
NO_RETRIES = {"CLAUDE_CODE_MAX_RETRIES": "0"}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The adapters add the request's env to this process's: nothing may point the CLIs
    elsewhere (a real key, an outer cairn run)."""
    for name in list(os.environ):
        if name.startswith(FOREIGN):
            monkeypatch.delenv(name)


def dispatch(
    kind: str, tmp: Path, entry: dict[str, Any], status: int, env: dict[str, str]
) -> Result:
    """One dispatch of the real ``kind`` against a server that answers ``entry`` (HTTP
    ``status``) every time; the CLI asks once."""
    repo = tmp / "repo"
    repo.mkdir()
    with ModelServer({"after_end": entry}) as server:
        given = {**agent_env(tmp, server.url), **NO_RETRIES, **env}
        if "CLAUDE_CODE_OAUTH_TOKEN" in env:
            del given["ANTHROPIC_API_KEY"]
        command = CLAUDE_COMMAND
        if kind == "codex":
            command = codex_command(server.url, repo, git_writable=False)
        request = DispatchRequest(
            role="coder",
            workspace=repo,
            run_dir=tmp / "run",
            max_turns=3,
            next_prompt=lambda n: "Do the plan." if n == 1 else None,
            env=given,
            command=command,
        )
        session = agents.get(kind).start(request)
        list(session.events())
        assert session.result is not None
        assert [status for _, _, status in server.seen if status != 200] == [status]
        return session.result


def usage(kind: str, tmp: Path) -> tuple[Result, datetime, datetime]:
    """The dispatch, and the earliest and latest time the server's limit can reset."""
    before = datetime.now(UTC)
    entry = {"limit": "usage", "resets_in": RESETS_IN}
    result = dispatch(kind, tmp, entry, 429, SUBSCRIPTION if kind == "claude-code" else {})
    window = timedelta(seconds=RESETS_IN)
    return result, before + window, datetime.now(UTC) + window


@pytest.mark.parametrize("kind", ["claude-code", "codex"])
def test_usage_limit_is_known_with_its_reset_time(
    kind: str, tmp_path: Path, claude_bin: Path, codex_bin: Path
) -> None:
    started = time.monotonic()
    result, earliest, latest = usage(kind, tmp_path)
    assert result.reason == "error" and result.failure is not None
    assert result.failure.kind == "usage_limit" and result.failure.limit
    assert result.failure.resets_at is not None
    # Claude: the rate_limit_event's resetsAt (to the second); Codex: "try again at 10:33 AM"
    slack = timedelta(seconds=1 if kind == "claude-code" else 60)  # to the second or minute
    assert earliest - slack <= result.failure.resets_at <= latest
    assert "hit your" in result.failure.text
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("kind", ["claude-code", "codex"])
@pytest.mark.parametrize(
    ("entry", "failure"),
    [
        ({"limit": "rate", "resets_in": 3600}, "rate_limit"),
        ({"error": 401, "message": "invalid x-api-key"}, "auth"),
    ],
)
def test_rate_limit_and_refused_credentials_are_known(
    kind: str,
    entry: dict[str, Any],
    failure: str,
    tmp_path: Path,
    claude_bin: Path,
    codex_bin: Path,
) -> None:
    status = 429 if "limit" in entry else entry["error"]
    result = dispatch(kind, tmp_path, entry, status, {})
    assert result.reason == "error" and result.failure is not None
    assert (result.failure.kind, result.failure.resets_at) == (failure, None)
    assert result.failure.limit == (failure == "rate_limit")
