"""Helpers shared by the tests in tests/integrations/ (not a test module)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec

from cairn.integrations import claude_settings
from cairn.state import marker
from cairn.state.layout import discover
from cairn.terms import ENV_PREFIX

FIXTURE = Path(__file__).parent.parent / "fixtures" / "claude-code-2.1.328" / "hook-payloads.jsonl"


def captured() -> dict[str, dict[str, Any]]:
    """The captured payloads, one per event (the last one seen)."""
    found: dict[str, dict[str, Any]] = {}
    for line in FIXTURE.read_text().splitlines():
        if line.strip():
            payload = json.loads(line)
            found[payload["hook_event_name"]] = payload
    return found


def payload(event: str, cwd: Path, **extra: Any) -> bytes:
    """A real payload of ``event`` with ``cwd`` pointed at a test directory."""
    shapes = captured()
    base = dict(shapes.get(event) or shapes["SessionEnd"], hook_event_name=event)
    return json.dumps({**base, "cwd": str(cwd), **extra}).encode()


def run_hook(args: str, stdin: bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """Run a settings entry's command the way Claude does: through the shell, payload on
    stdin, in the project directory, without any cairn run's environment."""
    command = claude_settings.hook_command(*shlex.split(args))
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    return subprocess.run(
        command, shell=True, input=stdin, cwd=cwd, env=env, capture_output=True, timeout=60
    )


def aged_marker(repo: Path, ticket: str = "main") -> tuple[Path, marker.Marker]:
    """``ticket``'s marker made an hour older than it is: its path and the old marker."""
    _, _, layout = discover(repo)
    path = layout.marker_path(ticket)
    old = marker.read(path)
    assert old is not None
    aged = msgspec.structs.replace(old, last_updated=old.last_updated - timedelta(hours=1))
    marker.write(path, aged)
    return path, aged
