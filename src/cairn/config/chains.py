"""Named agents (``[agents.NAME]``) and their fallback chains, as the config reads them: a named
agent's table over ``[agent]``'s keys, and no chain that comes back to an agent it passed."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import msgspec

from cairn.errors import BadInput


class Agent(Protocol):  # an [agent] or [agents.NAME] table, read
    @property
    def kind(self) -> str | None: ...

    @property
    def fallback(self) -> list[str]: ...


AGENT_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
OWN_KEYS = ("fallback", "on_limit")  # a named agent's own: never taken from [agent]


def named_agents(
    tables: dict[str, Any],
    agent: Any,
    where: str,
    read: Callable[[dict[str, Any], str], dict[str, Any]],
) -> dict[str, Any]:
    """``[agents.NAME]`` tables over ``[agent]``'s keys (``agent``, the table as written), each
    read as an ``[agent]`` table is (``read``)."""
    inherited = {k: v for k, v in (agent if isinstance(agent, dict) else {}).items()}
    for key in OWN_KEYS:
        inherited.pop(key, None)
    out: dict[str, Any] = {}
    for name, table in tables.items():
        if not AGENT_NAME.fullmatch(name):
            raise msgspec.ValidationError(
                f"{name!r} is not an agent name (lower-case letters, digits, ., _, -) - at "
                f"`${where}`"
            )
        if not isinstance(table, dict):
            raise msgspec.ValidationError(
                f"Expected `table`, got `{type(table).__name__}` - at `${where}.{name}`"
            )
        own = dict(inherited)
        if own.get("kind") not in (None, table.get("kind", own.get("kind"))):  # another kind's
            own.pop("command", None)
            own.pop("script", None)
        merged = {**own, **table}
        if "max_turns" in table and "budget_pressure_turns" not in table:
            merged.pop("budget_pressure_turns", None)
        out[name] = read(merged, f"{where}.{name}")
    return out


def check_chains(agent: Agent, agents: dict[str, Any], path: Path) -> None:
    """No fallback chain comes back to an agent it passed, and every named agent has a kind;
    bad input naming the key otherwise. (That a fallback names an agent, ``[agents.NAME]`` or
    a kind, is checked when a run or the fleet starts: ``cairn.run.chain``.)"""
    for name, named in agents.items():
        if named.kind is None:
            raise BadInput(
                f"{path}: agents.{name}.kind: no kind; set kind (claude-code, codex, …) in "
                f"[agents.{name}] or [agent]"
            )
    tables = [("agent", agent), *((f"agents.{n}", a) for n, a in agents.items())]
    for key, table in tables:
        start = key.removeprefix("agents.") if key != "agent" else (table.kind or "agent")
        _walk(agents, [start], table.fallback, f"{path}: {key}.fallback")


def _walk(agents: dict[str, Any], path: list[str], fallback: list[str], where: str) -> None:
    for entry in fallback:
        if entry in path:
            chain = " → ".join([*path, entry])
            raise BadInput(
                f"{where}: {chain} is a cycle; list each agent once, never the agent itself"
            )
        named = agents.get(entry)
        _walk(agents, [*path, entry], named.fallback if named else [], where)
