"""YAML front matter: a ``---`` line at the top of a file, YAML, and a closing line.

This module finds the block, loads it and checks that it is a mapping; each format (plans, change
summaries) words its own errors from the :class:`FrontMatterError` it gets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cairn.util import yaml_io

OPENING = "---"
CLOSINGS = ("---", "...")


class FrontMatterError(ValueError):
    """The block is there but cannot be used; ``line`` is 1-based in the whole file."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(problem)
        self.line = line
        self.problem = problem


class InvalidYAML(FrontMatterError):
    """The block is not valid YAML; ``line`` is where the YAML parser gave up."""


class NotAMapping(FrontMatterError):
    """The block holds YAML other than a mapping (``value``); ``line`` is its first line."""

    def __init__(self, line: int, value: Any) -> None:
        super().__init__(line, "the front matter is not a YAML mapping")
        self.value = value


def opens(lines: Sequence[str]) -> bool:
    """Whether ``lines`` start with the ``---`` line that opens front matter."""
    return bool(lines) and lines[0].rstrip() == OPENING


def closing_line(lines: Sequence[str], closings: Sequence[str] = CLOSINGS) -> int | None:
    """The index of the line closing the front matter; None when there is no block to close."""
    if not opens(lines):
        return None
    return next((i for i in range(1, len(lines)) if lines[i].rstrip() in closings), None)


def load(lines: Sequence[str], close: int) -> dict[Any, Any] | None:
    """The mapping between ``lines[0]`` and ``lines[close]``; None when the block is empty.

    Raises InvalidYAML naming the line the parser failed on, or NotAMapping.
    """
    try:
        data = yaml_io.safe_load("\n".join(lines[1:close]))
    except yaml_io.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        raise InvalidYAML(line, getattr(exc, "problem", None) or str(exc)) from exc
    if data is None or isinstance(data, dict):
        return data
    raise NotAMapping(2, data)
