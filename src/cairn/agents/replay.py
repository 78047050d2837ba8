"""A dispatch's transcript read again as the dispatch read it: the agent kind's own stream
reader (Claude Code's, Codex's, the scripted agent's) turns each raw line into the events the
orchestrator got, so ``cairn logs`` numbers the turns as cairn counted them and marks the calls
cairn counted as denied."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from cairn.agents.base import Event

if TYPE_CHECKING:
    from cairn.state.transcript_lines import Line

Reader = Callable[[str], list[Event]]
CLAUDE_TYPES = frozenset({"system", "assistant", "user", "result"})


class Replay:
    """One transcript's events, fed a line at a time; the reader is chosen by the first line
    that names its kind. ``turns``: the turns counted so far."""

    def __init__(self) -> None:
        self._reader: Reader | None = None
        self.turns = 0

    def feed(self, line: str) -> list[Event]:
        if self._reader is None:
            self._reader = _reader_for(line)
        events = self._reader(line) if self._reader is not None else []
        for event in events:
            if event.kind == "turn_started":
                self.turns = max(self.turns, event.turn)
        return events


class LineReader:
    """One transcript's ``cairn logs`` lines (``cairn.state.transcript_lines.Line``), fed a raw
    line at a time. Its agent kind's own reader (``Replay``) reads it again: the turns are
    numbered as cairn counted them, and the calls it counted as denied say so."""

    def __init__(self) -> None:
        self.replay = Replay()
        self.denied: set[str] = set()

    def feed(self, raw: str) -> list[Line]:
        from cairn.state.transcript_lines import Line, at_of, cut, describe
        from cairn.state.transcripts import records

        lines: list[Line] = []
        for record in records([raw]):
            at = at_of(record)
            for event in self.replay.feed(raw):
                if event.kind == "turn_started":
                    lines.append(Line("turn", f"turn {event.turn}", at=at))
                elif event.kind == "tool_denied":
                    self.denied.add(str(event.data.get("id")))
                    tool = str(event.data.get("tool"))
                    target = cut(event.data.get("target") or "")
                    lines.append(Line("tool", f"  tool {tool}: {target} (denied)", tool, True, at))
                elif event.kind == "tool_use" and event.data.get("denied"):
                    given = event.data.get("input")
                    if isinstance(given, dict) and given.get("id") is not None:
                        self.denied.add(str(given["id"]))
            found = describe(record, self.denied, self.replay.turns)
            lines += [line._replace(at=at) if at else line for line in found]
        return lines


def _reader_for(line: str) -> Reader | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    kind = record.get("type") if isinstance(record, dict) else None
    if not isinstance(kind, str):
        return None
    if kind in CLAUDE_TYPES:
        from cairn.agents.claude_code import StreamState

        return StreamState().feed
    if kind.startswith(("thread.", "turn.", "item.")) or kind == "error":
        from cairn.agents.codex import ExecState

        return ExecState().feed
    from cairn.agents.scripted.adapter import parse_event

    return lambda text: [event] if (event := parse_event(text)) is not None else []
