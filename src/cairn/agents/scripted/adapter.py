"""The ``scripted`` agent kind: a deterministic agent that follows a YAML script, for demos, tests
and fault injection. It runs as a real subprocess (``cairn.agents.scripted.program``) in its own
process group, so kills, crashes and hangs are real.

Script: a mapping role → list of turns; a turn is a list of actions; an action is a one-key
mapping (see ``ACTIONS``). The adapter validates the whole script before spawning anything, so a
bad script is ``BadInput`` naming the file, the role, the turn and the action.

Protocol (JSON lines): the adapter writes ``{"turn": n, "prompt": "..."}`` on the agent's stdin
for each turn; the agent answers with event lines ``{"type": kind, "turn": n, ...}`` ending with
``{"type": "turn_completed", "turn": n, "done": bool}``. Closing stdin makes the agent exit 0.
The agent keeps a cursor per role in the state dir, so a continuation dispatch plays the next
unplayed turn and a turn that killed its process is never replayed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

from cairn.agents import process
from cairn.agents.base import (
    Adapter,
    Denial,
    Dispatch,
    DispatchRequest,
    Event,
    EventKind,
    Usage,
    next_turn,
)
from cairn.agents.limits import Failure
from cairn.errors import BadInput
from cairn.terms import StopReason
from cairn.util import yaml_io

STATE_DIR = "scripted-agent"
CURSOR_SUFFIX = ".cursor"
PROMPTS_FILE = "prompts.jsonl"
STOP_WAIT = 5.0  # seconds an agent gets to exit after its stdin is closed
STOP_GRACE = 1.0

ACTIONS = (
    "write",
    "append",
    "edit",
    "delete",
    "run",
    "cairn",
    "say",
    "plan",
    "sleep",
    "exit",
    "kill",
    "hang",
    "usage",
    "deny",
    "fail",
)
USAGE_KEYS = frozenset(
    {"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd"}
)
_EVENT_KINDS = frozenset(get_args(EventKind))

Action = tuple[str, Any]
Script = dict[str, list[list[Action]]]


def _relative_path(value: object) -> str | None:
    """The problem with a workspace path, or None when it is fine."""
    if not isinstance(value, str) or not value:
        return "path must be a non-empty string"
    parts = Path(value).parts
    if Path(value).is_absolute() or ".." in parts:
        return f"path {value!r} must be relative and stay inside the workspace"
    return None


def _check_action(name: str, arg: Any) -> str | None:
    """The problem with one action, or None when it is well formed."""
    if name in ("write", "append"):
        if not isinstance(arg, dict) or set(arg) != {"path", "content"}:
            return f"{name} takes {{path, content}}"
        if not isinstance(arg["content"], str):
            return f"{name}: content must be a string"
        return _relative_path(arg["path"])
    if name == "edit":
        if not isinstance(arg, dict) or set(arg) != {"path", "old", "new"}:
            return "edit takes {path, old, new}"
        if not isinstance(arg["old"], str) or not arg["old"] or not isinstance(arg["new"], str):
            return "edit: old must be a non-empty string and new a string"
        return _relative_path(arg["path"])
    if name == "delete":
        return _relative_path(arg)
    if name in ("run", "say"):
        return None if isinstance(arg, str) else f"{name} takes a string"
    if name == "cairn":
        ok = isinstance(arg, list) and all(isinstance(a, str) for a in arg)
        return None if ok else "cairn takes a list of string arguments"
    if name == "plan":
        ok = isinstance(arg, list) and all(
            isinstance(a, str)
            or (
                isinstance(a, dict)
                and isinstance(a.get("text"), str)
                and set(a) <= {"text", "completed"}
            )
            for a in arg
        )
        return None if ok else "plan takes a list of strings or {text, completed} items"
    if name == "sleep":
        ok = isinstance(arg, int | float) and not isinstance(arg, bool) and arg >= 0
        return None if ok else "sleep takes a number of seconds ≥ 0"
    if name == "exit":
        ok = isinstance(arg, int) and not isinstance(arg, bool) and 0 <= arg <= 255
        return None if ok else "exit takes an exit code 0-255"
    if name == "kill":
        return None if arg is True else "kill takes true"
    if name == "hang":
        if arg is True:
            return None
        if (
            isinstance(arg, dict)
            and set(arg) <= {"ignore_term"}
            and isinstance(arg.get("ignore_term", False), bool)
        ):
            return None
        return "hang takes true or {ignore_term: true|false}"
    if name in ("usage", "deny", "fail"):
        return _check_report(name, arg)
    return f"unknown action {name!r}; use one of {', '.join(ACTIONS)}"


def _check_report(name: str, arg: Any) -> str | None:
    """``usage`` (what the turn cost), ``deny`` (a refused tool call), ``fail`` (an error)."""
    if name == "fail":
        return None if isinstance(arg, str) and arg else "fail takes the error text"
    if name == "deny":
        ok = isinstance(arg, dict) and "tool" in arg and set(arg) <= {"tool", "target"}
        ok = ok and all(isinstance(v, str) for v in arg.values())
        return None if ok else "deny takes {tool, target}"
    if not isinstance(arg, dict) or not arg or not set(arg) <= USAGE_KEYS:
        return f"usage takes a mapping of {', '.join(sorted(USAGE_KEYS))}"
    for key, value in arg.items():
        number = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
        if not number or (key != "cost_usd" and not isinstance(value, int)):
            return f"usage: {key} must be a number ≥ 0 (tokens are integers)"
    return None


def parse_script(text: str, path: Path) -> Script:
    """Validate a script's text; BadInput names ``path`` and where the problem is."""
    try:
        data = yaml_io.safe_load(text)
    except yaml_io.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise BadInput(f"scripted agent script {path} is not valid YAML{where}") from None
    if not isinstance(data, dict) or not data:
        raise BadInput(f"scripted agent script {path} must be a mapping of role to a list of turns")
    script: Script = {}
    for role, turns in data.items():
        where = f"scripted agent script {path}: role {role!r}"
        if not isinstance(role, str):
            raise BadInput(f"{where}: role names must be strings")
        if not isinstance(turns, list):
            raise BadInput(f"{where}: must be a list of turns")
        parsed: list[list[Action]] = []
        for t, turn in enumerate(turns, 1):
            if not isinstance(turn, list):
                raise BadInput(f"{where} turn {t}: a turn must be a list of actions")
            actions: list[Action] = []
            for a, action in enumerate(turn, 1):
                at = f"{where} turn {t} action {a}"
                if not isinstance(action, dict) or len(action) != 1:
                    raise BadInput(f"{at}: an action is a mapping with one key, e.g. `say: hi`")
                ((name, arg),) = action.items()
                problem = _check_action(str(name), arg)
                if problem:
                    raise BadInput(f"{at}: {problem}")
                actions.append((str(name), arg))
            parsed.append(actions)
        script[role] = parsed
    return script


def load_script(path: Path) -> Script:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problem = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise BadInput(f"scripted agent script {path} cannot be read ({problem})") from None
    return parse_script(text, path)


def role_turns(script: Script, role: str, path: Path) -> list[list[Action]]:
    if role not in script:
        known = ", ".join(sorted(script))
        raise BadInput(f"scripted agent script {path} has no role {role!r}; it has {known}")
    return script[role]


def cursor_name(role: str) -> str:
    """The role's cursor file name: the role with anything but ``[A-Za-z0-9._-]`` made ``_``."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in role)
    return (safe.lstrip(".") or "_") + CURSOR_SUFFIX


class ScriptedAdapter(Adapter):
    kind = "scripted"

    def preflight(self, request: DispatchRequest) -> None:
        if request.script is None:
            raise BadInput("agent kind scripted needs agent.script")
        script_path = Path(request.script).absolute()
        role_turns(load_script(script_path), request.role, script_path)
        if not Path(request.workspace).is_dir():
            raise BadInput(f"workspace {request.workspace} is not a directory")

    def start(self, request: DispatchRequest) -> Dispatch:
        self.preflight(request)
        script_path = Path(str(request.script)).absolute()
        state_dir = Path(request.run_dir) / STATE_DIR  # a fallback agent's: its own, named
        if request.agent not in ("", "scripted"):
            state_dir = state_dir.with_name(f"{STATE_DIR}-{request.agent}")
        argv = [
            sys.executable,
            "-m",
            "cairn.agents.scripted.program",
            "--script",
            str(script_path),
            "--role",
            request.role,
            "--state",
            str(state_dir.absolute()),
            "--workspace",
            str(Path(request.workspace).absolute()),
        ]
        return ScriptedDispatch(request, argv)


class ScriptedDispatch(process.ChildDispatch):
    """A running dispatch (one agent invocation for a role, possibly several turns) of the
    scripted agent: one process for the whole dispatch, started at once, a turn per prompt."""

    def __init__(self, request: DispatchRequest, argv: list[str]) -> None:
        super().__init__(request, argv)
        self._error: str | None = None  # the agent's own error text (a ``fail`` action)
        self._child = process.Child(argv, cwd=Path(request.workspace), env=request.env)

    @property
    def child(self) -> process.Child:
        """The agent process (it lives as long as the dispatch)."""
        assert self._child is not None
        return self._child

    def _run(self) -> Iterator[Event]:
        n = 1
        while True:
            prompt, end = next_turn(self.request, n, lambda: self._interrupt)
            if prompt is None:
                if self._interrupt is not None:
                    self._finish_stopped()
                else:
                    self._finish_gracefully(end or "completed")
                return
            self._turns = n
            sent = self.child.send((json.dumps({"turn": n, "prompt": prompt}) + "\n").encode())
            done: bool | None = None
            if sent:
                for event in self._relay():
                    yield event
                    if event.kind == "turn_completed" and event.turn == n:
                        done = bool(event.data.get("done"))
                        break
            if done is None:
                self._finish_stopped(unfinished=n)
                return
            if done:
                self._finish_gracefully("completed")
                return
            n += 1

    def _relay(self) -> Iterator[Event]:
        for line in self.child.lines():
            self._keep(line)
            event = parse_event(line)
            if event is None:
                self._note_error(line)
                continue
            if event.kind == "message" and isinstance(event.data.get("text"), str):
                self._final = event.data["text"]
            elif event.kind == "tool_use" and event.data.get("denied"):
                target = event.data.get("input", {}).get("target", "")
                self._denials.append(Denial(str(event.data.get("name")), str(target)))
            elif event.kind == "turn_completed" and isinstance(event.data.get("usage"), dict):
                self._used(Usage(**event.data["usage"]))
            yield event

    def _note_error(self, line: str) -> None:
        """``{"type": "error", "text": …}``: the agent's error text, the dispatch's detail."""
        try:
            record = json.loads(line)
        except ValueError:
            return
        if isinstance(record, dict) and record.get("type") == "error":
            self._error = str(record.get("text"))

    def _set(
        self,
        reason: StopReason,
        exit_code: int | None = None,
        detail: str | None = None,
        failure: Failure | None = None,
    ) -> None:
        super()._set(reason, exit_code, self._error or detail, failure)

    def _finish_gracefully(self, reason: StopReason) -> None:
        """Close the agent's stdin (it exits 0) and record ``reason``."""
        self.child.close_stdin()
        if self.child.wait(STOP_WAIT) is None:
            self.child.stop(STOP_GRACE)
        self._set(self._interrupt or reason)

    def _finish_stopped(self, unfinished: int | None = None) -> None:
        """The agent stopped (or is being stopped) before finishing its turn."""
        if self._interrupt is not None and self.child.returncode is None:
            self.child.close_stdin()
        returncode = self.child.wait(None if self._interrupt is not None else STOP_WAIT)
        if returncode is None:  # closed its stdout but lives on: stop it
            returncode = self.child.stop(STOP_GRACE)
        reason = process.classify(returncode, self._interrupt)
        if reason is None:
            # Exit 0 in the middle of a turn: the agent broke the protocol.
            self._set(
                "error",
                exit_code=0,
                detail=f"the scripted agent exited before finishing turn {unfinished}",
            )
            return
        detail = None
        if self._interrupt is None:
            detail = self.child.with_stderr(f"scripted agent {process.describe_exit(returncode)}")
        self._set(reason, exit_code=returncode if returncode > 0 else None, detail=detail)


def parse_event(line: str) -> Event | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("type") not in _EVENT_KINDS:
        return None
    kind = record.pop("type")
    turn = record.pop("turn", 0)
    return Event(kind=kind, turn=turn if isinstance(turn, int) else 0, data=record)
