"""The adapter interface every agent kind implements.

A dispatch is one agent invocation for a role (coder, reviewer, evaluator), possibly several
turns. An adapter starts one from a ``DispatchRequest`` and the running ``Dispatch`` turns it into
a stream of events and a final result. Adapters never write cairn's state files: the
orchestrator records what the events say. The registry of kinds is ``cairn.agents.ADAPTERS``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from cairn.terms import AgentPermissions, StopReason

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cairn.agents.limits import Failure

EventKind = Literal[
    "turn_started",
    "turn_completed",
    "tool_use",
    "tool_denied",
    "file_changed",
    "plan_updated",
    "message",
]


@dataclass(frozen=True)
class Event:
    """Something the agent did. ``tool_use`` data: ``name`` and ``input`` as the agent gave
    them, and where the adapter knows them ``tool`` (the name a person knows it by),
    ``target`` (its command or path, one line) and ``denied`` (refused, known at once);
    ``tool_denied``: a call refused after its ``tool_use`` (``tool``, ``target``, ``message``);
    ``turn_started`` carries ``session_id`` once the agent's session is known."""

    kind: EventKind
    turn: int = 0
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Usage:
    """Tokens (and the cost, where the agent reports one) of a dispatch or a run."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )

    def __add__(self, other: Usage) -> Usage:
        costs = [c for c in (self.cost_usd, other.cost_usd) if c is not None]
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            sum(costs) if costs else None,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "total_tokens": self.total_tokens,
            "cost_usd": self.cost_usd,
        }


@dataclass(frozen=True)
class Denial:
    """A tool call the agent was refused: the tool (``Bash``, ``Write``, Codex's ``exec``) and
    what it asked for (the command or the path), on one line."""

    tool: str
    target: str = ""


@dataclass(frozen=True)
class Result:
    """How a dispatch ended. ``detail`` is the agent's own error text for an ``error`` (the
    API's message, ``turn.failed``, a crash's stderr tail) and ``failure`` what it was (a rate
    or usage limit, refused credentials, another error: ``cairn.agents.limits``), set by the
    adapter for an ``error``; ``transcript`` the file name, in the run directory, of the
    agent's raw event stream."""

    reason: StopReason
    num_turns: int
    final_message: str | None = None
    session_id: str | None = None
    exit_code: int | None = None
    usage: Usage | None = None
    detail: str | None = None
    denials: tuple[Denial, ...] = ()
    transcript: str | None = None
    session_cost_usd: float | None = None  # the agent session's cost so far, as it counts it
    failure: Failure | None = None


@dataclass
class DispatchRequest:
    """What a dispatch (one agent invocation for a role, possibly several turns) is to do.

    ``next_prompt(n)`` gives the prompt of turn ``n`` (1-based): turn 1 is the dispatch prompt,
    later turns are continuation prompts (with the wrap-up directive when the budget runs low).
    It returns None when the orchestrator considers the dispatch's work done.
    ``permissions`` is ``agent.permissions`` (``preset``: cairn's permission preset plus the
    ``allow`` commands; ``user``: only the user's own flags); ``transcript`` is where the
    agent's raw event stream is kept (None: nowhere). ``session_cost_usd`` is what the
    session ``session_id`` had cost when its last dispatch ended, as the agent counts it:
    Claude Code reports a resumed session's cost from its start, so cairn subtracts it.
    """

    role: str
    workspace: Path
    run_dir: Path
    max_turns: int
    next_prompt: Callable[[int], str | None]
    env: dict[str, str] = field(default_factory=dict)
    command: str | list[str] | None = None
    script: Path | None = None
    session_id: str | None = None
    pressure_turns: int = 0
    writable: list[Path] = field(default_factory=list)
    permissions: AgentPermissions = "user"
    allow: list[str] = field(default_factory=list)
    transcript: Path | None = None
    session_cost_usd: float | None = None
    agent: str = ""  # the agent's name in the run's chain ([agents.NAME], or its kind)


def next_turn(
    request: DispatchRequest, turn: int, interrupted: Callable[[], StopReason | None]
) -> tuple[str | None, StopReason | None]:
    """The prompt of ``turn``, or why the dispatch ends before it.

    Asking for the prompt comes first, so work finished exactly on the last allowed turn ends
    as ``completed``, not ``max_turns``; an interrupt wins over both.
    """
    if (reason := interrupted()) is not None:
        return None, reason
    prompt = request.next_prompt(turn)
    if (reason := interrupted()) is not None:
        return None, reason
    if prompt is None:
        return None, "completed"
    if turn > request.max_turns:
        return None, "max_turns"
    return prompt, None


class Dispatch(ABC):
    """A running dispatch: one agent invocation for a role, possibly several turns.

    ``events()`` yields until the agent stops, then ``result`` is set. ``result.session_id`` is
    the agent's own conversation id (Claude Code's session, Codex's thread), if it has one.
    """

    result: Result | None = None

    @property
    def pid(self) -> int | None:
        """The agent's process (its process group leader) now running, if any."""
        return None

    @abstractmethod
    def events(self) -> Iterator[Event]: ...

    @abstractmethod
    def interrupt(self, reason: StopReason, grace: float) -> None:
        """Stop the agent: SIGTERM to its process group, SIGKILL after ``grace`` seconds.

        Returns at once (it may be called from a signal handler or a timer); ``events()`` ends
        when the agent is gone and ``result.reason`` is ``reason``.
        """


class Adapter(ABC):
    """One agent kind: checks a request and starts dispatches."""

    kind: ClassVar[str]
    reports_cost: ClassVar[bool] = True  # False: agent.max_cost_usd cannot be checked

    @abstractmethod
    def preflight(self, request: DispatchRequest) -> None:
        """Check that ``request`` can start (program found, script valid); BadInput if not.

        The orchestrator calls it for every role before it writes any state.
        """

    @abstractmethod
    def start(self, request: DispatchRequest) -> Dispatch:
        """Start a dispatch (one agent invocation for a role, possibly several turns)."""

    def resume_command(self, session_id: str) -> str | None:
        """The command a person types to continue the agent's session ``session_id`` by hand
        (None: this kind has no such command)."""
        return None
