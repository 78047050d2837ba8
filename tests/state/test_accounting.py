"""What catch-up and status say about a run's usage, denials, error and transcripts; the sums
and words of ``cairn.state.accounting``; the summary's usage, Blocked note and error detail."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cairn import summary
from cairn.state import accounting
from cairn.state.catchup import catchup
from helpers import cairn, scripted_project

TICKET = "T-1"
NOW = datetime(2026, 11, 30, 10, 15, tzinfo=UTC)

SCRIPT: dict[str, Any] = {
    "coder": [
        [
            {"usage": {"input_tokens": 180_000, "output_tokens": 2_150, "cost_usd": 0.84}},
            {"deny": {"tool": "Bash", "target": "curl https://example.com"}},
            {"cairn": ["task", "done", "1"]},
        ],
        [{"fail": "API Error: 500 Internal Server Error"}],
    ]
}


@pytest.fixture
def interrupted(tmp_path: Path) -> Path:
    repo, plan = scripted_project(tmp_path, SCRIPT)
    assert cairn("run", str(plan), cwd=repo).returncode == 3
    return repo


def test_catchup_json_reports_usage_denials_error_and_transcripts(interrupted: Path) -> None:
    result = cairn("catchup", TICKET, "--json", cwd=interrupted)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["usage"]["total_tokens"] == 182_150 and report["usage"]["cost_usd"] == 0.84
    assert report["error"] == "API Error: 500 Internal Server Error"
    assert report["denials"] == [{"tool": "Bash", "target": "curl https://example.com"}]
    assert report["transcripts"] == ["01_coder_transcript.jsonl"]
    (brief,) = report["dispatches"]
    assert brief["number"] == 1 and brief["reason"] == "error"
    assert brief["transcript"] == "01_coder_transcript.jsonl"
    assert brief["usage"]["input_tokens"] == 180_000


def test_catchup_text_reports_usage_denials_error_and_transcripts(interrupted: Path) -> None:
    result = cairn("catchup", TICKET, cwd=interrupted)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "  error: API Error: 500 Internal Server Error" in lines
    assert (
        "  blocked: agent was denied 1 tool call: Bash ×1 (curl https://example.com) — allow "
        "them with agent.allow or agent.command; see docs/agents.md"
    ) in lines
    assert "  usage: 182k tokens · $0.84 in 1 dispatch" in lines
    assert "  transcripts: 01_coder_transcript.jsonl (cairn logs T-1)" in lines
    summary_line = next(line for line in lines if line.startswith("  summary: "))
    assert "; API Error: 500 Internal Server Error (" in summary_line
    context = cairn("catchup", TICKET, "--format", "context", cwd=interrupted).stdout
    assert "The agent was denied 1 tool call: Bash ×1" in context


def test_catchup_in_process_matches(interrupted: Path) -> None:
    report = catchup(interrupted, TICKET)
    assert report.usage is not None and report.usage["output_tokens"] == 2_150
    assert report.error == "API Error: 500 Internal Server Error"


def test_status_json_reads_usage_from_the_summary_head(interrupted: Path) -> None:
    (row,) = json.loads(cairn("status", "--json", cwd=interrupted).stdout)
    assert row["usage"] == accounting.usage(
        {"input_tokens": 180_000, "output_tokens": 2_150, "cost_usd": 0.84}
    )


def test_status_json_usage_is_null_before_any_is_reported(tmp_path: Path) -> None:
    repo, plan = scripted_project(tmp_path, {"coder": [[{"cairn": ["task", "done", "1"]}]]})
    cairn("run", str(plan), cwd=repo)
    (row,) = json.loads(cairn("status", "--json", cwd=repo).stdout)
    assert row["usage"] is None


# --- the sums and the words ---------------------------------------------------------------------


def test_sums_keep_a_cost_only_where_one_was_reported() -> None:
    a = accounting.usage({"input_tokens": 10, "output_tokens": 5})
    b = accounting.usage({"input_tokens": 1, "cache_write_tokens": 4, "cost_usd": 0.1})
    assert a["cost_usd"] is None
    total = accounting.total([a, b, None])
    assert total["total_tokens"] == 20 and total["cost_usd"] == 0.1
    assert accounting.add(a, a)["cost_usd"] is None


@pytest.mark.parametrize(
    ("tokens", "cost", "text"),
    [(0, None, ""), (950, None, "950 tokens"), (182_150, 0.84, "182k tokens · $0.84"),
     (1_400_000, 12.5, "1.4M tokens · $12.50"), (0, 0.0, "$0.00")],
)  # fmt: skip
def test_usage_text(tokens: int, cost: float | None, text: str) -> None:
    assert accounting.usage_text({"input_tokens": tokens, "cost_usd": cost}) == text


def test_denials_text_counts_by_tool_and_cuts_long_targets() -> None:
    long = "curl " + "x" * 80
    denials = [
        {"tool": "Write", "target": "a"},
        {"tool": "Bash", "target": long},
        {"tool": "Bash", "target": "y"},
    ]
    text = accounting.denials_text(denials)
    assert text.startswith("agent was denied 3 tool calls: Bash ×2 (curl xxx")
    assert "…), Write ×1 (a)" in text
    assert accounting.denials_text([]) == ""


def test_error_text_is_one_line_and_capped() -> None:
    assert accounting.error_text("API Error:\n  500\tboom") == "API Error: 500 boom"
    assert len(accounting.error_text("x" * 1000) or "") == accounting.ERROR_LIMIT
    assert accounting.error_text(None) is None


# --- the change summary -------------------------------------------------------------------------


def noted() -> summary.Summary:
    s = summary.scaffold_tasks(TICKET, "20261130-101500Z", [(1, "One"), (2, "Two")], NOW)
    s = summary.start_task(s, 1, NOW)
    s = summary.account(
        s,
        {"input_tokens": 181_200, "output_tokens": 950, "cache_read_tokens": 3,
         "cache_write_tokens": 0, "cost_usd": 0.84},
        "agent was denied 1 tool call: Bash ×1 (curl x)",
        NOW,
    )  # fmt: skip
    return summary.mark_interrupted(
        s, "error", NOW, ref="refs/cairn/wip/T-1", commit="5aa0bec17542", detail="API Error: 500"
    )


def test_usage_blocked_and_detail_round_trip() -> None:
    s = noted()
    text = summary.render(s)
    assert '  "usage": {\n    "input_tokens": 181200,' in text and '"cost_usd": 0.84' in text
    assert (
        "## Status\nInterrupted — error during task 1 of 2; work saved at refs/cairn/wip/T-1 "
        "(5aa0bec17542); API Error: 500\n- **Blocked:** agent was denied 1 tool call: Bash ×1 "
        "(curl x)\n"
    ) in text
    assert summary.parse(text) == s
    again = summary.account(s, msgspec.structs.asdict(s.usage) if s.usage else None, s.blocked, NOW)
    assert again is s


def test_status_prose_after_a_blank_line_is_not_a_blocked_note() -> None:
    s = summary.scaffold_tasks(TICKET, None, [(1, "One")], NOW)
    text = summary.render(s).replace(
        "Not started — 0 of 1 tasks\n", "Not started — 0 of 1 tasks\n\n- **Blocked:** hand\n"
    )
    parsed = summary.parse(text)
    assert parsed.blocked is None and parsed.prose["status"] == ["- **Blocked:** hand"]
    assert summary.render(parsed) == text


def test_a_detail_needs_an_interrupted_status() -> None:
    from cairn.summary.model import Status

    with pytest.raises(ValueError, match="only for an interrupted status"):
        msgspec.convert({"state": "in_progress", "detail": "boom"}, Status)


def test_a_summary_without_usage_renders_as_before() -> None:
    s = summary.scaffold_tasks(TICKET, None, [(1, "One")], NOW)
    assert "usage" not in summary.render(s)


def test_the_denial_hint_is_the_agents_own() -> None:
    """Codex's refusals are its sandbox's: agent.allow does nothing for them (issue 22)."""
    assert "agent.allow or agent.command" in accounting.denial_hint("claude-code")
    codex = accounting.denial_hint("codex")
    assert "allow them with agent.allow" not in codex
    assert "sandbox_workspace_write.network_access=true" in codex
    started = [{"event": "run_started", "agent": "claude-code"}, {"event": "turn"}]
    assert accounting.agent_kind([*started, {"event": "run_started", "agent": "codex"}]) == "codex"
    assert accounting.agent_kind([]) is None
