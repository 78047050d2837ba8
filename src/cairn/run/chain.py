"""A run's agents: the one it starts on and its fallback chain (``agent.fallback``), each with
its own settings, and which one dispatches now.

The primary is ``--agent`` (a named agent ``[agents.NAME]`` or a kind) or ``agent.kind``; its
``fallback`` lists, in order, the agents the run may move to, each followed by its own fallback
(the config refuses a cycle). A kind named as a fallback has ``[agent]``'s settings with that
kind. What the run does on a limit (``on_limit``, ``max_wait``, ``failback``) is the primary's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import msgspec

from cairn.errors import BadInput
from cairn.terms import OnLimit
from cairn.util.durations import parse_duration

if TYPE_CHECKING:
    from cairn.agents.base import Adapter
    from cairn.config.records import AgentConfig, Config
    from cairn.state.layout import Layout


@dataclass
class Member:
    """One agent of the chain: its name (a named agent's, or its kind) and its settings."""

    name: str
    config: AgentConfig
    _adapter: Adapter | None = field(default=None, repr=False)

    @property
    def kind(self) -> str:
        return self.config.kind or self.name

    @property
    def adapter(self) -> Adapter:
        if self._adapter is None:
            from cairn import agents

            self._adapter = agents.get(self.kind)
        return self._adapter


@dataclass
class Agents:
    """The run's chain, the primary first, and the one dispatching now (``current``)."""

    members: list[Member]
    current: int = 0

    @property
    def now(self) -> Member:
        return self.members[self.current]

    @property
    def primary(self) -> Member:
        return self.members[0]

    @property
    def policy(self) -> OnLimit | None:
        """``on_limit`` as set (None: chosen per limit, see ``choose``)."""
        return self.primary.config.on_limit

    @property
    def max_wait(self) -> float:
        return parse_duration(self.primary.config.max_wait)

    def names(self) -> list[str]:
        return [m.name for m in self.members]

    def index(self, name: str) -> int | None:
        return next((i for i, m in enumerate(self.members) if m.name == name), None)

    def first_free(
        self, layout: Layout, now: datetime, after: int = -1, warnings: list[str] | None = None
    ) -> int | None:
        """The first member after ``after`` that is not at a limit, None when all are."""
        from cairn.state import limited

        for i in range(after + 1, len(self.members)):
            if limited.holding(layout, self.members[i].name, now, warnings) is None:
                return i
        return None


def resolve(config: Config, chosen: str | None) -> Agents:
    """The chain of a run started with ``--agent chosen`` (None: ``agent.kind``); BadInput
    when there is no agent or ``chosen`` names none."""
    from cairn import agents

    if chosen is not None and chosen in config.agents:
        primary = Member(chosen, config.agents[chosen])
    elif chosen is not None:
        agents.get(chosen)  # an unknown kind: BadInput naming the known ones
        primary = Member(chosen, _as_kind(config, chosen, config.agent.fallback))
    elif config.agent.kind:
        primary = Member(config.agent.kind, config.agent)
    else:
        raise BadInput(
            "no agent kind: set agent.kind in cairn.toml (scripted, command, …) or pass --agent"
        )
    members = [primary]
    _follow(config, primary.config.fallback, members, "agent" if chosen is None else chosen)
    return Agents(members)


def _follow(config: Config, fallback: list[str], members: list[Member], key: str) -> None:
    from cairn.agents import ADAPTERS

    for name in fallback:
        if name not in config.agents and name not in ADAPTERS:
            known = ", ".join([*sorted(config.agents), *sorted(ADAPTERS)])
            where = f"{config.source}: " if config.source else ""
            table = key if key == "agent" or key not in config.agents else f"agents.{key}"
            raise BadInput(
                f"{where}{table}.fallback: {name!r} is not an agent; name one of {known}"
            )
        if any(m.name == name for m in members):
            continue  # already in the chain (--agent chose it as the primary)
        named = config.agents.get(name)
        if named is not None:
            members.append(Member(name, named))
            _follow(config, named.fallback, members, name)
        else:
            members.append(Member(name, _as_kind(config, name, [])))


def _as_kind(config: Config, kind: str, fallback: list[str]) -> AgentConfig:
    """``[agent]``'s settings for an agent of ``kind``: its program and script only when it is
    ``[agent]``'s own kind, or ``[agent]`` names none (they are that kind's)."""
    same = config.agent.kind in (None, kind)
    return msgspec.structs.replace(
        config.agent,
        kind=kind,
        command=config.agent.command if same else None,
        script=config.agent.script if same else None,
        fallback=fallback,
        on_limit=config.agent.on_limit if fallback else None,
    )
