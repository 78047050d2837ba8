"""What a plan is once read, whatever its format: tasks with titles, details and criteria."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

PLAN_READ_LIMIT = 4 * 1024 * 1024

PlanFormat = Literal["markdown-headings", "checklist", "yaml", "json"]

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".txt"})
YAML_SUFFIXES = frozenset({".yaml", ".yml"})
JSON_SUFFIXES = frozenset({".json"})

ACCEPTED_FORMS = (
    "write '## Task 1: title' headings, a '- [ ] title' checklist, "
    "or a .yaml/.json plan with a 'tasks' list"
)


class PlanTask(BaseModel):
    """One task of a plan; ``done`` is True for a checked checklist item (``- [x]``)."""

    model_config = ConfigDict(extra="forbid")

    number: int = Field(ge=0)
    title: str
    details: str = ""
    acceptance: list[str] = Field(default_factory=list)
    done: bool = False

    @field_validator("title")
    @classmethod
    def _one_line_title(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("the title is empty")
        if "\n" in value or "\r" in value:
            raise ValueError("the title must be one line")
        return value


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ticket: str | None = None
    title: str | None = None
    tasks: list[PlanTask] = Field(min_length=1)
    source: str
    format: PlanFormat
