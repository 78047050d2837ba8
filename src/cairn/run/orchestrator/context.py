"""What every part of one run's loop shares: the run and its lease, the config, the plan, the
agent adapter and the event sink, and what the run has gathered so far (counts, the last
snapshot, the agent's last message, a signal to cairn, the dispatch in flight)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cairn.agents.base import Adapter, Dispatch, Result
from cairn.config.records import AgentConfig, Config
from cairn.git import Repo
from cairn.run.chain import Agents
from cairn.run.events import EventSink
from cairn.run.plan import Plan
from cairn.state.lease import Lease
from cairn.state.marker import SnapshotRef
from cairn.state.runstate import RunRef
from cairn.summary import Summary
from cairn.terms import CutoffReason


@dataclass
class Stats:
    dispatches: int = 0
    turns: int = 0
    rounds: int = 0
    snapshots: list[str] = field(default_factory=list)
    phases: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        return time.monotonic() - self.started


class Stop(Exception):
    """The run stops here, its state saved (a signal, or continuations used up)."""

    def __init__(self, reason: CutoffReason) -> None:
        super().__init__(reason)
        self.reason: CutoffReason = reason


LAST_WORDS_LIMIT = 200  # characters of the agent's last message in the one-line error
IDLE_REASONS = ("completed", "max_turns")  # the agent stopped by itself, or used its turns


@dataclass
class Streak:
    """The run's idle coder dispatches in a row (this session), and what blocked them."""

    count: int = 0
    denials: list[dict[str, str]] = field(default_factory=list)
    last_message: str | None = None  # the coder's, in its last idle dispatch

    def after(self, progressed: bool, result: Result, denials: list[dict[str, str]]) -> None:
        if progressed:
            self.count, self.denials, self.last_message = 0, [], None
        elif result.reason in IDLE_REASONS:
            self.count += 1
            self.denials += denials
            self.last_message = result.final_message or self.last_message

    def blocker(self) -> dict[str, Any]:
        return {"denials": list(self.denials), "last_message": self.last_message}

    def error(self) -> str:
        """Why the run needs input, on one line: the idle dispatches, the denied calls, the
        agent's last words."""
        from cairn.state import accounting

        dispatches = "dispatch" if self.count == 1 else "dispatches"
        parts = [f"no progress in {self.count} {dispatches} in a row"]
        denied = accounting.denials_text(self.denials)
        if denied:
            parts.append(denied)
        words = accounting.error_text(self.last_message, LAST_WORDS_LIMIT)
        if words:
            parts.append(f'its last words: "{words}"')
        return "; ".join(parts)


@dataclass
class RunContext:
    repo: Repo
    config: Config
    ref: RunRef
    lease: Lease
    plan: Plan
    agents: Agents  # the run's agent and its fallback chain; ``agents.now`` dispatches
    sink: EventSink
    max_turns_override: int | None = None
    stats: Stats = field(default_factory=Stats)
    running: Dispatch | None = None  # the dispatch in flight: what a signal to cairn stops
    signalled: CutoffReason | None = None  # "signal" once cairn got SIGINT or SIGTERM
    # the agent's time to stop on SIGINT or SIGTERM (None: grace); a --remote run's is short,
    # so a cancelled CI job has pushed before the runner's SIGTERM
    signal_grace: float | None = None
    # what the agent's environment gets besides the run's own names (a --remote run's checkpoint
    # barrier: its `cairn task done` returns once the completion is on the remote)
    agent_env: dict[str, str] = field(default_factory=dict)
    last_snapshot: SnapshotRef | None = None
    last_message: str | None = None  # the agent's, handed to the next dispatch
    last_error: str | None = None  # the agent's error text when its last dispatch failed
    usage_before: dict[str, Any] = field(default_factory=dict)  # the run's earlier sessions
    usage: dict[str, Any] = field(default_factory=dict)  # this session's dispatches
    denials: list[dict[str, str]] = field(default_factory=list)  # the run's, every session
    over_budget: bool = False  # this session's cost passed agent.max_cost_usd
    sessions: set[str] = field(default_factory=set)  # the agent sessions shown so far
    base: str | None = None  # HEAD when the run started (its first session)
    idle: Streak = field(default_factory=Streak)  # idle coder dispatches in a row
    unknown_usage: int = 0  # the run's dispatches whose usage is unknown (every session)
    # an agent session's cost so far, as the agent counts it (Claude Code's is cumulative)
    session_costs: dict[str, float] = field(default_factory=dict)
    waits: int = 0  # the waits for a limit's reset in this session

    @property
    def adapter(self) -> Adapter:
        """The adapter of the agent dispatching now."""
        return self.agents.now.adapter

    @property
    def agent(self) -> AgentConfig:
        """The settings of the agent dispatching now (``[agent]``, or ``[agents.NAME]``): its
        command, script, turns and permissions. What bounds the whole run (its cost, its
        continuations, the cutoff's grace) is ``config.agent``'s."""
        return self.agents.now.config

    @property
    def grace(self) -> float:
        """Seconds between SIGTERM and SIGKILL, and a snapshot's time budget."""
        return self.config.agent.cutoff_timeout_ms / 1000

    def summary(self) -> Summary:
        """The run's current change summary (the latest one: a fix round has its own)."""
        return self.ref.load_summary()[1]

    def run_usage(self) -> dict[str, Any]:
        """What the run's dispatches used, in every session of the run."""
        from cairn.state import accounting

        return accounting.add(self.usage_before, self.usage)

    def max_turns(self, role: str) -> int:
        if self.max_turns_override is not None:
            return self.max_turns_override
        configured = self.config.roles.get(role)
        if configured is not None and configured.max_turns is not None:
            return configured.max_turns
        return self.agent.max_turns


def agent_script(toplevel: Path, agent: AgentConfig) -> Path | None:
    """The scripted agent's script (``script``, relative to the work tree), if any."""
    script = agent.script
    if script is None:
        return None
    path = Path(script).expanduser()
    return path if path.is_absolute() else toplevel / path
