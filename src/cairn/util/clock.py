"""The clock every state file is stamped with: local time with its offset, whole seconds."""

from __future__ import annotations

from datetime import datetime


def now() -> datetime:
    return datetime.now().astimezone().replace(microsecond=0)
