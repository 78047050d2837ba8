"""The chat services' native messages of a notification (docs/fleet.md "Notifications"): the
facts of ``notify.payload`` (the generic JSON body) read once into a ``Card`` (``card``), then
one renderer a service — Slack's blocks, a Discord embed, a Microsoft Teams Adaptive Card —
each within its service's documented limits (a text over one is cut with an ellipsis).

``render`` gives the body to POST for a format; ``json`` is the payload itself.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from cairn.terms import ChatFormat

WHAT: dict[str, str] = {  # what happened, after the ticket's name
    "completed": "completed",
    "needs_review": "needs your review",
    "needs_input": "needs your input",
    "failed": "failed",
    "interrupted": "stopped: its attempts are spent",
    "waiting": "waits for a usage or rate limit's reset",
    "budget": "held: the fleet's budget is spent",
}
COLORS = {"needs_you": 0xE67E22, "failed": 0xE74C3C, "completed": 0x2ECC71, "news": 0x3498DB}
ELLIPSIS = "…"
SLACK_SECTION, SLACK_FIELD, SLACK_HEADER, SLACK_BUTTON = 3000, 2000, 150, 75
DISCORD_CONTENT, DISCORD_TITLE, DISCORD_DESCRIPTION = 2000, 256, 4096
DISCORD_FIELD_NAME, DISCORD_FIELD_VALUE, DISCORD_TOTAL = 256, 1024, 6000
TEAMS_BYTES = 28 * 1024
TEAMS_TEXT = 8000  # the status line and the detail each, well under the message's 28 KB


class Card(NamedTuple):
    """What every format says: the facts of one notification."""

    title: str  # "GH-12 needs your review"
    attention: str  # "needs_you" or "news"
    status: str  # the status line, or what is known instead
    detail: str | None
    to_do: str | None  # what a person does, for a need
    fields: list[tuple[str, str]]  # (name, value): state, attempt, cost, branch, …
    links: list[tuple[str, str]]  # (label, url): the dashboard, the pull request, the issue
    state: str
    key: str
    at: str | None  # when it was sent, ISO 8601


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the last an ellipsis when it was cut."""
    if len(text) <= limit:
        return text
    return text[: limit - 1] + ELLIPSIS if limit > 0 else ""


def cost(body: dict[str, Any]) -> str:
    value = body.get("cost_usd")
    return f"${value:.2f}" if isinstance(value, int | float) else "unknown"


def card(body: dict[str, Any]) -> Card:
    """The facts of the notification ``body`` (``notify.payload``)."""
    state = str(body.get("state"))
    fields = [("State", state), ("Cost", cost(body))]
    if body.get("attempt") is not None:
        fields.append(("Attempt", f"{body['attempt']} of {body.get('max_attempts')}"))
    if body.get("tokens") is not None:
        fields.append(("Tokens", f"{body['tokens']:,}"))
    if body.get("branch"):
        fields.append(("Branch", str(body["branch"])))
    if body.get("next_attempt_at"):
        fields.append(("Starts again", str(body["next_attempt_at"])))
    links = [
        (label, str(url))
        for label, url in (
            ("Dashboard", body.get("dashboard")),
            ("Pull request", body.get("pull_request")),
            ("Issue", body.get("issue")),
        )
        if url
    ]
    return Card(
        title=f"{body.get('ticket')} {WHAT.get(state, state)}",
        attention=str(body.get("attention") or "news"),
        status=str(body.get("status_line") or "no status line (the run wrote no summary)"),
        detail=str(body["detail"]) if body.get("detail") else None,
        to_do=str(body["to_do"]) if body.get("to_do") else None,
        fields=fields,
        links=links,
        state=state,
        key=str(body.get("key")),
        at=str(body["sent_at"]) if body.get("sent_at") else None,
    )


def render(format: ChatFormat, body: dict[str, Any]) -> dict[str, Any]:
    """The body to POST to a webhook of ``format``."""
    if format == "json":
        return body
    return {"slack": slack, "discord": discord, "teams": teams}[format](card(body))


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack(told: Card) -> dict[str, Any]:
    """Slack's incoming webhook: ``text`` (the notification's fallback) and Block Kit blocks."""

    def mrkdwn(text: str, limit: int) -> dict[str, str]:
        return {"type": "mrkdwn", "text": clip(_slack_escape(text), limit)}

    said = told.status + (f"\n{told.detail}" if told.detail else "")
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": clip(told.title, SLACK_HEADER)}},
        {"type": "section", "text": mrkdwn(said, SLACK_SECTION)},
    ]
    if told.to_do:
        blocks.append({"type": "section", "text": mrkdwn(f"What to do: {told.to_do}", 3000)})
    fields = [mrkdwn(f"{name}\n{value}", SLACK_FIELD) for name, value in told.fields[:10]]
    blocks.append({"type": "section", "fields": fields})
    context = f"cairn · {told.key}" + (f" · {told.at}" if told.at else "")
    blocks.append({"type": "context", "elements": [mrkdwn(context, SLACK_FIELD)]})
    if told.links:
        buttons = [
            {
                "type": "button",
                "text": {"type": "plain_text", "text": clip(label, SLACK_BUTTON)},
                "url": url,
            }
            for label, url in told.links[:25]
        ]
        blocks.append({"type": "actions", "elements": buttons})
    return {"text": clip(f"{told.title}: {told.status}", SLACK_SECTION), "blocks": blocks}


def discord(told: Card) -> dict[str, Any]:
    """Discord's webhook: a short ``content`` and one embed, mentions of nobody."""
    color = COLORS.get(told.state, COLORS.get(told.attention, COLORS["news"]))
    fields: list[dict[str, Any]] = [
        {
            "name": clip(name, DISCORD_FIELD_NAME),
            "value": clip(value, DISCORD_FIELD_VALUE),
            "inline": True,
        }
        for name, value in told.fields[:24]
    ]
    if told.links:
        said = " · ".join(f"[{label}]({url})" for label, url in told.links)
        fields.append({"name": "Links", "value": clip(said, DISCORD_FIELD_VALUE), "inline": False})
    title = clip(told.title, DISCORD_TITLE)
    used = len(title) + sum(len(f["name"]) + len(f["value"]) for f in fields)
    lines = [told.status, told.detail or "", f"**What to do:** {told.to_do}" if told.to_do else ""]
    room = min(DISCORD_DESCRIPTION, DISCORD_TOTAL - used)  # the embed's total stays ≤ 6000
    embed: dict[str, Any] = {
        "title": title,
        "description": clip("\n".join(line for line in lines if line), room),
        "color": color,
        "fields": fields,
    }
    if told.links:
        embed["url"] = told.links[0][1]
    if told.at:
        embed["timestamp"] = told.at
    return {
        "content": clip(told.title, DISCORD_CONTENT),
        "embeds": [embed],
        "allowed_mentions": {"parse": []},
    }


def teams(told: Card) -> dict[str, Any]:
    """Microsoft Teams (a Workflows webhook): an Adaptive Card 1.4 in a message, under 28 KB."""
    text = TEAMS_TEXT
    while True:
        title = {"type": "TextBlock", "text": told.title, "weight": "Bolder", "size": "Medium"}
        body: list[dict[str, Any]] = [
            {**title, "wrap": True},
            {"type": "TextBlock", "text": clip(told.status, text), "wrap": True},
        ]
        if told.detail:
            body.append({"type": "TextBlock", "text": clip(told.detail, text), "wrap": True})
        if told.to_do:
            line = {"type": "TextBlock", "text": f"What to do: {told.to_do}", "wrap": True}
            body.append({**line, "color": "Attention", "weight": "Bolder"})
        facts = [{"title": name, "value": value} for name, value in told.fields]
        body.append({"type": "FactSet", "facts": facts})
        content: dict[str, Any] = {
            "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
            "type": "AdaptiveCard",
            "version": "1.4",
            "body": body,
        }
        if told.links:
            content["actions"] = [
                {"type": "Action.OpenUrl", "title": label, "url": url} for label, url in told.links
            ]
        message = {
            "type": "message",
            "attachments": [
                {
                    "contentType": "application/vnd.microsoft.card.adaptive",
                    "contentUrl": None,
                    "content": content,
                }
            ],
        }
        if len(json.dumps(message).encode()) <= TEAMS_BYTES or text < 100:
            return message
        text //= 2  # multi-byte text, or escapes: halve the long texts until it fits
