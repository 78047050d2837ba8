"""Helpers shared by the tests in tests/run/ (not a test module)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cairn import summary
from cairn.state import journal, marker
from cairn.state.layout import artifacts
from cairn.summary import Summary
from cairn.util import procs
from helpers import (
    CliResult,
    cairn,
    git,
)

TICKET = "T-1"


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def event(self, kind: str, **fields: Any) -> None:
        self.events.append((kind, fields))

    def update(self, **state: Any) -> None:
        pass

    def named(self, kind: str) -> list[dict[str, Any]]:
        return [fields for name, fields in self.events if name == kind]


def run_dir(repo: Path) -> Path:
    (found,) = [p for p in (repo / ".git/cairn/tickets" / TICKET).iterdir() if p.is_dir()]
    return found


def latest_summary(repo: Path) -> summary.Summary:
    paths = [a.path for a in artifacts(run_dir(repo)) if a.name == "change-summary"]
    loaded = summary.load(paths[-1])
    assert loaded is not None
    return loaded


WIP_REF = f"refs/cairn/wip/{TICKET}"
AGENT_MODULE = b"cairn.agents.scripted.program"


def done(n: int, *files: str, outcome: str = "works") -> dict[str, Any]:
    """The scripted action reporting task ``n`` done."""
    args = ["task", "done", str(n), "--outcome", outcome]
    if files:
        args[3:3] = ["--files", ",".join(files)]
    return {"cairn": args}


def toml_value(value: Any) -> str:
    return json.dumps(value)  # strings, ints, floats and lists of strings read the same in TOML


@dataclass
class Project:
    repo: Path
    plan: Path
    script: Path
    initial: dict[str, str] = field(default_factory=dict)
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    # running cairn

    def run(self, *args: str) -> CliResult:
        return cairn("run", str(self.plan), *args, cwd=self.repo)

    def resume(self, *args: str) -> CliResult:
        return cairn("resume", TICKET, *args, cwd=self.repo)

    def popen(self, *args: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cairn", "run", str(self.plan), *args],
            cwd=self.repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.started.append(proc)
        return proc

    def catchup(self) -> dict[str, Any]:
        result = cairn("catchup", TICKET, "--json", cwd=self.repo)
        assert code(result) == 0, result.stderr
        loaded: dict[str, Any] = json.loads(result.stdout)
        return loaded

    # reading the state back

    @property
    def state_root(self) -> Path:
        return self.repo / ".git" / "cairn"

    @property
    def ticket_dir(self) -> Path:
        return self.state_root / "tickets" / TICKET

    @property
    def marker_path(self) -> Path:
        return self.ticket_dir / ".in-progress.yaml"

    def run_dirs(self) -> list[Path]:
        if not self.ticket_dir.is_dir():
            return []
        return sorted(p for p in self.ticket_dir.iterdir() if p.is_dir() and p.name[0].isdigit())

    @property
    def run_dir(self) -> Path:
        dirs = self.run_dirs()
        assert len(dirs) == 1, dirs
        return dirs[0]

    def marker(self) -> marker.Marker | None:
        return marker.read(self.marker_path)

    def events(self) -> list[dict[str, Any]]:
        events, warnings = journal.read(self.run_dir)
        assert warnings == []
        return events

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events() if e["event"] == name]

    def summaries(self) -> list[Path]:
        return [
            a.path
            for a in artifacts(self.run_dir)
            if a.role == "coder" and a.name == "change-summary"
        ]

    def summary(self, path: Path | None = None) -> Summary:
        loaded = summary.load(path or self.summaries()[-1])
        assert loaded is not None
        return loaded

    def summary_text(self) -> str:
        return self.summaries()[-1].read_text()

    def first_summary(self) -> Summary:
        return self.summary(self.summaries()[0])

    def prompts(self, role: str | None = None) -> list[dict[str, Any]]:
        path = self.run_dir / "scripted-agent" / "prompts.jsonl"
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [r for r in records if role is None or r["role"] == role]

    def wip(self) -> str:
        return git(self.repo, "rev-parse", WIP_REF).strip()

    def agent_pids(self) -> list[int]:
        """Live scripted-agent processes playing this project's script (zombies have no
        cmdline, so they do not count)."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if AGENT_MODULE in argv and os.fsencode(self.script) in argv:
                found.append(int(entry.name))
        return found

    def wait_agents_gone(self, timeout: float = 10.0) -> None:
        wait_for(lambda: not self.agent_pids(), timeout, "the agent process to be gone")

    def assert_intact(self) -> None:
        """No torn or stray state: the journal reads without warnings, the marker and every
        summary parse, and no temp file of an interrupted write is left."""
        journal_events, warnings = journal.read(self.run_dir)
        assert journal_events and warnings == []
        marker.read(self.marker_path)
        for path in self.summaries():
            assert summary.load(path) is not None
        assert [p for p in self.state_root.rglob("*") if p.name.startswith(".tmp.")] == []

    def cleanup(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        for pid in self.agent_pids():
            procs.kill_group(pid)


def wait_for(check: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def exit_code(returncode: int, stderr: str | bytes) -> int:
    """The exit code, after checking that an interrupted or unreviewed run is not reported as
    an error (stderr has no traceback and no internal error)."""
    text = stderr.decode() if isinstance(stderr, bytes) else stderr
    assert "Traceback" not in text and "internal error" not in text, text
    return returncode


def code(result: CliResult) -> int:
    return exit_code(result.returncode, result.stderr)


def outcome(result: CliResult) -> dict[str, Any]:
    """The RunOutcome that ``--json`` prints as its last line."""
    loaded: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return loaded
