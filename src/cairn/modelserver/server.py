"""The HTTP server: routes, the request record, and the in-process ``ModelServer`` handle."""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import sys
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cairn.modelserver import anthropic, openai
from cairn.modelserver.scenario import Entry, Scenario, Script, load_scenario, parse_scenario
from cairn.util import durable

MODEL_IDS = ("scripted-model",)


def read_requests(path: str | Path) -> list[dict[str, Any]]:
    """The model requests a server recorded, in the order they arrived."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def user_texts(request: dict[str, Any], *, latest: bool = False) -> list[str]:
    """All user-visible text in a recorded request of either API: user messages, system
    reminders and hook context carried in them, tool results. ``latest``: only the texts after the
    last assistant turn, i.e. what the agent was told since it last spoke."""
    module = anthropic if request["api"] == "anthropic" else openai
    texts: list[str] = module.user_texts(request["body"], latest=latest)
    return texts


def _models_listing() -> dict[str, Any]:
    """One body that satisfies both the Anthropic and the OpenAI shape of ``GET /v1/models``."""
    data = [
        {
            "id": model,
            "type": "model",
            "object": "model",
            "display_name": model,
            "created_at": "2026-01-01T00:00:00Z",
            "created": 1767225600,
            "owned_by": "cairn",
        }
        for model in MODEL_IDS
    ]
    return {
        "object": "list",
        "data": data,
        "has_more": False,
        "first_id": data[0]["id"],
        "last_id": data[-1]["id"],
    }


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: ModelServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    server_version = "cairn-modelserver/1"

    # -- plumbing -----------------------------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.owner.verbose:
            sys.stderr.write(f"modelserver: {self.address_string()} {format % args}\n")

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        self.server.owner.seen.append((self.command, self.path, int(code)))
        super().log_request(code, size)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            raw = b"".join(parts)
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding", "").lower() == "gzip":
            raw = gzip.decompress(raw)
        return raw

    def _send_json(self, status: int, payload: Any, extra: Iterable[tuple[str, str]] = ()) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in extra:
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_sse(self, events: Iterable[tuple[str, dict[str, Any]]], request_id: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", request_id)
        self.send_header("x-request-id", request_id)
        self.end_headers()
        for name, data in events:
            chunk = f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _route(self) -> str:
        path = urlsplit(self.path).path.rstrip("/")
        return path.removeprefix("/v1") or "/"

    # -- verbs --------------------------------------------------------------------------------

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        route = self._route()
        if route == "/models":
            self._send_json(200, _models_listing())
        elif route.startswith("/models/"):
            model = route.removeprefix("/models/")
            item = {**_models_listing()["data"][0], "id": model, "display_name": model}
            self._send_json(200, item)
        elif route in ("/", "/health", "/healthz"):
            self._send_json(200, {"status": "ok"})
        else:
            self._not_found()

    def do_POST(self) -> None:
        route = self._route()
        try:
            raw = self._read_body()
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("the request body is not a JSON object")
        except (ValueError, OSError) as exc:
            self._send_json(400, anthropic.error_body(400, f"bad request body: {exc}"))
            return
        if route == "/messages/count_tokens":
            self._send_json(200, anthropic.count_tokens(body))
        elif route == "/messages":
            self._answer("anthropic", body)
        elif route == "/responses":
            self._answer("openai", body)
        else:
            self._not_found()

    def _not_found(self) -> None:
        self._send_json(404, anthropic.error_body(404, f"no route for {self.command} {self.path}"))

    def _answer(self, api: str, body: dict[str, Any]) -> None:
        owner = self.server.owner
        entry = owner._next(api, self.path, body)
        if entry.sleep and owner._stopping.wait(entry.sleep):
            self.close_connection = True
            return
        module = anthropic if api == "anthropic" else openai
        request_id = f"req_{time.time_ns():x}"
        if entry.limit is not None:
            status, payload, headers = module.refusal(entry, time.time())
            self._send_json(status, payload, [("request-id", request_id), *headers])
        elif entry.error is not None:
            payload = module.error_body(entry.error, entry.message)
            self._send_json(entry.error, payload, [("request-id", request_id)])
        elif body.get("stream"):
            events = (
                anthropic.stream(entry, body) if api == "anthropic" else openai.stream(entry, body)
            )
            self._send_sse(events, request_id)
        else:
            full = (
                anthropic.message(entry, body)
                if api == "anthropic"
                else openai.response(entry, body)
            )
            self._send_json(200, full, [("request-id", request_id)])

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


class ModelServer:
    """A scripted model server on 127.0.0.1 for the Anthropic Messages and OpenAI Responses APIs.

    ``scenario`` is a YAML file path, a parsed :class:`Scenario`, or the equivalent mapping.
    ``record`` (optional) is a JSON-lines file that gets one line per model request.
    Use as ``with ModelServer(scenario, record) as server: ... server.url ...`` or call
    :meth:`start` (returns the base URL) and :meth:`stop`.
    """

    def __init__(
        self,
        scenario: str | Path | Scenario | dict[str, Any],
        record: str | Path | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        verbose: bool = False,
    ) -> None:
        if isinstance(scenario, Scenario):
            parsed = scenario
        elif isinstance(scenario, dict):
            parsed = parse_scenario(scenario)
        else:
            parsed = load_scenario(scenario)
        self.script = Script(parsed)
        self.record_path = Path(record) if record is not None else None
        self.host, self.port, self.verbose = host, port, verbose
        self.requests: list[dict[str, Any]] = []  # what the record file holds, in memory
        self.seen: list[tuple[str, str, int]] = []  # every HTTP request: (method, path, status)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the model server is not started")
        return f"http://{self.host}:{self.port}"

    def start(self) -> str:
        if self._httpd is None:
            self._stopping.clear()
            httpd = _HTTPServer((self.host, self.port), _Handler)
            httpd.owner = self
            self.port = httpd.server_address[1]
            self._httpd = httpd
            self._thread = threading.Thread(
                target=httpd.serve_forever, args=(0.05,), name="modelserver", daemon=True
            )
            self._thread.start()
        return self.url

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        with self._lock:
            open_connections = list(self._connections)
        for conn in open_connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ModelServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _next(self, api: str, path: str, body: dict[str, Any]) -> Entry:
        """Take the next scenario entry for ``api`` and record the request, atomically."""
        with self._lock:
            position, entry = self.script.next(api)
            line = {
                "api": api,
                "path": path,
                "index": len(self.requests),
                "entry": position,
                "body": body,
            }
            self.requests.append(line)
            if self.record_path is not None:
                record = json.dumps(line, ensure_ascii=False)
                durable.append_line(self.record_path, record, fsync=False)
        return entry
