"""The MCP tools' shapes: strict argument types, the structured results, and argument errors
worded for a tool call (the argument's name, never a command-line flag).

The results are msgspec records, their output schemas ``msgspec.json.schema``'s. The arguments
are declared in the tools' signatures, from which the SDK's ``MCPServer`` builds a pydantic
model per tool (its tool API takes no other kind); pydantic there is the SDK's own.

Arguments are strict: ``{"task": true}`` or ``{"task": 1.0}`` is not task 1, and an argument a
tool does not declare is refused, not ignored (each tool's argument model forbids extra keys and
its input schema says ``additionalProperties: false``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

STRICT = ConfigDict(extra="forbid", strict=True, arbitrary_types_allowed=True)
StatusLine = Annotated[str, Meta(description="The summary's status line.")]


class Reported(Struct, kw_only=True):
    """The change summary after a progress report."""

    ticket: str
    run: str
    summary_path: str | None
    status: StatusLine
    resolved: Annotated[int, Meta(description="Tasks or findings resolved so far.")]
    total: int


class Item(Struct, kw_only=True):
    id: Annotated[str, Meta(description="Task number or finding id.")]
    title: str
    status: str


class Progress(Struct, kw_only=True):
    """Where the run stands: its summary, its tasks or findings, and its marker."""

    ticket: str
    run: str
    summary_path: str | None
    mode: Annotated[str, Meta(description="implementation (tasks) or review (findings).")]
    status: StatusLine
    resolved: int
    total: int
    done: list[Item]
    remaining: list[Item]
    phase: Annotated[
        str | None, Meta(description="The marker's phase; null when there is no marker.")
    ]
    round: int | None
    task: Annotated[int | None, Meta(description="The task the marker says is current.")]


class FindingAdded(Struct, kw_only=True):
    ticket: str
    run: str
    finding: str
    round: int
    findings: Annotated[int, Meta(description="Findings in the review now.")]


def output_schema(record: type[Struct]) -> dict[str, Any]:
    """The JSON schema of a tool's structured result: the record's object at the top, the
    records it holds under ``$defs``."""
    schema = msgspec.json.schema(record)
    defs = schema.pop("$defs", {})
    top: dict[str, Any] = defs.pop(record.__name__, schema)
    return {**top, "$defs": defs} if defs else top


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
