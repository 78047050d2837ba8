"""The dashboard's JSON API (``/api/v1/…``), its one error shape, and the guard every request
passes: the token when one is set, a loopback ``Host`` when none is, a same-origin ``POST``.

Errors are ``{"error": {"code": "<slug>", "message": "…"}}`` with the HTTP status that fits.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse as _StarletteJSON

from cairn import tickets
from cairn.errors import BadInput, Refused
from cairn.fleet.dashboard.views import Dashboard
from cairn.terms import CONTROL_ACTIONS, ENV_DASHBOARD_TOKEN, Asker


class JSONResponse(_StarletteJSON):
    """Every answer of the API, encoded by msgspec (the records library): the fleet's state at
    1,000 tickets is about 550 KB, which ``json.dumps`` takes ~10 ms to write and msgspec ~2."""

    def render(self, content: Any) -> bytes:
        return msgspec.json.encode(content)


TOKEN_COOKIE = "cairn_dashboard_token"
NO_STORE = {"Cache-Control": "no-store"}
_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    500: "internal",
}

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is this machine's
    loopback: ``localhost``, 127.0.0.0/8, ``::1``."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def error(status: int, code: str, message: str) -> JSONResponse:
    body = {"error": {"code": code, "message": message}}
    headers = dict(NO_STORE)
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse(body, status_code=status, headers=headers)


def _dashboard(request: Request) -> Dashboard:
    found: Dashboard = request.app.state.dashboard
    return found


def state(request: Request) -> JSONResponse:
    return JSONResponse(_dashboard(request).state(), headers=NO_STORE)


def ticket(request: Request) -> JSONResponse:
    name = request.path_params["ticket"]
    why = tickets.problem(name)
    if why is not None:
        return error(400, "invalid_ticket", f"{name!r} is not a ticket id: {why}")
    page = _dashboard(request).ticket(name)
    if page is None:
        return error(
            404, "unknown_ticket", f"no fleet ticket {name!r}; GET /api/v1/state lists them"
        )
    return JSONResponse(page, headers=NO_STORE)


def asker(request: Request) -> Asker:
    """Who a POST is from: the page (it carries an ``Origin``, which the guard lets through only
    from the page's own origin) or another program (none)."""
    return "dashboard" if request.headers.get("origin") else "api"


def control(request: Request) -> JSONResponse:
    """``POST /api/v1/tickets/{id}/{action}``: 202 once asked; 404 for an unknown ticket or
    action, 409 when the ticket's state does not allow it. A POST carrying an ``Origin`` (the
    guard let only this page's own through) is the dashboard's; one without, another program's."""
    name, action = request.path_params["ticket"], request.path_params["action"]
    why = tickets.problem(name)
    if why is not None:
        return error(400, "invalid_ticket", f"{name!r} is not a ticket id: {why}")
    chosen = next((known for known in CONTROL_ACTIONS if known == action), None)
    if chosen is None:
        return error(404, "not_found", f"no action {action!r}; POST pause, resume, stop or retry")
    try:
        done = _dashboard(request).control(name, chosen, asker(request))
    except Refused as exc:
        return error(exc.status, exc.code, str(exc))
    except BadInput as exc:
        return error(400, "bad_request", str(exc))
    return JSONResponse(done, status_code=202, headers=NO_STORE)


async def answer(request: Request) -> JSONResponse:
    """``POST /api/v1/tickets/{id}/answer`` ``{"text": …, "by"?: …}``: a person's answer to a
    ticket waiting for input, and its run resumed with it (``steer.answer``); 202 once asked,
    409 when the ticket does not wait for input, 400 for a bad body."""
    from starlette.concurrency import run_in_threadpool

    name = request.path_params["ticket"]
    why = tickets.problem(name)
    if why is not None:
        return error(400, "invalid_ticket", f"{name!r} is not a ticket id: {why}")
    try:
        data = await request.json()
    except ValueError:
        data = None
    text = data.get("text") if isinstance(data, dict) else None
    who = data.get("by") if isinstance(data, dict) else None
    if not isinstance(text, str) or not (who is None or isinstance(who, str)):
        return error(400, "invalid_answer", '(body): send {"text": "the answer", "by": "who"}')
    dashboard = _dashboard(request)
    try:
        done = await run_in_threadpool(dashboard.answer, name, text, who, asker(request))
    except Refused as exc:
        return error(exc.status, exc.code, str(exc))
    except BadInput as exc:
        return error(400, "invalid_answer", str(exc))
    return JSONResponse(done, status_code=202, headers=NO_STORE)


def transcript(request: Request) -> JSONResponse:
    """``GET /api/v1/tickets/{id}/transcript[?dispatch=N][&since=K]``."""
    name = request.path_params["ticket"]
    why = tickets.problem(name)
    if why is not None:
        return error(400, "invalid_ticket", f"{name!r} is not a ticket id: {why}")
    numbers = {}
    for key in ("dispatch", "since"):
        given = request.query_params.get(key)
        if given is None:
            continue
        if not given.isdigit() or (key == "dispatch" and int(given) < 1):
            least = 1 if key == "dispatch" else 0
            return error(
                400, "bad_request", f"{key} must be a whole number ≥ {least}, not {given!r}"
            )
        numbers[key] = int(given)
    try:
        found = _dashboard(request).transcript(
            name, numbers.get("dispatch"), numbers.get("since", 0)
        )
    except Refused as exc:
        return error(exc.status, exc.code, str(exc))
    if found is None:
        return error(
            404, "unknown_ticket", f"no fleet ticket {name!r}; GET /api/v1/state lists them"
        )
    return JSONResponse(found, headers=NO_STORE)


def refresh(request: Request) -> JSONResponse:
    coalesced = _dashboard(request).refresh()
    if coalesced is None:
        return error(
            409,
            "no_supervisor",
            "this dashboard reads the files only (cairn fleet dashboard); "
            "run `cairn fleet start --port P` to poll the tracker from the page",
        )
    return JSONResponse({"queued": True, "coalesced": coalesced}, status_code=202)


def unknown_api(request: Request) -> JSONResponse:
    return error(404, "not_found", f"no API endpoint {request.url.path}; see docs/fleet.md")


async def http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    code = _CODES.get(exc.status_code, "error")
    return error(exc.status_code, code, str(exc.detail))


async def server_error(request: Request, exc: Exception) -> JSONResponse:
    return error(500, "internal", f"{type(exc).__name__}: {exc}")


# Sent with every response, pages, assets, API and errors alike: the page runs its own files
# only (no inline script or style, no other origin), is never framed, and its ``?token=`` URL
# is never passed on as a Referer.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),  # frame-ancestors for browsers that predate it
    (b"referrer-policy", b"no-referrer"),
]


class SecurityHeaders:
    """ASGI middleware: ``SECURITY_HEADERS`` on every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)


class Guard:
    """ASGI middleware: every HTTP request carries the token when one is set (the
    ``Authorization: Bearer`` header, ``?token=``, or the cookie a ``?token=`` page load sets,
    so the page's own assets load); with no token, only a loopback ``Host`` is served (a web
    page cannot reach the dashboard by rebinding a name to 127.0.0.1); a POST from another
    origin is refused."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refused = self._refusal(scope, headers)
        if refused is not None:
            await refused(scope, receive, send)
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if self.token is None or query.get("token") != [self.token]:
            await self.app(scope, receive, send)
            return
        cookie = f"{TOKEN_COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"

        async def with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"set-cookie", cookie.encode())]
            await send(message)

        await self.app(scope, receive, with_cookie)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> JSONResponse | None:
        host = urlsplit(f"//{headers.get('host', '')}").hostname or ""
        if self.token is not None:
            if not self._has_token(scope, headers):
                return error(
                    401,
                    "unauthorized",
                    "this dashboard needs its token: `Authorization: Bearer <token>` "
                    f"or ?token=<token> ({ENV_DASHBOARD_TOKEN} of the server)",
                )
        elif not is_loopback(host):
            return error(
                403,
                "forbidden_host",
                f"this dashboard serves loopback names only, not {host or 'no Host'!r}",
            )
        origin = headers.get("origin")
        if scope["method"] == "POST" and origin and urlsplit(origin).netloc != headers.get("host"):
            return error(403, "forbidden_origin", f"a POST from {origin} is refused")
        return None

    def _has_token(self, scope: Scope, headers: dict[str, str]) -> bool:
        assert self.token is not None
        given = []
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            given.append(value.strip())
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        given += query.get("token", [])
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(headers.get("cookie", ""))
        except Exception:  # a malformed Cookie header counts as none
            jar = SimpleCookie()
        if TOKEN_COOKIE in jar:
            given.append(jar[TOKEN_COOKIE].value)
        want = self.token.encode()
        return any(hmac.compare_digest(g.encode(), want) for g in given)


# --- a person's review: POST and GET /api/v1/tickets/{id}/review ---------------------------------


async def review(request: Request) -> JSONResponse:
    """Request changes (a fix round of the ticket's run, each comment a finding) or approve;
    ``cairn.fleet.comments`` checks the body, the ticket and every comment's line first."""
    from starlette.concurrency import run_in_threadpool

    name = request.path_params["ticket"]
    why = tickets.problem(name)
    if why is not None:
        return error(400, "invalid_ticket", f"{name!r} is not a ticket id: {why}")
    try:
        data = await request.json()
    except ValueError:
        return error(
            400, "invalid_review", '(body): not JSON; send {"verdict": …, "comments": […]}'
        )
    try:
        answer = await run_in_threadpool(_review, _dashboard(request), name, data)
    except Refused as exc:
        return error(exc.status, exc.code, str(exc))
    return JSONResponse(answer, headers=NO_STORE)


def _review(dashboard: Dashboard, ticket: str, data: Any) -> dict[str, Any]:
    from cairn.fleet import comments, fleetcontrol

    if dashboard.source is not None:
        raise Refused(409, "unsupported_engine", "reviews run on the embedded engine only")
    asked = comments.check(data, "dashboard")
    try:
        answer = comments.submit(dashboard.repo.git, dashboard.layout, ticket, asked)
    except Refused:
        raise
    except BadInput as exc:  # the run cannot be reopened (its marker is there): nothing written
        raise Refused(409, "not_reviewable", str(exc)) from None
    answer["warnings"] = dashboard.carry_out()
    pending = fleetcontrol.pending(dashboard.layout, [])
    answer["pending"] = any(r.ticket == ticket for r in pending)
    return answer


def review_rounds(request: Request) -> JSONResponse:
    """Every review of the ticket's run, each comment with its answer and whether it is
    outdated."""
    from cairn.fleet import comments, fleetstate

    name = request.path_params["ticket"]
    why = tickets.problem(name)
    if why is not None:
        return error(400, "invalid_ticket", f"{name!r} is not a ticket id: {why}")
    dashboard = _dashboard(request)
    record = fleetstate.read(dashboard.layout, name) if dashboard.source is None else None
    if record is None:
        return error(
            404, "unknown_ticket", f"no fleet ticket {name!r}; GET /api/v1/state lists them"
        )
    return JSONResponse(
        comments.rounds(dashboard.repo.git, dashboard.layout, record), headers=NO_STORE
    )
