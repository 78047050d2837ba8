"""The progress marker ``tickets/<ticket>/.in-progress.yaml``: where a run is right now.

Rewritten atomically at every transition and removed when the run ends. A hand-written marker
with only the five original fields (``skill``, ``phase``, ``round``, ``started_at``,
``last_updated``) is accepted; times without an offset are taken as UTC.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cairn.errors import CorruptState
from cairn.state import owner
from cairn.state.owner import Liveness, Owner
from cairn.util import clock, durable, yaml_io

VERSION = 1
TicketState = Literal["in_progress", "interrupted", "stale", "done", "none"]
READ_LIMIT = 1024 * 1024


def _aware(value: Any) -> Any:
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class DispatchRecord(_Part):
    role: str
    turn: int = Field(default=0, ge=0)
    max_turns: int | None = Field(default=None, ge=1)
    pid: int | None = Field(default=None, ge=1)
    pid_started_at: datetime | None = None

    @field_validator("pid_started_at", mode="after")
    @classmethod
    def _with_offset(cls, value: datetime | None) -> datetime | None:
        return _aware(value)


class SnapshotRef(_Part):
    ref: str
    commit: str
    at: datetime

    @field_validator("at", mode="after")
    @classmethod
    def _with_offset(cls, value: datetime) -> datetime:
        return _aware(value)


class Marker(_Part):
    version: int = VERSION
    skill: str = "impl"
    phase: str
    round: int | None = Field(default=None, ge=0)
    task: int | None = Field(default=None, ge=0)
    started_at: datetime
    last_updated: datetime
    ticket: str | None = None
    run: str | None = None
    owner: Owner | None = None
    dispatch: DispatchRecord | None = None
    snapshot: SnapshotRef | None = None

    @field_validator("started_at", "last_updated", mode="after")
    @classmethod
    def _with_offset(cls, value: datetime) -> datetime:
        return _aware(value)

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value > VERSION:
            raise ValueError(f"version {value} was written by a newer cairn; upgrade cairn")
        return value

    def touched(self, **changes: Any) -> Marker:
        return self.model_copy(update={"last_updated": clock.now(), **changes})


_LINE = re.compile(r"( {2})?([a-z_]+):(?: (.*))?")
_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./@+-]*")
_INT = re.compile(r"0|[1-9][0-9]*")


def _fast_load(text: str) -> dict[str, Any] | None:
    """The mapping of a marker in the simple shape cairn writes; None for anything else.

    A marker rewritten at every transition is read by every ``cairn status``; PyYAML's
    constructor costs ~150 µs a marker even with libyaml, this ~15 µs. Every value it is not
    sure of sends the whole text to the full YAML parser, so both always agree.
    """
    data: dict[str, Any] = {}
    section: dict[str, Any] | None = None
    for line in text.split("\n"):
        if not line:
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            return None
        nested, key, raw = match.groups()
        if raw is None:
            if nested:
                return None
            section = data[key] = {}
            continue
        if nested:
            if section is None:
                return None
            target = section
        else:
            section, target = None, data
        if len(raw) >= 2 and raw[0] == raw[-1] == "'" and "'" not in raw[1:-1].replace("''", ""):
            target[key] = raw[1:-1].replace("''", "'")
        elif not _PLAIN.fullmatch(raw):
            return None
        else:
            kind = yaml_io.plain_scalar_tag(raw)
            if kind == "str":
                target[key] = raw
            elif kind == "int" and _INT.fullmatch(raw):
                target[key] = int(raw)
            else:
                return None
    return data or None


def parse(text: str, path: Path) -> Marker:
    try:
        data = _fast_load(text)
        if data is None:
            data = yaml_io.safe_load(text)
    except yaml_io.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise CorruptState(
            f"marker {path} is not valid YAML{where}; fix it or delete it "
            "(cairn catchup then infers the state from the run's files)"
        ) from None
    if not isinstance(data, dict):
        raise CorruptState(
            f"marker {path} is not a YAML mapping; fix it or delete it "
            "(cairn catchup then infers the state from the run's files)"
        )
    try:
        return Marker.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"]) or "(top level)"
        why = first["msg"].removeprefix("Value error, ")
        raise CorruptState(f"marker {path}: {key}: {why}; fix it or delete it") from None


def read(path: Path) -> Marker | None:
    data = durable.read_state_file(path, "marker", READ_LIMIT)
    if data is None:
        return None
    return parse(durable.decode_text(data, path, "marker"), path)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def render(marker: Marker) -> str:
    data = _plain(marker.model_dump(exclude_none=True))
    return yaml_io.safe_dump(data, sort_keys=False, allow_unicode=True)


def write(path: Path, marker: Marker) -> None:
    durable.atomic_write(path, render(marker))


def remove(path: Path) -> bool:
    return durable.remove(path)


def judge(current: Marker, stale_after: float, now: datetime) -> tuple[TicketState, Liveness, str]:
    """The state a marker puts its ticket in, by owner liveness first and age second."""
    liveness, detail = owner.check(current.owner, current.last_updated, stale_after, now)
    age = (now - current.last_updated).total_seconds()
    if liveness in ("alive", "remote"):
        return "in_progress", liveness, detail
    if liveness == "dead":
        return "interrupted", liveness, detail
    if liveness == "remote_stale" or age > stale_after:
        return "stale", liveness, detail
    return "interrupted", liveness, detail
