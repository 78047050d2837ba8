"""The agent CLI must be a version cairn knows how to read: checked once per program."""

from __future__ import annotations

import functools
import os
import re
import subprocess
from collections.abc import Mapping

from cairn.errors import BadInput

_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


@functools.cache
def _reported(program: str, env: frozenset[tuple[str, str]]) -> str:
    try:
        done = subprocess.run(
            [program, "--version"],
            capture_output=True,
            timeout=30,
            check=False,
            env=dict(env),
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"!{exc}"
    if done.returncode != 0:
        return f"!exit status {done.returncode}"
    return done.stdout.decode("utf-8", "replace").strip()


def require(
    program: str, env: Mapping[str, str], product: str, minimum: tuple[int, int, int]
) -> str:
    """The version ``program --version`` reports (run with the agent's environment); BadInput
    when it is older than ``minimum`` or is not a version at all (not that product)."""
    text = _reported(program, frozenset({**os.environ, **env}.items()))
    match = _VERSION.search(text) if not text.startswith("!") else None
    wanted = ".".join(map(str, minimum))
    if match is None:
        shown = text.lstrip("!")[:80] or "nothing"
        raise BadInput(
            f"{program} --version gave {shown!r}, not a {product} version; "
            f"install {product} {wanted} or newer, or set agent.command"
        )
    found = tuple(int(part) for part in match.groups())
    if found < minimum:
        raise BadInput(
            f"{program} is {product} {match.group(0)}, older than {wanted}, the oldest cairn "
            f"reads; upgrade it"
        )
    return match.group(0)
