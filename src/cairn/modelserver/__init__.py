"""A scripted model server for running the real agent CLIs offline.

It speaks the Anthropic Messages API (``POST /v1/messages``, what Claude Code calls) and the OpenAI
Responses API (``POST /v1/responses``, what Codex calls), streamed as server-sent events, answers
from a scenario file in order, and records every model request. See ``docs/model-server.md``.
"""

from cairn.modelserver.scenario import (
    Entry,
    Scenario,
    ScenarioError,
    ToolCall,
    load_scenario,
    parse_scenario,
)
from cairn.modelserver.server import ModelServer, read_requests, user_texts

__all__ = [
    "Entry",
    "ModelServer",
    "Scenario",
    "ScenarioError",
    "ToolCall",
    "load_scenario",
    "parse_scenario",
    "read_requests",
    "user_texts",
]
