"""Parse a change-summary file: strict about structure, tolerant of prose added by hand."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any, NoReturn, TypeVar

import msgspec
from msgspec import Struct

from cairn.summary.model import (
    FINDING_FIELD,
    FINDING_ID,
    SECTIONS,
    TASK_FIELD,
    Finding,
    Gate,
    Status,
    Summary,
    SummaryError,
    Task,
    run_id,
    ticket_id,
)
from cairn.summary.render import BLOCKED, heading
from cairn.terms import FINDING_STATUSES, TASK_STATUSES, VERDICTS
from cairn.util import frontmatter
from cairn.util.codespans import parse_code_spans

R = TypeVar("R", bound=Struct)
Line = tuple[int, str]
Section = tuple[int, list[Line]]  # the heading's line number, and the lines under it
ProseByKey = dict[str, list[str]]
MakeBlock = Callable[[int, str, list[Line]], Any]  # (heading line, heading, lines under it)

_KEYS = ("format", "ticket", "run", "mode", "round", "updated", "usage")
_TASK_HEADING = re.compile(r"### Task ([0-9]+): (.*)")
_FINDING_HEADING = re.compile(rf"### ({FINDING_ID.pattern}): (.*)")
_COUNTS = re.compile(r"(Not started|In progress|Completed) — ([0-9]+) of ([0-9]+) (tasks|findings)")
_AT_ITEM = re.compile(r"In progress — (task|finding) ([0-9]+) of ([0-9]+)")
_INTERRUPTED = re.compile(
    r"Interrupted — ([a-z0-9_-]+) "
    r"(?:during (task|finding) ([0-9]+) of ([0-9]+)|after ([0-9]+) of ([0-9]+) (tasks|findings)"
    r"|after (task|finding) ([0-9]+) of ([0-9]+)); "
    r"(?:no snapshot|work saved at (\S+)(?: \(([0-9a-fA-F]{7,40})\))?)"
    r"(?:; (.+))?"
)
_STATES = {"Not started": "not_started", "In progress": "in_progress", "Completed": "completed"}
_GATE = re.compile(rf"([A-Za-z0-9][A-Za-z0-9 _./+-]*?)(?: \((.*)\))?: ({'|'.join(VERDICTS)})")


def parse(text: str, source: str = "change summary") -> Summary:
    """The Summary in ``text``; SummaryError naming the line when its structure is wrong."""
    return _Parser(text, source).summary()


def _value(fields: dict[str, tuple[int, str]], name: str) -> str | None:
    """A field's free text: None for a missing, empty, ``(pending)`` or ``(none)`` value."""
    value = fields.get(name, (0, ""))[1]
    if value in ("", "(pending)", "(none)"):
        return None
    return value[1:] if value.startswith("\\") else value


class _Parser:
    def __init__(self, text: str, source: str) -> None:
        self.source = source
        raw = text.removeprefix("\ufeff").split("\n")
        if raw[-1] == "":
            raw.pop()
        self.lines = [line.rstrip() for line in raw]
        self.line_of: Callable[[str], int] = lambda key: 1
        self.blocked: str | None = None

    def fail(self, line: int, problem: str, fix: str | None = None) -> NoReturn:
        if fix is None:
            raise SummaryError(self.source, line, problem)
        raise SummaryError(self.source, line, problem, fix)

    def summary(self) -> Summary:
        header, body_start = self._front_matter()
        mode = header["mode"]
        body = self._title(header, body_start)
        sections = self._sections(mode, body)
        prose: ProseByKey = {"preamble": [text for _, text in sections["preamble"][1]]}
        status_at, status_parts = self._status(sections["status"], prose)
        data: dict[str, Any] = dict(header)
        if mode == "implementation":
            data["tasks"] = self._blocks(sections["tasks"], "tasks", prose, self._task)
            data["files_changed"] = self._listing(sections["files"], "files", prose, self._file)
            data["deferred"] = self._listing(
                sections["deferred"], "deferred", prose, self._deferred
            )
        else:
            data["findings"] = self._blocks(sections["findings"], "findings", prose, self._finding)
        data["gates"] = self._listing(sections["gates"], "gates", prose, self._gate)
        data["status"] = self._check_status(status_at, status_parts, mode, data)
        data["blocked"] = self.blocked
        data["prose"] = prose
        return self._build(Summary, data, status_at)

    def _build(self, cls: type[R], data: dict[str, Any], line: int) -> R:
        try:
            return msgspec.convert(data, cls, strict=False)
        except msgspec.ValidationError as exc:  # the data was not in shape
            from cairn.util.invalid import line as explained
            from cairn.util.invalid import problem

            where = problem(exc, cls)[0].split(".")[0]
            if cls is Summary and where in _KEYS:
                line = self.line_of(where)
            self.fail(line, explained(exc, cls))

    def _front_matter(self) -> tuple[dict[str, Any], int]:
        if not frontmatter.opens(self.lines):
            self.fail(1, "no front matter: a change summary starts with a '---' line")
        close = frontmatter.closing_line(self.lines, closings=("---",))
        if close is None:
            self.fail(len(self.lines), "the front matter is not closed by a '---' line")
        block = self.lines[1:close]

        def line_of(key: str) -> int:
            starts = (f"{key}:", f'"{key}":')  # the YAML written by hand, the JSON cairn writes
            return next((i + 2 for i, t in enumerate(block) if t.lstrip().startswith(starts)), 1)

        self.line_of = line_of
        try:
            data = frontmatter.load(self.lines, close)
        except frontmatter.InvalidYAML as exc:
            self.fail(exc.line, f"the front matter is not valid YAML ({exc.problem})")
        except frontmatter.NotAMapping:
            data = None
        if data is None:
            self.fail(1, "the front matter is not a YAML mapping")
        fmt = data.get("format")
        if type(fmt) is int and fmt > 1:
            self.fail(
                line_of("format"),
                f"written by a newer cairn (format {fmt})",
                "upgrade cairn to read it",
            )
        if fmt != 1 or type(fmt) is not int:
            self.fail(line_of("format"), f"front matter format must be 1, not {fmt!r}")
        for key in data:
            if key not in _KEYS:
                self.fail(line_of(str(key)), f"unknown front matter key {key!r}")
        for key in ("ticket", "mode", "updated"):
            if key not in data:
                self.fail(close + 1, f"the front matter has no {key!r}")
        header = {key: data.get(key) for key in _KEYS}
        if header["mode"] not in SECTIONS:
            self.fail(line_of("mode"), f"mode {header['mode']!r} is not implementation or review")
        if (header["mode"] == "review") != (header["round"] is not None):
            needs = "a review round" if header["mode"] == "review" else "round: null"
            self.fail(line_of("round"), f"a {header['mode']} summary needs {needs}")
        updated = header["updated"]
        if isinstance(updated, str):
            with contextlib.suppress(ValueError):
                header["updated"] = updated = datetime.fromisoformat(updated)
        if not isinstance(updated, datetime) or updated.utcoffset() is None:
            self.fail(
                line_of("updated"),
                f"updated {str(updated)!r} is not an ISO-8601 time with a UTC offset",
            )
        checks: tuple[tuple[str, Callable[[Any], Any]], ...] = (
            ("ticket", ticket_id),
            ("run", run_id),
        )
        for key, check in checks:
            if not isinstance(header[key], str) and (key == "ticket" or header[key] is not None):
                self.fail(line_of(key), f"{key}: Input should be a valid string")
            try:
                check(header[key])
            except ValueError as exc:
                self.fail(line_of(key), f"{key}: {exc}")
        return header, close + 1

    def _title(self, header: dict[str, Any], start: int) -> list[Line]:
        i = start
        while i < len(self.lines) and not self.lines[i]:
            i += 1
        if i == len(self.lines):
            self.fail(len(self.lines), "the title line is missing")
        expected = heading(header["ticket"], header["mode"], header["round"])
        if self.lines[i] != expected:
            self.fail(i + 1, f"expected the title {expected!r} to match the front matter")
        return [(n + 1, self.lines[n]) for n in range(i + 1, len(self.lines))]

    def _sections(self, mode: str, body: list[Line]) -> dict[str, Section]:
        order = SECTIONS[mode]
        keys = {heading: key for key, heading in order}
        sections: dict[str, Section] = {"preamble": (0, [])}
        current = "preamble"
        for number, text in body:
            key = keys.get(text)
            if key is None:
                sections[current][1].append((number, text))
                continue
            if key in sections:
                first = sections[key][0]
                self.fail(number, f"section {text!r} appears twice (first on line {first})")
            expected = order[len(sections) - 1]
            if key != expected[0]:
                self.fail(number, f"section {expected[1]!r} is missing before this line")
            sections[key] = (number, [])
            current = key
        if len(sections) - 1 < len(order):
            missing = order[len(sections) - 1][1]
            self.fail(max(len(self.lines), 1), f"section {missing!r} is missing")
        return sections

    def _status(self, section: Section, prose: ProseByKey) -> tuple[int, re.Match[str]]:
        heading, lines = section
        first = next((i for i, (_, text) in enumerate(lines) if text), None)
        if first is None:
            self.fail(heading, "the Status section has no status line")
        number, text = lines[first]
        after = first + 1
        if after < len(lines) and lines[after][1].startswith(BLOCKED):
            note = lines[after][1][len(BLOCKED) :].strip()
            self.blocked = (note[1:] if note.startswith("\\") else note) or None
            after += 1
        prose["status"] = [t for _, t in lines[after:]]
        for pattern in (_COUNTS, _AT_ITEM, _INTERRUPTED):
            match = pattern.fullmatch(text)
            if match:
                return number, match
        self.fail(number, f"unrecognised status line {text!r}")

    def _check_status(
        self, line: int, match: re.Match[str], mode: str, data: dict[str, Any]
    ) -> Status:
        impl = mode == "implementation"
        noun, unit = ("task", "tasks") if impl else ("finding", "findings")
        items: list[Any] = data["tasks"] if impl else data["findings"]
        total = len(items)
        resolved = sum(1 for item in items if item.resolved)
        fields: dict[str, Any] = {}
        if match.re is _COUNTS:
            label, done, of, said_unit = match.groups()
            self._agree(line, said_unit == unit, f"it counts {said_unit} but this is a {mode}")
            self._agree(line, int(of) == total, f"it says {of} {unit} but the list has {total}")
            self._agree(line, int(done) == resolved, f"it says {done} resolved but {resolved} are")
            fields["state"] = _STATES[label]
            return self._build(Status, fields, line)
        if match.re is _AT_ITEM:
            said_noun, position, of = match.groups()
            fields["state"] = "in_progress"
        else:
            reason, said_noun, position, of, done, of_after, said_unit = match.groups()[:7]
            if match.group(8) is not None:  # "after task K of M"; older files say "K of M tasks"
                said_unit, done, of_after = match.group(8) + "s", match.group(9), match.group(10)
            ref, commit, detail = match.group(11), match.group(12), match.group(13)
            fields.update(state="interrupted", reason=reason, ref=ref, commit=commit)
            fields.update(detail=detail)
            if position is None:
                of = of_after
                self._agree(line, said_unit == unit, f"it counts {said_unit} in a {mode}")
                self._agree(
                    line, int(done) == resolved, f"it says {done} resolved but {resolved} are"
                )
        self._agree(line, int(of) == total, f"it says {of} {unit} but the list has {total}")
        if position is not None:
            self._agree(line, said_noun == noun, f"it names a {said_noun} in a {mode}")
            n = int(position)
            if impl:
                self._agree(line, n in {t.number for t in items}, f"there is no task {n}")
                fields["item"] = n
            else:
                self._agree(line, 1 <= n <= total, f"there is no finding {n} of {total}")
                fields["item"] = items[n - 1].id
        return self._build(Status, fields, line)

    def _agree(self, line: int, ok: bool, problem: str) -> None:
        if not ok:
            self.fail(line, f"the status line disagrees with the list: {problem}")

    def _blocks(self, section: Section, key: str, prose: ProseByKey, make: MakeBlock) -> list[Any]:
        _, lines = section
        starts = [i for i, (_, text) in enumerate(lines) if text.startswith("### ")]
        prose[key] = [text for _, text in lines[: starts[0] if starts else len(lines)]]
        blocks = []
        seen: dict[Any, int] = {}
        for at, start in enumerate(starts):
            end = starts[at + 1] if at + 1 < len(starts) else len(lines)
            number, text = lines[start]
            block = make(number, text, lines[start + 1 : end])
            ident = block.number if key == "tasks" else block.id
            if ident in seen:
                self.fail(number, f"{text!r} repeats the heading on line {seen[ident]}")
            seen[ident] = number
            blocks.append(block)
        return blocks

    def _heading(self, number: int, text: str, pattern: re.Pattern[str], what: str) -> list[str]:
        match = pattern.fullmatch(text)
        if not match:
            self.fail(number, f"{text!r} is not a valid {what} heading")
        *ident, rest = match.groups()
        title, sep, status = rest.rpartition(" — ")
        if not sep:
            self.fail(number, f"the {what} heading has no ' — <status>' at its end")
        return [*ident, title, status]

    def _fields(
        self, lines: list[Line], pattern: re.Pattern[str]
    ) -> tuple[dict[str, tuple[int, str]], list[str]]:
        fields: dict[str, tuple[int, str]] = {}
        prose = []
        for number, text in lines:
            match = pattern.match(text)
            if not match:
                prose.append(text)
                continue
            name = match.group(1)
            if name in fields:
                first = fields[name][0]
                self.fail(number, f"the {name} field appears twice (first on line {first})")
            fields[name] = (number, text[match.end() :].strip())
        return fields, prose

    def _task(self, number: int, text: str, lines: list[Line]) -> Task:
        n, title, status = self._heading(number, text, _TASK_HEADING, "task")
        if status not in TASK_STATUSES:
            self.fail(
                number, f"unknown task status {status!r}; use one of {', '.join(TASK_STATUSES)}"
            )
        fields, prose = self._fields(lines, TASK_FIELD)
        files: list[str] | None = None
        if "Files" in fields:
            line, value = fields["Files"]
            if value == "(none)":
                files = []
            elif value not in ("", "(pending)"):
                try:
                    files = parse_code_spans(value)
                except ValueError as exc:
                    self.fail(line, f"Files: {exc}")
        data = dict(number=int(n), title=title, status=status, files=files, prose=prose)
        data.update(outcome=_value(fields, "Outcome"), notes=_value(fields, "Notes"))
        data.update(agent=_value(fields, "Agent"))
        return self._build(Task, data, number)

    def _finding(self, number: int, text: str, lines: list[Line]) -> Finding:
        ident, title, status = self._heading(number, text, _FINDING_HEADING, "finding")
        if status not in FINDING_STATUSES:
            allowed = ", ".join(FINDING_STATUSES)
            self.fail(number, f"unknown finding status {status!r}; use one of {allowed}")
        fields, prose = self._fields(lines, FINDING_FIELD)
        data = dict(id=ident, title=title, status=status, prose=prose)
        return self._build(Finding, {**data, "action": _value(fields, "Action")}, number)

    def _listing(
        self, section: Section, key: str, prose: ProseByKey, item: Callable[[int, str], list[Any]]
    ) -> list[Any] | None:
        _, lines = section
        first = next((i for i, (_, text) in enumerate(lines) if text), None)
        if first is None:
            return None
        text = lines[first][1]
        if text in ("(pending)", "(none)"):
            prose[key] = [t for _, t in lines[first + 1 :]]
            return None if text == "(pending)" else []
        if not text.startswith("- "):
            prose[key] = [t for _, t in lines[first:]]
            return None
        items: list[Any] = []
        i = first
        while i < len(lines):
            number, text = lines[i]
            if text.startswith("- "):
                items += item(number, text[2:])
                i += 1
            elif not text:
                after = next((j for j in range(i, len(lines)) if lines[j][1]), None)
                if after is None or not lines[after][1].startswith("- "):
                    break
                i = after
            else:
                break
        prose[key] = [t for _, t in lines[i:]]
        return items

    def _file(self, number: int, text: str) -> list[str]:
        try:
            return parse_code_spans(text)
        except ValueError as exc:
            self.fail(number, f"a changed file must be a `code span`: {exc}")

    def _deferred(self, number: int, text: str) -> list[str]:
        value = text.strip()
        value = value[1:] if value.startswith("\\") else value
        if not value:
            self.fail(number, "a deferred item is empty")
        return [value]

    def _gate(self, number: int, text: str) -> list[Gate]:
        match = _GATE.fullmatch(text)
        if not match:
            self.fail(number, "a quality gate must read '- <name> (`<command>`): pass|fail'")
        name, command, result = match.groups()
        if command is not None:
            try:
                spans = parse_code_spans(command)
            except ValueError as exc:
                self.fail(number, f"the gate command must be one `code span`: {exc}")
            if len(spans) != 1:
                self.fail(number, "the gate command must be one `code span`")
            command = spans[0]
        return [self._build(Gate, {"name": name, "command": command, "result": result}, number)]
