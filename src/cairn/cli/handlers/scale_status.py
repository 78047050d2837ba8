"""``cairn fleet status`` and the dashboard with ``engine = "temporal"``: the tickets' rows read
from their workflows (``cairn.scale.status``), not from local files."""

from __future__ import annotations

import json as jsonlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.cli.handlers.scale import _need_temporalio, _unreachable, run_async
from cairn.cli.output import say, say_warning
from cairn.errors import BadInput, ExitCode
from cairn.scale.remote import base_of, fleet_key, url_of

if TYPE_CHECKING:
    from cairn.fleet.dashboard.source import Source

HEADER = (
    "ticket",
    "state",
    "phase",
    "task",
    "attempt",
    "segments",
    "snapshot",
    "branch",
    "worker",
    "last",
)


def status(json: bool, workspace: Path) -> ExitCode:
    from cairn.config import load
    from cairn.git import Repo

    repo = Repo.discover(workspace)
    config = load(repo.toplevel)
    url_of(repo, config.fleet.remote)  # the remote must be one
    key = fleet_key(repo, config.fleet.id, config.fleet.remote, config.fleet.base)
    _need_temporalio()
    from cairn.scale import status as scale_status
    from cairn.scale.connection import connect

    async def read() -> scale_status.Listing:
        client = await connect(config.temporal)
        return await scale_status.listing(client, key)

    found = run_async(read(), json, config.temporal.address)
    from cairn.state.layout import Layout

    found.rows += scale_status.refused_rows(Layout.for_repo(repo, config), found.warnings)
    for warning in found.warnings:  # on stderr: stdout stays the table or the JSON array
        say_warning(warning)
    if json:
        sys.stdout.write(jsonlib.dumps(found.rows, indent=2) + "\n")
    elif not found.rows:
        say("no ticket workflows for this repository: `cairn fleet start` starts the queue's")
    else:
        sys.stdout.write(table(found.rows))
    return ExitCode.OK


def table(rows: list[dict[str, Any]]) -> str:
    from cairn.state.status import age_text

    lines: list[tuple[str, ...]] = [HEADER]
    for row in rows:
        snapshot = row["snapshot"] or "-"
        if row["snapshot"] and row["snapshot_age_seconds"] is not None:
            snapshot += f" {age_text(row['snapshot_age_seconds'])}"
        last = "-"
        if row["last_event"] is not None:
            last = f"{row['last_event']} {age_text(row['last_event_age_seconds'])}"
        lines.append(
            (
                row["ticket"] or row["plan"],  # a refused entry may name no ticket
                row["state"].replace("_", " ") + (" (paused)" if row["paused"] else ""),
                row["phase"] or "-",
                str(row["task"]) if row["task"] is not None else "-",
                str(row["attempt"] or "-"),
                str(row["segments"]),
                snapshot,
                row["branch_sha"] or "-",
                row["worker"] or "-",
                last,
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
    text = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    ]
    text += [f"  {row['ticket'] or row['plan']}: {row['detail']}" for row in rows if row["detail"]]
    return "\n".join(text) + "\n"


def _source(workspace: Path) -> Source:
    """The dashboard's rows from Temporal (``cairn.scale.dashsource``); an unreachable
    Temporal is bad input."""
    from cairn.config import load
    from cairn.git import Repo
    from cairn.state.layout import Layout

    repo = Repo.discover(workspace)
    config = load(repo.toplevel)
    remote = url_of(repo, config.fleet.remote)
    _need_temporalio()
    from cairn.scale.dashsource import TemporalRows

    scratch = Layout.for_repo(repo, config).root / "scale" / "dashboard"
    try:
        base = base_of(repo, remote, config.fleet.base)
        return TemporalRows(
            config,
            remote,
            base,
            scratch,
            repo.common_dir / "objects",
            Layout.for_repo(repo, config),
            fleet_key(repo, config.fleet.id, config.fleet.remote, config.fleet.base),
            repo,
        )
    except BadInput:
        raise
    except (OSError, RuntimeError, TimeoutError) as exc:
        raise _unreachable(config.temporal.address, exc) from None


def dashboard(json: bool, workspace: Path, port: int, host: str | None) -> ExitCode:
    """``cairn fleet dashboard`` on the temporal engine: served until SIGINT or SIGTERM."""
    from cairn.cli.handlers.fleet_dashboard import _announce
    from cairn.fleet.dashboard import serve
    from cairn.fleet.dashboard.app import make_app

    token = serve.token_from_env()
    address = serve.check_bind(host, token)
    sock = serve.bind(address, port)
    app = make_app(workspace, token=token, source=_source(workspace))
    _announce(serve.url(sock), json, read_only=True, token=token is not None)
    serve.foreground(app, sock)
    return ExitCode.OK


def start(once: bool, json: bool, workspace: Path, port: int, host: str | None) -> int:
    """``cairn fleet start --port P`` on the temporal engine: the dashboard in a thread while
    the workflows are started (and, with ``--once``, waited for)."""
    from cairn.cli.handlers import scale
    from cairn.cli.handlers.fleet_dashboard import _announce
    from cairn.fleet.dashboard import serve
    from cairn.fleet.dashboard.app import make_app

    token = serve.token_from_env()
    address = serve.check_bind(host, token)
    sock = serve.bind(address, port)
    app = make_app(workspace, token=token, source=_source(workspace))
    serve.Background(app, sock).start()
    _announce(serve.url(sock), json, read_only=False, token=token is not None)
    return scale.fleet_start(once, json, workspace)
