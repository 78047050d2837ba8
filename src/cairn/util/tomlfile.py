"""A small TOML file read whole: a path that is not a regular file, too large, binary, not
UTF-8 or not TOML is bad input naming the file and the fix (``cairn.toml``, ``pyproject.toml``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cairn.errors import BadInput

MAX_BYTES = 1024 * 1024


def read_table(path: Path, limit: int = MAX_BYTES) -> dict[str, Any]:
    """The top-level table of the TOML file at ``path`` (at most ``limit`` bytes)."""
    import tomllib

    if not path.is_file():
        raise BadInput(f"{path} is not a regular file; make it a TOML file or remove it")
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise BadInput(f"{path}: cannot be read ({exc.strerror})") from None
    if len(data) > limit:
        raise BadInput(f"{path} is over {limit} bytes, not a config; fix the file")
    if b"\0" in data:
        raise BadInput(f"{path} is binary, not TOML text; fix or remove it")
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path} is not UTF-8 text (byte {exc.start}); fix the file") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path}: not valid TOML ({exc}); fix the file") from None
