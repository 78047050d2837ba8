"""The outbox: what a tracker still has to tell its issue system, on disk until it is told.

Each message (a comment, a label change, a pull request) is one JSON file in
``<state root>/fleet/outbox/``, written atomically before it is sent and removed once sent; a
message that fails stays, and is sent again at the next poll (a killed supervisor's messages are
sent by the next one). Files are named by the time they were written, so a ticket's messages go
out in the order they were made.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from cairn.errors import BadInput
from cairn.state.layout import Layout
from cairn.util import durable

READ_LIMIT = 256 * 1024


class Outbox:
    """Messages kept until they are sent; what it sets aside is said in ``warnings`` (the
    tracker's)."""

    def __init__(self, layout: Layout, warnings: list[str]) -> None:
        self.directory = layout.fleet_dir / "outbox"
        self.warnings = warnings
        self._last = 0

    def put(self, message: dict[str, Any]) -> Path:
        """Keep ``message`` (which names its ``ticket`` and ``kind``) until it is sent."""
        stamp = max(time.time_ns(), self._last + 1)  # strictly increasing, so in order
        self._last = stamp
        path = self.directory / f"{stamp:020d}-{message['ticket']}-{message['kind']}.json"
        durable.ensure_dir(self.directory)
        durable.atomic_write(path, json.dumps(message, indent=2) + "\n")
        return path

    def pending(self) -> list[tuple[Path, dict[str, Any]]]:
        """Every message not sent yet, oldest first. One that cannot be read is set aside
        (renamed ``*.bad``) with a warning: it never blocks the others."""
        try:
            names = sorted(n for n in os.listdir(self.directory) if n.endswith(".json"))
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = []
        for name in names:
            path = self.directory / name
            try:
                data = durable.read_state_file(path, "outbox message", READ_LIMIT)
                message = json.loads(data or b"")
                if not isinstance(message, dict) or "kind" not in message:
                    raise ValueError("not a message")
            except (OSError, ValueError, BadInput) as exc:
                self.warnings.append(f"outbox {path}: {exc}; set aside as .bad")
                os.replace(path, path.with_suffix(".bad"))
                continue
            found.append((path, message))
        return found

    def update(self, path: Path, message: dict[str, Any]) -> None:
        durable.atomic_write(path, json.dumps(message, indent=2) + "\n")

    def sent(self, path: Path) -> None:
        durable.remove(path)
