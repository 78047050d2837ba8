"""The MCP tools' shapes: strict argument types, the structured results, and argument errors
worded for a tool call (the argument's name, never a command-line flag).

Arguments are strict: ``{"task": true}`` or ``{"task": 1.0}`` is not task 1, and an argument a
tool does not declare is refused, not ignored (each tool's argument model forbids extra keys and
its input schema says ``additionalProperties: false``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

STRICT = ConfigDict(extra="forbid", strict=True, arbitrary_types_allowed=True)


class Reported(BaseModel):
    """The change summary after a progress report."""

    ticket: str
    run: str
    summary_path: str | None
    status: str = Field(description="The summary's status line.")
    resolved: int = Field(description="Tasks or findings resolved so far.")
    total: int


class Item(BaseModel):
    id: str = Field(description="Task number or finding id.")
    title: str
    status: str


class Progress(BaseModel):
    """Where the run stands: its summary, its tasks or findings, and its marker."""

    ticket: str
    run: str
    summary_path: str | None
    mode: str = Field(description="implementation (tasks) or review (findings).")
    status: str = Field(description="The summary's status line.")
    resolved: int
    total: int
    done: list[Item]
    remaining: list[Item]
    phase: str | None = Field(description="The marker's phase; null when there is no marker.")
    round: int | None
    task: int | None = Field(description="The task the marker says is current.")


class FindingAdded(BaseModel):
    ticket: str
    run: str
    finding: str
    round: int
    findings: int = Field(description="Findings in the review now.")


TaskNumber = Annotated[
    StrictInt, Field(ge=0, description="Task number as the plan gives it ('### Task N').")
]
RunTicket = Annotated[
    StrictStr | None,
    Field(
        description="Ticket whose live run gets the report "
        "(default: the server's CAIRN_RUN_DIR, else the branch's)."
    ),
]
Notes = Annotated[StrictStr | None, Field(description="Why, or what is left.")]
Files = Annotated[
    list[StrictStr] | None, Field(description="Files the task changed (commas also separate).")
]


def strict(arg_model: type[BaseModel]) -> type[BaseModel]:
    """The SDK's argument model of a tool, made strict: unknown keys and loose types refused."""
    return type(arg_model.__name__, (arg_model,), {"model_config": STRICT, "__module__": __name__})


def problem(error: Any, declared: Iterable[str]) -> str:
    """One argument error on one line, naming the argument: ``argument `task`: Input should be a
    valid integer (got True)``; ``unknown argument `tsak`; the arguments are task, ticket``."""
    where = ".".join(str(part) for part in error["loc"])
    name = f"`{where}`" if where else "(the arguments)"
    if error["type"] == "missing":
        return f"argument {name} is required"
    if error["type"] == "extra_forbidden":
        return f"unknown argument {name}; the arguments are {', '.join(declared)}"
    text = f"argument {name}: {error['msg']}"
    if "input" in error:
        got = repr(error["input"])
        text += f" (got {got if len(got) <= 60 else got[:57] + '...'})"
    return " ".join(text.split())


_FLAG = re.compile(r"--([a-z][a-z-]*)")


def as_arguments(message: str, declared: Iterable[str]) -> str:
    """A cairn error worded for the CLI, reworded for a tool: ``pass --ticket`` becomes ``pass
    the `ticket` argument`` when the tool has that argument."""
    names = set(declared)

    def swap(match: re.Match[str]) -> str:
        name = match.group(1).replace("-", "_")
        return f"the `{name}` argument" if name in names else match.group(0)

    return _FLAG.sub(swap, message)
