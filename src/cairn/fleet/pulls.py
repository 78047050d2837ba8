"""The pull request a tracker opened (or found) for a ticket's branch: ``{"url", "number"}`` in
``<state root>/fleet/pulls/<ticket>.json``, written when it is known, read by the dashboard's
ticket page to link it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cairn.errors import BadInput
from cairn.state.layout import Layout
from cairn.util import durable

READ_LIMIT = 16 * 1024


def path_of(layout: Layout, ticket: str) -> Path:
    return layout.fleet_dir / "pulls" / f"{ticket}.json"


def record(layout: Layout, ticket: str, pull: dict[str, Any]) -> None:
    """Keep the link of ``pull`` (a pull request as GitHub's API answers it)."""
    url, number = pull.get("html_url"), pull.get("number")
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        return  # nothing a page can link to
    path = path_of(layout, ticket)
    durable.ensure_dir(path.parent)
    shown = {"url": url, "number": number if isinstance(number, int) else None}
    durable.atomic_write(path, json.dumps(shown) + "\n")


def read(layout: Layout, ticket: str) -> dict[str, Any] | None:
    """The ticket's pull request link, None when none was recorded (or it cannot be read)."""
    try:
        data = durable.read_state_file(path_of(layout, ticket), "pull request link", READ_LIMIT)
        found = json.loads(data) if data is not None else None
    except (OSError, ValueError, BadInput):
        return None
    if not isinstance(found, dict) or not isinstance(found.get("url"), str):
        return None
    return {"url": found["url"], "number": found.get("number")}
