"""A chat webhook receiver on 127.0.0.1 and validators of each service's documented payload
shape (/work/shared/reference/integrations.md section 2): Slack's blocks and their limits, a
Discord embed's limits and its 6000-character total, a Teams Adaptive Card's envelope, version
and 28 KB size. A validator returns the problems it finds (none: the payload is in shape)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, dict[str, str], bytes]  # status, headers, body
# what each service answers a message it took (Slack 200 "ok", Discord 204, Teams 202)
TOOK: dict[str, Answer] = {
    "slack": (200, {"Content-Type": "text/plain"}, b"ok"),
    "discord": (204, {}, b""),
    "teams": (202, {}, b""),
    "json": (204, {}, b""),
}


@dataclass
class Post:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class ChatReceiver:
    """Takes POSTs at ``/<format>/<name>``; ``answers[path]``: what to answer first, in
    order, then the format's own success."""

    posts: list[Post] = field(default_factory=list)
    answers: dict[str, list[Answer]] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)  # every path asked, whatever the answer
    base: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, format: str, name: str = "hook") -> str:
        return f"{self.base}/{format}/{name}"

    def at(self, format: str, name: str = "hook") -> list[dict[str, Any]]:
        return [post.body for post in self.posts if post.path == f"/{format}/{name}"]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length))
        receiver = self.server.receiver
        with receiver.lock:
            receiver.asked.append(self.path)
            queued = receiver.answers.get(self.path) or []
            status, headers, text = queued.pop(0) if queued else TOOK[self.path.split("/")[1]]
            if status < 300:
                receiver.posts.append(Post(self.path, dict(self.headers.items()), body))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    receiver: ChatReceiver


def serve() -> Iterator[ChatReceiver]:
    receiver = ChatReceiver()
    server = _Server(("127.0.0.1", 0), _Handler)
    server.receiver = receiver
    receiver.base = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


def _text(obj: Any, kinds: set[str], limit: int, where: str) -> list[str]:
    if not isinstance(obj, dict) or obj.get("type") not in kinds:
        return [f"{where}: not a text object of {sorted(kinds)}"]
    text = obj.get("text")
    if not isinstance(text, str) or not text:
        return [f"{where}: no text"]
    return [f"{where}: {len(text)} > {limit}"] if len(text) > limit else []


def slack(body: dict[str, Any]) -> list[str]:
    """Slack's incoming webhook: ``text`` and Block Kit ``blocks`` within their limits."""
    problems = [f"unknown key {key}" for key in body if key not in ("text", "blocks")]
    if not isinstance(body.get("text"), str) or not body["text"]:
        problems.append("no text fallback")
    blocks = body.get("blocks")
    if not isinstance(blocks, list) or not 1 <= len(blocks) <= 50:
        return [*problems, "blocks: not a list of 1 to 50"]
    if len(json.dumps(blocks)) > 12_000:  # msg_blocks_too_long was seen near 13k
        problems.append("blocks over 12,000 characters")
    for n, block in enumerate(blocks):
        kind, where = block.get("type"), f"blocks[{n}]"
        if kind == "header":
            problems += _text(block.get("text"), {"plain_text"}, 150, where)
        elif kind == "section":
            if "text" not in block and "fields" not in block:
                problems.append(f"{where}: a section without text or fields")
            if "text" in block:
                problems += _text(block["text"], {"mrkdwn", "plain_text"}, 3000, where)
            fields = block.get("fields", [])
            if not isinstance(fields, list) or len(fields) > 10:
                problems.append(f"{where}: over 10 fields")
            for field_ in fields:
                problems += _text(field_, {"mrkdwn", "plain_text"}, 2000, f"{where}.fields")
        elif kind == "context":
            elements = block.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= 10:
                problems.append(f"{where}: context elements not 1 to 10")
            for element in elements or []:
                problems += _text(element, {"mrkdwn", "plain_text"}, 3000, where)
        elif kind == "actions":
            elements = block.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= 25:
                problems.append(f"{where}: actions elements not 1 to 25")
            for button in elements or []:
                if button.get("type") != "button":
                    problems.append(f"{where}: not a button")
                problems += _text(button.get("text"), {"plain_text"}, 75, f"{where}.button")
                url = button.get("url")
                if not isinstance(url, str) or not url.startswith("http") or len(url) > 3000:
                    problems.append(f"{where}: a button without a URL")
        else:
            problems.append(f"{where}: unknown block type {kind}")
    return problems


def _discord_total(embed: dict[str, Any]) -> int:
    fields = embed.get("fields", [])
    parts = [embed.get("title", ""), embed.get("description", "")]
    parts += [embed.get("footer", {}).get("text", ""), embed.get("author", {}).get("name", "")]
    parts += [f.get("name", "") + f.get("value", "") for f in fields]
    return sum(len(part) for part in parts)


def discord(body: dict[str, Any]) -> list[str]:
    """Discord's execute-webhook body: content ≤ 2000, embeds ≤ 10 within the embed limits,
    all embeds ≤ 6000 characters, and no mention parsed."""
    problems = []
    content, embeds = body.get("content"), body.get("embeds")
    if not content and not embeds:
        problems.append("neither content nor embeds")
    if content is not None and (not isinstance(content, str) or len(content) > 2000):
        problems.append("content over 2000")
    if body.get("allowed_mentions") != {"parse": []}:
        problems.append('allowed_mentions is not {"parse": []}')
    if not isinstance(embeds, list) or len(embeds) > 10:
        return [*problems, "embeds: not a list of up to 10"]
    limits = {"title": 256, "description": 4096}
    for n, embed in enumerate(embeds):
        for key, limit in limits.items():
            if len(embed.get(key, "")) > limit:
                problems.append(f"embeds[{n}].{key} over {limit}")
        fields = embed.get("fields", [])
        if len(fields) > 25:
            problems.append(f"embeds[{n}]: over 25 fields")
        for f in fields:
            if not f.get("name") or len(f["name"]) > 256:
                problems.append(f"embeds[{n}]: a field name empty or over 256")
            if not f.get("value") or len(f["value"]) > 1024:
                problems.append(f"embeds[{n}]: a field value empty or over 1024")
        color = embed.get("color")
        if color is not None and not (isinstance(color, int) and 0 <= color <= 0xFFFFFF):
            problems.append(f"embeds[{n}]: color {color!r}")
        if "timestamp" in embed:
            datetime.fromisoformat(embed["timestamp"])
        if "url" in embed and not str(embed["url"]).startswith("http"):
            problems.append(f"embeds[{n}]: url {embed['url']!r}")
    if sum(_discord_total(embed) for embed in embeds) > 6000:
        problems.append("embeds over 6000 characters in all")
    return problems


def teams(body: dict[str, Any]) -> list[str]:
    """A Teams Workflows message: one Adaptive Card (≤ 1.4) attachment, under 28 KB."""
    problems = []
    if len(json.dumps(body).encode()) > 28 * 1024:
        problems.append("over 28 KB")
    if body.get("type") != "message" or not isinstance(body.get("attachments"), list):
        return [*problems, "not a message with attachments"]
    (attachment,) = body["attachments"]
    if attachment.get("contentType") != "application/vnd.microsoft.card.adaptive":
        problems.append("contentType is not an Adaptive Card's")
    if "contentUrl" not in attachment or attachment["contentUrl"] is not None:
        problems.append("contentUrl is not null")
    card = attachment.get("content", {})
    if card.get("type") != "AdaptiveCard" or card.get("version") not in ("1.0", "1.2", "1.4"):
        problems.append("not an AdaptiveCard of version 1.4 or lower")
    if not str(card.get("$schema", "")).startswith("http://adaptivecards.io/schemas/"):
        problems.append("no $schema")
    for element in card.get("body", []):
        if element.get("type") == "TextBlock":
            if not isinstance(element.get("text"), str) or not element["text"]:
                problems.append("a TextBlock without text")
        elif element.get("type") == "FactSet":
            for fact in element.get("facts", []):
                if not isinstance(fact.get("title"), str) or not isinstance(fact.get("value"), str):
                    problems.append("a fact without title or value")
        else:
            problems.append(f"unexpected element {element.get('type')}")
    for action in card.get("actions", []):
        if action.get("type") != "Action.OpenUrl" or not str(action.get("url")).startswith("http"):
            problems.append(f"an action that is not Action.OpenUrl: {action}")
        if not action.get("title"):
            problems.append("an action without title")
    return problems


VALIDATE = {"slack": slack, "discord": discord, "teams": teams}
