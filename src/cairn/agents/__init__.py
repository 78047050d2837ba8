"""Agent adapters, one module per kind, listed in one explicit table.

A kind's module is imported only when a run asks for that kind. To add an agent, write a module
with an ``Adapter`` subclass (see ``base``) and add one line to ``ADAPTERS``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from cairn.errors import BadInput

if TYPE_CHECKING:
    from cairn.agents.base import Adapter

ADAPTERS: dict[str, str | type[Adapter]] = {
    "claude-code": "cairn.agents.claude_code:ClaudeCodeAdapter",
    "codex": "cairn.agents.codex:CodexAdapter",
    "command": "cairn.agents.command:CommandAdapter",
    "scripted": "cairn.agents.scripted.adapter:ScriptedAdapter",
}


def get(kind: str) -> Adapter:
    """A new adapter of ``kind``; BadInput naming the known kinds if there is none."""
    try:
        target = ADAPTERS[kind]
    except KeyError:
        known = ", ".join(sorted(ADAPTERS))
        raise BadInput(f"unknown agent kind {kind!r}; use one of {known}") from None
    if isinstance(target, str):
        module, _, name = target.partition(":")
        target = getattr(importlib.import_module(module), name)
    return target()
