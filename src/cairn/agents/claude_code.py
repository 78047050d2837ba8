"""Claude Code: ``claude -p PROMPT --output-format stream-json --verbose --max-turns N``.

Claude runs its own agent loop; one invocation may take many turns. A turn is one assistant
message (a model call). The final ``result`` line says how it ended; ``error_max_turns`` is the
turn cap (the CLI reports ``num_turns`` = cap + 1 then, and exits 1). When Claude finishes with
work left and turns to spare, the dispatch continues the same session with
``--resume <session_id>`` and the continuation prompt. Inside Claude's loop, cairn's
``PostToolUse`` hook (passed with ``--settings``, never written into the user's files) adds the
wrap-up directive once the turns left reach ``budget_pressure_turns``.

An API failure ends with a ``result`` line ``is_error: true`` (its ``subtype`` still
``success``), ``terminal_reason: api_error``, ``api_error_status`` and the error text in
``result``; a usage limit of a subscription comes first as a ``rate_limit_event`` whose
``status`` is ``rejected`` with ``resetsAt`` (epoch seconds). The dispatch's ``failure`` is
``cairn.agents.limits.classify`` of that text, status and reset time.
"""

from __future__ import annotations

import json
import shlex
import sys
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from cairn.agents import limits, permissions, process
from cairn.agents.base import Denial, DispatchRequest, Event, Usage
from cairn.agents.streaming import StreamingAdapter, StreamingDispatch
from cairn.terms import CLAUDE_SYNTHETIC_MODEL, ENV_DISPATCH_ID, ENV_MAX_TURNS, ENV_PRESSURE_TURNS
from cairn.util.text import one_line, tool_target

PROGRAM = "claude"
MINIMUM_VERSION = (2, 1, 0)
FILE_TOOLS = {"Write", "Edit", "MultiEdit", "NotebookEdit"}
REFUSED = ("rejected", "denied")  # a rate_limit_event's status when the plan's window is spent


def hook_settings(extra: dict[str, Any] | None = None) -> str:
    """``--settings`` JSON that registers cairn's in-loop budget hook (and ``extra`` keys: the
    permission preset's rules)."""
    command = shlex.join([sys.executable, "-m", "cairn", "hook", "claude", "post-tool-use"])
    hook = {"matcher": "*", "hooks": [{"type": "command", "command": command}]}
    return json.dumps({"hooks": {"PostToolUse": [hook]}, **(extra or {})})


def denials(result: dict[str, Any]) -> list[Denial]:
    """The tool calls Claude was refused, from its ``result`` line's ``permission_denials``."""
    found = result.get("permission_denials")
    refused = []
    for item in found if isinstance(found, list) else []:
        if not isinstance(item, dict):
            continue
        target = tool_target(item.get("tool_input"))
        refused.append(Denial(str(item.get("tool_name") or "?"), one_line(target)))
    return refused


@dataclass
class StreamState:
    """What one invocation's stream has said so far."""

    base: int = 0
    turns: int = 0
    session_id: str | None = None
    result: dict[str, Any] | None = None
    last_text: str | None = None
    malformed: int = 0
    usage: Usage | None = None  # the assistant messages' usage (a cut-off invocation's)
    denied: list[Denial] = field(default_factory=list)  # its permission_denied events
    api_status: int | None = None  # the HTTP status of the API error it reported
    resets_at: datetime | None = None  # when the usage limit it was refused on resets
    retrying: str | None = None  # the API error Claude is retrying now (its api_retry line)
    _message: str | None = field(default=None, repr=False)
    _calls: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)  # by id

    def feed(self, line: str) -> list[Event]:
        if not line.strip():
            return []
        try:
            data = json.loads(line)
        except ValueError:
            self.malformed += 1
            return []
        if not isinstance(data, dict):
            self.malformed += 1
            return []
        kind = data.get("type")
        if kind == "system" and data.get("subtype") == "init":
            self.session_id = data.get("session_id") or self.session_id
        elif kind == "system" and data.get("subtype") == "permission_denied":
            return self._denied(data)
        elif kind == "assistant" and not data.get("parent_tool_use_id"):
            return self._assistant(data)
        elif kind == "user" and not data.get("parent_tool_use_id"):
            return self._close_turn()
        elif kind == "system" and data.get("subtype") == "api_retry":
            self.retrying = str(data.get("error") or "api error")
            self._api_error({"api_error_status": data.get("error_status")})
        elif kind == "rate_limit_event":
            self._rate_limit(data.get("rate_limit_info"))
        elif kind == "result":
            self.result = data
            self.session_id = data.get("session_id") or self.session_id
            self._api_error(data)
            return self._close_turn()
        return []

    def _rate_limit(self, info: Any) -> None:
        """A ``rate_limit_event``: refused (``rejected``) until ``resetsAt``, or just a notice."""
        if not isinstance(info, dict) or info.get("status") not in REFUSED:
            return
        reset = info.get("resetsAt")
        if isinstance(reset, int | float) and not isinstance(reset, bool) and reset > 0:
            self.resets_at = datetime.fromtimestamp(reset, UTC)

    def _api_error(self, data: dict[str, Any]) -> None:
        status = data.get("api_error_status")
        if isinstance(status, int) and not isinstance(status, bool):
            self.api_status = status

    def failure(self, text: str | None) -> limits.Failure:
        """What the failure whose error text is ``text`` was, with what the stream said."""
        return limits.classify(text, status=self.api_status, resets_at=self.resets_at)

    def _assistant(self, data: dict[str, Any]) -> list[Event]:
        message = data.get("message") or {}
        if message.get("model") == CLAUDE_SYNTHETIC_MODEL:
            self._api_error(data)
            return []  # Claude's own note (an API error's text), not a model call
        ident = message.get("id") or data.get("uuid")
        self.retrying = None
        events = []
        if ident != self._message:
            events += self._close_turn()
            self._message = ident
            self.turns += 1
            said = {"session_id": self.session_id} if self.session_id else {}
            events.append(Event("turn_started", self.base + self.turns, said))
            if isinstance(message.get("usage"), dict):
                self.usage = (self.usage or Usage()) + claude_usage({"usage": message["usage"]})
        turn = self.base + self.turns
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and block.get("text"):
                self.last_text = str(block["text"])
                events.append(Event("message", turn, {"text": self.last_text}))
            elif block.get("type") == "tool_use":
                name = str(block.get("name", ""))
                tool_input = block.get("input") or {}
                call = {"name": name, "input": tool_input, "id": block.get("id")}
                call |= {"tool": name, "target": one_line(tool_target(tool_input))}
                self._calls[str(block.get("id"))] = call
                events.append(Event("tool_use", turn, call))
                path = tool_input.get("file_path") if isinstance(tool_input, dict) else None
                if name in FILE_TOOLS and path:
                    events.append(Event("file_changed", turn, {"path": path}))
        return events

    def _denied(self, data: dict[str, Any]) -> list[Event]:
        """Claude's ``permission_denied`` line: the tool call it names was refused."""
        call = self._calls.get(str(data.get("tool_use_id")), {})
        given = {**data, "tool_input": call.get("input")}
        self.denied += denials({"permission_denials": [given]})  # kept if the result never comes
        tool = str(data.get("tool_name") or call.get("tool") or "?")
        message = one_line(str(data.get("message") or data.get("decision_reason") or ""))
        said = {"id": data.get("tool_use_id"), "tool": tool, "message": message}
        said["target"] = call.get("target", "")
        return [Event("tool_denied", self.base + self.turns, said)]

    def _close_turn(self) -> list[Event]:
        if self._message is None:
            return []
        self._message = None
        return [Event("turn_completed", self.base + self.turns)]


class ClaudeDispatch(StreamingDispatch):
    """A running Claude Code dispatch (one agent invocation for a role, possibly several
    turns): ``claude -p`` per invocation, continued with ``--resume <session_id>``."""

    def __init__(self, request: DispatchRequest, argv: list[str]) -> None:
        super().__init__(request, argv)
        self._dispatch_id = f"{request.role}-{uuid.uuid4().hex[:12]}"

    def _invocation(self, prompt: str) -> list[str]:
        argv = [*self.argv, "-p", prompt, "--output-format", "stream-json", "--verbose"]
        argv += ["--max-turns", str(self.request.max_turns - self._turns)]
        request = self.request
        preset = permissions.claude_settings(request.permissions, request.allow)
        argv += ["--settings", hook_settings(preset)]
        argv += permissions.claude_flags(request.permissions, self.argv)
        if self._session_id:
            argv += ["--resume", self._session_id]
        return argv

    def _env(self) -> dict[str, str]:
        return {
            **self.request.env,
            ENV_MAX_TURNS: str(self.request.max_turns),
            ENV_PRESSURE_TURNS: str(self.request.pressure_turns),
            ENV_DISPATCH_ID: self._dispatch_id,
        }

    def _stream(self) -> StreamState:
        return StreamState(base=self._turns)

    def _continue(self, state: StreamState, returncode: int, child: process.Child) -> bool:
        """Whether to run another invocation of the same session; sets the result if not."""
        result = state.result
        if result is not None:  # what the invocation used and was refused, in full
            used = claude_usage(result)
            if used.cost_usd is not None:  # the session's cost so far: this one's is the rise
                before, self._session_cost = self._session_cost or 0.0, used.cost_usd
                used = replace(used, cost_usd=round(max(0.0, used.cost_usd - before), 6))
            self._used(used)
            self._denials += denials(result)
        else:  # cut off: what its stream said so far
            if state.usage is not None:
                self._used(state.usage)
            self._denials += state.denied
        if self._interrupt is not None:  # stopped, perhaps while Claude waited out a limit
            failure = state.failure(state.retrying) if state.retrying else None
            self._set(self._interrupt, failure=failure if failure and failure.limit else None)
            return False
        if result is None:
            reason = process.classify(returncode, None) or "error"
            detail = f"claude {process.describe_exit(returncode)} with no result line"
            if state.malformed:
                detail += f" ({state.malformed} malformed stream lines)"
            failure = state.failure(child.stderr_tail() or detail)
            if reason != "error" and not failure.limit:
                failure = None
            code = returncode if returncode > 0 else None
            self._set(reason, code, child.with_stderr(detail), failure)
            return False
        subtype = result.get("subtype")
        if subtype == "error_max_turns" or result.get("terminal_reason") == "max_turns":
            self._set("max_turns", returncode if returncode > 0 else None)
            return False
        if subtype != "success" or result.get("is_error"):
            errors = result.get("errors") or [result.get("result") or subtype]
            said = "; ".join(str(e) for e in errors)
            what = "reported an error" if subtype == "success" else f"ended with {subtype}"
            detail = f"claude {what}: {said[:300]}"
            code = result.get("api_error")  # e.g. usage_limit_reached, when its words are not
            failure = state.failure(f"{code}\n{said}" if isinstance(code, str) else said)
            self._set("error", returncode if returncode > 0 else None, detail, failure)
            return False
        if isinstance(result.get("result"), str):
            self._final = result["result"]
        if state.turns == 0:
            self._set("error", None, "claude finished without a single model turn")
            return False
        return True


def claude_usage(result: dict[str, Any]) -> Usage:
    """The tokens and cost of one ``claude -p`` invocation, from its ``result`` line."""
    found = result.get("usage")
    usage: dict[str, Any] = found if isinstance(found, dict) else {}
    cost = result.get("total_cost_usd")
    return Usage(
        input_tokens=_count(usage.get("input_tokens")),
        output_tokens=_count(usage.get("output_tokens")),
        cache_read_tokens=_count(usage.get("cache_read_input_tokens")),
        cache_write_tokens=_count(usage.get("cache_creation_input_tokens")),
        cost_usd=float(cost) if isinstance(cost, int | float) and cost >= 0 else None,
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


class ClaudeCodeAdapter(StreamingAdapter):
    kind = "claude-code"
    product = "Claude Code"
    install = "npm install -g @anthropic-ai/claude-code"
    minimum_version = MINIMUM_VERSION
    default_command = (PROGRAM,)
    dispatch_type = ClaudeDispatch

    def resume_command(self, session_id: str) -> str:
        return f"claude --resume {session_id}"
