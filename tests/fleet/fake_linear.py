"""A fake Linear GraphQL server on 127.0.0.1 for the linear tracker's tests.

Every request is parsed and validated by graphql-core against ``SCHEMA`` (linear_schema.graphql
beside this file), a subset of Linear's
real schema (the types, fields, arguments and filter inputs the tracker uses, with their names,
nullability and list shapes as Linear's ``schema.graphql`` has them), then executed by
resolvers over the in-memory teams, workflow states, labels, issues, comments and attachments.
A query Linear would refuse is refused here (HTTP 400, ``GRAPHQL_VALIDATION_FAILED``) and kept
in ``invalid``: the tests assert it stays empty.

It checks the ``Authorization`` header (the raw personal key, as Linear takes it: ``Bearer``
is for OAuth tokens), records every request (its root fields, variables, status) and can be
told to answer the next request naming a field with Linear's rate limit (HTTP 400,
``errors[0].extensions.code = "RATELIMITED"``, ``Retry-After`` and the ``X-RateLimit-*``
headers), a 5xx, a lost answer (the request is carried out, the connection closed), or any raw
bytes (a proxy's page, a body without ``data``).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from graphql import GraphQLError, build_schema, graphql_sync, parse

from fleet.linear_resolvers import Root

KEY = "lin_api_fake_key_for_tests"
LOST = -1
RATELIMITED = -2
_KEY = re.compile(r"\n?<!-- (cairn:[^ ]+) -->")

SCHEMA = build_schema((Path(__file__).parent / "linear_schema.graphql").read_text())

STATES = [
    ("Backlog", "backlog"),
    ("Todo", "unstarted"),
    ("In Progress", "started"),
    ("In Review", "started"),
    ("Done", "completed"),
    ("Canceled", "canceled"),
]


@dataclass
class Seen:
    fields: list[str]  # the operation's root fields
    variables: dict[str, Any]
    status: int


@dataclass
class Fault:
    field: str  # a root field the request names
    status: int  # LOST, RATELIMITED, or an HTTP status (with ``data``)
    headers: dict[str, str]
    data: bytes = b""


@dataclass
class FakeLinear:
    teams: list[dict[str, Any]] = field(default_factory=list)
    states: list[dict[str, Any]] = field(default_factory=list)
    labels: list[dict[str, Any]] = field(default_factory=list)
    issues: dict[str, dict[str, Any]] = field(default_factory=dict)
    comments: list[dict[str, Any]] = field(default_factory=list)
    attachments: list[dict[str, Any]] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)  # queries Linear would refuse
    faults: list[Fault] = field(default_factory=list)
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    # --- set-up --------------------------------------------------------------------------------

    def add_team(self, key: str, name: str, labels: tuple[str, ...] = ("cairn",)) -> None:
        team = {"id": f"team-{key}", "key": key, "name": name}
        self.teams.append(team)
        for n, (state, kind) in enumerate(STATES):
            self.states.append(
                {
                    "id": f"{key}-state-{n}",
                    "name": state,
                    "type": kind,
                    "position": float(n),
                    "color": "#000",
                    "team": key,
                }
            )
        for label in labels:
            self.add_label(label, key)

    def add_label(self, name: str, team: str | None) -> None:
        self.labels.append(
            {
                "id": f"label-{len(self.labels)}",
                "name": name,
                "color": "#000",
                "isGroup": False,
                "team": team,
            }
        )

    def add_issue(
        self,
        identifier: str,
        title: str,
        description: str | None,
        state: str = "Todo",
        labels: tuple[str, ...] = ("cairn",),
    ) -> dict[str, Any]:
        team, number = identifier.rsplit("-", 1)
        issue = {
            "id": f"uuid-{identifier.lower()}",
            "identifier": identifier,
            "number": float(number),
            "title": title,
            "description": description,
            "priority": 0.0,
            "url": f"https://linear.test/acme/issue/{identifier}",
            "branchName": f"ana/{identifier.lower()}",
            "createdAt": "2026-12-01T10:00:00.000Z",
            "state": self.state_id(team, state),
            "team": team,
            "labels": list(labels),
        }
        self.issues[identifier] = issue
        return issue

    def state_id(self, team: str, name: str) -> str:
        return str(next(s["id"] for s in self.states if s["team"] == team and s["name"] == name))

    def rate_limit_once(self, field_name: str, retry_after: int | None = 1) -> None:
        headers = {
            "X-RateLimit-Requests-Limit": "1500",
            "X-RateLimit-Requests-Remaining": "0",
            "X-RateLimit-Requests-Reset": str(int((time.time() + 60) * 1000)),
        }
        if retry_after is not None:
            headers["Retry-After"] = str(retry_after)
        self.faults.append(Fault(field_name, RATELIMITED, headers))

    def fail_once(self, field_name: str, status: int = 502) -> None:
        self.faults.append(
            Fault(
                field_name,
                status,
                {"Content-Type": "text/html"},
                b"<html><body>502 Bad Gateway</body></html>",
            )
        )

    def lose_answer_once(self, field_name: str) -> None:
        self.faults.append(Fault(field_name, LOST, {}))

    def answer_raw_once(self, field_name: str, status: int, data: bytes, kind: str) -> None:
        self.faults.append(Fault(field_name, status, {"Content-Type": kind}, data))

    # --- what it was asked ---------------------------------------------------------------------

    def requests(self, field_name: str) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if field_name in s.fields]

    def state_of(self, identifier: str) -> str:
        issue = self.issues[identifier]
        return str(next(s["name"] for s in self.states if s["id"] == issue["state"]))

    def say(self, identifier: str, body: str, name: str = "Ana") -> None:
        """A person of the workspace comments on the issue."""
        with self.lock:
            self.comments.append(
                {
                    "id": f"person-{len(self.comments) + 1}",
                    "issue": self.issues[identifier]["id"],
                    "body": body,
                    "createdAt": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
                    "user": {"id": f"user-{name.lower()}", "name": name, "displayName": name},
                }
            )

    def comments_on(self, identifier: str) -> list[str]:
        uuid = self.issues[identifier]["id"]
        return [_KEY.sub("", c["body"]) for c in self.comments if c["issue"] == uuid]

    def keys_on(self, identifier: str) -> list[str]:
        uuid = self.issues[identifier]["id"]
        found = [_KEY.search(c["body"]) for c in self.comments if c["issue"] == uuid]
        return [m.group(1) if m else "-" for m in found]

    def links_on(self, identifier: str) -> list[tuple[str, str]]:
        uuid = self.issues[identifier]["id"]
        return [(a["url"], a["title"]) for a in self.attachments if a["issue"] == uuid]

    # --- answering -----------------------------------------------------------------------------

    def answer(self, body: Any) -> tuple[int, dict[str, str], Any]:
        if not isinstance(body, dict) or not isinstance(body.get("query"), str):
            return 400, {}, _errors("Must provide query string.", "GRAPHQL_PARSE_FAILED")
        query, variables = body["query"], body.get("variables") or {}
        try:
            names = _root_fields(query)
        except GraphQLError as exc:
            self.invalid.append(f"{exc.message}: {query}")
            return 400, {}, _errors(exc.message, "GRAPHQL_PARSE_FAILED")
        with self.lock:
            for fault in self.faults:
                if fault.field in names:
                    self.faults.remove(fault)
                    if fault.status == LOST:
                        status, _ = self._execute(query, variables)
                        self.seen.append(Seen(names, variables, status))
                        return LOST, {}, None
                    if fault.status == RATELIMITED:
                        self.seen.append(Seen(names, variables, 400))
                        payload = _errors("Rate limit exceeded", "RATELIMITED", "ratelimited")
                        payload["errors"][0]["extensions"]["statusCode"] = 429
                        return 400, fault.headers, payload
                    self.seen.append(Seen(names, variables, fault.status))
                    return fault.status, fault.headers, fault.data
            status, payload = self._execute(query, variables)
            self.seen.append(Seen(names, variables, status))
            return status, {}, payload

    def _execute(self, query: str, variables: dict[str, Any]) -> tuple[int, Any]:
        result = graphql_sync(SCHEMA, query, root_value=Root(self), variable_values=variables)
        refused = result.errors and not any(e.extensions for e in result.errors)
        if refused and result.data is None and result.errors:  # refused by validation
            self.invalid += [f"{e.message}: {query}" for e in result.errors]
            return 400, _errors(result.errors[0].message, "GRAPHQL_VALIDATION_FAILED")
        payload: dict[str, Any] = {"data": result.data}
        if result.errors:
            payload["errors"] = [e.formatted for e in result.errors]
        return 200, payload


def _errors(message: str, code: str, kind: str | None = None) -> dict[str, Any]:
    extensions: dict[str, Any] = {"code": code}
    if kind is not None:
        extensions["type"] = kind
    return {"errors": [{"message": message, "extensions": extensions}]}


def _root_fields(query: str) -> list[str]:
    document = parse(query)
    names: list[str] = []
    for definition in document.definitions:
        selections = getattr(getattr(definition, "selection_set", None), "selections", [])
        names += [s.name.value for s in selections if hasattr(s, "name")]
    return names


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers: dict[str, str] = {}
        payload: Any
        if self.path != "/graphql":
            status, payload = 404, b"Not Found"
        elif self.headers.get("Authorization") != KEY:
            status = 400
            payload = _errors(
                "Authentication required, not authenticated",
                "AUTHENTICATION_ERROR",
                "authentication error",
            )
        else:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            status, headers, payload = self.server.fake.answer(body)
            if status == LOST:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        if "Content-Type" not in headers:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeLinear


def serve(fake: FakeLinear) -> Iterator[FakeLinear]:
    """Serve ``fake`` on 127.0.0.1 (a free port) for the duration of the generator."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.fake = fake
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/graphql"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
