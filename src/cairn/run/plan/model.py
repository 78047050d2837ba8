"""What a plan is once read, whatever its format: tasks with titles, details and criteria."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, Struct, field
from msgspec.structs import force_setattr

PLAN_READ_LIMIT = 4 * 1024 * 1024

PlanFormat = Literal["markdown-headings", "checklist", "yaml", "json"]

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".txt"})
YAML_SUFFIXES = frozenset({".yaml", ".yml"})
JSON_SUFFIXES = frozenset({".json"})

ACCEPTED_FORMS = (
    "write '## Task 1: title' headings, a '- [ ] title' checklist, "
    "or a .yaml/.json plan with a 'tasks' list"
)


class PlanTask(Struct, kw_only=True, forbid_unknown_fields=True):
    """One task of a plan; ``done`` is True for a checked checklist item (``- [x]``)."""

    number: Annotated[int, Meta(ge=0)]
    title: str
    details: str = ""
    acceptance: list[str] = field(default_factory=list)
    done: bool = False

    def __post_init__(self) -> None:
        title = self.title.strip()
        if not title:
            raise ValueError("title: the title is empty")
        if "\n" in title or "\r" in title:
            raise ValueError("title: the title must be one line")
        force_setattr(self, "title", title)


class Plan(Struct, kw_only=True, forbid_unknown_fields=True):
    ticket: str | None = None
    title: str | None = None
    tasks: Annotated[list[PlanTask], Meta(min_length=1)]
    source: str
    format: PlanFormat
