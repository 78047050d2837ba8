"""What the supervisor takes in at each poll of its tracker.

The tracker's candidates; the entries it refused, each said once per change (a
``ticket_refused`` event, which the command line also prints on stderr) and kept in
``<state root>/fleet/refused.json`` for ``cairn fleet status`` and the dashboard; and a tracker
that fails after the first poll kept from stopping the fleet: a warning, and the last good list
holds till the next poll. A tracker that fails at the first poll (a queue that is a file, a
token GitHub refuses) is bad input: exit 2 before anything starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cairn.errors import ExitCode, explain
from cairn.fleet import refusals
from cairn.fleet.trackers import Candidate, Tracker
from cairn.state.layout import Layout

Emit = Callable[..., None]


class Intake:
    def __init__(self, tracker: Tracker, layout: Layout, emit: Emit) -> None:
        self.tracker, self.emit = tracker, emit
        self.reporter = refusals.Reporter(layout)
        self.last: list[Candidate] = []
        self.polls = 0
        self.failed: str | None = None  # the trouble this intake set, when the poll raised

    def poll(self) -> list[Candidate]:
        self.polls += 1
        try:
            found = self.tracker.candidates()
        except Exception as exc:
            if self.polls == 1:
                raise
            self._say_tracker()
            self.failed = self.tracker.trouble = f"the tracker's poll failed ({_why(exc)})"
            self._warn(f"{self.failed}; the last list holds till the next poll")
            return self.last
        if self.failed is not None and self.tracker.trouble == self.failed:
            self.tracker.trouble = None  # it answered again
        self.failed = None
        self.last = found
        self._say_tracker()
        for refusal in self.reporter.poll(self.tracker.rejected):
            self.emit(
                refusals.EVENT, ticket=refusal.ticket, plan=refusal.plan, reason=refusal.reason
            )
        try:
            self.reporter.save()
        except Exception as exc:  # tried again at the next poll
            self._warn(
                f"the refused entries could not be recorded for `cairn fleet status` ({_why(exc)})"
            )
        return found

    def _say_tracker(self) -> None:
        for message in self.tracker.said():
            self._warn(message)

    def _warn(self, message: str) -> None:
        self.emit("ticket_warning", ticket=None, message=message)

    def settle(self, driven: bool) -> int:
        """``--once``'s exit code when no ticket failed or was left interrupted, the refusals
        and an unreadable tracker counted: a queue that held refused entries only is bad input
        (2); nothing listed because the tracker could not be read is 3 (run it again); a
        refused entry beside tickets that all completed is 1; else 0."""
        if not driven:
            if self.tracker.rejected:
                return ExitCode.BAD_INPUT
            if self.tracker.trouble is not None:
                return ExitCode.INTERRUPTED
            return ExitCode.OK
        return ExitCode.FAILURE if self.tracker.rejected else ExitCode.OK

    def totals(self) -> dict[str, Any]:
        """What ``fleet_finished`` says of the intake: the entries the last poll refused, and
        why the tracker could not be read (None: it could)."""
        return {"refused": len(self.tracker.rejected), "tracker_error": self.tracker.trouble}


def _why(exc: Exception) -> str:
    return explain(exc)[1]
