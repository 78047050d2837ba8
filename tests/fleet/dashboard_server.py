"""cairn's dashboard app served on 127.0.0.1 in a thread, for the page's browser test and
bench/dashboard_page.py."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from cairn.fleet.dashboard.app import make_app


def app_for(repo: Path, token: str | None = None) -> tuple[Any, str]:
    """The dashboard of ``repo`` read from its files (no supervisor), and its name."""
    return make_app(repo, supervisor=None, token=token), "cairn.fleet.dashboard.app"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1 in a thread; yields its base URL."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
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
