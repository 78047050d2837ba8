"""What a settings file was before ``cairn hooks install``, so uninstall can put it back.

One record per settings file, in the state root (``<state root>/claude-settings/<key>.json``,
the key a hash of the file's path): whether the file existed, its exact bytes, whether cairn
created its directory, and a hash of the bytes cairn wrote. Uninstall restores the original
byte for byte while the file still holds exactly what cairn wrote; once someone edited it, only
cairn's entries come out (see ``claude_settings.uninstall``).
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

from cairn.errors import CairnError
from cairn.util import durable

DIRECTORY = "claude-settings"
READ_LIMIT = 16 * 1024 * 1024


class Original:
    """The settings file as it was before cairn first wrote it."""

    def __init__(self, existed: bool, data: bytes, dir_created: bool, installed: str) -> None:
        self.existed, self.data = existed, data
        self.dir_created, self.installed = dir_created, installed

    def as_dict(self, path: Path) -> dict[str, Any]:
        return {
            "format": 1,
            "path": str(path),
            "existed": self.existed,
            "original": base64.b64encode(self.data).decode("ascii"),
            "dir_created": self.dir_created,
            "installed": self.installed,
        }


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_path(keep: Path, target: Path) -> Path:
    key = hashlib.sha256(str(target.absolute()).encode("utf-8", "surrogateescape")).hexdigest()
    return keep / DIRECTORY / f"{key[:24]}.json"


def load(keep: Path | None, target: Path) -> Original | None:
    """The record for ``target``; None when there is none or it cannot be read."""
    if keep is None:
        return None
    path = record_path(keep, target)
    try:
        data = durable.read_state_file(path, "settings backup", READ_LIMIT)
        raw = json.loads(data) if data is not None else None
        if not isinstance(raw, dict) or raw.get("path") != str(target.absolute()):
            return None
        return Original(
            bool(raw["existed"]),
            base64.b64decode(raw["original"], validate=True),
            bool(raw["dir_created"]),
            str(raw["installed"]),
        )
    except (OSError, ValueError, KeyError, TypeError, CairnError):
        return None


def save(keep: Path, target: Path, original: Original) -> None:
    path = record_path(keep, target)
    durable.ensure_dir(path.parent)
    durable.atomic_write(path, json.dumps(original.as_dict(target.absolute()), indent=1) + "\n")


def forget(keep: Path | None, target: Path) -> None:
    if keep is not None:
        durable.remove(record_path(keep, target))
