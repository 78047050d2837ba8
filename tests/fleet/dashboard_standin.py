"""A STAND-IN for the dashboard server, for the page's browser test and bench/dashboard_page.py
until ``cairn.fleet.dashboard.app.make_app`` exists: a small Starlette app answering the
documented API shapes (docs/fleet.md) from the fleet's files, and serving the page's
static assets from the package. ``app_for`` prefers the real ``make_app`` when it imports.

It is deliberately plain (no caching, no supervisor): it reads what ``cairn fleet status``
reads, plus git for the diffs and the snapshot, so what the page shows is what is on disk.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import cairn
from cairn.state import fleetstatus, layout

STATIC = Path(cairn.__file__).parent / "fleet" / "dashboard" / "static"
DIFF_CAP = 200 * 1024


def app_for(repo: Path, token: str | None = None) -> tuple[Any, str]:
    """The real dashboard app when it exists, else this stand-in; and which it is."""
    try:
        from cairn.fleet.dashboard.app import make_app  # type: ignore[import-not-found]
    except ImportError:
        return standin_app(repo, token), "stand-in"
    return make_app(repo, supervisor=None, token=token), "cairn.fleet.dashboard.app"


def error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, check=False)
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else ""


def rows(repo: Path) -> list[dict[str, Any]]:
    out = []
    for row in fleetstatus.fleet_status(repo).rows:
        data = row.model_dump(mode="json")
        data["usage"] = None
        if row.state == "retrying":
            data["last_error"] = row.detail or row.last_reason
        out.append(data)
    return out


def state(repo: Path) -> dict[str, Any]:
    found = rows(repo)
    running = sum(1 for row in found if row.get("state") == "running")
    _, config, _ = layout.discover(repo)
    concurrency = getattr(getattr(config, "fleet", None), "concurrency", None)
    return {
        "generated_at": datetime.now(UTC).isoformat(),
        "supervisor": {"running": False, "pid": None},
        "agents": {"running": running, "max": concurrency},
        "usage": {"total_tokens": 0, "cost_usd": None},
        "next_poll_at": None,
        "counts": dict(Counter(row["state"] for row in found)),
        "tickets": found,
    }


def ticket(repo: Path, ticket_id: str) -> dict[str, Any] | None:
    row = next((row for row in rows(repo) if row["ticket"] == ticket_id), None)
    if row is None:
        return None
    _, _, where = layout.discover(repo)
    summary, journal = "", []
    if row["run"]:
        run_dir = where.run_dir(ticket_id, row["run"])
        found = layout.latest_artifact(run_dir, layout.SUMMARY_ROLE, layout.SUMMARY_ARTIFACT)
        if found is not None:
            summary = Path(found.path).read_text()
        log = run_dir / layout.JOURNAL
        if log.exists():
            lines = log.read_text().splitlines()[-50:]
            journal = [json.loads(line) for line in lines if line.startswith("{")]
    branch = row["branch"] or f"cairn/{ticket_id}"
    ref = f"refs/cairn/wip/{ticket_id}"
    snapshots = []
    commit = git(repo, "rev-parse", "-q", "--verify", ref).strip()
    if commit:
        when = int(git(repo, "log", "-1", "--format=%ct", commit).strip() or 0)
        snapshots.append(
            {
                "ref": ref,
                "commit": commit,
                "age_seconds": max(0, int(time.time()) - when),
                "reason": git(repo, "log", "-1", "--format=%s", commit).strip(),
                "inspect": [f"git show --stat {commit[:10]}", f"git diff {branch} {commit[:10]}"],
            }
        )
    return {
        "ticket": row,
        "summary": summary,
        "branch_diff": git(repo, "diff", f"HEAD...{branch}")[:DIFF_CAP],
        "snapshot_diff": git(repo, "diff", branch, commit)[:DIFF_CAP] if commit else "",
        "journal": journal,
        "snapshots": snapshots,
    }


def standin_app(repo: Path, token: str | None = None) -> Starlette:
    async def get_state(request: Request) -> Response:
        return JSONResponse(state(repo))

    async def get_ticket(request: Request) -> Response:
        ticket_id = request.path_params["ticket"]
        found = ticket(repo, ticket_id)
        if found is None:
            return error(404, "unknown_ticket", f"no fleet ticket {ticket_id!r}")
        return JSONResponse(found)

    async def refresh(request: Request) -> Response:
        return error(409, "no_supervisor", "no supervisor runs; start one with cairn fleet start")

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html")

    async def ticket_page(request: Request) -> Response:
        return FileResponse(STATIC / "ticket.html")

    async def check_token(request: Request, call_next: Any) -> Response:
        given = request.query_params.get("token")
        header = request.headers.get("authorization", "")
        if token is not None and token not in (given, header.removeprefix("Bearer ")):
            return error(401, "unauthorized", "this dashboard needs its token; add ?token=<t>")
        response: Response = await call_next(request)
        return response

    return Starlette(
        middleware=[Middleware(BaseHTTPMiddleware, dispatch=check_token)],
        routes=[
            Route("/", index),
            Route("/tickets/{ticket}", ticket_page),
            Route("/api/v1/state", get_state),
            Route("/api/v1/tickets/{ticket}", get_ticket),
            Route("/api/v1/refresh", refresh, methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC)),
        ],
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1 in a thread; yields its base URL."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the dashboard server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
