"""The run loop: implement, then review and fix for up to ``loop.max_rounds`` rounds.

Every dispatch runs under a turn budget; when it ends without finishing its work (turn cap,
timeout, a signal to cairn, an agent crash or error) the agent is stopped first, the work tree is
snapshotted, and the change summary, marker and journal say where and why. Up to
``agent.max_continuations`` new dispatches continue from the summary; a completed task is never
dispatched again. Exit codes: 0 done, 1 needs manual review, 3 interrupted (resumable).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Literal

from pydantic import BaseModel

from cairn import summary
from cairn.agents.base import Adapter, Dispatch, DispatchRequest, Result
from cairn.config import Config
from cairn.errors import BadInput, ExitCode
from cairn.git import Repo
from cairn.run import evaluation, prompts, review
from cairn.run.budget import Budget
from cairn.run.events import EventSink
from cairn.run.plan import Plan
from cairn.state import journal, layout, marker, runstate
from cairn.state.lease import Lease
from cairn.state.runstate import RunRef
from cairn.summary import Summary
from cairn.summary.render import status_line
from cairn.terms import ENV_RUN_DIR, ENV_TASK, ENV_TICKET
from cairn.util import clock

Status = Literal["completed", "interrupted", "needs_manual_review"]


class RunOutcome(BaseModel):
    ticket: str
    run: str
    status: Status
    reason: str | None = None
    exit_code: int
    run_dir: str
    summary_path: str | None = None
    snapshot: str | None = None
    dispatches: int = 0
    turns: int = 0
    rounds: int = 0
    elapsed_seconds: float = 0.0
    next_command: str | None = None


@dataclass
class Stats:
    dispatches: int = 0
    turns: int = 0
    rounds: int = 0
    snapshots: list[str] = field(default_factory=list)
    phases: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)


class Stop(Exception):
    """The run stops here, its state saved (a signal, or continuations used up)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Orchestrator:
    def __init__(
        self,
        repo: Repo,
        config: Config,
        ref: RunRef,
        lease: Lease,
        plan: Plan,
        adapter: Adapter,
        sink: EventSink,
        max_turns: int | None = None,
    ) -> None:
        self.repo, self.config, self.ref, self.lease = repo, config, ref, lease
        self.plan, self.adapter, self.sink = plan, adapter, sink
        self.max_turns_override = max_turns
        self.stats = Stats()
        self.session: Dispatch | None = None
        self.signalled: str | None = None
        self.last_snapshot: marker.SnapshotRef | None = None
        self.last_message: str | None = None
        self.grace = config.agent.cutoff_timeout_ms / 1000
        self._done_seen: set[int] = set()
        self.resumed_from: str | None = None
        self.resume_session: str | None = None

    # --- the loop -------------------------------------------------------------------------

    def execute(self, phase: str = "implement", round: int = 1) -> RunOutcome:
        phases = self.config.loop.phases
        try:
            with self._signals():
                if phase == "implement" and "implement" in phases:
                    self._implement()
                if "review" in phases or "evaluate" in phases:
                    status = self._review_loop(round, resume_fix=phase == "fix")
                    if status == "needs_manual_review":
                        return self._end("needs_manual_review", "blocking findings remain")
                return self._end("completed", None)
        except Stop as stop:
            return self._interrupted(stop.reason)
        except Exception as error:
            self._record_failure(error)
            raise

    def _record_failure(self, error: Exception) -> None:
        """Record an unexpected error as the run's ``error`` stop. When even that fails, the
        second failure is shown (a warning, and a note on the error), the lease is released,
        and the caller re-raises the first error."""
        try:
            self._interrupted("error")
        except Exception as second:
            why = f"{type(second).__name__}: {second}"
            error.add_note(f"the stop could not be recorded: {why}")
            self.lease.release()
            self.sink.event(
                "warning",
                message=f"the run failed ({type(error).__name__}: {error}) and the stop "
                f"could not be recorded: {why}",
            )

    def _implement(self) -> None:
        self._phase("implement", None)
        self._done_seen = {t.number for t in self._summary().tasks if t.status == "completed"}
        self._until_resolved(self._coder_prompt, self._task_done, self.resumed_from)

    def _until_resolved(
        self, first_prompt: Callable[[str | None], Any], on_turn: Any, handoff: str | None
    ) -> None:
        """Dispatch the coder until every item of the current summary is resolved.

        Each dispatch that ends short is a cutoff; up to ``max_continuations`` more dispatches
        start from ``first_prompt(reason)``, then the run stops (resumable).
        """
        continuations = 0
        session = self.resume_session if handoff is not None else None
        while True:
            current = self._summary()
            if current.resolved() == current.total():
                runstate.finalise_summary(self.ref)
                return
            result = self._dispatch("coder", first_prompt(handoff), on_turn, session)
            session = result.session_id or session
            current = self._summary()
            if current.resolved() == current.total():
                runstate.finalise_summary(self.ref)
                return
            handoff = self._cutoff_reason(result)
            self._cutoff("coder", handoff)
            if continuations >= self.config.agent.max_continuations:
                raise Stop(handoff)
            continuations += 1

    def _single_turn(self, role: str, prompt: str) -> None:
        """A reviewer or evaluator dispatch: one prompt; anything short of completion stops."""
        result = self._dispatch(role, lambda turn: prompt if turn == 1 else None, None)
        if result.reason != "completed":
            reason = self._cutoff_reason(result)
            self._cutoff(role, reason)
            raise Stop(reason)

    def _review_loop(self, start_round: int, resume_fix: bool) -> Status:
        phases = self.config.loop.phases
        for round_number in range(start_round, self.config.loop.max_rounds + 1):
            self.stats.rounds = round_number
            resuming = resume_fix and round_number == start_round
            if resuming:
                found = self._latest_review()
            else:
                failed = self._evaluate(round_number) if "evaluate" in phases else []
                found = self._review(round_number, failed, dispatch="review" in phases)
            if not found.blocking():
                return "completed"
            if round_number == self.config.loop.max_rounds or "fix" not in phases:
                return "needs_manual_review"
            current = self._summary()
            if resuming and current.mode == "review" and current.round == round_number:
                self._phase("fix", round_number)
                self._fix_dispatches(round_number, found)
            else:
                self._fix(round_number, found)
        return "completed"

    def _evaluate(self, round_number: int) -> list[review.ReviewFinding]:
        """Acceptance criteria the evaluator did not pass, as blocking findings (AC1, AC2…)."""
        checked = evaluation.scaffold(self.plan, self.ref.ticket, round_number)
        if not checked.criteria:
            return []
        self._phase("evaluate", round_number)
        path = runstate.write_artifact(
            self.ref, "evaluator", f"eval-round-{round_number}", evaluation.render(checked)
        )
        prompt = prompts.render(
            "evaluate",
            self.repo.toplevel,
            ticket=self.ref.ticket,
            run=self.ref.run_id,
            round=round_number,
            workspace=self.repo.toplevel,
            criteria="\n".join(f"- {c.id}: {c.text} (task {c.task})" for c in checked.criteria),
            max_turns=self._max_turns("evaluator"),
        )
        self._single_turn("evaluator", prompt)
        concluded = evaluation.conclude(evaluation.load(path))
        evaluation.save(path, concluded)
        journal.record(
            self.ref.run_dir,
            "phase",
            phase="evaluate",
            round=round_number,
            status=concluded.status,
            failed=[c.id for c in concluded.failed()],
        )
        self.sink.event(
            "evaluation",
            round=round_number,
            status=concluded.status,
            failed=len(concluded.failed()),
        )
        return [
            review.ReviewFinding(
                id=c.id.replace("-", ""),
                title=f"acceptance criterion not met: {c.text}",
                details=c.reason,
            )
            for c in concluded.failed()
        ]

    def _review(
        self, round_number: int, seeded: list[review.ReviewFinding], dispatch: bool
    ) -> review.Review:
        path = runstate.write_artifact(
            self.ref,
            "reviewer",
            "review",
            review.render(
                review.Review(ticket=self.ref.ticket, round=round_number, findings=seeded)
            ),
        )
        if not dispatch:
            return review.load(path)
        self._phase("review", round_number)
        prompt = prompts.render(
            "review",
            self.repo.toplevel,
            ticket=self.ref.ticket,
            run=self.ref.run_id,
            round=round_number,
            workspace=self.repo.toplevel,
            tasks=self._task_list(),
            summary_path=self.ref.summary_path(),
            max_turns=self._max_turns("reviewer"),
        )
        self._single_turn("reviewer", prompt)
        found = review.load(path)
        self.sink.event(
            "review",
            round=round_number,
            findings=len(found.findings),
            blocking=len(found.blocking()),
        )
        return found

    def _fix(self, round_number: int, found: review.Review) -> None:
        self._phase("fix", round_number)
        scaffold = summary.scaffold_findings(
            self.ref.ticket,
            self.ref.run_id,
            round_number,
            [(f.id, f.title) for f in found.findings if f.to_fix],
            clock.now(),
        )
        runstate.new_summary(self.ref, scaffold)
        self._fix_dispatches(round_number, found)

    def _fix_dispatches(self, round_number: int, found: review.Review) -> None:
        findings = "\n".join(
            f"- {f.id}: {f.title}" + (f" ({f.location})" if f.location else "")
            for f in found.findings
            if f.to_fix
        )

        def first_prompt(handoff: str | None) -> Any:
            text = prompts.render(
                "fix",
                self.repo.toplevel,
                ticket=self.ref.ticket,
                run=self.ref.run_id,
                round=round_number,
                workspace=self.repo.toplevel,
                review_path=self._latest_review_path(),
                findings=findings,
                summary_path=self.ref.summary_path(),
                max_turns=self._max_turns("coder"),
            )
            return self._turn_prompts(text)

        self._until_resolved(first_prompt, None, None)

    # --- dispatching ----------------------------------------------------------------------

    def _max_turns(self, role: str) -> int:
        if self.max_turns_override is not None:
            return self.max_turns_override
        configured = self.config.roles.get(role)
        if configured is not None and configured.max_turns is not None:
            return configured.max_turns
        return self.config.agent.max_turns

    def _dispatch(
        self, role: str, prompt_for: Any, on_turn: Any, session_id: str | None = None
    ) -> Result:
        if self.signalled:
            raise Stop(self.signalled)
        max_turns = self._max_turns(role)
        pressure = min(self.config.agent.budget_pressure_turns, max_turns - 1)
        budget = Budget(max_turns, pressure, self.config.agent.max_seconds)
        self.stats.dispatches += 1
        number = self.stats.dispatches
        current = self._summary()
        task = current.status.item if isinstance(current.status.item, int) else None
        env = {
            ENV_RUN_DIR: str(self.ref.run_dir),
            ENV_TICKET: self.ref.ticket,
            ENV_TASK: "" if task is None else str(task),
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
        }
        sent: dict[int, bool] = {}

        def next_prompt(turn: int) -> str | None:
            text = prompt_for(turn)
            if text is None:
                return None
            under = budget.under_pressure(turn)
            sent[turn] = under
            if under:
                left = budget.seconds_left()
                text += "\n" + prompts.render(
                    "pressure",
                    self.repo.toplevel,
                    remaining_turns=budget.turns_left(turn),
                    time_note="" if left is None else f" and about {max(0, int(left))}s",
                )
            return text

        request = DispatchRequest(
            role=role,
            workspace=self.repo.toplevel,
            run_dir=self.ref.run_dir,
            max_turns=max_turns,
            next_prompt=next_prompt,
            env=env,
            command=self.config.agent.command,
            script=self._script(),
            pressure_turns=pressure,
            session_id=session_id,
            writable=sorted({self.repo.common_dir, self.ref.layout.root}),
        )
        marker_dispatch = marker.DispatchRecord(role=role, turn=0, max_turns=max_turns)
        runstate.update_marker(self.ref, "dispatch_started", dispatch=marker_dispatch)
        self.sink.event("dispatch_started", dispatch=number, role=role, max_turns=max_turns)
        self.sink.update(turn=0, max_turns=max_turns)
        session = self.adapter.start(request)
        self.session = session
        if self.signalled:
            session.interrupt("interrupted", self.grace)
        marker_dispatch = self._agent_pid(session, marker_dispatch)
        timer = None
        if self.config.agent.max_seconds is not None:
            timer = threading.Timer(
                self.config.agent.max_seconds, session.interrupt, ("timeout", self.grace)
            )
            timer.daemon = True
            timer.start()
        try:
            for event in session.events():
                if event.kind == "turn_started" and session.pid != marker_dispatch.pid:
                    marker_dispatch = self._agent_pid(session, marker_dispatch)
                if event.kind == "turn_completed":
                    self.stats.turns += 1
                    runstate.update_marker(
                        self.ref,
                        dispatch=marker_dispatch.model_copy(update={"turn": event.turn}),
                    )
                    journal.record(
                        self.ref.run_dir,
                        "turn",
                        role=role,
                        turn=event.turn,
                        pressure=sent.get(event.turn, False),
                    )
                    self.sink.event(
                        "turn",
                        turn=event.turn,
                        max_turns=max_turns,
                        pressure=sent.get(event.turn, False),
                    )
                    self.sink.update(turn=event.turn)
                    if on_turn is not None:
                        on_turn()
                elif event.kind == "message":
                    self.last_message = str(event.data.get("text", ""))[:2000] or self.last_message
                elif event.kind == "plan_updated":
                    self._plan_updated(event.data.get("items") or [])
        finally:
            if timer is not None:
                timer.cancel()
            self.session = None
        result = session.result or Result(reason="error", num_turns=0, detail="no result")
        if result.final_message:
            self.last_message = result.final_message
        runstate.update_marker(self.ref, dispatch=None)
        journal.record(
            self.ref.run_dir,
            "dispatch_finished",
            role=role,
            reason=result.reason,
            turns=result.num_turns,
            exit_code=result.exit_code,
            detail=result.detail,
            session_id=result.session_id,
        )
        self.sink.event(
            "dispatch_finished", dispatch=number, reason=result.reason, turns=result.num_turns
        )
        if on_turn is not None:
            on_turn()
        return result

    def _plan_updated(self, items: list[dict[str, Any]]) -> None:
        """An agent's own to-do list (Codex todo_list): a checked item that names a plan task
        completes that task, when the task is still open in the summary."""
        current = self._summary()
        if current.mode != "implementation":
            return
        for item in items:
            if not item.get("completed"):
                continue
            task = match_task(str(item.get("text", "")), current.tasks)
            if task is None or task.resolved:
                continue
            runstate.change_summary(
                self.ref,
                lambda s, n=task.number: summary.complete_task(
                    s, n, clock.now(), notes="checked off in the agent's own to-do list"
                ),
                "task",
                task=task.number,
                status="completed",
                source="todo_list",
            )

    def _agent_pid(
        self, session: Dispatch, current: marker.DispatchRecord
    ) -> marker.DispatchRecord:
        """Record the agent's pid in the marker, so a resume after cairn was killed can stop
        an agent left running."""
        pid = session.pid
        if pid is None or pid == current.pid:
            return current
        from cairn.util.procs import process_start_time

        updated = current.model_copy(update={"pid": pid, "pid_started_at": process_start_time(pid)})
        runstate.update_marker(self.ref, dispatch=updated)
        return updated

    def _script(self) -> Path | None:
        script = self.config.agent.script
        if script is None:
            return None
        path = Path(script).expanduser()
        return path if path.is_absolute() else self.repo.toplevel / path

    def _turn_prompts(self, first: str) -> Any:
        def prompt_for(turn: int) -> str | None:
            current = self._summary()
            if turn == 1:
                return first
            if current.resolved() == current.total():
                return None
            remaining = "\n".join(
                f"- Task {t.number}: {t.title}" for t in current.tasks if not t.resolved
            ) or "\n".join(f"- {f.id}: {f.title}" for f in current.findings if not f.resolved)
            return prompts.render(
                "continuation",
                self.repo.toplevel,
                ticket=self.ref.ticket,
                turn=turn,
                max_turns=self._max_turns("coder"),
                status_line=status_line(current),
                remaining=remaining,
            )

        return prompt_for

    def _coder_prompt(self, handoff_reason: str | None) -> Any:
        current = self._summary()
        values: dict[str, Any] = {
            "ticket": self.ref.ticket,
            "run": self.ref.run_id,
            "workspace": self.repo.toplevel,
            "summary_path": self.ref.summary_path(),
            "max_turns": self._max_turns("coder"),
        }
        if handoff_reason is None:
            text = prompts.render(
                "dispatch",
                self.repo.toplevel,
                plan_title=self.plan.title or "",
                tasks=self._task_list(),
                **values,
            )
        else:
            in_progress = [t for t in current.tasks if t.status == "in progress"]
            snap = self.last_snapshot
            text = prompts.render(
                "handoff",
                self.repo.toplevel,
                reason=handoff_reason,
                completed=_bullets(
                    f"Task {t.number}: {t.title} ({t.status})" for t in current.tasks if t.resolved
                ),
                in_progress=_bullets(f"Task {t.number}: {t.title}" for t in in_progress),
                remaining=_bullets(
                    f"Task {t.number}: {t.title}" for t in current.tasks if t.status == "pending"
                ),
                files=", ".join(sorted({f for t in current.tasks for f in t.files or []}))
                or "none reported",
                snapshot=f"{snap.ref} ({snap.commit[:12]})" if snap else "no snapshot",
                last_message=self.last_message or "(none)",
                **values,
            )
        return self._turn_prompts(text)

    def _task_list(self) -> str:
        current = self._summary()
        if current.mode != "implementation":
            current = summary.load(self._first_summary_path()) or current
        lines = []
        for task in self.plan.tasks:
            entry = current.task(task.number)
            status = entry.status if entry else "pending"
            lines.append(f"- Task {task.number}: {task.title} [{status}]")
            if task.details:
                lines += [f"    {line}" for line in task.details.splitlines()]
            for criterion in task.acceptance:
                if criterion not in task.details:
                    lines.append(f"    - acceptance: {criterion}")
        return "\n".join(lines)

    def _first_summary_path(self) -> Path:
        found = [
            a.path
            for a in layout.artifacts(self.ref.run_dir)
            if a.role == layout.SUMMARY_ROLE and a.name == layout.SUMMARY_ARTIFACT
        ]
        return found[0]

    # --- state ----------------------------------------------------------------------------

    def _summary(self) -> Summary:
        return self.ref.load_summary()[1]

    def _phase(self, phase: str, round_number: int | None) -> None:
        self.stats.phases.append(phase if round_number is None else f"{phase} {round_number}")
        runstate.update_marker(self.ref, "phase", phase=phase, round=round_number)
        self.sink.event("phase", phase=phase, round=round_number)
        current = self._summary()
        self.sink.update(phase=phase, round=round_number, total=current.total())

    def _task_done(self) -> None:
        """After each turn: snapshot when a task was completed since the last snapshot."""
        current = self._summary()
        done = {t.number for t in current.tasks if t.status == "completed"}
        new, self._done_seen = done - self._done_seen, done
        item = current.status.item
        self.sink.update(task=item if isinstance(item, int) else None, total=current.total())
        for number in sorted(new):
            self._snapshot(f"task {number} done")

    def _snapshot(self, reason: str) -> marker.SnapshotRef | None:
        if not self.config.agent.preserve_uncommitted_work:
            return None
        from cairn import wip

        try:
            saved = wip.save(
                self.repo.toplevel,
                ticket=self.ref.ticket,
                reason=reason,
                timeout=self.grace,
                run_id=self.ref.run_id,
                config=self.config,
            )
        except Exception as exc:  # a failed snapshot must not end the run; say so
            self.sink.event("warning", message=f"snapshot failed: {exc}")
            journal.record(self.ref.run_dir, "snapshot", reason=reason, error=str(exc))
            return None
        if saved.commit is None:
            return self.last_snapshot
        snap = marker.SnapshotRef(ref=saved.ref, commit=saved.commit, at=clock.now())
        if saved.created:
            self.stats.snapshots.append(saved.commit)
            runstate.update_marker(self.ref, "snapshot", snapshot=snap)
            self.sink.event("snapshot", commit=saved.commit, reason=reason)
            self.sink.update(snapshot=saved.commit[:12])
        self.last_snapshot = snap
        return snap

    def _cutoff_reason(self, result: Result) -> str:
        if self.signalled:
            return self.signalled
        return {"completed": "incomplete", "crashed": "crash", "interrupted": "signal"}.get(
            result.reason, result.reason
        )

    def _cutoff(self, role: str, reason: str) -> None:
        snap = self._snapshot(f"cutoff: {reason}")
        runstate.record_cutoff(self.ref, _slug(reason), snap)
        self.sink.event(
            "cutoff", reason=reason, role=role, snapshot=snap.commit[:12] if snap else None
        )

    def _latest_review_path(self) -> Path:
        found = layout.latest_artifact(self.ref.run_dir, "reviewer", "review")
        if found is None:
            raise BadInput(f"run {self.ref.run_id} has no review to fix")
        return found.path

    def _latest_review(self) -> review.Review:
        return review.load(self._latest_review_path())

    def check_tree(self, snapshot: str | None) -> None:
        """Resume never touches the work tree; it says when the tree is not what was saved."""
        before = self.last_snapshot
        snap = self._snapshot("resume")
        if snapshot and snap is not None and snap.commit != snapshot:
            self.sink.event(
                "warning",
                message=(
                    f"the work tree differs from the last snapshot {snapshot[:12]}; it is left "
                    f"as it is (now saved as {snap.commit[:12]}); to bring back the interrupted "
                    f"agent's files: cairn wip restore {snapshot[:12]} --dry-run"
                ),
            )
        self.last_snapshot = snap or before

    # --- ends -----------------------------------------------------------------------------

    def _end(self, status: Status, reason: str | None) -> RunOutcome:
        self._snapshot("run finished")
        code = ExitCode.OK if status == "completed" else ExitCode.FAILURE
        if status == "completed":
            runstate.update_marker(self.ref, "phase", phase="done", round=None)
        self._write_run_summary(status, reason)
        if status == "completed":
            runstate.finish(self.ref, self.lease)
        else:
            journal.record(self.ref.run_dir, "run_finished", status=status)
            with suppress(BadInput):
                marker.remove(self.ref.marker_path)
            self.lease.release()
        return self._outcome(status, reason, code)

    def _interrupted(self, reason: str) -> RunOutcome:
        self._write_run_summary("interrupted", reason)
        runstate.interrupt(self.ref, self.lease, _slug(reason), self.last_snapshot)
        return self._outcome("interrupted", reason, ExitCode.INTERRUPTED)

    def _outcome(self, status: Status, reason: str | None, code: int) -> RunOutcome:
        elapsed = time.monotonic() - self.stats.started
        self.sink.event(
            "run_finished", run=self.ref.run_id, status=status, elapsed=f"{elapsed:.1f}s"
        )
        return RunOutcome(
            ticket=self.ref.ticket,
            run=self.ref.run_id,
            status=status,
            reason=reason,
            exit_code=code,
            run_dir=str(self.ref.run_dir),
            summary_path=str(self.ref.summary_path()),
            snapshot=self.last_snapshot.commit if self.last_snapshot else None,
            dispatches=self.stats.dispatches,
            turns=self.stats.turns,
            rounds=self.stats.rounds,
            elapsed_seconds=round(elapsed, 3),
            next_command=f"cairn resume {self.ref.ticket}" if status == "interrupted" else None,
        )

    def _write_run_summary(self, status: Status, reason: str | None) -> None:
        elapsed = time.monotonic() - self.stats.started
        lines = [
            f"# Run summary — ticket {self.ref.ticket}, run {self.ref.run_id}",
            "",
            f"- **Outcome:** {status}" + (f" ({reason})" if reason else ""),
            f"- **Phases:** {', '.join(self.stats.phases) or '(none)'}",
            f"- **Review rounds:** {self.stats.rounds}",
            f"- **Dispatches:** {self.stats.dispatches}",
            f"- **Turns:** {self.stats.turns}",
            f"- **Duration:** {elapsed:.1f}s",
            f"- **Snapshots:** {', '.join(s[:12] for s in self.stats.snapshots) or '(none)'}",
            f"- **Change summary:** {self.ref.summary_path()}",
            "",
        ]
        runstate.write_artifact(self.ref, "orchestrator", "run-summary", "\n".join(lines))

    # --- signals --------------------------------------------------------------------------

    @contextmanager
    def _signals(self) -> Any:
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum: int, frame: FrameType | None) -> None:
            name = "signal"
            if self.signalled is None:
                self.signalled = name
                if self.session is not None:
                    self.session.interrupt("interrupted", self.grace)
            elif self.session is not None:
                self.session.interrupt("interrupted", 0)

        previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for signum, old in previous.items():
                signal.signal(signum, old)


def _normal(text: str) -> str:
    return " ".join("".join(c.lower() if c.isalnum() else " " for c in text).split())


def match_task(text: str, tasks: list[Any]) -> Any:
    """The plan task a to-do item names: "Task 3…", or the task's exact title; None if unsure."""
    words = _normal(text)
    for task in tasks:
        title = _normal(task.title)
        if words == title or words.startswith(f"task {task.number} "):
            return task
        if words == f"task {task.number}" or (title and words.endswith(f" {title}")):
            return task
    return None


def _bullets(items: Any) -> str:
    lines = [f"- {item}" for item in items]
    return "\n".join(lines) or "- (none)"


def _slug(reason: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in reason.lower()) or "error"
