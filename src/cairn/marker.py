"""The progress marker ``tickets/<ticket>/.in-progress.yaml``: where a run is right now.

Rewritten atomically at every transition and removed when the run ends. A hand-written marker
with only the five original fields (``skill``, ``phase``, ``round``, ``started_at``,
``last_updated``) is accepted; times without an offset are taken as UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cairn import durable
from cairn.errors import BadInput
from cairn.owner import Owner

VERSION = 1
READ_LIMIT = 1024 * 1024

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def now() -> datetime:
    return datetime.now().astimezone().replace(microsecond=0)


def _aware(value: Any) -> Any:
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Dispatch(_Part):
    role: str
    turn: int = Field(default=0, ge=0)
    max_turns: int | None = Field(default=None, ge=1)


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
    dispatch: Dispatch | None = None
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
        return self.model_copy(update={"last_updated": now(), **changes})


def parse(text: str, path: Path) -> Marker:
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise BadInput(
            f"marker {path} is not valid YAML{where}; fix it or delete it "
            "(cairn catchup then infers the state from the run's files)"
        ) from None
    if not isinstance(data, dict):
        raise BadInput(
            f"marker {path} is not a YAML mapping; fix it or delete it "
            "(cairn catchup then infers the state from the run's files)"
        )
    try:
        return Marker.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"]) or "(top level)"
        why = first["msg"].removeprefix("Value error, ")
        raise BadInput(f"marker {path}: {key}: {why}; fix it or delete it") from None


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
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True)


def write(path: Path, marker: Marker) -> None:
    durable.atomic_write(path, render(marker))


def remove(path: Path) -> bool:
    return durable.remove(path)
