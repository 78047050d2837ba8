"""The ``linear`` tracker's set-up, checked when it opens: the team ``[fleet.linear] team``
names, its workflow states by name (``[fleet.linear.states]`` must name some of them) and the
label; and the web address of a ticket's branch, to link it on the issue."""

from __future__ import annotations

import re
import uuid
from typing import Any

from cairn.config.trackers import LinearConfig
from cairn.errors import BadInput
from cairn.fleet.linear_api import LinearAPI
from cairn.fleet.outbox import hidden
from cairn.git import Repo

STATES = ("started", "review", "input", "completed", "failed")
# a remote's web address: https://host/owner/name(.git), ssh://git@host/…, git@host:owner/name
_WEB = re.compile(
    r"(?:https?://|ssh://(?:[^@/]+@)?|[^@/:]+@)([^/:]+)(?::\d+)?[:/](.+?)(?:\.git)?/?"
)


def read(api: LinearAPI, settings: LinearConfig) -> dict[str, str]:
    """The team's workflow states, name → id. ``BadInput`` naming the known ones when the team,
    a state of ``settings.states`` or the label is unknown; ``LinearError`` when Linear could
    not be read."""
    key = str(settings.team)
    team = api.team(key)
    if team is None:
        keys = sorted({str(t.get("key")) for t in api.teams() if t.get("key")})
        raise BadInput(
            f"[fleet.linear] team {key!r} is not a Linear team the key sees; the team keys: "
            f"{', '.join(keys) or '(none)'}; set team to one of them"
        )
    found = team.get("states")
    nodes = found.get("nodes") if isinstance(found, dict) else None
    states = {
        s["name"]: str(s["id"])
        for s in (nodes if isinstance(nodes, list) else [])
        if isinstance(s, dict) and isinstance(s.get("name"), str) and s.get("id")
    }
    for field in STATES:
        name = getattr(settings.states, field)
        if name is not None and name not in states:
            raise BadInput(
                f"[fleet.linear.states] {field} = {name!r} is not a workflow state of team {key}; "
                f"its states: {', '.join(sorted(states)) or '(none)'}; set it to one of them"
            )
    mine = [
        label
        for label in api.labels(settings.label)
        if not isinstance(label.get("team"), dict) or label["team"].get("key") == key
    ]
    if not mine:
        raise BadInput(
            f"[fleet.linear] label {settings.label!r} is not a label of team {key} or of the "
            "workspace; create it in Linear (the team's settings, Labels) or set label"
        )
    return states


def branch_url(repo: Repo, remote: str) -> str | None:
    """``https://<host>/<owner>/<name>/tree/{branch}`` from the remote's URL, when it is a
    forge's (an https, ssh or scp-like address); None for a path."""
    found = repo.git.run(["remote", "get-url", "--", remote], check=False)
    match = _WEB.fullmatch(found.text.strip()) if found.ok else None
    if match is None or "/" not in match.group(2):
        return None
    return f"https://{match.group(1)}/{match.group(2)}/tree/{{branch}}"


def posted(found: list[dict[str, Any]], message: dict[str, Any]) -> bool:
    """Whether one of the issue's comments is ``message``'s: by the id cairn gave it, or by
    the key hidden in its body."""
    key = message.get("key")
    if not isinstance(key, str):
        return False
    mark, named = hidden(key), comment_id(message)
    return any(c.get("id") == named or mark in str(c.get("body")) for c in found)


def comment_id(message: dict[str, Any]) -> str | None:
    """The id of a keyed comment: a UUID derived from its key, the same at every try, so Linear
    holds at most one comment of the key and one posted already is found by it."""
    key = message.get("key")
    return str(uuid.uuid5(uuid.NAMESPACE_URL, key)) if isinstance(key, str) else None
