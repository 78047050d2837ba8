"""``cairn fleet start --port P`` (the supervisor with its dashboard) and ``cairn fleet
dashboard`` (the dashboard alone, read-only from the files)."""

from __future__ import annotations

import json as jsonlib
import sys
from pathlib import Path

from cairn.cli.output import say


def _announce(url: str, json: bool, read_only: bool, token: bool) -> None:
    if json:
        event = {"event": "dashboard_started", "url": url, "read_only": read_only, "token": token}
        sys.stdout.write(jsonlib.dumps(event) + "\n")
    else:
        notes = ["read-only" if read_only else "with the supervisor"]
        if token:
            notes.append("token required")
        say(f"dashboard: {url} ({', '.join(notes)})")
    sys.stdout.flush()


def start(
    once: bool,
    concurrency: int | None,
    json: bool,
    workspace: Path,
    port: int,
    host: str | None,
) -> int:
    from cairn.cli.handlers.fleet_run import supervisor_for
    from cairn.fleet.dashboard import serve
    from cairn.fleet.dashboard.app import make_app

    token = serve.token_from_env()
    address = serve.check_bind(host, token)
    supervisor = supervisor_for(once, concurrency, json, workspace)
    sock = serve.bind(address, port)
    app = make_app(workspace, supervisor=supervisor, token=token)
    server = serve.Background(app, sock)
    server.start()
    app.state.dashboard.warm()
    _announce(serve.url(sock), json, read_only=False, token=token is not None)
    try:
        return supervisor.run()
    finally:
        server.stop()


def dashboard(json: bool, workspace: Path, port: int, host: str | None) -> None:
    from cairn.fleet.dashboard import serve
    from cairn.fleet.dashboard.app import make_app

    token = serve.token_from_env()
    address = serve.check_bind(host, token)
    app = make_app(workspace, token=token)  # reads the repository first: a bad -C is exit 2
    sock = serve.bind(address, port)
    app.state.dashboard.warm()
    _announce(serve.url(sock), json, read_only=True, token=token is not None)
    serve.foreground(app, sock)
