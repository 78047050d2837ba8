"""What ``cairn run`` shows while it works: a live view on a terminal, plain lines otherwise,
or one JSON event a line with ``--json``: the CLI's ``cairn.run.events.EventSink``. What the
agent does (its tool calls and messages, ``AGENT_ACTIVITY``) is a line each, cut to the
terminal's width; ``quiet`` leaves it out."""

from __future__ import annotations

import json
import shutil
import sys
import time
from typing import Any, Literal

from cairn.run.events import AGENT_ACTIVITY
from cairn.util.text import counted, printable

Mode = Literal["live", "plain", "json", "silent"]
FALLBACK_WIDTH = 100  # columns when stdout is not a terminal and COLUMNS is not set

_LINES = {
    "run_started": (
        "run {run} of ticket {ticket}: {tasks_text}, agent {agent}{fallback_text}{budget_text}"
    ),
    "run_resumed": "resuming run {run} of ticket {ticket} at {phase}{budget_text}",
    "phase": "phase {phase}{round_text}",
    "dispatch_started": "dispatch {dispatch}: {role}, up to {max_turns_text}",
    "turn": "  turn {turn}/{max_turns}{pressure_text}",
    "session": "  agent session {session_id}{resume_text}",
    "tool": "  {tool}  {target}",
    "tool_denied": "  denied  {tool}  {target}{message_text}",
    "message": "  ▸ {text}",
    "task": "  task {task} {status}",
    "finding": "  finding {finding} {status}",
    "snapshot": "  snapshot {short} ({reason})",
    "cutoff": "cutoff: {reason}{detail_text} in {role} dispatch; {saved_text}",
    "dispatch_finished": (
        "dispatch {dispatch} ended: {reason} after {turns_text}{error_text}{unknown_text}"
    ),
    "denials": "  {message}",
    "agent_switched": "agent {from} → {to} ({reason_text})",
    "waiting": (
        "waiting {seconds}s for the {reason_text} of {agent} to reset ({until}); Ctrl+C stops "
        "the run, cairn resume continues it"
    ),
    "warning": "warning: {message}",
    "note": "{message}",
    "run_finished": "run {run} {status} in {elapsed}{usage_suffix}",
}


def pick_mode(json_output: bool) -> Mode:
    if json_output:
        return "json"
    return "live" if sys.stdout.isatty() else "plain"


class Display:
    """The run's event sink on the terminal (``mode``: live, plain, json, or silent);
    ``quiet``: without the agent's activity."""

    def __init__(self, mode: Mode, quiet: bool = False) -> None:
        self.mode = mode
        self.quiet = quiet
        self.state: dict[str, Any] = {}
        self.started = time.monotonic()
        self._live: Any = None

    def open(self) -> None:
        if self.mode == "live":
            from rich.live import Live

            self._live = Live(self._render(), refresh_per_second=4, transient=True)
            self._live.start()

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def event(self, kind: str, **fields: Any) -> None:
        if self.quiet and kind in AGENT_ACTIVITY:
            return
        if self.mode == "json":
            payload = {"event": kind, **fields}
            sys.stdout.write(json.dumps(payload, ensure_ascii=False, default=str) + "\n")
            sys.stdout.flush()
            return
        if self.mode == "silent":
            return
        template = _LINES.get(kind)
        if template is None:
            return
        if kind in AGENT_ACTIVITY:  # the agent's words, each on one line
            fields = {k: printable(v) if isinstance(v, str) else v for k, v in fields.items()}
        values = {
            **fields,
            "round_text": f", round {fields['round']}" if fields.get("round") else "",
            "tasks_text": counted(fields["tasks"], "task")
            if isinstance(fields.get("tasks"), int)
            else f"{fields.get('tasks')} tasks",
            "budget_text": f"; {fields['budget']}" if fields.get("budget") else "",
            "fallback_text": f" (then {', '.join(fields['fallback'])})"
            if fields.get("fallback")
            else "",
            "pressure_text": " (wrap-up directive sent)" if fields.get("pressure") else "",
            "saved_text": (
                f"work saved at {fields['snapshot']}"
                if fields.get("snapshot")
                else "no snapshot taken"
            ),
            "short": str(fields.get("commit", ""))[:12],
            "detail_text": f" ({fields['detail']})" if fields.get("detail") else "",
            "error_text": f": {fields['error']}" if fields.get("error") else "",
            "turns_text": counted(int(fields.get("turns") or 0), "turn"),
            "max_turns_text": counted(int(fields.get("max_turns") or 0), "turn"),
            "unknown_text": " · usage unknown" if "usage" in fields and not fields["usage"] else "",
            "usage_suffix": f" · {fields['usage_text']}" if fields.get("usage_text") else "",
            "resume_text": f" · continue it by hand: {fields['resume']}"
            if fields.get("resume")
            else "",
            "message_text": f" — {fields['message']}" if fields.get("message") else "",
            "reason_text": str(fields.get("reason", "")).replace("_", " "),
        }
        try:
            line = template.format(**values)
        except (KeyError, IndexError):
            line = f"{kind} {fields}"
        if kind in AGENT_ACTIVITY - {"session"}:
            line = self._fit(line.rstrip())
        if self._live is not None:
            self._live.console.print(line, markup=False, highlight=False)
        else:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def _fit(self, line: str) -> str:
        """``line`` cut to the terminal's width (an ellipsis marks the cut)."""
        if self._live is not None:
            width = self._live.console.width
        else:
            width = shutil.get_terminal_size((FALLBACK_WIDTH, 24)).columns
        width = max(width, 20)
        return line if len(line) <= width else line[: width - 1] + "…"

    def update(self, **state: Any) -> None:
        self.state.update(state)
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> Any:
        from rich.table import Table

        s = self.state
        table = Table.grid(padding=(0, 2))
        table.add_row(
            "phase", f"{s.get('phase', '-')}" + (f", round {s['round']}" if s.get("round") else "")
        )
        task = s.get("task")
        table.add_row("task", f"{task} of {s.get('total', '?')}" if task is not None else "-")
        turn = s.get("turn")
        table.add_row("turn", f"{turn}/{s.get('max_turns', '?')}" if turn else "-")
        table.add_row("elapsed", f"{time.monotonic() - self.started:.0f}s")
        table.add_row("snapshot", s.get("snapshot") or "-")
        if s.get("waiting_until"):
            table.add_row("waiting", f"until {s['waiting_until']} for an agent's limit to reset")
        return table
