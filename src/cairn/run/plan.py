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
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from cairn import tickets
from cairn.errors import BadInput
from cairn.util.durable import read_state_file
from cairn.util.yaml_io import YAMLError, safe_load

PLAN_READ_LIMIT = 4 * 1024 * 1024

PlanFormat = Literal["markdown-headings", "checklist", "yaml", "json"]

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".txt"})
YAML_SUFFIXES = frozenset({".yaml", ".yml"})
JSON_SUFFIXES = frozenset({".json"})

ACCEPTED_FORMS = (
    "write '## Task 1: title' headings, a '- [ ] title' checklist, "
    "or a .yaml/.json plan with a 'tasks' list"
)

_COMPOSE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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


# --------------------------------------------------------------------------- public entry points


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
        _fail(source, text.count("\n", 0, nul) + 1, "the plan is binary, not text", _FIX_FORMAT)
    kind = suffix.lower()
    if kind and not kind.startswith("."):
        kind = "." + kind
    if kind in YAML_SUFFIXES:
        return _parse_structured(text, source, "yaml")
    if kind in JSON_SUFFIXES:
        return _parse_structured(text, source, "json")
    return _parse_markdown(text, source)


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


# --------------------------------------------------------------------------- shared helpers

_FIX_FORMAT = "pass a UTF-8 markdown, YAML or JSON plan"


def _fail(source: str, line: int, problem: str, fix: str) -> NoReturn:
    raise BadInput(f"{source}:{line}: {_flat(problem)}; {fix}")


def _flat(text: str) -> str:
    return " ".join(text.split())


def _decode(data: bytes, source: str) -> str:
    nul = data.find(b"\0")
    if nul >= 0:
        _fail(source, data.count(b"\n", 0, nul) + 1, "the plan is binary, not text", _FIX_FORMAT)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        _fail(source, line, f"the plan is not UTF-8 text (byte {exc.start})", "save it as UTF-8")


def _kind(value: Any) -> str:
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


def _check_numbers(numbers: list[int], line_of: Callable[[int], int], source: str) -> None:
    """Task numbers must be unique and increasing; ``line_of(position)`` locates a task."""
    first_at: dict[int, int] = {}
    for pos, number in enumerate(numbers):
        if number in first_at:
            _fail(
                source,
                line_of(pos),
                f"duplicate task number {number} (first used at line {line_of(first_at[number])})",
                "give every task its own number",
            )
        if pos and number < numbers[pos - 1]:
            _fail(
                source,
                line_of(pos),
                f"task number {number} comes after task {numbers[pos - 1]} "
                f"(line {line_of(pos - 1)})",
                "number the tasks in increasing order",
            )
        first_at[number] = pos


def _meta(
    data: dict[Any, Any], source: str, line_of: Callable[[str], int]
) -> tuple[str | None, str | None]:
    """``ticket`` and ``title`` from front matter or a structured plan's top level."""
    ticket = data.get("ticket")
    if isinstance(ticket, int) and not isinstance(ticket, bool):
        ticket = str(ticket)
    if ticket is not None:
        if not isinstance(ticket, str):
            _fail(
                source,
                line_of("ticket"),
                f"'ticket' must be a string, not {_kind(ticket)}",
                "write a slug such as 'ticket: PROJ-123'",
            )
        try:
            tickets.validate(ticket)
        except BadInput as exc:
            raise BadInput(f"{source}:{line_of('ticket')}: {exc}") from None
    title = data.get("title")
    if title is not None:
        if not isinstance(title, str):
            _fail(
                source,
                line_of("title"),
                f"'title' must be a string, not {_kind(title)}",
                "quote the title",
            )
        title = title.strip()
        if "\n" in title or "\r" in title:
            _fail(source, line_of("title"), "'title' must be one line", "shorten the title")
    return ticket, title or None


# --------------------------------------------------------------------------- markdown

_OUTSIDE, _FENCE_OPEN, _FENCE_INSIDE = 0, 1, 2

_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)")
_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+$")
_TASK = re.compile(
    r"task[ \t]+#?(?P<num>[^ \t:—–]+?)[ \t]*"
    r"(?::|—|–|(?<=[ \t])-(?=[ \t]|$)|\.(?=[ \t]|$))[ \t]*(?P<title>.*)",
    re.IGNORECASE,
)
_TASK_BARE = re.compile(r"task[ \t]+#?(?P<num>[^ \t:—–]+)", re.IGNORECASE)
_DIGITS = re.compile(r"[0-9]+")
_ROMAN = re.compile(r"[IVXLC]+")
_NUMBER_WORDS = frozenset(
    {
        *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"),
        *("ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen"),
        *("seventeen", "eighteen", "nineteen", "twenty"),
    }
)
_ACCEPTANCE = re.compile(
    r"(?:#{1,6}[ \t]+)?(?:\*\*|__|\*|_)?acceptance[ \t]+criteri(?:a|on)[ \t]*:?[ \t]*"
    r"(?:\*\*|__|\*|_)?[ \t]*:?(?:[ \t]+#+)?",
    re.IGNORECASE,
)
_BULLET = re.compile(r"[ \t]*(?:[-*+]|[0-9]{1,9}[.)])[ \t]+(?:\[[ xX]\](?:[ \t]+|$))?(?P<text>.*)")
_CHECK_ITEM = re.compile(r"[-*+][ \t]+\[(?P<box>[ xX])\](?:[ \t]+(?P<title>.*))?")


@dataclass(slots=True)
class _Heading:
    index: int
    level: int
    text: str
    task: tuple[int, str] | None
    acceptance: bool


@dataclass(slots=True)
class _Draft:
    number: int
    title: str
    line: int
    done: bool = False
    details: str = ""
    acceptance: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)


def _split_lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _parse_markdown(text: str, source: str) -> Plan:
    lines = _split_lines(text)
    meta, start = _front_matter(lines, source)
    fences = _fence_kinds(lines, start)
    headings = _headings(lines, fences, start, source)
    ticket, title = _meta(meta, source, lambda key: _front_matter_line(lines, start, key))
    if title is None:
        title = next((h.text for h in headings if h.level == 1 and not h.task and h.text), None)
    fmt: PlanFormat
    if any(h.task for h in headings):
        fmt, drafts = "markdown-headings", _heading_tasks(lines, fences, headings)
    else:
        fmt, drafts = "checklist", _checklist_tasks(lines, fences, start, source)
    if not drafts:
        _fail(source, 1, "no tasks found", ACCEPTED_FORMS)
    _check_numbers([d.number for d in drafts], lambda pos: drafts[pos].line, source)
    tasks = [
        PlanTask(
            number=d.number, title=d.title, details=d.details, acceptance=d.acceptance, done=d.done
        )
        for d in drafts
    ]
    return Plan(ticket=ticket, title=title, tasks=tasks, source=source, format=fmt)


def _front_matter(lines: list[str], source: str) -> tuple[dict[Any, Any], int]:
    """The front matter mapping and the index of the first line after it."""
    if not lines or lines[0].rstrip() != "---":
        return {}, 0
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
    if end is None:
        return {}, 0
    try:
        data = safe_load("\n".join(lines[1:end]))
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc)
        _fail(
            source,
            line,
            f"invalid YAML in the front matter: {problem}",
            "fix the block between the '---' lines",
        )
    if data is None:
        return {}, end + 1
    if not isinstance(data, dict):
        _fail(
            source,
            2,
            f"the front matter must be a YAML mapping, not {_kind(data)}",
            "write 'key: value' lines such as 'ticket: PROJ-123' between the '---' lines",
        )
    return data, end + 1


def _front_matter_line(lines: list[str], start: int, key: str) -> int:
    pattern = re.compile(rf"{re.escape(key)}[ \t]*:")
    for i in range(1, max(start - 1, 1)):
        if pattern.match(lines[i]):
            return i + 1
    return 2


def _fence_kinds(lines: list[str], start: int) -> list[int]:
    """Per line: outside any fenced code block, the opening fence, or inside/closing it."""
    kinds = [_OUTSIDE] * len(lines)
    fence_char, fence_len = "", 0
    for i in range(start, len(lines)):
        line = lines[i]
        if fence_len:
            kinds[i] = _FENCE_INSIDE
            stripped = line.strip()
            if (
                len(stripped) >= fence_len
                and stripped[0] == fence_char
                and stripped == fence_char * len(stripped)
            ):
                fence_len = 0
            continue
        if "```" not in line and "~~~" not in line:
            continue
        match = _FENCE.fullmatch(line)
        if match and not (match[1][0] == "`" and "`" in match[2]):
            kinds[i] = _FENCE_OPEN
            fence_char, fence_len = match[1][0], len(match[1])
    return kinds


def _headings(lines: list[str], fences: list[int], start: int, source: str) -> list[_Heading]:
    headings = []
    for i in range(start, len(lines)):
        line = lines[i]
        if fences[i] or "#" not in line[:4]:
            continue
        match = _ATX.fullmatch(line)
        if not match:
            continue
        text = _CLOSING_HASHES.sub("", match[2] or "").strip()
        headings.append(
            _Heading(
                index=i,
                level=len(match[1]),
                text=text,
                task=_task_heading(text, i + 1, source),
                acceptance=_ACCEPTANCE.fullmatch(line.strip()) is not None,
            )
        )
    return headings


def _task_heading(text: str, line: int, source: str) -> tuple[int, str] | None:
    """(number, title) when ``text`` is a task heading; None for any other heading."""
    match = _TASK.fullmatch(text) or _TASK_BARE.fullmatch(text)
    if match is None:
        return None
    token = match["num"]
    if not _DIGITS.fullmatch(token):
        if not _looks_numbered(token):
            return None
        _fail(
            source,
            line,
            f"task heading has a non-numeric number {token!r}",
            "number tasks with digits, as in '### Task 2: Add the parser'",
        )
    number = int(token)
    title = (match.groupdict().get("title") or "").strip()
    if not title:
        _fail(
            source,
            line,
            f"task {number} has an empty title",
            f"write a title after the number, as in '## Task {number}: Add the parser'",
        )
    return number, title


def _looks_numbered(token: str) -> bool:
    return (
        any(c.isdigit() for c in token)
        or token.lower() in _NUMBER_WORDS
        or _ROMAN.fullmatch(token) is not None
    )


def _heading_tasks(lines: list[str], fences: list[int], headings: list[_Heading]) -> list[_Draft]:
    drafts = []
    for pos, head in enumerate(headings):
        if head.task is None:
            continue
        end = _body_end(headings, pos, len(lines))
        number, title = head.task
        drafts.append(
            _Draft(
                number=number,
                title=title,
                line=head.index + 1,
                details=_block(lines[head.index + 1 : end]),
                acceptance=_acceptance(lines, fences, head.index + 1, end),
            )
        )
    return drafts


def _body_end(headings: list[_Heading], pos: int, total: int) -> int:
    """Index of the line ending task ``headings[pos]``'s body.

    The next task heading ends it, and so does any heading of the same or a higher level, except
    an "Acceptance criteria" heading at the task's own level, which stays part of the task.
    """
    level = headings[pos].level
    for nxt in range(pos + 1, len(headings)):
        head = headings[nxt]
        if head.task is not None or head.level < level:
            return head.index
        if head.level == level and not head.acceptance:
            return head.index
    return total


def _block(lines: list[str]) -> str:
    """``lines`` joined, without blank lines at either end or trailing whitespace."""
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return "\n".join(lines[start:end]).rstrip()


def _acceptance(lines: list[str], fences: list[int], start: int, end: int) -> list[str]:
    """Bullet items following "Acceptance criteria" markers between ``start`` and ``end``."""
    items: list[str] = []
    active = continuable = False
    for i in range(start, end):
        if fences[i]:
            active = continuable = False
            continue
        line = lines[i]
        stripped = line.strip()
        if _ACCEPTANCE.fullmatch(stripped):
            active, continuable = True, False
            continue
        if not active or not stripped:
            continue
        bullet = _BULLET.fullmatch(line)
        if bullet:
            text = bullet["text"].strip()
            if text:
                items.append(text)
            continuable = bool(text)
        elif line[0] in " \t":
            if continuable:
                items[-1] = f"{items[-1]} {stripped}"
        else:
            active = continuable = False
    return items


def _checklist_tasks(lines: list[str], fences: list[int], start: int, source: str) -> list[_Draft]:
    drafts: list[_Draft] = []
    current: _Draft | None = None
    fence_in_item = False
    for i in range(start, len(lines)):
        line = lines[i]
        indented = line[:2] == "  " or line[:1] == "\t"
        if fences[i] == _FENCE_INSIDE:
            if current is not None and fence_in_item:
                current.body.append(line)
            continue
        if fences[i] == _FENCE_OPEN:
            fence_in_item = current is not None and indented
            if fence_in_item and current is not None:
                current.body.append(line)
            else:
                current = None
            continue
        item = _CHECK_ITEM.fullmatch(line)
        if item:
            title = (item["title"] or "").strip()
            if not title:
                _fail(
                    source,
                    i + 1,
                    f"checklist item {len(drafts)} has an empty title",
                    "write the task after the box, as in '- [ ] Add the parser'",
                )
            current = _Draft(number=len(drafts), title=title, line=i + 1, done=item["box"] != " ")
            drafts.append(current)
        elif current is not None:
            if indented or not line.strip():
                current.body.append(line)
            else:
                current = None
    for draft in drafts:
        draft.details = _block(textwrap.dedent("\n".join(draft.body)).split("\n"))
    return drafts


# --------------------------------------------------------------------------- YAML and JSON


class _Locator:
    """Line numbers of values in a YAML/JSON document, composed only when an error needs one."""

    def __init__(self, text: str, fmt: str) -> None:
        # JSON allows tabs between tokens where YAML does not; they are never inside strings.
        self._text = text.replace("\t", " ") if fmt == "json" else text
        self._root: yaml.Node | None = None
        self._composed = False

    def line(self, *path: str | int) -> int:
        if not self._composed:
            self._composed = True
            try:
                self._root = yaml.compose(self._text, Loader=_COMPOSE_LOADER)
            except (YAMLError, RecursionError):
                self._root = None
        node, line = self._root, 1
        for key in path:
            if node is None:
                break
            line = node.start_mark.line + 1
            node = _child(node, key)
        if node is not None:
            line = node.start_mark.line + 1
        return line


def _child(node: yaml.Node, key: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return value_node
    elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        return node.value[key]
    return None


def _load_structured(text: str, source: str, fmt: PlanFormat) -> Any:
    try:
        if fmt == "json":
            return json.loads(text)
        return safe_load(text)
    except json.JSONDecodeError as exc:
        _fail(source, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})", "fix the syntax")
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc)
        _fail(
            source,
            line,
            f"invalid YAML: {problem}",
            "fix the syntax (quote titles that contain ': ' or start with a special character)",
        )
    except RecursionError:
        _fail(source, 1, f"the {fmt.upper()} plan is nested too deeply", "flatten it")


def _parse_structured(text: str, source: str, fmt: PlanFormat) -> Plan:
    data = _load_structured(text, source, fmt)
    where = _Locator(text, fmt)
    items: Any
    if isinstance(data, list):
        items, prefix, ticket, title = data, (), None, None
    elif isinstance(data, dict):
        if "tasks" not in data:
            _fail(source, 1, "the plan has no 'tasks' key", ACCEPTED_FORMS)
        items, prefix = data["tasks"], ("tasks",)
        if items is not None and not isinstance(items, list):
            _fail(
                source,
                where.line("tasks"),
                f"'tasks' must be a list, not {_kind(items)}",
                "give one list item per task, each a title or a mapping with 'title'",
            )
        ticket, title = _meta(data, source, where.line)
    elif data is None:
        _fail(source, 1, "no tasks found", ACCEPTED_FORMS)
    else:
        _fail(
            source,
            1,
            f"the plan must be a mapping with 'tasks' or a list of tasks, not {_kind(data)}",
            ACCEPTED_FORMS,
        )
    if not items:
        _fail(source, where.line(*prefix), "no tasks found", ACCEPTED_FORMS)
    tasks = [
        _structured_task(item, pos, source, lambda *key, pos=pos: where.line(*prefix, pos, *key))
        for pos, item in enumerate(items)
    ]
    _check_numbers([t.number for t in tasks], lambda pos: where.line(*prefix, pos), source)
    return Plan(ticket=ticket, title=title, tasks=tasks, source=source, format=fmt)


def _structured_task(item: Any, pos: int, source: str, line_of: Callable[..., int]) -> PlanTask:
    if isinstance(item, str):
        item = {"title": item}
    elif not isinstance(item, dict):
        _fail(
            source,
            line_of(),
            f"task {pos} must be a title or a mapping with 'title', not {_kind(item)}",
            "write '- Add the parser' or '- title: Add the parser'",
        )
    return PlanTask(
        number=_task_number(item, pos, source, line_of),
        title=_task_title(item, pos, source, line_of),
        details=_task_details(item, pos, source, line_of),
        acceptance=_task_acceptance(item, pos, source, line_of),
        done=_task_done(item, pos, source, line_of),
    )


def _task_title(item: dict[Any, Any], pos: int, source: str, line_of: Callable[..., int]) -> str:
    if item.get("title") is None:
        _fail(source, line_of(), f"task {pos} has no 'title'", "give every task a 'title'")
    title = item["title"]
    if not isinstance(title, str):
        _fail(
            source,
            line_of("title"),
            f"task {pos} 'title' must be a string, not {_kind(title)}",
            "quote the title",
        )
    title = title.strip()
    if not title:
        _fail(source, line_of("title"), f"task {pos} has an empty title", "write a title")
    if "\n" in title or "\r" in title:
        _fail(
            source,
            line_of("title"),
            f"task {pos} 'title' must be one line",
            "move the rest into 'details'",
        )
    return title


def _task_number(item: dict[Any, Any], pos: int, source: str, line_of: Callable[..., int]) -> int:
    number = item.get("number")
    if number is None:
        return pos
    if isinstance(number, bool) or not isinstance(number, int) or number < 0:
        _fail(
            source,
            line_of("number"),
            f"task {pos} 'number' must be a whole number 0 or more, not {number!r}",
            "fix the number or leave it out to use the task's position",
        )
    return number


def _task_details(item: dict[Any, Any], pos: int, source: str, line_of: Callable[..., int]) -> str:
    details = item.get("details")
    if details is None:
        return ""
    if not isinstance(details, str):
        _fail(
            source,
            line_of("details"),
            f"task {pos} 'details' must be a string, not {_kind(details)}",
            "write the details as one (block) string",
        )
    return details.strip()


def _task_acceptance(
    item: dict[Any, Any], pos: int, source: str, line_of: Callable[..., int]
) -> list[str]:
    criteria = item.get("acceptance")
    if criteria is None:
        return []
    fix = "write one criterion string per list item"
    if not isinstance(criteria, list):
        _fail(
            source,
            line_of("acceptance"),
            f"task {pos} 'acceptance' must be a list of strings, not {_kind(criteria)}",
            fix,
        )
    for index, criterion in enumerate(criteria):
        if not isinstance(criterion, str):
            _fail(
                source,
                line_of("acceptance", index),
                f"task {pos} 'acceptance' item {index} must be a string, not {_kind(criterion)}",
                fix,
            )
    return [c.strip() for c in criteria if c.strip()]


def _task_done(item: dict[Any, Any], pos: int, source: str, line_of: Callable[..., int]) -> bool:
    done = item.get("done", False)
    if not isinstance(done, bool):
        _fail(
            source,
            line_of("done"),
            f"task {pos} 'done' must be true or false, not {_kind(done)}",
            "write 'done: true' or leave it out",
        )
    return done
