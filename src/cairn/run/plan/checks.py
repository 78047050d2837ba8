"""What every plan format checks the same way, and the one shape of a plan error:
``"{source}:{line}: {problem}; {fix}"``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from cairn import tickets
from cairn.errors import BadInput

FIX_FORMAT = "pass a UTF-8 markdown, YAML or JSON plan"


def fail(source: str, line: int, problem: str, fix: str) -> NoReturn:
    raise BadInput(f"{source}:{line}: {' '.join(problem.split())}; {fix}")


def kind_of(value: Any) -> str:
    """How a plan's author would name the kind of a YAML/JSON value."""
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def check_numbers(numbers: list[int], line_of: Callable[[int], int], source: str) -> None:
    """Task numbers must be unique and increasing; ``line_of(position)`` locates a task."""
    first_at: dict[int, int] = {}
    for pos, number in enumerate(numbers):
        if number in first_at:
            fail(
                source,
                line_of(pos),
                f"duplicate task number {number} (first used at line {line_of(first_at[number])})",
                "give every task its own number",
            )
        if pos and number < numbers[pos - 1]:
            fail(
                source,
                line_of(pos),
                f"task number {number} comes after task {numbers[pos - 1]} "
                f"(line {line_of(pos - 1)})",
                "number the tasks in increasing order",
            )
        first_at[number] = pos


def ticket_and_title(
    data: dict[Any, Any], source: str, line_of: Callable[[str], int]
) -> tuple[str | None, str | None]:
    """``ticket`` and ``title`` from front matter or a structured plan's top level."""
    ticket = data.get("ticket")
    if isinstance(ticket, int) and not isinstance(ticket, bool):
        ticket = str(ticket)
    if ticket is not None:
        if not isinstance(ticket, str):
            fail(
                source,
                line_of("ticket"),
                f"'ticket' must be a string, not {kind_of(ticket)}",
                "write a slug such as 'ticket: PROJ-123'",
            )
        try:
            tickets.validate(ticket)
        except BadInput as exc:
            raise BadInput(f"{source}:{line_of('ticket')}: {exc}") from None
    title = data.get("title")
    if title is not None:
        if not isinstance(title, str):
            fail(
                source,
                line_of("title"),
                f"'title' must be a string, not {kind_of(title)}",
                "quote the title",
            )
        title = title.strip()
        if "\n" in title or "\r" in title:
            fail(source, line_of("title"), "'title' must be one line", "shorten the title")
    return ticket, title or None
