"""A dispatch's budget: turns and seconds left, and when the wrap-up directive is due."""

from __future__ import annotations

import time

import pytest

from cairn.run.budget import Budget


def started_ago(seconds: float) -> float:
    return time.monotonic() - seconds


def test_turns_left_counts_the_coming_turn() -> None:
    budget = Budget(max_turns=5, pressure_turns=2)
    assert [budget.turns_left(turn) for turn in range(1, 6)] == [5, 4, 3, 2, 1]


@pytest.mark.parametrize(
    ("max_turns", "pressure", "due"),
    [(5, 2, [4, 5]), (2, 1, [2]), (3, 2, [2, 3]), (10, 1, [10]), (4, 0, [])],
)
def test_turn_pressure_starts_when_the_turns_left_reach_pressure_turns(
    max_turns: int, pressure: int, due: list[int]
) -> None:
    budget = Budget(max_turns=max_turns, pressure_turns=pressure)
    assert [t for t in range(1, max_turns + 1) if budget.under_pressure(t)] == due


def test_never_on_the_first_turn_even_when_time_is_up() -> None:
    budget = Budget(max_turns=2, pressure_turns=1, max_seconds=1, started=started_ago(60))
    left = budget.seconds_left()
    assert left is not None and left < 0
    assert not budget.under_pressure(1)
    assert not budget.under_pressure(0)
    assert budget.under_pressure(2)


def test_without_max_seconds_there_is_no_time_left_and_no_time_pressure() -> None:
    budget = Budget(max_turns=100, pressure_turns=2, started=started_ago(3600))
    assert budget.seconds_left() is None
    assert not budget.under_pressure(2)


def test_time_pressure_when_less_time_is_left_than_pressure_turns_average_turns() -> None:
    # 3 turns took 30 s (10 s each); 2 turns of pressure need 20 s
    relaxed = Budget(max_turns=100, pressure_turns=2, max_seconds=60, started=started_ago(30))
    assert not relaxed.under_pressure(4)  # about 30 s left
    tight = Budget(max_turns=100, pressure_turns=2, max_seconds=45, started=started_ago(30))
    assert tight.under_pressure(4)  # about 15 s left
    left = tight.seconds_left()
    assert left is not None and 14 < left <= 15


def test_time_pressure_is_off_with_pressure_turns_zero() -> None:
    budget = Budget(max_turns=100, pressure_turns=0, max_seconds=1, started=started_ago(60))
    assert not budget.under_pressure(50)
