"""Turn and time budgets of a dispatch, and when to tell the agent to wrap up.

Pressure starts when the turns left (the coming one included) reach ``budget_pressure_turns``,
or when the time left is less than that many average turns. Never on a dispatch's first turn.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from cairn.util.text import counted

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cairn.config.records import Config
    from cairn.run.chain import Agents


def session_budget(config: Config, max_turns: int | None, chain: Agents) -> dict[str, Any]:
    """What a run session's start event says of its budgets (the coder's turn cap, the cost)
    and its agents (the primary, then its fallback chain)."""
    primary = chain.primary
    coder = config.roles.get("coder")
    if max_turns is None:
        max_turns = coder.max_turns if coder and coder.max_turns else primary.config.max_turns
    unpriced = [m.name for m in chain.members if not m.adapter.reports_cost]
    said = run_budget(max_turns, config.agent.max_cost_usd, ", ".join(unpriced), not unpriced)
    if len(chain.members) > 1:
        said["fallback"] = chain.names()[1:]
    return said


def run_budget(max_turns: int, max_cost_usd: float, kind: str, priced: bool) -> dict[str, Any]:
    """A run session's budgets as its start event carries them: the coder's turn cap per
    dispatch and ``agent.max_cost_usd`` (None when 0: no cap), and the line that says both,
    ``budget: 150 turns · $10.00`` or ``budget: 150 turns · no cost cap``; for an agent that
    reports no cost (not ``priced``), that the cap cannot be checked."""
    cost = f"${max_cost_usd:.2f}" if max_cost_usd else "no cost cap"
    if max_cost_usd and not priced:
        cost += f" (not checked: {kind} reports no cost)"
    return {
        "max_turns": max_turns,
        "max_cost_usd": max_cost_usd or None,
        "budget": f"budget: {counted(max_turns, 'turn')} · {cost}",
    }


@dataclass
class Budget:
    max_turns: int
    pressure_turns: int
    max_seconds: float | None = None
    started: float = field(default_factory=time.monotonic)

    def turns_left(self, turn: int) -> int:
        """Turns left when turn ``turn`` (1-based) is about to start, that turn included."""
        return self.max_turns - turn + 1

    def seconds_left(self) -> float | None:
        if self.max_seconds is None:
            return None
        return self.max_seconds - (time.monotonic() - self.started)

    def under_pressure(self, turn: int) -> bool:
        if turn <= 1 or self.pressure_turns <= 0:
            return False
        if self.turns_left(turn) <= self.pressure_turns:
            return True
        left = self.seconds_left()
        if left is None:
            return False
        per_turn = (time.monotonic() - self.started) / (turn - 1)
        return left <= per_turn * self.pressure_turns
