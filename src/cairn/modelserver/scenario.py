"""The scenario file: which answer the scripted model gives to each model request.

Format (YAML)::

    responses:                      # used by both APIs unless overridden below
      - tool: {name: Write, input: {file_path: /tmp/x/hello.txt, content: "hi\\n"}}
      - text: "All done."
    anthropic: [...]                # optional: a list only for POST /v1/messages
    openai: [...]                   # optional: a list only for POST /v1/responses
    after_end: "done"               # answer once a list is used up (text, or an entry)

An entry answers text and/or tool calls, an HTTP ``error: STATUS`` (with ``message``), or a
``limit`` the way the real API says it (``resets_in`` seconds from the answer, default 3600):

- ``limit: usage``: the plan's quota is spent. Anthropic: 429 ``rate_limit_error`` with
  ``anthropic-ratelimit-unified-status: rejected`` and ``anthropic-ratelimit-unified-reset``
  (epoch seconds); OpenAI: 429 ``{"error": {"type": "usage_limit_reached", "plan_type": "plus",
  "resets_at": …, "resets_in_seconds": …}}``.
- ``limit: rate``: too many requests. Anthropic: 429 ``rate_limit_error``; OpenAI: 429
  ``rate_limit_exceeded``; both with ``retry-after: <resets_in>``.

Each API family (``anthropic``, ``openai``) has its **own cursor** over its list, so one scenario
can drive a Claude Code run and a Codex run the same way. Entries are used in order, one per
model request; nothing is matched by content.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cairn.util import yaml_io

APIS = ("anthropic", "openai")
ANSWER_KEYS = ("text", "tool", "tools", "error", "limit")
ENTRY_KEYS = {*ANSWER_KEYS, "sleep", "repeat", "message", "resets_in"}
LIMITS = ("usage", "rate")
RESETS_IN = 3600.0


class ScenarioError(ValueError):
    """The scenario file is malformed."""


@dataclass(frozen=True)
class ToolCall:
    name: str
    input: Any  # a mapping for JSON tools; a string for freeform (custom) tools


@dataclass(frozen=True)
class Entry:
    """One scripted answer: text and/or tool calls, an HTTP error, or a usage or rate limit
    (``limit``, resetting ``resets_in`` seconds after the answer); optionally delayed."""

    text: str | None = None
    tools: tuple[ToolCall, ...] = ()
    error: int | None = None
    message: str | None = None  # the error message for ``error`` and ``limit`` entries
    sleep: float = 0.0
    limit: str | None = None  # one of LIMITS
    resets_in: float = RESETS_IN

    @property
    def stop_reason(self) -> str:
        return "tool_use" if self.tools else "end_turn"


@dataclass(frozen=True)
class Scenario:
    responses: tuple[Entry, ...] = ()
    per_api: dict[str, tuple[Entry, ...]] = field(default_factory=dict)
    after_end: Entry = Entry(text="done")

    def entries(self, api: str) -> tuple[Entry, ...]:
        return self.per_api.get(api, self.responses)


def _tool(raw: Any, where: str) -> ToolCall:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise ScenarioError(f"{where}: a tool call needs a string `name` (got {raw!r})")
    unknown = set(raw) - {"name", "input"}
    if unknown:
        raise ScenarioError(f"{where}: unknown tool-call keys {sorted(unknown)}")
    value = raw.get("input", {})
    if not isinstance(value, dict | str):
        raise ScenarioError(f"{where}: tool `input` must be a mapping or a string")
    return ToolCall(raw["name"], value)


def parse_entry(raw: Any, where: str = "entry") -> Entry:
    """One scenario entry; a bare string is shorthand for ``{text: ...}``."""
    if isinstance(raw, str):
        return Entry(text=raw)
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: expected a mapping, got {raw!r}")
    unknown = set(raw) - ENTRY_KEYS
    if unknown:
        raise ScenarioError(f"{where}: unknown keys {sorted(unknown)}")
    if not any(key in raw for key in ANSWER_KEYS):
        raise ScenarioError(f"{where}: needs one of {', '.join(ANSWER_KEYS)}")
    text = raw.get("text")
    if text is not None and not isinstance(text, str):
        raise ScenarioError(f"{where}: `text` must be a string")
    tools: list[ToolCall] = []
    if "tool" in raw:
        tools.append(_tool(raw["tool"], where))
    if "tools" in raw:
        if not isinstance(raw["tools"], list) or not raw["tools"]:
            raise ScenarioError(f"{where}: `tools` must be a non-empty list")
        tools.extend(_tool(item, where) for item in raw["tools"])
    error = raw.get("error")
    if error is not None:
        if isinstance(error, bool) or not isinstance(error, int) or not 400 <= error <= 599:
            raise ScenarioError(f"{where}: `error` must be an HTTP status 400-599")
        if text is not None or tools:
            raise ScenarioError(f"{where}: an `error` entry cannot also answer text or tools")
    limit = raw.get("limit")
    if limit is not None:
        if limit not in LIMITS:
            raise ScenarioError(f"{where}: `limit` must be one of {', '.join(LIMITS)}")
        if text is not None or tools or error is not None:
            raise ScenarioError(f"{where}: a `limit` entry cannot also answer text, tools or error")
    resets_in = raw.get("resets_in", RESETS_IN)
    if isinstance(resets_in, bool) or not isinstance(resets_in, int | float) or resets_in < 0:
        raise ScenarioError(f"{where}: `resets_in` must be a non-negative number of seconds")
    if "resets_in" in raw and limit is None:
        raise ScenarioError(f"{where}: `resets_in` goes with `limit`")
    message = raw.get("message")
    if message is not None and not isinstance(message, str):
        raise ScenarioError(f"{where}: `message` must be a string")
    sleep = raw.get("sleep", 0)
    if isinstance(sleep, bool) or not isinstance(sleep, int | float) or sleep < 0:
        raise ScenarioError(f"{where}: `sleep` must be a non-negative number of seconds")
    return Entry(
        text=text,
        tools=tuple(tools),
        error=error,
        message=message,
        sleep=float(sleep),
        limit=limit,
        resets_in=float(resets_in),
    )


def _entries(raw: Any, where: str) -> tuple[Entry, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ScenarioError(f"{where}: expected a list of entries")
    out: list[Entry] = []
    for i, item in enumerate(raw):
        entry = parse_entry(item, f"{where}[{i}]")
        repeat = item.get("repeat", 1) if isinstance(item, dict) else 1
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise ScenarioError(f"{where}[{i}]: `repeat` must be a positive integer")
        out.extend([entry] * repeat)
    return tuple(out)


def parse_scenario(data: Any) -> Scenario:
    """A scenario from already-loaded YAML/JSON data (``None`` is the empty scenario)."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ScenarioError("a scenario is a mapping with a `responses` list")
    unknown = set(data) - {"responses", "after_end", *APIS}
    if unknown:
        raise ScenarioError(f"unknown scenario keys {sorted(unknown)}")
    per_api = {api: _entries(data[api], api) for api in APIS if api in data}
    after_end = parse_entry(data.get("after_end", "done"), "after_end")
    return Scenario(_entries(data.get("responses"), "responses"), per_api, after_end)


def load_scenario(path: str | Path) -> Scenario:
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = yaml_io.safe_load(text)
    except yaml_io.YAMLError as exc:
        raise ScenarioError(f"{path}: not valid YAML: {exc}") from exc
    return parse_scenario(data)


class Script:
    """A scenario being played: one cursor per API family, safe to use from many threads."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self._cursor = dict.fromkeys(APIS, 0)
        self._lock = threading.Lock()

    def next(self, api: str) -> tuple[int | None, Entry]:
        """The next entry for ``api`` and its position in that API's list (None once used up)."""
        entries = self.scenario.entries(api)
        with self._lock:
            position = self._cursor[api]
            if position >= len(entries):
                return None, self.scenario.after_end
            self._cursor[api] = position + 1
            return position, entries[position]

    def remaining(self, api: str) -> int:
        with self._lock:
            return max(0, len(self.scenario.entries(api)) - self._cursor[api])


# Helpers shared by the two API encoders.


def chunks(text: str, parts: int = 3) -> list[str]:
    """``text`` cut into up to ``parts`` non-empty pieces (one empty piece for ``""``)."""
    if not text:
        return [""]
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def estimate_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: about four characters a token, at least one."""
    return max(1, len(text) // 4)
