"""The OpenAI Responses API (``POST /v1/responses``), streamed as server-sent events or as JSON.

Stream for one answer (a message item first, then one item per tool call); every event carries
an increasing ``sequence_number``::

    response.created / response.in_progress         response: {id, status: in_progress, ...}
    response.output_item.added                      item: {type: message, status: in_progress}
    response.content_part.added                     part: {type: output_text, text: ""}
    response.output_text.delta (x n)                delta
    response.output_text.done                       text
    response.content_part.done
    response.output_item.done                       item: {type: message, status: completed}
    response.output_item.added                      item: {type: function_call, call_id, name}
    response.function_call_arguments.delta (x n)    delta
    response.function_call_arguments.done           arguments
    response.output_item.done
    response.completed                              response: {status: completed, output, usage}

A tool the request offers as ``{"type": "custom"}`` (freeform, e.g. Codex's ``apply_patch`` on
some models) is answered with a ``custom_tool_call`` item and ``response.custom_tool_call_input.*``
events instead.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

from cairn.modelserver.scenario import Entry, ToolCall, chunks, estimate_tokens

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
}

Event = tuple[str, dict[str, Any]]


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def input_tokens(body: dict[str, Any]) -> int:
    return estimate_tokens(json.dumps(body.get("input", "")) + str(body.get("instructions") or ""))


def _is_custom(name: str, body: dict[str, Any]) -> bool:
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("name") == name:
            return tool.get("type") == "custom"
    return False


def _tool_item(call: ToolCall, body: dict[str, Any]) -> dict[str, Any]:
    if _is_custom(call.name, body):
        text = call.input if isinstance(call.input, str) else json.dumps(call.input)
        return {
            "id": new_id("ctc"),
            "type": "custom_tool_call",
            "status": "completed",
            "call_id": new_id("call"),
            "name": call.name,
            "input": text,
        }
    arguments = call.input if isinstance(call.input, str) else json.dumps(call.input)
    return {
        "id": new_id("fc"),
        "type": "function_call",
        "status": "completed",
        "arguments": arguments,
        "call_id": new_id("call"),
        "name": call.name,
    }


def _items(entry: Entry, body: dict[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if entry.text or not entry.tools:
        items.append(
            {
                "id": new_id("msg"),
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": entry.text or "", "annotations": []}],
            }
        )
    items.extend(_tool_item(call, body) for call in entry.tools)
    return items


def _item_tokens(item: dict[str, Any]) -> int:
    if item["type"] == "message":
        return estimate_tokens(item["content"][0]["text"])
    return estimate_tokens(item.get("arguments", item.get("input", "")))


def response(entry: Entry, body: dict[str, Any]) -> dict[str, Any]:
    """The non-streaming answer: one complete ``response`` object."""
    items = _items(entry, body)
    tokens_in = input_tokens(body)
    tokens_out = sum(_item_tokens(item) for item in items)
    return {
        "id": new_id("resp"),
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": body.get("model", "scripted-model"),
        "output": items,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "usage": {
            "input_tokens": tokens_in,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": tokens_out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens_in + tokens_out,
        },
    }


def _item_events(index: int, item: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The events for one output item, without ``type``/``sequence_number`` filled in."""
    where = {"item_id": item["id"], "output_index": index}
    if item["type"] == "message":
        text = item["content"][0]["text"]
        yield (
            "response.output_item.added",
            {
                "output_index": index,
                "item": {**item, "status": "in_progress", "content": []},
            },
        )
        part = {"type": "output_text", "text": "", "annotations": []}
        yield "response.content_part.added", {**where, "content_index": 0, "part": part}
        for piece in chunks(text):
            yield (
                "response.output_text.delta",
                {
                    **where,
                    "content_index": 0,
                    "delta": piece,
                    "logprobs": [],
                },
            )
        yield (
            "response.output_text.done",
            {**where, "content_index": 0, "text": text, "logprobs": []},
        )
        yield (
            "response.content_part.done",
            {
                **where,
                "content_index": 0,
                "part": {**part, "text": text},
            },
        )
    elif item["type"] == "function_call":
        yield (
            "response.output_item.added",
            {
                "output_index": index,
                "item": {**item, "status": "in_progress", "arguments": ""},
            },
        )
        for piece in chunks(item["arguments"]):
            yield "response.function_call_arguments.delta", {**where, "delta": piece}
        yield (
            "response.function_call_arguments.done",
            {
                **where,
                "name": item["name"],
                "arguments": item["arguments"],
            },
        )
    else:  # custom_tool_call
        yield (
            "response.output_item.added",
            {
                "output_index": index,
                "item": {**item, "status": "in_progress", "input": ""},
            },
        )
        for piece in chunks(item["input"]):
            yield "response.custom_tool_call_input.delta", {**where, "delta": piece}
        yield "response.custom_tool_call_input.done", {**where, "input": item["input"]}
    yield "response.output_item.done", {"output_index": index, "item": item}


def stream(entry: Entry, body: dict[str, Any]) -> Iterator[Event]:
    """The streamed answer as ``(event name, data)`` pairs, with ``sequence_number`` 0, 1, ..."""
    full = response(entry, body)
    pending = {**full, "status": "in_progress", "output": [], "usage": None}

    def events() -> Iterator[tuple[str, dict[str, Any]]]:
        yield "response.created", {"response": pending}
        yield "response.in_progress", {"response": pending}
        for index, item in enumerate(full["output"]):
            yield from _item_events(index, item)
        yield "response.completed", {"response": full}

    for number, (name, data) in enumerate(events()):
        yield name, {"type": name, "sequence_number": number, **data}


def error_body(status: int, message_text: str | None = None) -> dict[str, Any]:
    return {
        "error": {
            "message": message_text or f"scripted error {status}",
            "type": ERROR_TYPES.get(status, "server_error"),
            "param": None,
            "code": None,
        }
    }


RATE_LIMITED = "Rate limit reached for requests. Please try again later."
USAGE_LIMITED = "The usage limit has been reached"


def refusal(entry: Entry, now: float) -> tuple[int, dict[str, Any], list[tuple[str, str]]]:
    """A ``limit`` entry's answer at ``now`` (epoch seconds): status, body and headers. A usage
    limit is ChatGPT's 429 ``usage_limit_reached`` with its reset time (what Codex reads to say
    when to try again); a rate limit a plain 429 ``rate_limit_exceeded`` with ``retry-after``."""
    seconds = int(entry.resets_in)
    if entry.limit == "usage":
        error = {
            "type": "usage_limit_reached",
            "message": entry.message or USAGE_LIMITED,
            "plan_type": "plus",
            "resets_at": int(now) + seconds,
            "eligible_promo": None,
            "resets_in_seconds": seconds,
        }
        return 429, {"error": error}, []
    body = error_body(429, entry.message or RATE_LIMITED)
    body["error"]["code"] = "rate_limit_exceeded"
    return 429, body, [("retry-after", str(seconds))]


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            out.append(part["text"])
    return out


ASSISTANT_ITEMS = {
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "reasoning",
    "web_search_call",
}
TOOL_OUTPUTS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}


def user_texts(body: dict[str, Any], *, latest: bool = False) -> list[str]:
    """The text of every ``user`` and ``developer`` message and every tool output in ``input``,
    in order. With ``latest``, only what came after the last assistant-side item."""
    items = body.get("input")
    if isinstance(items, str):
        return [items]
    out: list[str] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        role = item.get("role")
        if kind in ASSISTANT_ITEMS or (kind == "message" and role == "assistant"):
            if latest:
                out = []
        elif kind == "message" and role in ("user", "developer"):
            out.extend(_texts(item.get("content")))
        elif kind in TOOL_OUTPUTS:
            out.extend(_texts(item.get("output", "")))
    return out
