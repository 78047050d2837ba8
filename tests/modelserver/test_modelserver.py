"""The scripted model server: real HTTP requests, the SSE streams parsed event by event."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from cairn.modelserver import (
    ModelServer,
    ScenarioError,
    load_scenario,
    parse_scenario,
    read_requests,
    user_texts,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "modelserver"

WRITE = {"name": "Write", "input": {"file_path": "/tmp/x/hello.txt", "content": "hi there\n"}}
EXEC = {"name": "exec_command", "input": {"cmd": "printf 'hi\\n' > hello.txt", "login": False}}


def request(
    url: str, method: str, path: str, body: Any = None
) -> tuple[int, http.client.HTTPMessage, bytes]:
    conn = http.client.HTTPConnection(urlsplit(url).netloc, timeout=10)
    try:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


def sse(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    """Parse a server-sent-events body into ``(event, data)`` pairs; every frame has both."""
    events = []
    for frame in raw.decode().split("\n\n"):
        if not frame.strip():
            continue
        fields = dict(line.split(": ", 1) for line in frame.splitlines())
        assert set(fields) == {"event", "data"}, frame
        data = json.loads(fields["data"])
        assert data["type"] == fields["event"]
        events.append((fields["event"], data))
    return events


def messages_body(prompt: str = "write hello.txt", stream: bool = True) -> dict[str, Any]:
    return {
        "model": "claude-opus-5-5",
        "max_tokens": 32000,
        "stream": stream,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
        "tools": [{"name": "Write", "input_schema": {"type": "object"}}],
    }


def responses_body(prompt: str = "write hello.txt", stream: bool = True, **extra: Any) -> dict:
    return {
        "model": "fake-model",
        "stream": stream,
        "instructions": "You are Codex.",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]}
        ],
        "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}],
        **extra,
    }


def anthropic_stream(url: str, body: dict | None = None) -> list[tuple[str, dict[str, Any]]]:
    status, headers, raw = request(url, "POST", "/v1/messages?beta=true", body or messages_body())
    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    return sse(raw)


def openai_stream(url: str, body: dict | None = None) -> list[tuple[str, dict[str, Any]]]:
    status, headers, raw = request(url, "POST", "/v1/responses", body or responses_body())
    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    events = sse(raw)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    return events


def collapse(names: list[str]) -> list[str]:
    """Event names with runs of the same delta event collapsed to one ``name*``."""
    out: list[str] = []
    for name in names:
        if name.endswith("delta") and out and out[-1] in (name, name + "*"):
            out[-1] = name + "*"
        else:
            out.append(name)
    return out


# -- Anthropic Messages -----------------------------------------------------------------------


def test_anthropic_text_answer_streams_the_message_events() -> None:
    with ModelServer({"responses": [{"text": "Hello there, this is the scripted model."}]}) as srv:
        events = anthropic_stream(srv.url)
    names = [name for name, _ in events]
    assert collapse(names) == [
        "message_start",
        "content_block_start",
        "content_block_delta*",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert names.count("content_block_delta") > 1
    start = events[0][1]["message"]
    assert start["id"].startswith("msg_") and start["type"] == "message"
    assert start["role"] == "assistant" and start["model"] == "claude-opus-5-5"
    assert start["content"] == [] and start["stop_reason"] is None
    assert start["usage"]["input_tokens"] > 0
    assert events[1][1] == {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    deltas = [data["delta"] for name, data in events if name == "content_block_delta"]
    assert {d["type"] for d in deltas} == {"text_delta"}
    assert "".join(d["text"] for d in deltas) == "Hello there, this is the scripted model."
    final = events[-2][1]
    assert final["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert final["usage"]["output_tokens"] > 0


def test_anthropic_tool_call_streams_input_json_deltas() -> None:
    with ModelServer({"responses": [{"text": "Writing.", "tool": WRITE}]}) as srv:
        events = anthropic_stream(srv.url)
    assert collapse([name for name, _ in events]) == [
        "message_start",
        "content_block_start",
        "content_block_delta*",
        "content_block_stop",
        "content_block_start",
        "content_block_delta*",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    opening = [d for n, d in events if n == "content_block_start"][1]
    assert opening["index"] == 1
    block = opening["content_block"]
    assert block["type"] == "tool_use" and block["name"] == "Write" and block["input"] == {}
    assert block["id"].startswith("toolu_")
    parts = [d["delta"] for n, d in events if n == "content_block_delta" and d["index"] == 1]
    assert {p["type"] for p in parts} == {"input_json_delta"}
    assert len(parts) > 1
    assert json.loads("".join(p["partial_json"] for p in parts)) == WRITE["input"]
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_anthropic_several_tool_calls_get_their_own_blocks_and_ids() -> None:
    second = {"name": "Bash", "input": {"command": "ls"}}
    with ModelServer({"responses": [{"tools": [WRITE, second]}]}) as srv:
        events = anthropic_stream(srv.url)
    blocks = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert [b["type"] for b in blocks] == ["tool_use", "tool_use"]  # no empty text block
    assert [b["name"] for b in blocks] == ["Write", "Bash"]
    assert len({b["id"] for b in blocks}) == 2
    for index, call in enumerate([WRITE, second]):
        parts = [
            d["delta"]["partial_json"]
            for n, d in events
            if n == "content_block_delta" and d["index"] == index
        ]
        assert json.loads("".join(parts)) == call["input"]


def test_anthropic_non_streaming_answers_one_message() -> None:
    with ModelServer({"responses": [{"text": "ok", "tool": WRITE}]}) as srv:
        status, headers, raw = request(srv.url, "POST", "/v1/messages", messages_body(stream=False))
    assert status == 200 and headers["Content-Type"] == "application/json"
    message = json.loads(raw)
    assert message["type"] == "message" and message["stop_reason"] == "tool_use"
    assert message["content"][0] == {"type": "text", "text": "ok"}
    assert message["content"][1]["input"] == WRITE["input"]
    assert message["usage"]["output_tokens"] > 0


# -- OpenAI Responses -------------------------------------------------------------------------


def test_openai_text_answer_streams_the_response_events() -> None:
    with ModelServer({"responses": [{"text": "Hello there, this is the scripted model."}]}) as srv:
        events = openai_stream(srv.url)
    assert collapse([name for name, _ in events]) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta*",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    created = events[0][1]["response"]
    assert created["id"].startswith("resp_") and created["status"] == "in_progress"
    assert created["model"] == "fake-model" and created["output"] == []
    added = events[2][1]["item"]
    assert added["type"] == "message" and added["role"] == "assistant"
    deltas = [d for n, d in events if n == "response.output_text.delta"]
    assert all(d["item_id"] == added["id"] and d["output_index"] == 0 for d in deltas)
    text = "".join(d["delta"] for d in deltas)
    assert text == "Hello there, this is the scripted model."
    done = dict(events)["response.output_text.done"]
    assert done["text"] == text
    completed = events[-1][1]["response"]
    assert completed["id"] == created["id"] and completed["status"] == "completed"
    assert completed["output"][0]["content"] == [
        {"type": "output_text", "text": text, "annotations": []}
    ]
    usage = completed["usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert usage["input_tokens_details"] == {"cached_tokens": 0}
    assert usage["output_tokens_details"] == {"reasoning_tokens": 0}


def test_openai_tool_calls_are_function_call_items() -> None:
    second = {"name": "exec_command", "input": {"cmd": "ls"}}
    with ModelServer({"responses": [{"text": "Running.", "tools": [EXEC, second]}]}) as srv:
        events = openai_stream(srv.url)
    call_events = [
        "response.output_item.added",
        "response.function_call_arguments.delta*",
        "response.function_call_arguments.done",
        "response.output_item.done",
    ]
    assert collapse([name for name, _ in events]) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta*",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        *call_events,
        *call_events,
        "response.completed",
    ]
    added = [d["item"] for n, d in events if n == "response.output_item.added"][1:]
    assert [item["type"] for item in added] == ["function_call", "function_call"]
    assert all(item["arguments"] == "" and item["status"] == "in_progress" for item in added)
    assert all(item["call_id"].startswith("call_") for item in added)
    assert len({item["call_id"] for item in added}) == 2
    for index, call in enumerate([EXEC, second], start=1):
        deltas = [
            d["delta"]
            for n, d in events
            if n == "response.function_call_arguments.delta" and d["output_index"] == index
        ]
        assert json.loads("".join(deltas)) == call["input"]
    output = events[-1][1]["response"]["output"]
    assert [item["type"] for item in output] == ["message", "function_call", "function_call"]
    assert output[1]["name"] == "exec_command" and output[1]["status"] == "completed"
    assert json.loads(output[1]["arguments"]) == EXEC["input"]


def test_openai_tool_offered_as_custom_gets_a_custom_tool_call() -> None:
    patch = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n"
    body = responses_body(tools=[{"type": "custom", "name": "apply_patch"}])
    with ModelServer({"responses": [{"tool": {"name": "apply_patch", "input": patch}}]}) as srv:
        events = openai_stream(srv.url, body)
    names = collapse([name for name, _ in events])
    assert names[2:5] == [
        "response.output_item.added",
        "response.custom_tool_call_input.delta*",
        "response.custom_tool_call_input.done",
    ]
    item = events[-1][1]["response"]["output"][0]
    assert item["type"] == "custom_tool_call" and item["input"] == patch


def test_openai_non_streaming_answers_one_response() -> None:
    with ModelServer({"responses": [{"tool": EXEC}]}) as srv:
        status, _, raw = request(srv.url, "POST", "/v1/responses", responses_body(stream=False))
    assert status == 200
    body = json.loads(raw)
    assert body["object"] == "response" and body["status"] == "completed"
    (item,) = body["output"]
    assert item["type"] == "function_call" and json.loads(item["arguments"]) == EXEC["input"]


# -- scenario behaviour -----------------------------------------------------------------------


def test_error_entries_answer_the_status_with_a_json_error_body() -> None:
    scenario = {"responses": [{"error": 500, "message": "scripted outage"}, {"error": 429}]}
    with ModelServer(scenario) as srv:
        results = [
            request(srv.url, "POST", "/v1/messages", messages_body()),
            request(srv.url, "POST", "/v1/messages", messages_body()),
            request(srv.url, "POST", "/v1/responses", responses_body()),
        ]
    (s1, _, b1), (s2, _, b2), (s3, _, b3) = results
    assert (s1, s2, s3) == (500, 429, 500)
    assert json.loads(b1) == {
        "type": "error",
        "error": {"type": "api_error", "message": "scripted outage"},
    }
    assert json.loads(b2)["error"]["type"] == "rate_limit_error"
    error = json.loads(b3)["error"]
    assert error["message"] == "scripted outage" and error["type"] == "server_error"


def test_limit_entries_answer_as_the_real_apis_do() -> None:
    usage = {"limit": "usage", "resets_in": 600}
    rate = {"limit": "rate", "resets_in": 30, "message": "slow down"}
    with ModelServer({"responses": [usage, rate]}) as srv:
        before = int(time.time())
        answers = [
            request(srv.url, "POST", "/v1/messages", messages_body()),
            request(srv.url, "POST", "/v1/messages", messages_body()),
            request(srv.url, "POST", "/v1/responses", responses_body()),
            request(srv.url, "POST", "/v1/responses", responses_body()),
        ]
        after = int(time.time())
    assert [status for status, _, _ in answers] == [429] * 4
    (_, h1, b1), (_, h2, b2), (_, _, b3), (_, h4, b4) = answers
    # Anthropic: the subscription's window in the unified headers, a plain 429 otherwise
    assert json.loads(b1)["error"]["type"] == "rate_limit_error"
    assert h1["anthropic-ratelimit-unified-status"] == "rejected"
    assert before + 600 <= int(h1["anthropic-ratelimit-unified-reset"]) <= after + 600
    assert h1["retry-after"] == "600"
    assert json.loads(b2) == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "slow down"},
    }
    assert h2["retry-after"] == "30" and "anthropic-ratelimit-unified-status" not in h2
    # OpenAI: ChatGPT's usage_limit_reached with its reset, rate_limit_exceeded otherwise
    error = json.loads(b3)["error"]
    assert error["type"] == "usage_limit_reached" and error["plan_type"] == "plus"
    assert error["resets_in_seconds"] == 600
    assert before + 600 <= error["resets_at"] <= after + 600
    assert json.loads(b4)["error"]["code"] == "rate_limit_exceeded" and h4["retry-after"] == "30"


def test_exhausted_scenario_answers_done_and_each_api_has_its_own_cursor() -> None:
    scenario = {"responses": [{"text": "first"}], "openai": [{"text": "codex first"}]}

    def text(events: list[tuple[str, dict[str, Any]]]) -> str:
        return "".join(
            d["delta"]["text"] if "delta" in d and isinstance(d["delta"], dict) else d["delta"]
            for n, d in events
            if n in ("content_block_delta", "response.output_text.delta")
        )

    with ModelServer(scenario) as srv:
        got = [
            text(anthropic_stream(srv.url)),
            text(openai_stream(srv.url)),
            text(anthropic_stream(srv.url)),
            text(openai_stream(srv.url)),
        ]
        entries = [r["entry"] for r in srv.requests]
    assert got == ["first", "codex first", "done", "done"]
    assert entries == [0, 0, None, None]
    with ModelServer({"responses": [], "after_end": {"error": 503}}) as srv:
        assert request(srv.url, "POST", "/v1/messages", messages_body())[0] == 503


def test_requests_are_recorded_in_order_with_their_bodies(tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text("responses:\n  - tool: {name: Write, input: {file_path: /tmp/x/a}}\n")
    record = tmp_path / "record.jsonl"
    bodies = [messages_body("one"), responses_body("two"), messages_body("three")]
    with ModelServer(scenario, record) as srv:
        # one keep-alive connection: the chunked SSE framing must leave it reusable
        conn = http.client.HTTPConnection(urlsplit(srv.url).netloc, timeout=10)
        for path, body in zip(
            ["/v1/messages?beta=true", "/v1/responses", "/v1/messages"], bodies, strict=True
        ):
            conn.request("POST", path, body=json.dumps(body))
            resp = conn.getresponse()
            assert resp.status == 200 and sse(resp.read())
        conn.close()
        in_memory = srv.requests
    recorded = read_requests(record)
    assert recorded == in_memory
    assert [(r["api"], r["path"], r["index"], r["entry"]) for r in recorded] == [
        ("anthropic", "/v1/messages?beta=true", 0, 0),
        ("openai", "/v1/responses", 1, 0),
        ("anthropic", "/v1/messages", 2, None),
    ]
    assert [r["body"] for r in recorded] == bodies


def test_sleep_delays_the_answer_and_stop_does_not_wait_for_it() -> None:
    with ModelServer({"responses": [{"sleep": 0.3, "text": "late"}]}) as srv:
        started = time.monotonic()
        assert request(srv.url, "POST", "/v1/responses", responses_body())[0] == 200
        assert time.monotonic() - started >= 0.3
    srv = ModelServer({"responses": [{"sleep": 30, "text": "never"}]})
    url = srv.start()
    conn = http.client.HTTPConnection(urlsplit(url).netloc, timeout=10)
    conn.request("POST", "/v1/messages", body=json.dumps(messages_body()))
    time.sleep(0.1)
    started = time.monotonic()
    srv.stop()
    assert time.monotonic() - started < 5
    with pytest.raises((http.client.HTTPException, OSError)):
        conn.getresponse().read()
    conn.close()


def test_probes_are_answered_without_using_the_scenario() -> None:
    with ModelServer({"responses": [{"text": "only"}]}) as srv:
        status, _, raw = request(srv.url, "GET", "/v1/models")
        assert status == 200 and json.loads(raw)["data"][0]["id"]
        assert request(srv.url, "HEAD", "/")[0] == 200
        assert request(srv.url, "GET", "/v1/nothing")[0] == 404
        assert request(srv.url, "POST", "/v1/other", {})[0] == 404
        status, _, raw = request(
            srv.url, "POST", "/v1/messages/count_tokens?beta=true", messages_body()
        )
        assert status == 200 and json.loads(raw)["input_tokens"] > 0
        assert srv.requests == []
        assert srv.script.remaining("anthropic") == 1
        assert ("GET", "/v1/models", 200) in srv.seen


def test_scenario_files_are_validated(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "responses:\n  - {text: again, repeat: 2}\n  - {tool: {name: Write, input: {}}}\n"
        "after_end: finished\n"
    )
    scenario = load_scenario(path)
    assert [e.text for e in scenario.responses] == ["again", "again", None]
    assert scenario.responses[2].stop_reason == "tool_use"
    assert scenario.after_end.text == "finished"
    for bad in [
        {"responses": [{"sleep": 1}]},
        {"responses": [{"text": 3}]},
        {"responses": [{"error": 200}]},
        {"responses": [{"error": 500, "text": "x"}]},
        {"responses": [{"tool": {"input": {}}}]},
        {"responses": [{"text": "x", "colour": "red"}]},
        {"responses": [{"text": "x", "repeat": 0}]},
        {"responses": [{"limit": "daily"}]},
        {"responses": [{"limit": "usage", "text": "x"}]},
        {"responses": [{"limit": "usage", "resets_in": -1}]},
        {"responses": [{"text": "x", "resets_in": 5}]},
        {"replies": []},
        ["not a mapping"],
    ]:
        with pytest.raises(ScenarioError):
            parse_scenario(bad)


# -- what the agent was told ------------------------------------------------------------------


def test_user_texts_of_a_claude_code_request() -> None:
    """The shape Claude Code 2.1.328 sends after a Write with SessionStart and PostToolUse hooks
    that returned ``additionalContext`` (hook context arrives as ``role: system`` messages)."""
    body = {
        "model": "claude-opus-5-5",
        "system": [{"type": "text", "text": "You are a Claude agent."}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": "<system-reminder>\nAttribution...\n</system-reminder>\n",
                    },
                    {"type": "text", "text": "do the plan"},
                ],
            },
            {"role": "system", "content": "SessionStart hook additional context: MARK-1\n\n# Env"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Writing."},
                    {"type": "tool_use", "id": "toolu_1", "name": "Write", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "File created"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": [{"type": "text", "text": "listing"}],
                    },
                ],
            },
            {
                "role": "system",
                "content": [
                    {
                        "type": "text",
                        "text": "PostToolUse:Write hook additional context: MARK-2",
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            },
        ],
    }
    recorded = {"api": "anthropic", "path": "/v1/messages", "index": 0, "body": body}
    texts = user_texts(recorded)
    assert texts[1:] == [
        "do the plan",
        "SessionStart hook additional context: MARK-1\n\n# Env",
        "File created",
        "listing",
        "PostToolUse:Write hook additional context: MARK-2",
    ]
    assert "You are a Claude agent." not in texts and "Writing." not in texts
    assert user_texts(recorded, latest=True) == [
        "File created",
        "listing",
        "PostToolUse:Write hook additional context: MARK-2",
    ]


def test_user_texts_of_a_codex_request() -> None:
    """The shape Codex 0.169.0 sends after an ``exec_command`` call."""
    body = {
        "model": "fake-model",
        "instructions": "You are Codex.",
        "input": [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "<permissions instructions>"}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "<environment_context>..."}],
            },
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Running.", "annotations": []}],
            },
            {"type": "reasoning", "summary": [], "encrypted_content": None},
            {"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": "c1"},
            {"type": "function_call_output", "call_id": "c1", "output": "Process exited with 0"},
            {
                "type": "custom_tool_call_output",
                "call_id": "c2",
                "output": [{"type": "input_text", "text": "patched"}],
            },
        ],
    }
    recorded = {"api": "openai", "path": "/v1/responses", "index": 0, "body": body}
    assert user_texts(recorded) == [
        "<permissions instructions>",
        "<environment_context>...",
        "go",
        "Process exited with 0",
        "patched",
    ]
    assert user_texts(recorded, latest=True) == ["Process exited with 0", "patched"]
    assert user_texts({"api": "openai", "body": {"input": "just a string"}}) == ["just a string"]


# -- the command line and the captured real-CLI runs ------------------------------------------


def test_command_line_serves_until_sigterm(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("responses:\n  - text: hi\n")
    record = tmp_path / "r.jsonl"
    command = [sys.executable, "-m", "cairn.modelserver", "--scenario", str(scenario)]
    proc = subprocess.Popen(
        [*command, "--record", str(record)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on http://127.0.0.1:")
        url = line.removeprefix("listening on ")
        assert request(url, "POST", "/v1/responses", responses_body())[0] == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert [r["api"] for r in read_requests(record)] == ["openai"]


def test_captured_real_cli_runs_finished_the_scripted_turns() -> None:
    claude = [json.loads(line) for line in (FIXTURES / "claude-write.stream.jsonl").open()]
    result = claude[-1]
    assert result["type"] == "result" and result["subtype"] == "success"
    assert result["result"] == "Created hello.txt." and result["num_turns"] == 2
    codex = [json.loads(line) for line in (FIXTURES / "codex-write.exec.jsonl").open()]
    assert codex[-1]["type"] == "turn.completed"
    kinds = [e["item"]["type"] for e in codex if e["type"] == "item.completed"]
    assert kinds == ["error", "agent_message", "command_execution", "agent_message"]


def test_doc_examples_are_valid_scenarios_and_records() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "model-server.md").read_text()
    fenced = doc.split("```")[1::2]
    yamls = [block.removeprefix("yaml\n") for block in fenced if block.startswith("yaml\n")]
    full, codex = (parse_scenario(yaml.safe_load(block)) for block in yamls)
    assert len(full.responses) == 6 and full.responses[1].error == 500
    assert full.responses[2].sleep == 2 and full.after_end.text == "done"
    assert codex.entries("openai")[0].tools[0].name == "exec_command"
    (record,) = [block.removeprefix("json\n") for block in fenced if block.startswith("json\n")]
    with ModelServer({"responses": []}) as srv:
        request(srv.url, "POST", "/v1/messages?beta=true", messages_body())
        assert list(json.loads(record)) == list(srv.requests[0])
