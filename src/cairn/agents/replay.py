"""A dispatch's transcript read again as the dispatch read it: the agent kind's own stream
reader (Claude Code's, Codex's, the scripted agent's) turns each raw line into the events the
orchestrator got, so ``cairn logs`` numbers the turns as cairn counted them and marks the calls
cairn counted as denied."""

from __future__ import annotations

import json
from collections.abc import Callable

from cairn.agents.base import Event

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
