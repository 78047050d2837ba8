"""What a run does when its agent hits a usage or rate limit (``agent.on_limit``): move to the
next free agent of its chain, wait for the reset, or stop (resumable); and, before each
dispatch, which agent dispatches (back to an earlier one once its limit has reset:
``agent.failback``).

Every limit is recorded for the whole repository (``cairn.state.limited``), so every run and
the fleet's supervisor keep off an agent until its reset. A switch is journalled as
``agent_switched`` (from, to, reason) and starts the next agent with cairn's handoff prompt in
the same work tree. Without ``on_limit``: ``failover`` when the chain has a fallback, else
``wait`` when the reset time is known and within ``agent.max_wait``, else ``stop``. A run of the
fleet never sleeps in its slot: it stops, and the supervisor holds the ticket as ``waiting`` (a
segment on Temporal stops the same way; its workflow starts the next one after its backoff).
"""

from __future__ import annotations

import os
import time
from datetime import datetime

from cairn.agents import limits
from cairn.agents.limits import Failure
from cairn.envnames import fleet_run
from cairn.run.orchestrator.context import RunContext, Stop
from cairn.state import limited, runstate
from cairn.terms import LimitKind, OnLimit
from cairn.util import clock

WAIT_STEP = 0.2  # seconds between looks at a signal while waiting for a reset


def limit_of(ctx: RunContext, failure: Failure | None) -> Failure | None:
    """``failure`` when it is a limit ``on_limit`` applies to (not while cairn was signalled:
    the signal wins)."""
    if failure is None or not failure.limit or ctx.signalled:
        return None
    return failure


def kind_of(failure: Failure) -> LimitKind:
    """The limit a failure ``limit_of`` let through is."""
    return "usage_limit" if failure.kind == "usage_limit" else "rate_limit"


def line(ctx: RunContext, failure: Failure) -> str:
    """The limit as every place shows it, with the agent's words."""
    said = limits.describe(failure, ctx.agents.now.name, clock.now())
    text = failure.text.strip()
    return f"{said}: {text}" if text else said


def note(ctx: RunContext, failure: Failure) -> None:
    """Record that the agent dispatching now is at ``failure``'s limit, for every run and the
    fleet."""
    now = clock.now()
    member = ctx.agents.now
    kind = kind_of(failure)
    limited.note(
        ctx.ref.layout,
        limited.Held(
            agent=member.name,
            kind=member.kind,
            limit=kind,
            resets_at=limited.hold_until(kind, failure.resets_at, now),
            reset_known=failure.resets_at is not None,
            seen_at=now,
            text=failure.text[:500],
            ticket=ctx.ref.ticket,
            run=ctx.ref.run_id,
        ),
    )


def after_limit(ctx: RunContext, failure: Failure) -> None:
    """The agent dispatching now hit ``failure`` (its dispatch is already cut off and the
    limit recorded): move to a free agent, or wait for the soonest reset, as ``on_limit``
    says; raises Stop(``failure.kind``) when the run is to stop (resumable)."""
    policy, kind = _policy(ctx, failure), kind_of(failure)
    if policy == "failover":
        free = ctx.agents.first_free(ctx.ref.layout, clock.now())
        if free is not None:
            switch(ctx, free, kind)
            return
    if policy == "stop" or not _another_wait(ctx):
        raise Stop(kind)
    if limited.holding(ctx.ref.layout, ctx.agents.now.name, clock.now()) is None:
        return  # its reset has passed already: it goes on
    if _wait_for_reset(ctx, kind):
        return
    raise Stop(kind)


def _another_wait(ctx: RunContext) -> bool:
    """Whether the run may wait (or go on after a reset) once more: waits count as
    continuations, so a limit that keeps coming back ends the run instead of re-prompting."""
    if ctx.waits > ctx.config.agent.max_continuations:
        return False
    ctx.waits += 1
    return True


def choose(ctx: RunContext) -> bool:
    """Before a dispatch: go back to an earlier agent of the chain whose limit has reset
    (``failback``), or off the agent dispatching now when it is at a limit another run saw;
    waits or stops (Stop) as ``on_limit`` says when every agent is at one. Whether the agent
    changed."""
    agents, now = ctx.agents, clock.now()
    before = agents.current
    warnings: list[str] = []
    free = agents.first_free(ctx.ref.layout, now, warnings=warnings)
    for message in warnings:
        ctx.sink.event("warning", message=message)
    held = limited.holding(ctx.ref.layout, agents.now.name, now)
    if free is not None and (free < before and agents.primary.config.failback):
        switch(ctx, free, "failback")
    elif held is not None:
        if free is not None and _policy_for(ctx, held.reset_known, held.resets_at) == "failover":
            switch(ctx, free, held.limit)
        else:
            known = held.resets_at if held.reset_known else None  # a guess is not a reset
            failure = Failure(held.limit, held.text, resets_at=known)
            ctx.last_error = line(ctx, failure)
            after_limit(ctx, failure)
    return agents.current != before


def switch(ctx: RunContext, to: int, reason: str) -> None:
    """The next dispatches go to agent ``to`` of the chain: journalled as ``agent_switched``."""
    agents = ctx.agents
    frm, target = agents.now.name, agents.members[to].name
    agents.current = to
    runstate.record(ctx.ref, "agent_switched", **{"from": frm, "to": target, "reason": reason})
    ctx.sink.event("agent_switched", **{"from": frm, "to": target, "reason": reason})


def _policy(ctx: RunContext, failure: Failure) -> OnLimit:
    return _policy_for(ctx, failure.resets_at is not None, failure.resets_at)


def _policy_for(ctx: RunContext, known: bool, resets_at: datetime | None) -> OnLimit:
    """``on_limit`` as set, or the default for this limit."""
    if ctx.agents.policy is not None:
        return ctx.agents.policy
    if len(ctx.agents.members) > 1:
        return "failover"
    soon = resets_at is not None and (resets_at - clock.now()).total_seconds()
    return "wait" if known and soon is not False and soon <= ctx.agents.max_wait else "stop"


def _wait_for_reset(ctx: RunContext, kind: LimitKind) -> bool:
    """Sleep until the soonest known reset of the chain's agents, when it is within
    ``max_wait`` (and the run is not the fleet's: it stops, the supervisor waits); then the
    agent whose limit reset dispatches. False when there is nothing to wait for; Stop on a
    signal (exit 3, resumable)."""
    if fleet_run(os.environ):
        return False  # a fleet's run (embedded, or a Temporal segment) frees its slot
    now = clock.now()
    held = [limited.holding(ctx.ref.layout, m.name, now) for m in ctx.agents.members]
    known = [h for h in held if h is not None and h.reset_known]  # a guessed reset: not waited
    if not known:
        return False
    soonest = min(known, key=lambda h: h.resets_at)
    seconds = max(0.0, (soonest.resets_at - now).total_seconds())
    if seconds > ctx.agents.max_wait:
        wait = ctx.agents.primary.config.max_wait
        ctx.last_error = f"{ctx.last_error or kind}; the reset is more than max_wait ({wait}) away"
        return False
    ctx.sink.event(
        "waiting",
        agent=soonest.agent,
        until=soonest.resets_at.isoformat(),
        seconds=round(seconds),
        reason=kind,
    )
    ctx.sink.update(waiting_until=soonest.resets_at.isoformat())
    deadline = time.monotonic() + max(0.0, seconds)
    while time.monotonic() < deadline:
        if ctx.signalled:
            raise Stop(ctx.signalled)
        time.sleep(min(WAIT_STEP, max(0.0, deadline - time.monotonic())))
    ctx.sink.update(waiting_until=None)
    index = ctx.agents.index(soonest.agent)
    if index is not None and index != ctx.agents.current:
        switch(ctx, index, "reset")
    return True
