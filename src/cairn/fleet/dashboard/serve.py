"""Serving the dashboard with Uvicorn: in a thread beside the supervisor (``cairn fleet start
--port P``) or in the foreground (``cairn fleet dashboard --port P``).

The socket is bound here, before anything starts, so a taken port or a refused address is one
error line and exit 2. A non-loopback address is served only with a token
(``CAIRN_DASHBOARD_TOKEN``), which every request must then carry.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import threading
from typing import Any

from cairn.errors import BadInput
from cairn.fleet.dashboard.api import is_loopback
from cairn.terms import ENV_DASHBOARD_TOKEN

LOOPBACK = "127.0.0.1"
STARTUP_WAIT = 10.0  # seconds for the server thread to be ready


def token_from_env() -> str | None:
    return os.environ.get(ENV_DASHBOARD_TOKEN) or None


def check_bind(host: str | None, token: str | None) -> str:
    """The address to listen on: 127.0.0.1 unless ``--host`` names another, which must be a
    loopback one or come with a token."""
    if host is None:
        return LOOPBACK
    if not host or any(c.isspace() for c in host):
        raise BadInput(f"--host {host!r} is not an address; give an IP address or a host name")
    if not is_loopback(host) and token is None:
        raise BadInput(
            f"--host {host} is not a loopback address, so the dashboard would be reachable from "
            f"other machines; set {ENV_DASHBOARD_TOKEN} to a secret (every request must then "
            "carry it) or leave --host out to serve on 127.0.0.1"
        )
    return host


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: one the system picks)."""
    if not 0 <= port <= 65535:
        raise BadInput(f"--port {port} is not a TCP port; use 1-65535 (0 picks a free one)")
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host.strip("[]")).version == 6 else 0
    except ValueError:
        family = 0
    try:
        infos = socket.getaddrinfo(
            host.strip("[]"), port, family or socket.AF_UNSPEC, socket.SOCK_STREAM
        )
        af, kind, proto, _, address = infos[0]
        sock = socket.socket(af, kind, proto)
    except OSError as exc:
        raise BadInput(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; check --host"
        ) from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise BadInput(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port"
        ) from None
    sock.set_inheritable(False)
    return sock


def url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def _server(app: Any) -> Any:
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    return uvicorn.Server(config)


class Background:
    """The dashboard served from a daemon thread until ``stop``."""

    def __init__(self, app: Any, sock: socket.socket) -> None:
        self.server = _server(app)
        self.sock = sock
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [sock]}, name="cairn-dashboard", daemon=True
        )

    def start(self) -> None:
        self.thread.start()
        deadline = threading.Event()
        for _ in range(int(STARTUP_WAIT / 0.01)):
            if self.server.started or not self.thread.is_alive():
                break
            deadline.wait(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)
        self.sock.close()


def foreground(app: Any, sock: socket.socket) -> None:
    """Serve until SIGINT or SIGTERM, then stop cleanly (exit 0: a stop is how a dashboard
    ends)."""
    stop = threading.Event()
    previous = {
        signum: signal.signal(signum, lambda *_: stop.set())
        for signum in (signal.SIGINT, signal.SIGTERM)
    }
    server = Background(app, sock)
    try:
        server.start()
        while server.thread.is_alive() and not stop.wait(0.5):
            pass
    finally:
        server.stop()
        for signum, old in previous.items():
            signal.signal(signum, old)
