"""Markdown plans: ``## Task N: title`` headings, or a ``- [ ] title`` checklist.

Front matter (``ticket:``, ``title:``) is read first; fenced code blocks are never read as
headings, checklist items or acceptance criteria.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from typing import Any

from cairn.run.plan.checks import check_numbers, fail, kind_of, ticket_and_title
from cairn.run.plan.model import ACCEPTED_FORMS, Plan, PlanFormat, PlanTask
from cairn.util import frontmatter

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


def parse_markdown(text: str, source: str) -> Plan:
    lines = _split_lines(text)
    meta, start = _front_matter(lines, source)
    fences = _fence_kinds(lines, start)
    headings = _headings(lines, fences, start, source)
    ticket, title = ticket_and_title(
        meta, source, lambda key: _front_matter_line(lines, start, key)
    )
    if title is None:
        title = next((h.text for h in headings if h.level == 1 and not h.task and h.text), None)
    fmt: PlanFormat
    if any(h.task for h in headings):
        fmt, drafts = "markdown-headings", _heading_tasks(lines, fences, headings)
    else:
        fmt, drafts = "checklist", _checklist_tasks(lines, fences, start, source)
    if not drafts:
        fail(source, 1, "no tasks found", ACCEPTED_FORMS)
    check_numbers([d.number for d in drafts], lambda pos: drafts[pos].line, source)
    tasks = [
        PlanTask(
            number=d.number, title=d.title, details=d.details, acceptance=d.acceptance, done=d.done
        )
        for d in drafts
    ]
    return Plan(ticket=ticket, title=title, tasks=tasks, source=source, format=fmt)


def _front_matter(lines: list[str], source: str) -> tuple[dict[Any, Any], int]:
    """The front matter mapping and the index of the first line after it."""
    close = frontmatter.closing_line(lines)
    if close is None:
        return {}, 0
    try:
        data = frontmatter.load(lines, close)
    except frontmatter.InvalidYAML as exc:
        fail(
            source,
            exc.line,
            f"invalid YAML in the front matter: {exc.problem}",
            "fix the block between the '---' lines",
        )
    except frontmatter.NotAMapping as exc:
        fail(
            source,
            exc.line,
            f"the front matter must be a YAML mapping, not {kind_of(exc.value)}",
            "write 'key: value' lines such as 'ticket: PROJ-123' between the '---' lines",
        )
    return data or {}, close + 1


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
        fail(
            source,
            line,
            f"task heading has a non-numeric number {token!r}",
            "number tasks with digits, as in '### Task 2: Add the parser'",
        )
    number = int(token)
    title = (match.groupdict().get("title") or "").strip()
    if not title:
        fail(
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
                fail(
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
