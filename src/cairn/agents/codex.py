"""Codex: ``codex exec --json PROMPT``, continued with ``codex exec resume <thread_id> PROMPT``.

Codex has no turn cap, so cairn counts and enforces it. A turn here is one step of the agent:
a completed command, file change, tool call or message item. When the count reaches
``max_turns`` while Codex is still working, cairn stops it (SIGTERM to its process group) and
the dispatch ends as ``max_turns``. ``todo_list`` items become ``plan_updated`` events.

A failed turn is a ``turn.failed`` (after an ``error`` event) with the error's text, e.g.
``You’ve hit your usage limit. … try again at 10:28 AM.`` (local time) or ``exceeded retry
limit, last status: 429 Too Many Requests``; the dispatch's ``failure`` is
``cairn.agents.limits.classify`` of it (of the end of stderr when the stream said nothing).

``agent.command`` is the command up to and including ``exec`` and its options (default
``codex exec``), for example ``["codex", "exec", "--full-auto", "-m", "gpt-5-codex"]``.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from cairn.agents import limits, permissions, process
from cairn.agents.base import Denial, DispatchRequest, Event, Usage
from cairn.agents.streaming import StreamingAdapter, StreamingDispatch
from cairn.util.text import one_line

DEFAULT = ("codex", "exec")
MINIMUM_VERSION = (0, 100, 0)
STEP_ITEMS = {"command_execution", "file_change", "mcp_tool_call", "web_search", "agent_message"}
# What a command's output says when Codex's sandbox refused it (Codex reports no refusal of its
# own in exec mode: the command just fails). Network errors count only in a sandbox without it.
REFUSED = ("Read-only file system", "Operation not permitted")
NO_NETWORK = (
    "Couldn't connect to server",
    "Could not resolve host",
    "Network is unreachable",
    "Temporary failure in name resolution",
)


@dataclass
class ExecState:
    """What one ``codex exec --json`` stream has said so far."""

    base: int = 0
    turns: int = 0
    session_id: str | None = None
    completed: bool = False
    failure: str | None = None
    last_text: str | None = None
    usage: dict[str, Any] | None = None
    malformed: int = 0
    sandboxed: bool = True
    denials: list[Denial] = field(default_factory=list)

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
        if kind == "thread.started":
            self.session_id = data.get("thread_id") or self.session_id
        elif kind == "turn.completed":
            self.completed = True
            self.usage = data.get("usage")
        elif kind == "turn.failed":
            error = data.get("error") or {}
            self.failure = str(error.get("message") or "turn failed")
        elif kind == "error":
            self.failure = str(data.get("message") or "error")
        elif kind in ("item.completed", "item.updated", "item.started"):
            return self._item(kind, data.get("item") or {})
        return []

    def _item(self, kind: str, item: dict[str, Any]) -> list[Event]:
        item_type = item.get("type")
        turn = self.base + self.turns
        if item_type == "todo_list":
            items = [
                {"text": str(i.get("text", "")), "completed": bool(i.get("completed"))}
                for i in item.get("items") or []
                if isinstance(i, dict)
            ]
            return [Event("plan_updated", turn, {"items": items})]
        if kind != "item.completed" or item_type not in STEP_ITEMS:
            return []
        self.turns += 1
        turn = self.base + self.turns
        said = {"session_id": self.session_id} if self.session_id else {}
        events = [Event("turn_started", turn, said)]
        if item_type == "agent_message":
            self.last_text = str(item.get("text") or "")
            events.append(Event("message", turn, {"text": self.last_text}))
        else:
            refused = self._refused(item)
            call = {"name": item_type, "input": item, **step(item)}
            if refused is not None:
                call |= {"denied": True, "message": refused}
            events.append(Event("tool_use", turn, call))
            for change in item.get("changes") or []:
                if isinstance(change, dict) and change.get("path"):
                    events.append(Event("file_changed", turn, {"path": change["path"]}))
        events.append(Event("turn_completed", turn))
        return events

    def _refused(self, item: dict[str, Any]) -> str | None:
        """A failed command whose output shows the sandbox refused it is a denial; returns
        what the output said (None: not refused)."""
        if item.get("type") != "command_execution" or item.get("status") != "failed":
            return None
        output = str(item.get("aggregated_output") or "")
        markers = REFUSED + (NO_NETWORK if self.sandboxed else ())
        found = next((marker for marker in markers if marker in output), None)
        if found is not None:
            command = shell_command(str(item.get("command") or ""))
            self.denials.append(Denial("exec", one_line(command)))
        return found


def step(item: dict[str, Any]) -> dict[str, str]:
    """A step's ``tool`` and ``target`` as a person reads them: ``exec`` and the command,
    ``patch`` and the files, ``mcp`` and the server's tool, ``search`` and the query."""
    kind = item.get("type")
    if kind == "command_execution":
        return {"tool": "exec", "target": one_line(shell_command(str(item.get("command") or "")))}
    if kind == "file_change":
        paths = [str(c.get("path")) for c in item.get("changes") or [] if isinstance(c, dict)]
        return {"tool": "patch", "target": one_line(", ".join(paths))}
    if kind == "mcp_tool_call":
        return {"tool": "mcp", "target": one_line(f"{item.get('server')}.{item.get('tool')}")}
    return {"tool": "search", "target": one_line(str(item.get("query") or ""))}


def shell_command(command: str) -> str:
    """The model's command out of Codex's ``/bin/bash -c '…'`` wrapper."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if len(words) == 3 and words[1] in ("-c", "-lc") and words[0].endswith("sh"):
        return words[2]
    return command


class CodexDispatch(StreamingDispatch):
    """A running Codex dispatch (one agent invocation for a role, possibly several turns):
    ``codex exec`` per invocation, continued with ``exec resume <thread_id>``."""

    def __init__(self, request: DispatchRequest, argv: list[str]) -> None:
        super().__init__(request, argv)
        self._capped = False

    def _invocation(self, prompt: str) -> list[str]:
        exec_at = self.argv.index("exec")
        head, options = self.argv[: exec_at + 1], self.argv[exec_at + 1 :]
        if self.request.writable and not any("writable_roots" in a for a in options):
            # git's directory and cairn's state are outside the workspace sandbox's reach;
            # without them the agent can neither commit nor report progress
            roots = json.dumps([str(p) for p in self.request.writable])
            options = [*options, "-c", f"sandbox_workspace_write.writable_roots={roots}"]
        options += permissions.codex_options(self.request.permissions, options)
        resume = ["resume", self._session_id] if self._session_id else []
        return [*head, *options, "--json", "--skip-git-repo-check", *resume, prompt]

    def _stream(self) -> ExecState:
        options = self.argv[self.argv.index("exec") + 1 :]
        added = permissions.codex_options(self.request.permissions, options)
        return ExecState(base=self._turns, sandboxed=permissions.codex_sandboxed(options + added))

    def _seen(self, event: Event, child: process.Child) -> None:
        if event.kind == "turn_completed" and event.turn >= self.request.max_turns:
            self._cap(child)

    def _cap(self, child: process.Child) -> None:
        """The turn cap: Codex has none, so cairn stops it here."""
        if not self._capped and self._interrupt is None:
            self._capped = True
            child.terminate(self._grace or 5.0)

    def _continue(self, state: ExecState, returncode: int, child: process.Child) -> bool:
        if state.usage:  # only at a turn's end: a turn cut off mid-way reports none
            self._used(codex_usage(state.usage))
        self._denials += state.denials
        if self._interrupt is not None:
            self._set(self._interrupt)
            return False
        if self._capped:
            self._set("max_turns")
            return False
        if state.failure is not None or not state.completed:
            reason = process.classify(returncode, None) or "error"
            detail = state.failure or f"codex {process.describe_exit(returncode)} mid-turn"
            if state.malformed:
                detail += f" ({state.malformed} malformed stream lines)"
            failure = limits.classify(state.failure or child.stderr_tail() or detail)
            if state.failure is None:
                detail = child.with_stderr(detail)
            code = returncode if returncode > 0 else None
            self._set(reason, code, detail, failure if reason == "error" or failure.limit else None)
            return False
        if state.turns == 0:
            self._set("error", None, "codex finished a turn without a single step")
            return False
        return True


def codex_usage(usage: dict[str, Any]) -> Usage:
    """The tokens of one Codex turn, from its ``turn.completed`` line (Codex reports no cost).
    Codex counts cached input inside ``input_tokens``; here it is counted once, as cached."""

    def count(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) and value >= 0 else 0

    cached = count("cached_input_tokens")
    return Usage(
        input_tokens=max(count("input_tokens") - cached, 0),
        output_tokens=count("output_tokens"),
        cache_read_tokens=cached,
        cache_write_tokens=count("cache_write_input_tokens"),
    )


class CodexAdapter(StreamingAdapter):
    kind = "codex"
    reports_cost = False  # tokens only
    product = "Codex"
    install = "npm install -g @openai/codex"
    minimum_version = MINIMUM_VERSION
    default_command = DEFAULT
    dispatch_type = CodexDispatch

    def program(self, command: str | list[str] | None) -> list[str]:
        """The command up to ``exec`` and its options; ``exec`` is added when missing."""
        argv = super().program(command)
        if "exec" not in argv:
            argv.insert(1, "exec")
        return argv

    def resume_command(self, session_id: str) -> str:
        return f"codex resume {session_id}"
