"""``cairn mcp``'s stdio transport: every frame gets an answer.

The SDK's stdio transport drops a line it cannot read as a JSON-RPC message without a word, so a
client that sent one waits forever. Here each line is checked first: one that is not JSON is
answered ``-32700`` (Parse error), a batch (a JSON array: MCP takes one message per line), a
JSON value that is not an object, or an object that is not a JSON-RPC 2.0 request, notification
or response is answered ``-32600`` (Invalid Request), with the request's ``id`` when it has a
usable one and ``null`` otherwise (JSON-RPC 2.0, section 5). Every other line goes to the SDK
unchanged; a blank line is not a frame and is skipped, as the SDK does.
"""

from __future__ import annotations

import fcntl
import io
import os
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import anyio
import mcp_types as types
import pydantic_core
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
ONE_PER_LINE = "send one JSON-RPC 2.0 message per line"


def answer(line: str) -> types.JSONRPCError | None:
    """The error a frame gets, or None when it is one for the server (or a blank line)."""
    text = line.strip()
    if not text:
        return None
    try:
        message = pydantic_core.from_json(text)
    except ValueError as exc:
        return _error(None, PARSE_ERROR, f"Parse error: not JSON ({exc}); {ONE_PER_LINE}")
    if isinstance(message, list):
        return _invalid(None, "a batch (a JSON array), which MCP does not take")
    if not isinstance(message, dict):
        return _invalid(None, f"a JSON {_JSON_NAMES.get(type(message), 'value')}, not an object")
    if "id" in message and _id_of(message) is None and not _null_error(message):
        return _invalid(None, 'its "id" is not a string or an integer')  # else a notification
    try:
        types.jsonrpc_message_adapter.validate_json(text, by_name=False)  # as the SDK reads it
        return None
    except ValidationError:
        return _invalid(_id_of(message), _why(message))


def _invalid(id_: int | str | None, why: str) -> types.JSONRPCError:
    return _error(id_, INVALID_REQUEST, f"Invalid Request: {why}; {ONE_PER_LINE}")


_JSON_NAMES = {str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def _why(message: dict[str, Any]) -> str:
    """What makes an object not a JSON-RPC 2.0 message, in the envelope's own words."""
    if message.get("jsonrpc") != "2.0":
        return 'not JSON-RPC 2.0 ("jsonrpc" must be "2.0")'
    if "method" in message:
        if not isinstance(message["method"], str):
            return 'its "method" is not a string'
        return 'its "params" is not an object'
    if "result" in message or "error" in message:
        return 'not a response: it needs an "id" and an object "result" or a valid "error"'
    return 'not a request or a notification: it has no "method"'


def _null_error(message: dict[str, Any]) -> bool:
    """An error response with a null ``id`` (its sender could not read a request): valid, and
    never answered, or two peers could answer each other's errors for ever."""
    return message.get("id", 0) is None and "error" in message and "method" not in message


def _id_of(message: dict[str, Any]) -> int | str | None:
    """The frame's ``id`` when it is one JSON-RPC allows (a string or an integer)."""
    found = message.get("id")
    if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)):
        return found
    return None


def _error(id_: int | str | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=id_, error=types.ErrorData(code=code, message=message)
    )


class Frames:
    """stdin's lines for the SDK's transport, the malformed ones answered on ``replies``
    (the transport's write stream, set once it is open) instead."""

    def __init__(self, lines: AsyncIterable[str]) -> None:
        self._lines = lines
        self.replies: Any = None

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self._lines:
            reply = answer(line)
            if reply is None:
                yield line
            elif self.replies is not None:
                await self.replies.send(SessionMessage(reply))


def _claim_stdin() -> io.TextIOWrapper:
    """The wire on a private descriptor, and fd 0 on the null device, as the SDK's transport
    does for the streams it claims: a child process (git) never reads the client's bytes."""
    wire = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return io.TextIOWrapper(os.fdopen(wire, "rb"), encoding="utf-8", errors="replace")


async def serve_stdio(server: MCPServer) -> None:
    """``server.run("stdio")``, every frame checked first (``answer``)."""
    frames = Frames(anyio.wrap_file(_claim_stdin()))
    async with stdio_server(stdin=frames) as (read_stream, write_stream):  # type: ignore[arg-type]
        frames.replies = write_stream  # before the reader's first line: no await in between
        lowlevel = server._lowlevel_server
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
