"""``POST /api/v1/tickets/{id}/land``: land one ticket's branch on the fleet's base branch
(``cairn.fleet.land``, as ``cairn fleet land`` does). A POST with an ``Origin`` header is the
dashboard page's (the guard has checked it is this server's own), one without is ``api``'s; the
journal's ``landed`` event says which. ``GET`` of the same path: whether it can land now."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from cairn import tickets
from cairn.fleet.dashboard.api import NO_STORE, JSONResponse, asker, error
from cairn.fleet.dashboard.views import Dashboard
from cairn.terms import Asker


async def land(request: Request) -> JSONResponse:
    from starlette.concurrency import run_in_threadpool

    from cairn.errors import Refused

    name = request.path_params["ticket"]
    why = tickets.problem(name)
    if why is not None:
        return error(400, "invalid_ticket", f"{name!r} is not a ticket id: {why}")
    by = asker(request)
    dashboard: Dashboard = request.app.state.dashboard
    try:
        answer = await run_in_threadpool(_land, dashboard, name, by)
    except Refused as exc:
        return error(exc.status, exc.code, str(exc))
    return JSONResponse(answer, headers=NO_STORE)


def state(request: Request) -> JSONResponse:
    """Whether the ticket can land now, and why not: the page's *Land* button."""
    from cairn.errors import Refused
    from cairn.fleet import land

    name = request.path_params["ticket"]
    why = tickets.problem(name)
    if why is not None:
        return error(400, "invalid_ticket", f"{name!r} is not a ticket id: {why}")
    dashboard: Dashboard = request.app.state.dashboard
    if dashboard.source is not None:
        return error(409, "unsupported_engine", "lands run on the embedded engine only")
    try:
        found = land.status(dashboard.repo, dashboard.config, dashboard.layout, name)
    except Refused as exc:
        return error(exc.status, exc.code, str(exc))
    return JSONResponse(found, headers=NO_STORE)


def _land(dashboard: Dashboard, ticket: str, by: Asker) -> dict[str, Any]:
    from cairn.errors import BadInput, Refused
    from cairn.fleet import land

    if dashboard.source is not None:
        raise Refused(409, "unsupported_engine", "lands run on the embedded engine only")
    try:
        (answer,) = land.land(dashboard.repo, dashboard.config, dashboard.layout, [ticket], by)
    except Refused:
        raise
    except BadInput as exc:  # the base moved meanwhile, its run could not be reopened
        raise Refused(409, "not_landed", str(exc)) from None
    if not answer["landed"]:  # its fix round: the supervisor carries it out, else we do
        answer["warnings"] = dashboard.carry_out()
    return answer
