"""The snapshot commit message: a subject line and ``Cairn-*`` trailers, written and read back.

Paths go into trailers as JSON strings with every non-ASCII character escaped, so names with
newlines or non-UTF-8 bytes (lone surrogates after ``surrogateescape``) survive.
"""

from __future__ import annotations

import json
import re

import msgspec

from cairn import __version__
from cairn.util.text import printable
from cairn.wip.models import Skipped

MAX_LISTED_PATHS = 200
MAX_REASON = 200

_TRAILER = re.compile(r"^Cairn-([A-Za-z-]+): (.*)$")


def clean_reason(reason: str) -> str:
    return printable(reason)[:MAX_REASON] or "manual"


class SnapshotMeta:
    """What a snapshot commit's message records."""

    def __init__(
        self,
        *,
        ticket: str,
        reason: str,
        base: str | None,
        branch: str | None,
        index_tree: str | None,
        files_changed: int,
        seq: int = 1,
        run: str | None = None,
        skipped: list[Skipped] | None = None,
        conflicted: list[str] | None = None,
        skipped_count: int = 0,
        conflicted_count: int = 0,
        version: str = __version__,
    ) -> None:
        self.ticket, self.reason, self.base, self.branch = ticket, reason, base, branch
        self.index_tree, self.files_changed, self.seq, self.run = (
            index_tree,
            files_changed,
            seq,
            run,
        )
        self.skipped = skipped if skipped is not None else []
        self.conflicted = conflicted if conflicted is not None else []
        self.skipped_count, self.conflicted_count = skipped_count, conflicted_count
        self.version = version

    def render(self) -> str:
        lines = [
            f"cairn wip {self.ticket}: {self.reason}",
            "",
            f"Cairn-Ticket: {self.ticket}",
            f"Cairn-Seq: {self.seq}",
            f"Cairn-Reason: {self.reason}",
            f"Cairn-Base: {self.base or 'none'}",
            f"Cairn-Branch: {json.dumps(self.branch)}",
            f"Cairn-Index-Tree: {self.index_tree or 'conflicted'}",
            f"Cairn-Files-Changed: {self.files_changed}",
            f"Cairn-Skipped: {len(self.skipped)}",
            f"Cairn-Conflicted: {len(self.conflicted)}",
        ]
        if self.run:
            lines.append(f"Cairn-Run: {self.run}")
        lines.append(f"Cairn-Version: {self.version}")
        for item in self.skipped[:MAX_LISTED_PATHS]:
            skipped = json.dumps(
                {k: v for k, v in msgspec.structs.asdict(item).items() if v is not None},
                separators=(",", ":"),
            )
            lines.append(f"Cairn-Skipped-Path: {skipped}")
        for path in self.conflicted[:MAX_LISTED_PATHS]:
            lines.append(f"Cairn-Conflicted-Path: {json.dumps(path)}")
        return "\n".join(lines) + "\n"

    @classmethod
    def parse(cls, message: str) -> SnapshotMeta | None:
        """The metadata of a snapshot message; None when it is not a cairn snapshot."""
        values: dict[str, str] = {}
        skipped: list[Skipped] = []
        conflicted: list[str] = []
        for line in message.splitlines():
            match = _TRAILER.match(line)
            if not match:
                continue
            key, value = match.groups()
            try:
                if key == "Skipped-Path":
                    skipped.append(msgspec.convert(json.loads(value), Skipped, strict=False))
                elif key == "Conflicted-Path":
                    conflicted.append(json.loads(value))
                else:
                    values.setdefault(key, value)
            except ValueError:
                continue
        if "Ticket" not in values or "Version" not in values:
            return None
        try:
            branch = json.loads(values.get("Branch", "null"))
        except ValueError:
            branch = None
        run = values.get("Run")
        # A commit cairn did not write may hold anything: no control character reaches a
        # terminal that prints what is read here.
        return cls(
            ticket=printable(values["Ticket"]),
            reason=printable(values.get("Reason", "")),
            base=_none(values.get("Base")),
            branch=printable(branch) if isinstance(branch, str) else None,
            index_tree=_none(values.get("Index-Tree"), "conflicted"),
            files_changed=_int(values.get("Files-Changed")),
            seq=_int(values.get("Seq"), 1),
            run=printable(run) if run is not None else None,
            skipped=skipped,
            conflicted=conflicted,
            skipped_count=_int(values.get("Skipped"), len(skipped)),
            conflicted_count=_int(values.get("Conflicted"), len(conflicted)),
            version=printable(values["Version"]),
        )


def _none(value: str | None, *sentinels: str) -> str | None:
    if value is None or value in ("none", *sentinels):
        return None
    return value


def _int(value: str | None, default: int = 0) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default
