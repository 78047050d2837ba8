"""``cairn mcp``: the real server over real stdio, driven by the official SDK's client."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult

from cairn import summary
from cairn.terms import ENV_RUN_DIR
from helpers import assert_one_line_error, begin_run, cairn, git, summary_file, write

TOOLS = {
    "task_start",
    "task_done",
    "finding_update",
    "gate_result",
    "progress",
    "catchup",
    "wip_save",
}


def serve(
    repo: Path, errlog: Path, env: dict[str, str], body: Callable[[ClientSession], Awaitable[None]]
) -> None:
    """Spawn ``cairn mcp -C repo`` with ``env`` over stdio, initialise, and run ``body``."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "cairn", "mcp", "-C", str(repo)], env=env
    )

    async def main() -> None:
        with anyio.fail_after(60), errlog.open("w") as log:
            async with (
                stdio_client(params, errlog=log) as (read, write_),
                ClientSession(read, write_) as session,
            ):
                await session.initialize()
                await body(session)

    asyncio.run(main())
    assert "Traceback" not in errlog.read_text(), errlog.read_text()


def text_of(result: CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert block.type == "text"
    return block.text


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def server_env(**extra: str) -> dict[str, str]:
    """The test's (isolated) environment: stdio_client passes only HOME, PATH and a few more."""
    env = {k: v for k, v in os.environ.items() if k != ENV_RUN_DIR}
    return {**env, **extra}


def test_tools_report_progress_into_the_run(repo: Path, tmp_path: Path) -> None:
    ref, lease = begin_run(repo, "T-1", ["A", "B"])

    def tasks() -> list[str]:
        loaded = summary.load(summary_file(ref))
        assert loaded is not None
        return [t.status for t in loaded.tasks]

    async def body(session: ClientSession) -> None:
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert names >= TOOLS

        started = await session.call_tool("task_start", {"task": 0})
        assert ok(started)["status"] == "In progress — task 0 of 2"
        assert text_of(started) == "task 0 in progress · In progress — task 0 of 2"
        assert tasks() == ["in progress", "pending"]

        done = await session.call_tool(
            "task_done", {"task": 0, "files": ["src/app.py"], "outcome": "A works"}
        )
        assert ok(done)["resolved"] == 1 and ok(done)["run"] == ref.run_id
        loaded = summary.load(summary_file(ref))
        assert loaded is not None
        assert loaded.tasks[0].status == "completed"
        assert loaded.tasks[0].files == ["src/app.py"]
        assert loaded.tasks[0].outcome == "A works"

        bad = await session.call_tool("task_start", {"task": 7})
        assert bad.is_error
        message = text_of(bad)
        assert "no task 7 in the plan (tasks 0–1)" in message
        assert "\n" not in message
        assert tasks() == ["completed", "pending"]

        gate = await session.call_tool(
            "gate_result", {"name": "Tests", "result": "pass", "command": "pytest -q"}
        )
        assert ok(gate)["ticket"] == "T-1"
        loaded = summary.load(summary_file(ref))
        assert loaded is not None and loaded.gates is not None
        assert [(g.name, g.result, g.command) for g in loaded.gates] == [
            ("Tests", "pass", "pytest -q")
        ]

        report = ok(await session.call_tool("progress", {}))
        assert report["status"] == "In progress — task 1 of 2"
        assert [i["id"] for i in report["done"]] == ["0"]
        assert [(i["id"], i["title"]) for i in report["remaining"]] == [("1", "B")]
        assert report["phase"] == "implement" and report["task"] == 1

        context = await session.call_tool("catchup", {})
        assert ok(context)["ticket"] == "T-1"
        paragraph = text_of(context)
        assert "ticket T-1" in paragraph and "Tasks done: 0; remaining: 1." in paragraph
        as_json = ok(await session.call_tool("catchup", {"format": "json"}))
        assert as_json["run"] == ref.run_id and as_json["done"] == ["0"]

        write(repo, "src/app.py", "print('changed')\n")
        saved = await session.call_tool("wip_save", {"reason": "before lunch"})
        data = ok(saved)
        assert data["created"] and data["ref"] == "refs/cairn/wip/T-1"
        assert text_of(saved).startswith("saved 1 changed file to refs/cairn/wip/T-1")
        assert git(repo, "rev-parse", "refs/cairn/wip/T-1").strip() == data["commit"]

    try:
        serve(repo, tmp_path / "server.err", server_env(**{ENV_RUN_DIR: str(ref.run_dir)}), body)
    finally:
        lease.release()


def test_without_run_dir_the_ticket_argument_finds_the_run(repo: Path, tmp_path: Path) -> None:
    ref, lease = begin_run(repo, "T-2", ["Only"])

    async def body(session: ClientSession) -> None:
        missing = await session.call_tool("progress", {})
        assert missing.is_error
        assert text_of(missing) == (
            "Error executing tool progress: "
            "ticket main has no run in progress; start one with cairn run, "
            "or pass the `ticket` argument for another ticket"
        )

        invalid = await session.call_tool("task_start", {"task": 0, "ticket": "no spaces"})
        assert invalid.is_error and "invalid ticket id 'no spaces'" in text_of(invalid)

        wrong_type = await session.call_tool("task_start", {"task": "one", "ticket": "T-2"})
        assert wrong_type.is_error
        assert text_of(wrong_type) == (
            "Error executing tool task_start: argument `task`: Input should be a valid integer "
            "(got 'one')"
        )
        no_result = await session.call_tool("gate_result", {"name": "Tests", "ticket": "T-2"})
        assert text_of(no_result) == (
            "Error executing tool gate_result: argument `result` is required"
        )

        started = ok(await session.call_tool("task_start", {"task": 0, "ticket": "T-2"}))
        assert started["ticket"] == "T-2" and started["run"] == ref.run_id
        report = ok(await session.call_tool("progress", {"ticket": "T-2"}))
        assert report["task"] == 0 and report["remaining"][0]["status"] == "in progress"

    try:
        serve(repo, tmp_path / "server.err", server_env(), body)
    finally:
        lease.release()


def test_arguments_are_strict_and_errors_name_them(repo: Path, tmp_path: Path) -> None:
    ref, lease = begin_run(repo, "T-3", ["A", "B"])
    journal = ref.run_dir / "run-log.jsonl"

    async def body(session: ClientSession) -> None:
        for tool in (await session.list_tools()).tools:
            assert tool.input_schema.get("additionalProperties") is False, tool.name
        before = (summary.load(summary_file(ref)), journal.read_bytes())
        refused: dict[str, list[tuple[dict[str, Any], str]]] = {
            "task_start": [
                ({"task": True}, "argument `task`: Input should be a valid integer (got True)"),
                ({"task": 1.0}, "argument `task`: Input should be a valid integer (got 1.0)"),
                ({"task": "1"}, "argument `task`: Input should be a valid integer (got '1')"),
                ({"task": -1}, "argument `task`: Input should be greater than or equal to 0"),
                (
                    {"task": 0, "tiket": "T-3"},
                    "unknown argument `tiket`; the arguments are task, ticket",
                ),
                ({}, "argument `task` is required"),
            ],
            "task_done": [
                ({"task": 0, "files": "a.py"}, "argument `files`: Input should be a valid list"),
                ({"task": 0, "notes": 3}, "argument `notes`: Input should be a valid string"),
            ],
            "gate_result": [
                ({"name": "Tests", "result": "PASS"}, "argument `result`: Input should be"),
            ],
            "wip_save": [({"reason": "x", "force": True}, "unknown argument `force`")],
        }
        for name, cases in refused.items():
            for arguments, says in cases:
                result = await session.call_tool(name, arguments)
                assert result.is_error, (name, arguments)
                text = text_of(result)
                assert text.startswith(f"Error executing tool {name}: {says}"), text
                assert "\n" not in text and "--" not in text
        assert (summary.load(summary_file(ref)), journal.read_bytes()) == before

        aside = await session.call_tool(
            "task_set_aside", {"task": 0, "status": "skipped", "notes": "  "}
        )
        assert aside.is_error and "the `notes` argument" in text_of(aside)
        assert "--" not in text_of(aside)

    try:
        serve(repo, tmp_path / "server.err", server_env(**{ENV_RUN_DIR: str(ref.run_dir)}), body)
    finally:
        lease.release()


def test_mcp_refuses_a_missing_workspace(tmp_path: Path) -> None:
    result = cairn("mcp", "-C", str(tmp_path / "nowhere"))
    assert_one_line_error(result)
    assert "is not a directory" in result.stderr


def test_docs_list_every_tool_and_a_valid_config() -> None:
    from cairn.integrations.mcp_server import build

    async def names() -> list[str]:
        return [tool.name for tool in await build().list_tools()]

    doc = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text()
    listed = re.findall(r"^\| `(\w+)` \|", doc, flags=re.MULTILINE)
    assert listed == asyncio.run(names())
    assert set(listed) >= TOOLS
    (config,) = re.findall(r"```json\n(.*?)```", doc, flags=re.DOTALL)
    server = json.loads(config)["mcpServers"]["cairn"]
    assert server["command"] == "cairn" and server["args"][0] == "mcp"
