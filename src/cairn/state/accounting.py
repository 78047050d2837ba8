"""What a run's dispatches cost and what the agent was refused, read from the journal.

Every ``dispatch_finished`` event carries the dispatch's ``usage`` (tokens in, out, cache read
and written, and ``cost_usd`` where the agent reports one), its ``denials`` (``{"tool",
"target"}``), its ``error`` text and its ``transcript`` file. A run's totals are the sum over its
journal, which a resumed run keeps appending to, so they count every session of the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

TOKEN_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
DENIAL_HINT = "allow them with agent.allow or agent.command; see docs/agents.md"
# Codex's refusals are its sandbox's: agent.allow does not reach them, the sandbox's own keys do.
CODEX_DENIAL_HINT = (
    "Codex's sandbox refused them (agent.allow does not apply to Codex); widen it in "
    "agent.command: -c sandbox_workspace_write.network_access=true for the network, "
    "-c 'sandbox_workspace_write.writable_roots=[\"DIR\"]' for more directories; "
    "see docs/agents.md"
)
TARGET_LIMIT = 40  # characters of a denied call's target shown in the one-line text
ERROR_LIMIT = 300  # characters of an agent's error text in a summary's status line


def usage(tokens: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A usage record (``Usage.as_dict()``'s shape) from what ``tokens`` has of it."""
    found = tokens or {}
    made: dict[str, Any] = {}
    for key in TOKEN_KEYS:
        value = found.get(key)
        made[key] = value if isinstance(value, int) and not isinstance(value, bool) else 0
    made["total_tokens"] = sum(made[key] for key in TOKEN_KEYS)
    cost = found.get("cost_usd")
    number = isinstance(cost, int | float) and not isinstance(cost, bool)
    made["cost_usd"] = round(float(cost), 6) if number and cost is not None else None
    return made


def add(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """The sum of two usage records; the cost is None only when neither has one."""
    left, right = usage(a), usage(b)
    made = {key: left[key] + right[key] for key in TOKEN_KEYS}
    costs = [c for c in (left["cost_usd"], right["cost_usd"]) if c is not None]
    made["cost_usd"] = sum(costs) if costs else None
    return usage(made)


def total(records: Iterable[Mapping[str, Any] | None]) -> dict[str, Any]:
    summed = usage()
    for record in records:
        summed = add(summed, record or {})
    return summed


def dispatches(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One brief per finished dispatch, numbered in journal order (across resumes)."""
    found: list[dict[str, Any]] = []
    for event in events:
        if event.get("event") != "dispatch_finished":
            continue
        found.append(
            {
                "number": len(found) + 1,
                "role": event.get("role"),
                "agent": event.get("agent") if isinstance(event.get("agent"), str) else None,
                "reason": event.get("reason"),
                "turns": event.get("turns"),
                # None: the agent reported no usage at all (unknown, not 0)
                "usage": usage(event["usage"]) if isinstance(event.get("usage"), dict) else None,
                "denials": denials_in(event),
                "error": event.get("error") if isinstance(event.get("error"), str) else None,
                "transcript": event.get("transcript"),
            }
        )
    return found


def by_agent(briefs: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any] | None]:
    """What each agent of the run used (its dispatches' usage; ``dispatches``' briefs), by the
    agent's name, in the order they first dispatched; a journal from before agents were named
    counts under ``"agent"``. An agent none of whose dispatches reported usage maps to None
    (unknown, never 0)."""
    found: dict[str, list[Mapping[str, Any] | None]] = {}
    for brief in briefs:
        found.setdefault(str(brief.get("agent") or "agent"), []).append(brief.get("usage"))
    return {
        name: total(used) if any(u is not None for u in used) else None
        for name, used in found.items()
    }


def denials_in(event: Mapping[str, Any]) -> list[dict[str, str]]:
    listed = event.get("denials")
    if not isinstance(listed, list):
        return []
    return [
        {"tool": str(d.get("tool", "")), "target": str(d.get("target", ""))}
        for d in listed
        if isinstance(d, dict)
    ]


def denial_hint(kind: str | None) -> str:
    """How to let an agent of ``kind`` make the calls it was denied."""
    return CODEX_DENIAL_HINT if kind == "codex" else DENIAL_HINT


def agent_kind(events: Iterable[Mapping[str, Any]]) -> str | None:
    """The agent kind of the run's latest session (its latest ``run_started`` event)."""
    kinds = [e.get("agent") for e in events if e.get("event") == "run_started"]
    return str(kinds[-1]) if kinds and kinds[-1] else None


def tokens_text(count: int) -> str:
    """``950``, ``18k``, ``182k``, ``1.4M``."""
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.0f}k"
    return f"{count / 1_000_000:.1f}M"


def usage_text(record: Mapping[str, Any] | None) -> str:
    """``182k tokens · $0.84``; ``""`` when nothing was counted."""
    made = usage(record)
    parts = []
    if made["total_tokens"]:
        parts.append(f"{tokens_text(made['total_tokens'])} tokens")
    if made["cost_usd"] is not None:
        parts.append(f"${made['cost_usd']:.2f}")
    return " · ".join(parts)


def run_usage_text(record: Mapping[str, Any] | None, unknown: int) -> str:
    """``usage_text``, and how many dispatches' usage is unknown (cut off before their agent
    reported any): ``182k tokens · $0.84 · usage of 1 dispatch unknown``."""
    from cairn.util.text import counted

    parts = [usage_text(record)]
    if unknown:
        parts.append(f"usage of {counted(unknown, 'dispatch', 'dispatches')} unknown")
    return " · ".join(part for part in parts if part)


def denials_text(denials: Iterable[Mapping[str, Any]]) -> str:
    """``agent was denied 5 tool calls: Bash ×3 (curl …), Write ×2``; ``""`` for none."""
    listed = list(denials)
    if not listed:
        return ""
    counts = Counter(str(d.get("tool", "?")) for d in listed)
    parts = []
    for tool, count in counts.most_common():
        first = next((str(d.get("target") or "") for d in listed if d.get("tool") == tool), "")
        example = first if len(first) <= TARGET_LIMIT else first[: TARGET_LIMIT - 1] + "…"
        parts.append(f"{tool} ×{count}" + (f" ({example})" if example else ""))
    calls = "call" if len(listed) == 1 else "calls"
    return f"agent was denied {len(listed)} tool {calls}: {', '.join(parts)}"


def error_text(text: str | None, limit: int = ERROR_LIMIT) -> str | None:
    """An agent's error text on one line, at most ``limit`` characters."""
    if not text:
        return None
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
