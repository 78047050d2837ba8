"""A fleet ticket whose branch and snapshot each hold an 8 MB diff, served by a real
``cairn fleet dashboard`` process under concurrent ticket-page requests, with the server's
memory read from /proc: for tests/fleet/test_dashboard_faces.py and bench/dashboard_diff.py."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2

from cairn.fleet import fleetstate
from cairn.fleet.fleetstate import FleetTicket
from cairn.state.layout import discover
from cairn.util import clock
from fleet.dashboard_setup import serve, started_url
from helpers import git, make_repo, save, write

TICKET = "BIG-1"
MiB = 1024 * 1024


def big_text(size: int, seed: str) -> str:
    line = f"{seed} " + "x" * 90 + "\n"
    return line * (size // len(line))


def build(root: Path, size: int = 8 * MiB) -> Path:
    """A repository whose ticket BIG-1 has a branch adding ``size`` bytes and a snapshot of
    as many uncommitted ones."""
    repo = make_repo(root / "repo")
    git(repo, "checkout", "-q", "-b", f"cairn/{TICKET}")
    write(repo, "big.txt", big_text(size, "committed"))
    git(repo, "add", "big.txt")
    git(repo, "commit", "-q", "-m", "a big change")
    write(repo, "notes.txt", big_text(size, "uncommitted"))
    save(repo, TICKET)
    os.unlink(repo / "notes.txt")
    git(repo, "checkout", "-q", "main")
    _, _, layout = discover(repo)
    fleetstate.write(
        layout,
        FleetTicket(
            ticket=TICKET,
            plan=f"cairn-queue/{TICKET}.md",
            state="completed",
            branch=f"cairn/{TICKET}",
            updated=clock.now(),
        ),
    )
    return repo


def memory(pid: int) -> dict[str, int]:
    """The process's resident set now and at its peak (VmRSS, VmHWM), in bytes."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) * 1024
    return found


@contextmanager
def dashboard(repo: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``cairn fleet dashboard --port 0`` of ``repo``; yields the process and its URL."""
    proc = serve(["dashboard", "--port", "0", "--json"], repo)
    try:
        yield proc, started_url(proc)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)


def load(url: str, requests: int) -> list[dict[str, Any]]:
    """``requests`` ticket-page requests for BIG-1 at once; their answers."""
    answers: list[dict[str, Any]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(requests)

    def one() -> None:
        try:
            start.wait()
            response = httpx2.get(f"{url}api/v1/tickets/{TICKET}", timeout=300)
            assert response.status_code == 200, response.text
            answers.append(response.json())
        except BaseException as exc:  # reported by the caller
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(requests)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return answers


def measure(repo: Path, requests: int = 50) -> dict[str, Any]:
    """The server's memory before and after ``requests`` concurrent ticket pages."""
    with dashboard(repo) as (proc, url):
        httpx2.get(f"{url}api/v1/tickets/{TICKET}", timeout=300)  # warm: imports, caches
        before = memory(proc.pid)
        answers = load(url, requests)
        after = memory(proc.pid)
    return {"before": before, "after": after, "answers": answers}
