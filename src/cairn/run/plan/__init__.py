"""Plan files: the multi-task plans cairn runs agents over.

Four formats are read, each into the same :class:`Plan`:

* ``markdown-headings``: ``## Task 1: title`` (or ``### ``, any level; ``:``, ``—``, ``–``, `` - ``
  or ``. `` after the number) headings, each followed by its body and optional acceptance criteria;
* ``checklist``: a markdown file without task headings whose top-level ``- [ ] title`` /
  ``- [x] title`` lines are the tasks, numbered from 0, with indented lines as details;
* ``yaml`` / ``json``: ``{ticket?, title?, tasks: [...]}`` or a bare list of tasks.

Markdown may start with ``---`` YAML front matter giving ``ticket:`` and ``title:``. Fenced code
blocks are never read as headings, checklist items or acceptance criteria. Every problem is a
one-line :class:`BadInput` of the form ``"{source}:{line}: {problem}; {fix}"``; parsing writes
nothing.

``markdown`` reads the first two formats, ``structured`` the last two, ``checks`` holds what they
share, ``model`` the result.
"""

from __future__ import annotations

from pathlib import Path

from cairn import tickets
from cairn.errors import BadInput
from cairn.run.plan.checks import FIX_FORMAT, fail
from cairn.run.plan.markdown import parse_markdown
from cairn.run.plan.model import (
    ACCEPTED_FORMS,
    JSON_SUFFIXES,
    MARKDOWN_SUFFIXES,
    PLAN_READ_LIMIT,
    YAML_SUFFIXES,
    Plan,
    PlanFormat,
    PlanTask,
)
from cairn.run.plan.structured import parse_structured
from cairn.util.durable import read_state_file

__all__ = [
    "ACCEPTED_FORMS",
    "FIX_FORMAT",
    "JSON_SUFFIXES",
    "MARKDOWN_SUFFIXES",
    "PLAN_READ_LIMIT",
    "YAML_SUFFIXES",
    "Plan",
    "PlanFormat",
    "PlanTask",
    "load",
    "parse",
    "ticket_for",
]


def load(path: Path) -> Plan:
    """Read and parse the plan file at ``path`` (files over 4 MiB are refused).

    A plan is the user's own input, so unlike cairn's state files it may be a symlink.
    """
    if path.is_dir():
        raise BadInput(f"plan {path} is a directory; pass the plan file itself")
    data = read_state_file(path.resolve() if path.is_symlink() else path, "plan", PLAN_READ_LIMIT)
    if data is None:
        raise BadInput(f"plan {path} not found; check the path")
    source = str(path)
    return parse(_decode(data, source), source, path.suffix)


def parse(text: str, source: str, suffix: str) -> Plan:
    """Parse plan ``text``; ``suffix`` (``.md``, ``.yaml``, ``.json``, …) selects the format."""
    text = text.removeprefix("\ufeff")
    nul = text.find("\0")
    if nul >= 0:
        fail(source, text.count("\n", 0, nul) + 1, "the plan is binary, not text", FIX_FORMAT)
    kind = suffix.lower()
    if kind and not kind.startswith("."):
        kind = "." + kind
    if kind in YAML_SUFFIXES:
        return parse_structured(text, source, "yaml")
    if kind in JSON_SUFFIXES:
        return parse_structured(text, source, "json")
    return parse_markdown(text, source)


def ticket_for(plan: Plan, path: Path) -> str:
    """The plan's ``ticket:``, validated; otherwise the file name mapped onto a ticket id."""
    if plan.ticket is not None:
        return tickets.validate(plan.ticket)
    mapped = tickets.map_name(path.stem)
    if not mapped:
        raise BadInput(
            f"cannot derive a ticket id from the plan file name {path.name!r}; "
            "add 'ticket: PROJ-123' to the plan or pass --ticket <id>"
        )
    return mapped


def _decode(data: bytes, source: str) -> str:
    nul = data.find(b"\0")
    if nul >= 0:
        fail(source, data.count(b"\n", 0, nul) + 1, "the plan is binary, not text", FIX_FORMAT)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        fail(source, line, f"the plan is not UTF-8 text (byte {exc.start})", "save it as UTF-8")
