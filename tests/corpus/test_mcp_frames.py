"""The MCP frame corpus: every frame in ``frames/mcp.yaml`` through the real ``cairn mcp``.

One server process per test worker (``python -m cairn mcp``, real pipes), initialised as a
client would. Each case writes its frame as one line, then a ``ping``; the answers that come
before the ping's must be exactly one JSON-RPC error of the case's code and id whose message
holds its fragment, and the ping must still be answered: a malformed frame never goes
unanswered and never stops the server. See README.md for the case format.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import make_repo

FRAMES = Path(__file__).parent / "frames" / "mcp.yaml"
WAIT = 30.0


@dataclass(frozen=True)
class Frame:
    id: str
    frame: str
    code: int
    error: str
    reply_id: int | str | None = None


def load_frames() -> list[Frame]:
    frames = []
    for entry in yaml.safe_load(FRAMES.read_text()):
        text = entry.pop("frame")
        if isinstance(text, dict):
            text = text["text"] * text.get("repeat", 1)
        frames.append(Frame(frame=text, **entry))
    return frames


class Server:
    """``cairn mcp`` on real pipes; its stdout lines read by a thread into a queue."""

    def __init__(self, repo: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cairn", "mcp", "-C", str(repo)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def until(self, id_: str) -> list[dict[str, Any]]:
        """Every message up to and including the answer to request ``id_``."""
        found: list[dict[str, Any]] = []
        while True:
            try:
                message = json.loads(self.lines.get(timeout=WAIT))
            except queue.Empty:
                raise AssertionError(f"no answer to {id_} in {WAIT:g}s; got {found}") from None
            found.append(message)
            if message.get("id") == id_:
                return found

    def request(self, id_: str, method: str, params: dict[str, Any] | None = None) -> None:
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
        self.send(json.dumps(body if params is None else {**body, "params": params}))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    repo = make_repo(tmp_path_factory.mktemp("mcp") / "repo")
    running = Server(repo)
    client = {"name": "corpus", "version": "1"}
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
    running.request("init", "initialize", params)
    assert "result" in running.until("init")[-1]
    running.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    yield running
    assert running.proc.stdin is not None
    running.proc.stdin.close()
    assert running.proc.wait(timeout=WAIT) == 0
    assert running.proc.stderr is not None
    errors = running.proc.stderr.read().decode()
    assert "Traceback" not in errors, errors


@pytest.mark.parametrize("case", load_frames(), ids=lambda case: case.id)
def test_a_malformed_frame_is_answered_and_the_server_goes_on(server: Server, case: Frame) -> None:
    server.send(case.frame)
    server.request(f"after-{case.id}", "ping")
    *before, after = server.until(f"after-{case.id}")
    assert after.get("result") == {}, after
    assert len(before) == 1, before
    (reply,) = before
    assert reply["jsonrpc"] == "2.0" and reply["id"] == case.reply_id, reply
    assert reply["error"]["code"] == case.code, reply
    assert case.error in reply["error"]["message"], reply
    assert "send one JSON-RPC 2.0 message per line" in reply["error"]["message"]


def test_well_formed_frames_get_the_servers_own_answers(server: Server) -> None:
    """The check never stands in the way: an unknown method is the SDK's -32601, a blank line
    is no frame at all, a null-id error response is never answered."""
    server.send("")
    server.send(json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -1, "message": "x"}}))
    server.request("unknown", "no/such/method")
    (reply,) = server.until("unknown")
    assert reply["error"]["code"] == -32601
    server.request("tools", "tools/list")
    (listed,) = server.until("tools")
    assert any(tool["name"] == "catchup" for tool in listed["result"]["tools"])
