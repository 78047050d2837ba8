"""The agent CLI must be a version cairn knows how to read: checked once per program."""

from __future__ import annotations

import functools
import os
import re
import subprocess
from collections.abc import Mapping

from cairn.errors import BadInput
from cairn.util.procs import kill_group

_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


TIMEOUT = 10.0  # seconds the probe may take


@functools.cache
def _reported(program: str, env: frozenset[tuple[str, str]]) -> str:
    """What ``program --version`` printed, or ``!`` and why it printed nothing usable. The probe
    runs in its own process group, killed whole when it times out: nothing it started stays."""
    try:
        proc = subprocess.Popen(
            [program, "--version"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(env),
            start_new_session=True,
        )
    except OSError as exc:
        return f"!{exc.strerror or exc}"
    try:
        out, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        proc.kill()
        proc.wait()
        return f"!timed out after {TIMEOUT:g} seconds"
    finally:
        kill_group(proc.pid)  # whatever it left running
        if proc.stdout is not None:
            proc.stdout.close()
    if proc.returncode != 0:
        return f"!exit status {proc.returncode}"
    return out.decode("utf-8", "replace").strip()


def require(
    program: str, env: Mapping[str, str], product: str, minimum: tuple[int, int, int]
) -> str:
    """The version ``program --version`` reports (run with the agent's environment); BadInput
    when it is older than ``minimum`` or is not a version at all (not that product)."""
    text = _reported(program, frozenset({**os.environ, **env}.items()))
    match = _VERSION.search(text) if not text.startswith("!") else None
    wanted = ".".join(map(str, minimum))
    if text.startswith("!"):
        raise BadInput(
            f"{program} --version failed: {text[1:]}; check that it is {product} "
            f"{'.'.join(map(str, minimum))} or newer, or set agent.command"
        )
    if match is None:
        shown = text[:80] or "nothing"
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
