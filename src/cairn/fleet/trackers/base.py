"""The ``Tracker`` interface: where the fleet's tickets come from.

STAND-IN (helper A, branch fleet-sup) of helper B's module; the integrator takes B's version.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import NamedTuple


class Candidate(NamedTuple):
    ticket: str
    plan: Path


class Tracker(ABC):
    @abstractmethod
    def candidates(self) -> list[Candidate]: ...

    @abstractmethod
    def claim(self, ticket: str) -> bool: ...

    @abstractmethod
    def transition(self, ticket: str, state: str, detail: str | None = None) -> None: ...

    @abstractmethod
    def finish(self, ticket: str, state: str) -> None: ...
