"""Every hot command gives the same stdout, stderr, exit code and state files through the fast
path and through Typer (``CAIRN_FAST=0``), good input and bad alike, on identical copies of the
same repository."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from cairn.terms import ENV_FAST, ENV_MAX_TURNS, ENV_PRESSURE_TURNS, ENV_RUN_DIR
from helpers import begin_run, git, write

TITLES = ["Parse the plan", "Wire the CLI", "Write docs"]
TYPER = {ENV_FAST: "0"}
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")
_OID = re.compile(r"\b[0-9a-f]{40}\b|\b[0-9a-f]{12}\b|\b[0-9a-f]{7}\b")
_AGES = re.compile(r'("age_seconds": )\d+|\b\d+[smhd]\b|\b\d+ ms\b|("elapsed_ms": )\d+')


def normal(text: str, root: Path) -> str:
    """Paths, times, ages and commit ids (a commit's id has its time in it) made comparable."""
    text = text.replace(str(root), "<ROOT>")
    text = _TIME.sub("<TIME>", text)
    text = _AGES.sub(lambda m: (m.group(1) or m.group(2) or "") + "<AGE>", text)
    # An age column is as wide as its text: "9s" on one copy, "12s" on the one run later.
    text = re.sub(r"<AGE> +", "<AGE> ", text)
    return _OID.sub("<OID>", text)


def cairn(
    *args: str, cwd: Path, env: dict[str, str], stdin: bytes | None
) -> subprocess.CompletedProcess[bytes]:
    """The real CLI in a subprocess, with ``stdin`` (hooks read their payload there)."""
    return subprocess.run(
        [sys.executable, "-m", "cairn", *args],
        cwd=cwd,
        env={**os.environ, **env},
        input=stdin if stdin is not None else b"",
        capture_output=True,
        check=False,
    )


def state_of(root: Path) -> dict[str, str]:
    """Every file of cairn's state, normalised, and every snapshot ref's tree; not the
    scratch space, nor the stat cache (named after the worktree's path, full of inodes)."""
    state = root / ".git" / "cairn"
    files = {
        str(p.relative_to(state)): normal(p.read_text(errors="replace"), root)
        for p in sorted(state.rglob("*"))
        if p.is_file() and not {"tmp", "cache"} & set(p.relative_to(state).parts)
    }
    refs = git(root, "for-each-ref", "--format=%(refname) %(objectname)", "refs/cairn")
    for line in refs.splitlines():
        ref = line.split()[0]
        files[ref] = git(root, "rev-parse", f"{ref}^{{tree}}").strip()
    return files


def both(
    template: Path,
    tmp: Path,
    commands: Sequence[Sequence[str]],
    env: dict[str, str],
    stdin: bytes | None = None,
) -> None:
    """Run ``commands`` on a copy through the fast path and on another through Typer."""
    results = {}
    for name, extra in (("fast", {}), ("typer", TYPER)):
        root = tmp / name
        shutil.copytree(template, root, symlinks=True)
        outputs = []
        for args in commands:
            run_env = {k: v.replace(str(template), str(root)) for k, v in env.items()}
            payload = stdin.replace(bytes(template), bytes(root)) if stdin else stdin
            result = cairn(*args, cwd=root, env={**run_env, **extra}, stdin=payload)
            stdout, stderr = result.stdout.decode(), result.stderr.decode()
            outputs.append((args, result.returncode, normal(stdout, root), normal(stderr, root)))
        results[name] = (outputs, state_of(root))
    for fast_out, typer_out in zip(results["fast"][0], results["typer"][0], strict=True):
        assert fast_out == typer_out
    assert results["fast"][1] == results["typer"][1]


@pytest.fixture
def implementation(repo: Path):  # type: ignore[no-untyped-def]
    ref, lease = begin_run(repo, "T-1", TITLES)
    yield repo, {ENV_RUN_DIR: str(ref.run_dir)}
    lease.release()


def test_progress_reports(implementation, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo, env = implementation
    both(
        repo,
        tmp_path,
        [
            ["task", "start", "0"],
            ["task", "done", "0", "--files", "a.py,b.py", "-f", "c.py", "--outcome", "works"],
            ["task", "done", "x"],
            ["task", "start", "9"],
            ["task", "skip", "1"],
            ["task", "skip", "1", "--notes", "not needed", "--json"],
            ["task", "defer", "2", "--notes=after review"],
            ["task", "start", "0"],
            ["gate", "Tests", "--result", "pass", "--command", "pytest -q"],
            ["gate", "Tests", "--result", "maybe"],
            ["defer", "the :bug: list\tand more", "--json"],
            ["finding", "F1", "--status", "FIXED"],
            ["task", "done"],
            ["task", "done", "1", "--bogus"],
            ["catchup"],
            ["catchup", "--json"],
            ["catchup", "--format", "context"],
            ["catchup", "--format", "yaml"],
            ["catchup", "../x"],
            ["status"],
            ["status", "--json"],
            # under --json an error is an object on stdout, whichever path parsed the line
            ["task", "start", "9", "--json"],
            ["task", "done", "x", "--json"],
            ["task", "done", "1", "--bogus", "--json"],
            ["gate", "Tests", "--json"],
            ["gate", "Tests", "--result", "maybe", "--json"],
            ["finding", "F1", "--json"],
            ["catchup", "--format", "yaml", "--json"],
            ["catchup", "../x", "--json"],
            ["ac", "AC-1", "--result", "pass", "--json"],
            ["status", "--bogus", "--json"],
        ],
        env,
    )


def test_progress_by_ticket_and_on_a_review(repo: Path, tmp_path: Path) -> None:
    _, lease = begin_run(repo, "R-1", ["Null check", "Slow loop"], review=True)
    try:
        both(
            repo,
            tmp_path,
            [
                ["finding", "F1", "--status", "FIXED", "--action", "guarded", "--ticket", "R-1"],
                ["finding", "F9", "--status", "FIXED", "-t", "R-1"],
                ["finding", "F2", "--status", "DONE", "-t", "R-1"],
                ["finding", "add", "F3", "title", "-t", "R-1"],
                ["finding", "F2", "F3", "-t", "R-1"],
                ["task", "done", "0", "-t", "R-1"],
                ["task", "done", "0", "-t", "NOPE"],
                ["catchup", "R-1", "--json"],
                ["status", "--json"],
            ],
            {},
        )
    finally:
        lease.release()


def test_wip_save(repo: Path, tmp_path: Path) -> None:
    write(repo, "README.md", "changed\n")
    write(repo, "notes/new.txt", "new\n")
    git(repo, "add", "README.md")
    write(repo, "src/app.py", "edited\n")
    both(
        repo,
        tmp_path,
        [
            ["wip", "save", "--ticket", "T-1", "--json", "--reason", "first"],
            ["wip", "save", "--ticket", "T-1", "--json"],
            ["wip", "save", "-r", "by hand"],
            ["wip", "save", "--ticket", "../x"],
            ["wip", "save", "-C", str(tmp_path / "missing")],
            ["wip", "save", "--timeout-ms", "0"],
            ["wip", "save", "--run", "bad run id!"],
            ["wip", "save", "--ticket", "../x", "--json"],
            ["wip", "save", "--timeout-ms", "0", "--json"],
            ["status", "--json"],
            ["catchup", "T-1"],
        ],
        {},
    )


def test_hooks(implementation, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo, env = implementation
    git(repo, "checkout", "-q", "-b", "T-1")
    write(repo, "dirty.txt", "dirty\n")
    transcript = repo / ".git" / "transcript.jsonl"
    transcript.write_text(
        "".join(
            json.dumps({"type": "assistant", "message": {"id": f"m{i}"}}) + "\n" for i in range(9)
        )
    )
    payload = json.dumps({"cwd": str(repo), "transcript_path": str(transcript)}).encode()
    hooks = [
        ["hook", "claude", "heartbeat"],
        ["hook", "claude", "snapshot", "--reason", "stop"],
        ["hook", "claude", "session-start"],
        ["hook", "claude", "post-tool-use"],
    ]
    both(repo, tmp_path / "by-hand", hooks, {}, stdin=payload)
    run_env = {**env, ENV_MAX_TURNS: "10", ENV_PRESSURE_TURNS: "2"}
    both(repo, tmp_path / "under-run", hooks, run_env, stdin=payload)
    both(repo, tmp_path / "garbage", hooks, {}, stdin=b"\xff not json")
