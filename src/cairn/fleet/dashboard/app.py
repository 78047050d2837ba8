"""The dashboard's Starlette app: the JSON API under ``/api/v1`` and the page, served from the
package's ``static/`` directory (no CDN, no build step)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from cairn.fleet.dashboard import api, landing
from cairn.fleet.dashboard.views import Dashboard

if TYPE_CHECKING:
    from cairn.fleet.dashboard.source import Source
    from cairn.fleet.supervisor import Supervisor

STATIC = Path(__file__).resolve().parent / "static"


def _page(name: str) -> Route:
    async def serve(request: Request) -> FileResponse:
        return FileResponse(STATIC / name, headers={"Cache-Control": "no-cache"})

    return Route("/" if name == "index.html" else "/tickets/{ticket}", serve, methods=["GET"])


def make_app(
    repo_path: Path,
    *,
    supervisor: Supervisor | None = None,
    token: str | None,
    source: Source | None = None,
) -> Starlette:
    """The dashboard of the repository at ``repo_path``: read-only from the files when
    ``supervisor`` is None, else also able to make it poll the tracker now; its rows from
    ``source`` when given (the temporal engine). With ``token``, every request must carry it."""
    routes = [
        Route("/api/v1/state", api.state, methods=["GET"]),
        Route("/api/v1/tickets/{ticket}", api.ticket, methods=["GET"]),
        Route("/api/v1/tickets/{ticket}/transcript", api.transcript, methods=["GET"]),
        Route("/api/v1/tickets/{ticket}/review", api.review, methods=["POST"]),
        Route("/api/v1/tickets/{ticket}/review", api.review_rounds, methods=["GET"]),
        Route("/api/v1/tickets/{ticket}/land", landing.land, methods=["POST"]),
        Route("/api/v1/tickets/{ticket}/land", landing.state, methods=["GET"]),
        Route("/api/v1/tickets/{ticket}/answer", api.answer, methods=["POST"]),
        # pause, resume, stop, retry: after the routes of their own a ticket has
        Route("/api/v1/tickets/{ticket}/{action}", api.control, methods=["POST"]),
        Route("/api/v1/refresh", api.refresh, methods=["POST"]),
        Route("/api/{rest:path}", api.unknown_api),
        _page("index.html"),
        _page("ticket.html"),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(api.SecurityHeaders), Middleware(api.Guard, token=token)],
        exception_handlers={HTTPException: api.http_error, Exception: api.server_error},
    )
    app.state.dashboard = Dashboard(repo_path, supervisor, source)
    return app
