"""``cairn logs``: the transcripts of a ticket's latest run (each dispatch's raw agent events),
one readable line per event, or the raw events as JSON lines; ``--follow`` tails the live run."""

from __future__ import annotations

import json as jsonlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.errors import BadInput

if TYPE_CHECKING:
    from cairn.agents.replay import LineReader
    from cairn.state.layout import Layout
    from cairn.state.transcripts import Transcript

POLL_SECONDS = 0.2

Emit = Callable[[str], None]


def logs(
    ticket: str | None = None,
    follow: bool = False,
    dispatch: int | None = None,
    json: bool = False,
    workspace: Path = Path("."),
) -> None:
    from cairn import tickets
    from cairn.state import branches, transcripts
    from cairn.state import layout as layouts
    from cairn.util.durations import parse_duration

    repo, config, layout = layouts.discover(workspace)
    if ticket:
        ticket = tickets.validate(ticket)
    else:
        ticket, note = branches.default_ticket(repo, layout)
        if note is not None:
            from cairn.cli.output import say_warning

            say_warning(note)
    run_id = _run_of(layout, ticket)
    run_dir = layout.run_dir(ticket, run_id)
    show = _Printer(json)
    if follow:
        stale_after = parse_duration(config.marker.stale_after)
        _follow(run_dir, dispatch, show, lambda: _live(layout, ticket, stale_after))
        return
    found = transcripts.listing(run_dir)
    if dispatch is not None:
        chosen = [t for t in found if t.number == dispatch]
        if not chosen:
            have = ", ".join(str(t.number) for t in found) or "none"
            raise BadInput(
                f"run {run_id} of ticket {ticket} has no transcript of dispatch {dispatch} "
                f"(it has: {have}); pass one of them to --dispatch"
            )
        found = chosen
    if not found and not json:
        show.line(f"run {run_id} of ticket {ticket} has no transcripts")
    for transcript in found:
        show.header(transcript)
        with open(transcript.path, "rb") as handle:
            show.raw(handle.read().decode("utf-8", "replace").splitlines())


def _run_of(layout: Layout, ticket: str) -> str:
    """The run the marker names, else the ticket's latest run."""
    from cairn.state import marker

    current = marker.read(layout.marker_path(ticket))
    if current is not None and current.run and layout.run_dir(ticket, current.run).is_dir():
        return current.run
    latest = layout.latest_run(ticket)
    if latest is None:
        raise BadInput(f"ticket {ticket} has no run; start one with cairn run PLAN")
    return latest


def _live(layout: Layout, ticket: str, stale_after: float) -> bool:
    from cairn.state import marker
    from cairn.util import clock

    current = marker.read(layout.marker_path(ticket))
    if current is None:
        return False
    return marker.judge(current, stale_after, clock.now())[0] == "in_progress"


class _Printer:
    """Readable lines (``cairn.agents.replay.LineReader``'s), or the raw events as JSON
    lines (``--json``), flushed as they come."""

    def __init__(self, json: bool) -> None:
        self.json = json
        self.reader: LineReader | None = None

    def line(self, text: str) -> None:
        from cairn.cli.output import say

        say(text)
        sys.stdout.flush()

    def header(self, transcript: Transcript) -> None:
        self.reader = None
        if not self.json:
            name = transcript.path.name
            self.line(f"== dispatch {transcript.number} · {transcript.role} · {name} ==")

    def raw(self, lines: list[str]) -> None:
        from cairn.agents.replay import LineReader
        from cairn.state.transcripts import records

        if self.reader is None:
            self.reader = LineReader()
        for line in lines:
            if self.json:
                for record in records([line]):
                    sys.stdout.write(jsonlib.dumps(record, ensure_ascii=False) + "\n")
                continue
            for shown in self.reader.feed(line):
                self.line(shown.text)
        sys.stdout.flush()


def _follow(run_dir: Path, number: int | None, show: _Printer, live: Callable[[], bool]) -> None:
    """Print the current transcript (or dispatch ``number``'s) as it grows, moving on to the
    next dispatch's, until the run is no longer live; then what is left is printed."""
    from cairn.state import transcripts

    current: Any = None
    tail = _Tail()
    while True:
        running = live()  # before reading: what was written before the run ended is read
        found = transcripts.listing(run_dir)
        if current is None:
            picked = [t for t in found if number is None or t.number == number]
            if picked:
                current = picked[-1] if number is None else picked[0]
                show.header(current)
        if current is not None:
            show.raw(tail.read(current.path))
            later = [t for t in found if t.number > current.number]
            if later and number is not None:
                return
            if later:
                current, tail = later[0], _Tail()
                show.header(current)
                continue
        if not running:
            return
        time.sleep(POLL_SECONDS)


class _Tail:
    """The complete lines a growing file got since the last read."""

    def __init__(self) -> None:
        self.offset = 0
        self.partial = b""

    def read(self, path: Path) -> list[str]:
        try:
            with open(path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self.partial + data
        complete, _, self.partial = data.rpartition(b"\n")
        return complete.decode("utf-8", "replace").splitlines() if complete else []
