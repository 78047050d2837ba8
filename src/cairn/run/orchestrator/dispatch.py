"""One dispatch (one agent invocation for a role, possibly several turns), from start to
result: its budget and prompts, the agent's environment, the max_seconds timer, and the event
pump that records what the agent does into the marker, the journal and the event sink."""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec

from cairn.agents import transcript
from cairn.agents.base import Dispatch, DispatchRequest, Event, Result
from cairn.run.budget import Budget
from cairn.run.orchestrator import activity, checkpoints
from cairn.run.orchestrator.context import RunContext, Stop, agent_script
from cairn.run.orchestrator.idle import IdleGuard
from cairn.run.orchestrator.prompting import PressuredPrompts, PromptFor
from cairn.run.orchestrator.todo_list import complete_checked_tasks
from cairn.state import accounting, runstate
from cairn.state.marker import DispatchRecord
from cairn.terms import ENV_AGENT, ENV_RUN_DIR, ENV_TASK, ENV_TICKET
from cairn.util.procs import process_start

LAST_MESSAGE_LIMIT = 2000  # characters of the agent's last message kept for the next handoff

AfterTurn = Callable[[], None]
# An agent's error text that says the model's API failed for a while, not for good: a 5xx, an
# overload, a dropped or refused connection (Claude's "API Error: 500 …", Codex's "We're
# currently experiencing high demand…").
TRANSIENT = re.compile(
    r"API Error: (5\d\d|Connection|Request timed out)|\b(500|502|503|504|529)\b"
    r"|overloaded|high demand|Internal Server Error|Service Unavailable|Bad Gateway"
    r"|connection (reset|refused|error)|ECONNRESET|ECONNREFUSED|stream disconnected",
    re.IGNORECASE,
)


def dispatch(
    ctx: RunContext,
    role: str,
    prompt_for: PromptFor,
    after_turn: AfterTurn | None = None,
    session_id: str | None = None,
) -> Result:
    """Run one dispatch of ``role`` to its end and record it; ``after_turn`` runs after every
    turn and once more at the end. Raises Stop when cairn was signalled before it starts, and
    after a ``budget`` cutoff when the run's cost passed ``agent.max_cost_usd``."""
    if ctx.signalled:
        raise Stop(ctx.signalled)
    if ctx.over_budget:
        checkpoints.cutoff(ctx, role, "budget")
        raise Stop("budget")
    return RecordedDispatch(ctx, role, after_turn).run(prompt_for, session_id)


def transient(result: Result) -> bool:
    """Whether ``result`` is an API error the agent hit before its first turn, worth a retry
    (a usage limit never is: it lasts until its reset)."""
    if result.failure is not None and result.failure.kind == "usage_limit":
        return False
    return (
        result.reason == "error"
        and result.num_turns == 0
        and bool(result.detail and TRANSIENT.search(result.detail))
    )


class RecordedDispatch:
    """One dispatch (one agent invocation for a role, possibly several turns) as the loop runs
    it: the adapter's running ``Dispatch``, and the record of it in ``DispatchRecord`` (the
    marker), the journal and the sink."""

    def __init__(self, ctx: RunContext, role: str, after_turn: AfterTurn | None) -> None:
        self.ctx, self.role, self.after_turn = ctx, role, after_turn
        self.max_turns = ctx.max_turns(role)
        self.record = DispatchRecord(role=role, turn=0, max_turns=self.max_turns)
        self.number = 0
        self.spent = accounting.usage()  # what the turns reported so far (mid-dispatch)
        self.stopped = False  # this dispatch was stopped for the budget
        self.guard: IdleGuard | None = None  # a coder's: ends it when its stops change nothing

    def run(self, prompt_for: PromptFor, session_id: str | None) -> Result:
        ctx = self.ctx
        pressure = min(ctx.agent.budget_pressure_turns, self.max_turns - 1)
        if self.role == "coder":  # reviewer and evaluator dispatches are single turns
            prompt_for = self.guard = IdleGuard(ctx, prompt_for)
        prompts = PressuredPrompts(
            ctx, Budget(self.max_turns, pressure, ctx.agent.max_seconds), prompt_for
        )
        ctx.stats.dispatches += 1
        self.number = ctx.stats.dispatches
        request = self._request(prompts, pressure, session_id)
        runstate.update_marker(ctx.ref, "dispatch_started", dispatch=self.record)
        ctx.sink.event(
            "dispatch_started",
            dispatch=self.number,
            role=self.role,
            max_turns=self.max_turns,
            agent=ctx.agents.now.name,
        )
        ctx.sink.update(turn=0, max_turns=self.max_turns)
        attempt = 0
        while True:
            result = self._attempt(request, prompts)
            if not self._retry(result, attempt):
                break
            attempt += 1
        self._finished(result)
        return result

    def _attempt(self, request: DispatchRequest, prompts: PressuredPrompts) -> Result:
        """Start the agent and pump its events to the end."""
        ctx = self.ctx
        running = ctx.adapter.start(request)
        ctx.running = running
        if ctx.signalled:
            running.interrupt("interrupted", ctx.grace)
        self._note_pid(running)
        timer = self._timer(running)
        try:
            for event in running.events():
                self._record(running, event, prompts.pressured)
        finally:
            if timer is not None:
                timer.cancel()
            ctx.running = None
        return running.result or Result(reason="error", num_turns=0, detail="no result")

    def _retry(self, result: Result, attempt: int) -> bool:
        """After a transient API error before any turn, journal a retry and wait out its
        backoff (``agent.api_retries``, ``agent.api_retry_backoff_seconds`` doubling); False
        when the result stands."""
        ctx, agent = self.ctx, self.ctx.agent
        if attempt >= agent.api_retries or ctx.signalled or not transient(result):
            return False
        delay = agent.api_retry_backoff_seconds * 2**attempt
        error = result.detail or ""
        runstate.record(
            ctx.ref,
            "dispatch_retried",
            role=self.role,
            attempt=attempt + 1,
            of=agent.api_retries,
            delay=delay,
            error=error,
        )
        ctx.sink.event(
            "warning",
            message=f"dispatch {self.number}: {error} — retrying in {delay:g} s "
            f"({attempt + 1} of {agent.api_retries})",
        )
        deadline = time.monotonic() + delay
        while not ctx.signalled and time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        return not ctx.signalled

    def _request(
        self, prompts: PressuredPrompts, pressure: int, session_id: str | None
    ) -> DispatchRequest:
        ctx = self.ctx
        item = ctx.summary().status.item
        env = {
            ENV_RUN_DIR: str(ctx.ref.run_dir),
            ENV_TICKET: ctx.ref.ticket,
            ENV_TASK: str(item) if isinstance(item, int) else "",
            ENV_AGENT: ctx.agents.now.name,
            # the agent's `cairn task …` must reach this cairn, whatever else is on PATH
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
            **ctx.agent_env,
        }
        return DispatchRequest(
            role=self.role,
            workspace=ctx.repo.toplevel,
            run_dir=ctx.ref.run_dir,
            max_turns=self.max_turns,
            next_prompt=prompts,
            env=env,
            command=ctx.agent.command,
            script=agent_script(ctx.repo.toplevel, ctx.agent),
            pressure_turns=pressure,
            session_id=session_id,
            session_cost_usd=ctx.session_costs.get(session_id or ""),
            writable=sorted({ctx.repo.common_dir, ctx.ref.layout.root}),
            permissions=ctx.agent.permissions,
            allow=list(ctx.agent.allow),
            transcript=transcript.claim(ctx.ref.run_dir, self.role),
            agent=ctx.agents.now.name,
        )

    def _timer(self, running: Dispatch) -> threading.Timer | None:
        """The ``agent.max_seconds`` cap: interrupt the dispatch as a ``timeout``."""
        max_seconds = self.ctx.agent.max_seconds
        if max_seconds is None:
            return None
        timer = threading.Timer(max_seconds, running.interrupt, ("timeout", self.ctx.grace))
        timer.daemon = True
        timer.start()
        return timer

    def _record(self, running: Dispatch, event: Event, pressured: dict[int, bool]) -> None:
        ctx = self.ctx
        activity.show(ctx, self.number, self.role, event)
        if event.kind == "turn_started" and running.pid != self.record.pid:
            self._note_pid(running)
        if event.kind == "turn_completed":
            pressure = pressured.get(event.turn, False)
            ctx.stats.turns += 1
            turn = msgspec.structs.replace(self.record, turn=event.turn)
            said = {"role": self.role, "turn": event.turn, "pressure": pressure}
            runstate.update_marker(ctx.ref, "turn", said, dispatch=turn)
            ctx.sink.event("turn", turn=event.turn, max_turns=self.max_turns, pressure=pressure)
            ctx.sink.update(turn=event.turn)
            if isinstance(event.data.get("usage"), dict):
                self.spent = accounting.add(self.spent, event.data["usage"])
            self._check_budget(running)
            if self.after_turn is not None:
                self.after_turn()
        elif event.kind == "message":
            text = str(event.data.get("text", ""))[:LAST_MESSAGE_LIMIT]
            ctx.last_message = text or ctx.last_message
            if self.guard is not None and text:
                self.guard.said = text
        elif event.kind == "plan_updated":
            complete_checked_tasks(ctx, event.data.get("items") or [])

    def _note_pid(self, running: Dispatch) -> None:
        """Record the agent's pid in the marker, so a resume after cairn was killed can stop
        an agent left running."""
        pid = running.pid
        if pid is None or pid == self.record.pid:
            return
        start = process_start(pid)
        self.record = msgspec.structs.replace(
            self.record,
            pid=pid,
            pid_started_at=start.at if start else None,
            pid_started_since_boot=start.since_boot if start else None,
        )
        runstate.update_marker(self.ctx.ref, dispatch=self.record)

    def _check_budget(self, running: Dispatch | None) -> None:
        """Past ``agent.max_cost_usd`` (this session's cost, with what the dispatch in flight
        reported so far), or told that the fleet's spend reached ``fleet.max_cost_usd``
        (SIGUSR2, at a turn's end): stop the dispatch; the run is cut off as ``budget``."""
        ctx = self.ctx
        cap = ctx.config.agent.max_cost_usd
        if cap and not ctx.over_budget:
            spent = accounting.add(ctx.usage, self.spent)["cost_usd"]
            if spent is not None and spent > cap:
                ctx.over_budget = True
                ctx.last_error = f"cost ${spent:.2f}, over agent.max_cost_usd ${cap:.2f}"
                ctx.sink.event("warning", message=f"the run has {ctx.last_error}")
        if ctx.over_budget and running is not None and not self.stopped:
            self.stopped = True  # once: a second interrupt would not wait for the grace
            running.interrupt("interrupted", ctx.grace)

    def _finished(self, result: Result) -> None:
        ctx = self.ctx
        if result.final_message:
            ctx.last_message = result.final_message
        usage = result.usage.as_dict() if result.usage is not None else None  # None: unknown
        denials = [{"tool": d.tool, "target": d.target} for d in result.denials]
        if result.session_id and result.session_cost_usd is not None:
            ctx.session_costs[result.session_id] = result.session_cost_usd
        error = accounting.error_text(result.detail) if result.reason != "completed" else None
        said = {
            "role": self.role,
            "agent": ctx.agents.now.name,
            "reason": result.reason,
            "turns": result.num_turns,
            "exit_code": result.exit_code,
            "detail": result.detail,
            "session_id": result.session_id,
            "session_cost_usd": result.session_cost_usd,
            "denials": denials,
            "usage": usage,
            "error": result.detail,
            "transcript": result.transcript,
        }
        if result.failure is not None and result.reason != "completed":
            said["failure"] = result.failure.kind
        if self.guard is not None:  # a coder's: did it change anything?
            progressed = self.guard.progressed()
            said["progress"] = progressed
            ctx.idle.after(progressed, result, denials)
        runstate.update_marker(ctx.ref, "dispatch_finished", said, dispatch=None)
        ctx.usage = accounting.add(ctx.usage, usage or {})
        ctx.unknown_usage += usage is None
        ctx.denials += denials
        if not ctx.over_budget and ctx.signalled != "fenced":  # else the budget's, the fence's
            ctx.last_error = error
        self.spent = accounting.usage()
        shown: dict[str, Any] = {"usage": usage, "denials": denials, "error": error}
        ctx.sink.event(
            "dispatch_finished",
            dispatch=self.number,
            reason=result.reason,
            turns=result.num_turns,
            **shown,
        )
        hint = accounting.denial_hint(ctx.adapter.kind)
        if denials:
            ctx.sink.event(
                "denials",
                dispatch=self.number,
                count=len(denials),
                denials=denials,
                message=f"{accounting.denials_text(denials)} — {hint}",
            )
        denied = accounting.denials_text(ctx.denials)
        blocked = f"{denied} — {hint}" if denied else None
        run_usage = ctx.run_usage()
        runstate.account(ctx.ref, _usage_note(run_usage), blocked)
        self._check_budget(None)
        if self.after_turn is not None:
            self.after_turn()


def _usage_note(usage: dict[str, Any]) -> dict[str, Any] | None:
    """The run's usage as the change summary's front matter keeps it; None when nothing was
    counted."""
    if not usage["total_tokens"] and usage["cost_usd"] is None:
        return None
    return {k: v for k, v in usage.items() if k != "total_tokens"}
