"""The Anthropic Messages API (``POST /v1/messages``), streamed as server-sent events or as JSON.

Stream for one answer (text first, then one block per tool call)::

    message_start                      message: {id, type, role, model, content: [], usage}
    content_block_start  index 0       content_block: {type: text, text: ""}
    content_block_delta  index 0 (x n) delta: {type: text_delta, text}
    content_block_stop   index 0
    content_block_start  index 1       content_block: {type: tool_use, id, name, input: {}}
    content_block_delta  index 1 (x n) delta: {type: input_json_delta, partial_json}
    content_block_stop   index 1
    message_delta                      delta: {stop_reason: end_turn|tool_use}, usage
    message_stop
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

from cairn.modelserver.scenario import Entry, chunks, estimate_tokens

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}

Event = tuple[str, dict[str, Any]]


def new_id(prefix: str) -> str:
    return f"{prefix}_01{uuid.uuid4().hex[:22]}"


def tool_input(value: Any) -> dict[str, Any]:
    """Anthropic tool inputs are objects; a freeform string is passed as ``{"input": ...}``."""
    return value if isinstance(value, dict) else {"input": value}


def input_tokens(body: dict[str, Any]) -> int:
    return estimate_tokens(
        json.dumps(body.get("messages", [])) + json.dumps(body.get("system", ""))
    )


def _blocks(entry: Entry) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if entry.text or not entry.tools:
        blocks.append({"type": "text", "text": entry.text or ""})
    for call in entry.tools:
        blocks.append(
            {
                "type": "tool_use",
                "id": new_id("toolu"),
                "name": call.name,
                "input": tool_input(call.input),
            }
        )
    return blocks


def _usage(body: dict[str, Any], output: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens(body),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output,
    }


def _output_tokens(blocks: list[dict[str, Any]]) -> int:
    return sum(
        estimate_tokens(b["text"] if b["type"] == "text" else json.dumps(b["input"]))
        for b in blocks
    )


def message(entry: Entry, body: dict[str, Any]) -> dict[str, Any]:
    """The non-streaming answer: one complete ``message`` object."""
    blocks = _blocks(entry)
    return {
        "id": new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "scripted-model"),
        "content": blocks,
        "stop_reason": entry.stop_reason,
        "stop_sequence": None,
        "usage": _usage(body, _output_tokens(blocks)),
    }


def stream(entry: Entry, body: dict[str, Any]) -> Iterator[Event]:
    """The streamed answer as ``(event name, data)`` pairs."""
    full = message(entry, body)
    start = {
        **full,
        "content": [],
        "stop_reason": None,
        "usage": {**full["usage"], "output_tokens": 1},
    }
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(full["content"]):
        if block["type"] == "text":
            opening: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": part} for part in chunks(block["text"])]
        else:
            opening = {**block, "input": {}}
            partial = json.dumps(block["input"], ensure_ascii=False)
            deltas = [
                {"type": "input_json_delta", "partial_json": part} for part in chunks(partial)
            ]
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opening},
        )
        for delta in deltas:
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": full["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": full["usage"]["output_tokens"]},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def error_body(status: int, message_text: str | None = None) -> dict[str, Any]:
    kind = ERROR_TYPES.get(status, "api_error")
    return {
        "type": "error",
        "error": {"type": kind, "message": message_text or f"scripted error {status}"},
    }


RATE_LIMITED = "This request would exceed your account's rate limit. Please try again later."


def refusal(entry: Entry, now: float) -> tuple[int, dict[str, Any], list[tuple[str, str]]]:
    """A ``limit`` entry's answer at ``now`` (epoch seconds): status, body and headers. A usage
    limit is the subscription's 429 with its ``anthropic-ratelimit-unified-*`` headers (what
    Claude Code reads to say when it resets); a rate limit a plain 429 with ``retry-after``."""
    reset = int(now + entry.resets_in)
    body = error_body(429, entry.message or RATE_LIMITED)
    headers = [("retry-after", str(int(entry.resets_in)))]
    if entry.limit == "usage":
        headers += [
            ("anthropic-ratelimit-unified-status", "rejected"),
            ("anthropic-ratelimit-unified-reset", str(reset)),
            ("anthropic-ratelimit-unified-representative-claim", "five_hour"),
            ("anthropic-ratelimit-unified-5h-status", "rejected"),
            ("anthropic-ratelimit-unified-5h-reset", str(reset)),
            ("anthropic-ratelimit-unified-5h-utilization", "1.0"),
        ]
    return 429, body, headers


def count_tokens(body: dict[str, Any]) -> dict[str, Any]:
    """``POST /v1/messages/count_tokens``: answered without using a scenario entry."""
    return {"input_tokens": input_tokens(body)}


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            out.append(block["text"])
        elif block.get("type") == "tool_result":
            out.extend(_texts(block.get("content", "")))
    return out


def user_texts(body: dict[str, Any], *, latest: bool = False) -> list[str]:
    """The text of every ``user`` and in-conversation ``system`` message, in order: the prompt,
    ``<system-reminder>`` blocks, tool results, and hook ``additionalContext`` (Claude Code 2.1.328
    sends that as a ``{"role": "system"}`` message, e.g. ``"PostToolUse:Write hook additional
    context: ..."``). The top-level ``system`` prompt is not included. With ``latest``, only what
    came after the last assistant message."""
    out: list[str] = []
    for msg in body.get("messages") or []:
        if not isinstance(msg, dict):
            continue
        if msg.get("role") == "assistant":
            if latest:
                out = []
        elif msg.get("role") in ("user", "system"):
            out.extend(_texts(msg.get("content")))
    return out
