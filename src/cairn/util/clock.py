"""The clock every state file is stamped with: local time with its offset, whole seconds."""

from __future__ import annotations

import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from datetime import datetime


def now() -> datetime:
    from datetime import datetime

    return datetime.now().astimezone().replace(microsecond=0)


def stamp() -> str:
    """``now()`` as ISO text (``now().isoformat()``), without loading ``datetime``: what the
    heartbeat writes into a marker."""
    local = time.localtime()
    offset = local.tm_gmtoff
    hours, rest = divmod(abs(offset), 3600)
    minutes, seconds = divmod(rest, 60)
    zone = f"{'-' if offset < 0 else '+'}{hours:02d}:{minutes:02d}"
    return time.strftime("%Y-%m-%dT%H:%M:%S", local) + zone + (f":{seconds:02d}" if seconds else "")
