"""Turn and time budgets of a dispatch, and when to tell the agent to wrap up.

Pressure starts when the turns left (the coming one included) reach ``budget_pressure_turns``,
or when the time left is less than that many average turns. Never on a dispatch's first turn.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


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
