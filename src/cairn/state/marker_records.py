"""The marker's records (``cairn.state.marker`` reads, writes and judges them): in a module of
their own, so that the heartbeat, which moves ``last_updated`` without validating the rest,
loads no records library."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct

from cairn.state.names import MARKER_VERSION as VERSION
from cairn.state.owner import Owner, with_offsets
from cairn.util import clock


class DispatchRecord(Struct, frozen=True, kw_only=True):
    role: str
    turn: Annotated[int, Meta(ge=0)] = 0
    max_turns: Annotated[int, Meta(ge=1)] | None = None
    pid: Annotated[int, Meta(ge=1)] | None = None
    pid_started_at: datetime | None = None
    pid_started_since_boot: float | None = None

    def __post_init__(self) -> None:
        with_offsets(self, "pid_started_at")


class SnapshotRef(Struct, frozen=True, kw_only=True):
    ref: str
    commit: str
    at: datetime

    def __post_init__(self) -> None:
        with_offsets(self, "at")


class Marker(Struct, frozen=True, kw_only=True):
    version: int = VERSION
    skill: str = "impl"
    phase: str
    round: Annotated[int, Meta(ge=0)] | None = None
    task: Annotated[int, Meta(ge=0)] | None = None
    started_at: datetime
    last_updated: datetime
    ticket: str | None = None
    run: str | None = None
    owner: Owner | None = None
    dispatch: DispatchRecord | None = None
    snapshot: SnapshotRef | None = None

    def __post_init__(self) -> None:
        if self.version > VERSION:
            raise ValueError(f"version: {self.version} was written by a newer cairn; upgrade cairn")
        with_offsets(self, "started_at", "last_updated")

    def touched(self, **changes: Any) -> Marker:
        return msgspec.structs.replace(self, **{"last_updated": clock.now(), **changes})
