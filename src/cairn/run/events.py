"""Where a run reports what happens: the event sink the loop writes to.

The loop, ``launch`` and everything else under ``run/`` know only this protocol; the CLI's
``Display`` implements it (a live view, plain lines or JSON), tests record into a list, and a
caller that wants nothing shown passes ``NoEvents``.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

# What the run reports, and the fields each event carries (``--json`` prints them as they are).
# ``AGENT_ACTIVITY`` are what the agent does, left out by ``--quiet``.
RunEvent = Literal[
    "run_started",  # run, ticket, tasks, agent, max_turns, max_cost_usd, budget
    "run_resumed",  # run, ticket, phase, agent, max_turns, max_cost_usd, budget
    "phase",  # phase, round
    "dispatch_started",  # dispatch, role, max_turns, agent
    "turn",  # turn, max_turns, pressure
    "session",  # dispatch, role, session_id, resume (the command that continues it by hand)
    "tool",  # dispatch, turn, tool, target: a tool call of the agent
    "tool_denied",  # dispatch, turn, tool, target, message: a tool call it was refused
    "message",  # dispatch, turn, text: a message of the agent
    "dispatch_finished",  # dispatch, reason, turns, usage (null: unknown), denials, error
    "denials",  # dispatch, count, denials ({tool, target}), message
    "agent_switched",  # from, to, reason (usage_limit, rate_limit, failback, reset)
    "waiting",  # agent, until, seconds, reason: waiting for a limit's reset
    "snapshot",  # commit, reason
    "cutoff",  # reason, role, snapshot, detail
    "evaluation",  # round, status, failed
    "review",  # round, findings, blocking
    "warning",  # message
    "note",  # message (and branch: which ticket a run on another branch's name is)
    "needs_input",  # reason (no_progress), error, blocker ({denials, last_message}), next_command
    "run_finished",  # run, status, elapsed, usage, usage_text, usage_unknown
]

AGENT_ACTIVITY: frozenset[str] = frozenset({"session", "tool", "tool_denied", "message"})


class EventSink(Protocol):
    def event(self, kind: RunEvent, **fields: Any) -> None:
        """Something happened (one line of output, one JSON object)."""

    def update(self, **state: Any) -> None:
        """Where the run is now, for a live view: any of ``phase``, ``round``, ``task``,
        ``total``, ``turn``, ``max_turns``, ``snapshot``, ``waiting_until``."""


class NoEvents:
    """A sink that shows nothing."""

    def event(self, kind: RunEvent, **fields: Any) -> None:
        pass

    def update(self, **state: Any) -> None:
        pass
