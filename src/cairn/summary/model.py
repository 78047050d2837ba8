"""The change summary's typed model. Validators normalise values so that every model renders to
markdown that parses back to an equal model."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from msgspec import Meta, Struct
from msgspec.structs import force_setattr

from cairn import tickets
from cairn.errors import CorruptState
from cairn.terms import FindingStatus as FindingStatus  # re-exported: cairn.summary's API
from cairn.terms import SummaryState, Verdict
from cairn.terms import TaskStatus as TaskStatus  # re-exported: cairn.summary's API

Mode = Literal["implementation", "review"]
ProseKey = Literal["preamble", "status", "tasks", "findings", "files", "gates", "deferred"]

RESOLVED_TASK = frozenset({"completed", "skipped", "deferred"})

SECTIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "implementation": (
        ("status", "## Status"),
        ("tasks", "## Per-task summary"),
        ("files", "## Files changed"),
        ("gates", "## Quality gates"),
        ("deferred", "## Deferred items"),
    ),
    "review": (
        ("status", "## Status"),
        ("findings", "## Findings addressed"),
        ("gates", "## Quality gates"),
    ),
}
TASK_FIELD = re.compile(r"- \*\*(Files|Outcome|Notes|Agent):\*\*")
FINDING_FIELD = re.compile(r"- \*\*(Action):\*\*")
FINDING_ID = re.compile(r"[A-Za-z]+[0-9]+(?:-[A-Za-z]+)?")
GATE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _./+-]*")
_LINE_BREAK = re.compile(r"\s*[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]\s*")
_SLUG = re.compile(r"[a-z0-9_-]+")
_COMMIT = re.compile(r"[0-9a-f]{7,40}")


class SummaryError(CorruptState):
    """A change summary file that cannot be read; the message names the line."""

    def __init__(
        self,
        source: str,
        line: int,
        problem: str,
        fix: str = "fix that line (the format is in docs/state.md)",
    ) -> None:
        self.source = source
        self.line = line
        self.problem = problem
        self.fix = fix
        super().__init__(f"{source}:{line}: {problem}; {fix}")

    def __reduce__(self) -> tuple[type[SummaryError], tuple[str, int, str, str]]:
        return (type(self), (self.source, self.line, self.problem, self.fix))


def _plain(value: str) -> str:
    if "\0" in value:
        raise ValueError("text must not contain a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text must be valid Unicode (no lone surrogates)") from None
    return value


def one_line(value: str) -> str:
    """Collapse each whitespace run that holds a line break into one space, then strip."""
    return _LINE_BREAK.sub(" ", _plain(value)).strip()


def _title(value: str) -> str:
    value = one_line(value)
    if not value:
        raise ValueError("a title must not be empty")
    return value


def _opt_text(value: str | None) -> str | None:
    return (one_line(value) or None) if value is not None else None


def _path(value: str) -> str:
    if not value:
        raise ValueError("a file path must not be empty")
    if any(c in value for c in "\n\r\0"):
        raise ValueError(f"file path {value!r} contains a line break or NUL")
    return _plain(value)


def _prose(lines: list[str]) -> list[str]:
    out = [part.rstrip() for line in lines for part in (_plain(line).splitlines() or [""])]
    while out and not out[0]:
        out.pop(0)
    while out and not out[-1]:
        out.pop()
    return out


def _no_space(what: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if not value or any(c.isspace() for c in _plain(value)):
            raise ValueError(f"{what} must be non-empty with no whitespace")
        return value

    return check


def _pattern(pattern: re.Pattern[str], what: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise ValueError(f"{what} {value!r} must match {pattern.pattern}")
        return value

    return check


def ticket_id(value: str) -> str:
    """A valid ticket id; ValueError otherwise."""
    why = tickets.problem(value)
    if why is not None:
        raise ValueError(f"invalid ticket id {value!r}: {why}")
    return value


def _gate_name(value: str) -> str:
    if not GATE_NAME.fullmatch(value) or value.endswith(" "):
        raise ValueError(
            f"gate name {value!r} must match {GATE_NAME.pattern} with no trailing space"
        )
    return value


def _commit(value: str) -> str:
    return _pattern(_COMMIT, "commit")(value.lower())


def _aware(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("must carry a UTC offset")
    return value.replace(microsecond=0)


def _drop_empty(value: dict[str, list[str]]) -> dict[str, list[str]]:
    return {key: _prose(lines) for key, lines in value.items() if _prose(lines)}


def _each(check: Callable[[str], str]) -> Callable[[list[str]], list[str]]:
    return lambda values: [check(value) for value in values]


def run_id(value: str | None) -> str | None:
    """A summary's run id (none, or one word); ValueError otherwise."""
    return None if value is None else _no_space("run id")(value)


def normalise(record: Struct, **checks: Callable[[Any], Any]) -> None:
    """Put each named field of ``record`` that is not None through its check (in
    ``__post_init__``); a ValueError names the field (``title: a title must not be empty``)."""
    for name, check in checks.items():
        value = getattr(record, name)
        try:
            if value is not None:
                force_setattr(record, name, check(value))
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None


class Record(Struct, frozen=True, forbid_unknown_fields=True):
    """A part of the change summary."""


class Task(Record, frozen=True, kw_only=True):
    number: Annotated[int, Meta(ge=0)]
    title: str
    status: TaskStatus = "pending"
    files: list[str] | None = None
    outcome: str | None = None
    notes: str | None = None
    agent: str | None = None  # the agent that completed it
    prose: list[str] = []

    def __post_init__(self) -> None:
        normalise(
            self,
            title=_title,
            files=_each(_path),
            outcome=_opt_text,
            notes=_opt_text,
            prose=_prose,
        )

    @property
    def resolved(self) -> bool:
        return self.status in RESOLVED_TASK


class Finding(Record, frozen=True, kw_only=True):
    id: str
    title: str
    status: FindingStatus = "pending"
    action: str | None = None
    prose: list[str] = []

    def __post_init__(self) -> None:
        normalise(
            self,
            id=_pattern(FINDING_ID, "finding id"),
            title=_title,
            action=_opt_text,
            prose=_prose,
        )

    @property
    def resolved(self) -> bool:
        return self.status != "pending"


class Gate(Record, frozen=True, kw_only=True):
    name: str
    command: str | None = None
    result: Verdict

    def __post_init__(self) -> None:
        normalise(self, name=_gate_name, command=_opt_text)


def _float(value: float | None) -> float | None:  # a cost that is not finite is unknown
    return None if value is None or value - value != 0 else float(value)


class Usage(Record, frozen=True, kw_only=True):
    """What the run's dispatches used so far (all its sessions): tokens, and any cost."""

    input_tokens: Annotated[int, Meta(ge=0)] = 0
    output_tokens: Annotated[int, Meta(ge=0)] = 0
    cache_read_tokens: Annotated[int, Meta(ge=0)] = 0
    cache_write_tokens: Annotated[int, Meta(ge=0)] = 0
    cost_usd: float | None = None

    def __post_init__(self) -> None:
        normalise(self, cost_usd=_float)

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )


class Status(Record, frozen=True, kw_only=True):
    state: SummaryState
    item: int | str | None = None
    reason: str | None = None
    ref: str | None = None
    commit: str | None = None
    detail: str | None = None  # the agent's error text, for an interrupted status

    def __post_init__(self) -> None:
        normalise(
            self,
            reason=_pattern(_SLUG, "reason"),
            ref=_no_space("ref"),
            commit=_commit,
            detail=_opt_text,
        )
        if self.state == "interrupted":
            if self.reason is None:
                raise ValueError("an interrupted status needs a reason")
            if self.commit is not None and self.ref is None:
                raise ValueError("a commit needs the ref it was saved at")
        elif (self.reason, self.ref, self.commit, self.detail) != (None, None, None, None):
            raise ValueError("reason, ref, commit and detail are only for an interrupted status")
        if self.item is not None and self.state in ("not_started", "completed"):
            raise ValueError(f"a {self.state} status has no current item")


class Summary(Record, frozen=True, kw_only=True):
    format: int = 1
    ticket: str
    run: str | None = None
    mode: Mode
    round: Annotated[int, Meta(ge=0)] | None = None
    updated: datetime
    usage: Usage | None = None
    status: Status
    blocked: str | None = None  # what the agent was denied, the Status section's Blocked note
    tasks: list[Task] = []
    findings: list[Finding] = []
    files_changed: list[str] | None = None
    gates: list[Gate] | None = None
    deferred: list[str] | None = None
    prose: dict[ProseKey, list[str]] = {}

    def __post_init__(self) -> None:
        normalise(
            self,
            ticket=ticket_id,
            run=run_id,
            updated=_aware,
            blocked=_opt_text,
            files_changed=_each(_path),
            deferred=_each(_title),
            prose=_drop_empty,
        )
        if self.format != 1:
            raise ValueError(f"format must be 1, not {self.format}")
        if self.mode == "implementation":
            self._check_implementation()
        else:
            self._check_review()
        self._check_prose()

    def _check_implementation(self) -> None:
        if self.round is not None:
            raise ValueError("an implementation summary has no review round")
        if self.findings:
            raise ValueError("an implementation summary has no findings")
        numbers = [task.number for task in self.tasks]
        dupes = sorted(n for n, count in Counter(numbers).items() if count > 1)
        if dupes:
            raise ValueError(f"task numbers must be unique; {dupes[0]} appears twice")
        item = self.status.item
        if item is not None and (not isinstance(item, int) or item not in numbers):
            raise ValueError(f"status item {item!r} is not a task number in the list")

    def _check_review(self) -> None:
        if self.round is None:
            raise ValueError("a review summary needs a review round")
        if self.tasks:
            raise ValueError("a review summary has no tasks")
        if self.files_changed is not None or self.deferred is not None:
            raise ValueError("a review summary has no files changed or deferred items")
        ids = [finding.id for finding in self.findings]
        dupes = sorted(i for i, count in Counter(ids).items() if count > 1)
        if dupes:
            raise ValueError(f"finding ids must be unique; {dupes[0]} appears twice")
        item = self.status.item
        if item is not None and item not in ids:
            raise ValueError(f"status item {item!r} is not a finding id in the list")

    def _check_prose(self) -> None:
        sections = dict(SECTIONS[self.mode])
        headings = set(sections.values())
        for key in self.prose:
            if key != "preamble" and key not in sections:
                raise ValueError(f"a {self.mode} summary has no {key!r} section for prose")
        blocks: list[tuple[str, list[str], re.Pattern[str] | None]] = [
            (key, lines, None) for key, lines in self.prose.items()
        ]
        blocks += [(f"task {t.number}", t.prose, TASK_FIELD) for t in self.tasks]
        blocks += [(f"finding {f.id}", f.prose, FINDING_FIELD) for f in self.findings]
        for where, lines, field_line in blocks:
            for line in lines:
                if line in headings:
                    raise ValueError(f"{where} prose line {line!r} would read as a section")
                in_blocks = field_line is not None or where in ("tasks", "findings")
                if in_blocks and line.startswith("### "):
                    raise ValueError(f"{where} prose line {line!r} would read as a heading")
                if field_line is not None and field_line.match(line):
                    raise ValueError(f"{where} prose line {line!r} would read as a field")
        for key, items in (
            ("files", self.files_changed),
            ("gates", self.gates),
            ("deferred", self.deferred),
        ):
            after = self.prose.get(key)
            if items and after and after[0].startswith("- "):
                raise ValueError(f"{key} prose must not start with a '- ' bullet after the list")

    def task(self, number: int) -> Task | None:
        return next((task for task in self.tasks if task.number == number), None)

    def finding(self, finding_id: str) -> Finding | None:
        return next((f for f in self.findings if f.id == finding_id), None)

    def items(self) -> list[Task] | list[Finding]:
        return self.tasks if self.mode == "implementation" else self.findings

    def resolved(self) -> int:
        """Tasks completed, skipped or deferred; or findings addressed."""
        return sum(1 for item in self.items() if item.resolved)

    def total(self) -> int:
        return len(self.items())
