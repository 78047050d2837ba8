"""The phases of a run: implement, then evaluate, review and fix for up to ``loop.max_rounds``
rounds, and how a run that is cut off stops."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from cairn import summary
from cairn.agents.base import Result
from cairn.config.records import Config
from cairn.git import Repo
from cairn.run import evaluation, progress, review
from cairn.run.chain import Agents
from cairn.run.events import EventSink
from cairn.run.orchestrator import checkpoints, failover, prompting
from cairn.run.orchestrator.context import RunContext, Stop
from cairn.run.orchestrator.dispatch import AfterTurn, dispatch
from cairn.run.orchestrator.outcome import (
    RunOutcome,
    disk_full,
    failed,
    finished,
    interrupted,
    needs_input,
)
from cairn.run.orchestrator.signals import handling_signals
from cairn.run.plan import Plan
from cairn.state import accounting, journal, layout, runstate
from cairn.state.lease import Lease
from cairn.state.runstate import RunRef
from cairn.terms import RunStatus
from cairn.util import clock, durable

# The first prompts of a coder dispatch, given why the one before was cut off (None: first).
FirstPrompts = Callable[[str | None], prompting.PromptFor]


class Orchestrator:
    """One run of a plan, from a phase and round (a new run: implement, round 1) to its end.

    ``resumed_from`` (why the run was interrupted, for the first handoff prompt) and
    ``resume_session_id`` (the coder's agent conversation to continue) are set by resume.
    """

    def __init__(
        self,
        repo: Repo,
        config: Config,
        ref: RunRef,
        lease: Lease,
        plan: Plan,
        agents: Agents,
        sink: EventSink,
        max_turns: int | None = None,
    ) -> None:
        self.ctx = RunContext(repo, config, ref, lease, plan, agents, sink, max_turns)
        self._earlier_sessions()
        self.resumed_from: str | None = None
        self.resume_session_id: str | None = None

    def execute(self, phase: str = "implement", round: int = 1) -> RunOutcome:
        """Run from ``phase`` in ``round`` to the end; exit code 0 done, 1 needs review,
        3 interrupted. An unexpected error is recorded as an ``error`` stop and raised again."""
        phases = self.ctx.config.loop.phases
        try:
            with handling_signals(self.ctx):
                asked = self._persons_review(phase)
                if asked is not None:
                    return self._persons_round(round, asked)
                if phase == "implement" and "implement" in phases:
                    self._implement()
                if "review" in phases or "evaluate" in phases:
                    status = self._review_loop(round, resume_fix=phase == "fix")
                    if status == "needs_review":
                        return finished(self.ctx, status, "blocking findings remain")
                return finished(self.ctx, "completed", None)
        except Stop as stop:
            if stop.reason == "no_progress":
                return needs_input(self.ctx)
            return interrupted(self.ctx, stop.reason)
        except OSError as error:
            if error.errno not in durable.DISK_FULL:
                failed(self.ctx, error)
                raise
            return disk_full(self.ctx, error)
        except Exception as error:
            failed(self.ctx, error)
            raise

    def _earlier_sessions(self) -> None:
        """What the run used and was denied before this session (a resumed run's journal)."""
        events, _ = journal.read(self.ctx.ref.run_dir)
        started = [e for e in events if e.get("event") == "run_started"]
        head = started[0].get("head") if started else None
        self.ctx.base = head if isinstance(head, str) else None
        done = accounting.dispatches(events)
        self.ctx.usage_before = accounting.total(d["usage"] for d in done)
        self.ctx.unknown_usage = sum(d["usage"] is None for d in done)
        self.ctx.denials = [denial for d in done for denial in d["denials"]]
        for event in events:
            cost, session = event.get("session_cost_usd"), event.get("session_id")
            if event.get("event") == "dispatch_finished" and isinstance(cost, float | int):
                self.ctx.session_costs[str(session)] = float(cost)

    def check_tree(self, snapshot: str | None) -> None:
        """Before a resumed run: snapshot the tree and say if it is not ``snapshot``."""
        checkpoints.check_tree(self.ctx, snapshot)

    # --- implement and fix: the coder until the summary is resolved ---------------------------

    def _implement(self) -> None:
        checkpoints.enter_phase(self.ctx, "implement", None)
        watch = checkpoints.TaskSnapshots(self.ctx)
        coder_prompts = partial(prompting.coder_prompts, self.ctx)
        self._until_resolved(coder_prompts, watch.after_turn, self.resumed_from)

    def _until_resolved(
        self, first_prompts: FirstPrompts, after_turn: AfterTurn | None, handoff: str | None
    ) -> None:
        """Dispatch the coder until every item of the current summary is resolved.

        Each dispatch that ends short is a cutoff; up to ``max_continuations`` more dispatches
        start from ``first_prompts(reason)``, then the run stops (resumable). After
        ``max_idle_dispatches`` dispatches in a row that changed nothing it stops as
        ``no_progress`` (the run needs input). A usage or rate limit is not a continuation:
        the next dispatch goes to another agent, or after a wait (``failover``).
        """
        continuations = 0
        session_id = self.resume_session_id if handoff is not None else None
        while not self._resolved():
            if failover.choose(self.ctx):
                session_id = None  # another agent: cairn's handoff, not its session
            asked = session_id
            result = dispatch(self.ctx, "coder", first_prompts(handoff), after_turn, session_id)
            session_id = result.session_id or session_id
            if self._resolved():
                return
            if asked is not None and self._session_lost(asked, result):
                session_id = None  # once: the next dispatch asks for no session
                continue
            if self._limited(result, "coder"):
                handoff, session_id = self.ctx.last_error, None
                continue
            reason = checkpoints.cutoff_reason(self.ctx, result)
            if self._stuck(reason):
                reason = "no_progress"
                self.ctx.last_error = self.ctx.idle.error()
            checkpoints.cutoff(self.ctx, "coder", reason)
            if (
                reason in ("budget", "no_progress")
                or continuations >= self.ctx.config.agent.max_continuations
            ):
                raise Stop(reason)
            continuations += 1
            handoff = reason

    def _session_lost(self, asked: str, result: Result) -> bool:
        """Whether the agent could not continue session ``asked`` at all (it failed before its
        first turn: e.g. a session kept in another machine's ``~/.claude`` or
        ``$CODEX_HOME``): then a new session starts from cairn's handoff, said in a warning,
        and no continuation is spent."""
        limit = result.failure is not None and result.failure.limit
        if result.num_turns or result.reason not in ("error", "crashed") or limit:
            return False
        if self.ctx.signalled or self.ctx.over_budget:
            return False
        why = accounting.error_text(result.detail) or result.reason
        self.ctx.sink.event(
            "warning",
            message=f"the agent could not continue its session {asked} ({why}); a new session "
            "starts from cairn's handoff",
        )
        return True

    def _limited(self, result: Result, role: str) -> bool:
        """When ``result`` is a usage or rate limit: the dispatch is cut off with it, the limit
        recorded, and the run moves to another agent or waits for the reset (True), or stops
        (Stop), as ``agent.on_limit`` says."""
        limit = failover.limit_of(self.ctx, result.failure)
        if limit is None:
            return False
        self.ctx.last_error = failover.line(self.ctx, limit)
        failover.note(self.ctx, limit)
        checkpoints.cutoff(self.ctx, role, failover.kind_of(limit))
        failover.after_limit(self.ctx, limit)
        return True

    def _stuck(self, reason: str) -> bool:
        """Whether the coder's idle dispatches in a row reached ``agent.max_idle_dispatches``
        (a signal to cairn or the budget wins over it)."""
        limit = self.ctx.config.agent.max_idle_dispatches
        return reason in ("incomplete", "max_turns") and 0 < limit <= self.ctx.idle.count

    def _resolved(self) -> bool:
        """Every item of the current summary is resolved; then the summary says Completed."""
        current = self.ctx.summary()
        if current.resolved() != current.total():
            return False
        runstate.finalise_summary(self.ctx.ref)
        return True

    def _fix(self, round_number: int, found: review.Review) -> None:
        checkpoints.enter_phase(self.ctx, "fix", round_number)
        scaffold = summary.scaffold_findings(
            self.ctx.ref.ticket,
            self.ctx.ref.run_id,
            round_number,
            [(f.id, f.title) for f in found.to_fix()],
            clock.now(),
        )
        runstate.new_summary(self.ctx.ref, scaffold)
        self._fix_dispatches(round_number, found)

    def _fix_dispatches(self, round_number: int, found: review.Review) -> None:
        self._until_resolved(
            lambda _: prompting.fix_prompts(self.ctx, round_number, found), None, None
        )

    # --- a person's fix round: their review comments, answered one by one ----------------------

    def _persons_review(self, phase: str) -> review.Review | None:
        """The person's review a resumed run in its ``fix`` phase answers (a fix round asked by
        ``cairn.fleet.fixround``), or None: the run goes on as configured."""
        if phase != "fix":
            return None
        found = layout.latest_artifact(self.ctx.ref.run_dir, "reviewer", "review")
        if found is None:
            return None
        asked = progress.catch_up_review(self.ctx.ref, found.path)
        return asked if asked.by is not None else None

    def _persons_round(self, round_number: int, asked: review.Review) -> RunOutcome:
        """Fix every finding of a person's review, whatever ``loop.phases`` and
        ``loop.max_rounds`` say (they bound the agents' own rounds), then end: ``completed`` when
        each was answered FIXED or ALREADY_RESOLVED, ``needs_review`` when one was NOT_FIXED or
        left unanswered (it waits for the person again)."""
        self.ctx.stats.rounds = round_number
        current = self.ctx.summary()
        if current.mode == "review" and current.round == round_number:  # resumed mid-round
            checkpoints.enter_phase(self.ctx, "fix", round_number)
            self._fix_dispatches(round_number, asked)
        else:
            self._fix(round_number, asked)
        answers = self.ctx.summary()
        said = []
        for status, words in (("NOT_FIXED", "not fixed"), ("pending", "not answered")):
            ids = [f.id for f in answers.findings if f.status == status]
            said += [f"{words}: {', '.join(ids)}"] if ids else []
        if said:  # a finding left unanswered is not done either: the person is told which
            return finished(self.ctx, "needs_review", "; ".join(said))
        return finished(self.ctx, "completed", None)

    # --- evaluate and review: one turn of one agent -------------------------------------------

    def _review_loop(self, start_round: int, resume_fix: bool) -> RunStatus:
        phases = self.ctx.config.loop.phases
        max_rounds = self.ctx.config.loop.max_rounds
        for round_number in range(start_round, max_rounds + 1):
            self.ctx.stats.rounds = round_number
            resuming = resume_fix and round_number == start_round
            if resuming:
                found = progress.catch_up_review(
                    self.ctx.ref, prompting.latest_review_path(self.ctx)
                )
            else:
                failed = self._evaluate(round_number) if "evaluate" in phases else []
                found = self._review(round_number, failed, dispatch_reviewer="review" in phases)
            if not found.blocking():
                return "completed"
            if round_number == max_rounds or "fix" not in phases:
                return "needs_review"
            current = self.ctx.summary()
            if resuming and current.mode == "review" and current.round == round_number:
                checkpoints.enter_phase(self.ctx, "fix", round_number)
                self._fix_dispatches(round_number, found)
            else:
                self._fix(round_number, found)
        return "completed"

    def _single_turn(self, role: str, prompt: str) -> None:
        """A reviewer or evaluator dispatch: one prompt; anything short of completion stops
        (a limit: the same prompt to the next agent, or after the wait)."""
        while True:
            failover.choose(self.ctx)
            result = dispatch(self.ctx, role, lambda turn: prompt if turn == 1 else None)
            if result.reason == "completed" or not self._limited(result, role):
                break
        if result.reason != "completed":
            reason = checkpoints.cutoff_reason(self.ctx, result)
            checkpoints.cutoff(self.ctx, role, reason)
            raise Stop(reason)

    def _evaluate(self, round_number: int) -> list[review.ReviewFinding]:
        """Acceptance criteria the evaluator did not pass, as blocking findings (AC1, AC2…)."""
        ctx = self.ctx
        checked = evaluation.scaffold(ctx.plan, ctx.ref.ticket, round_number)
        if not checked.criteria:
            return []
        checkpoints.enter_phase(ctx, "evaluate", round_number)
        path = runstate.write_artifact(
            ctx.ref, "evaluator", f"eval-round-{round_number}", evaluation.render(checked)
        )
        self._single_turn("evaluator", prompting.evaluate_prompt(ctx, round_number, checked))
        concluded = evaluation.conclude(progress.catch_up_evaluation(ctx.ref, path))
        evaluation.save(path, concluded)
        failed = concluded.failed()
        runstate.record(
            ctx.ref,
            "phase",
            phase="evaluate",
            round=round_number,
            status=concluded.status,
            failed=[c.id for c in failed],
        )
        ctx.sink.event(
            "evaluation", round=round_number, status=concluded.status, failed=len(failed)
        )
        return [
            review.ReviewFinding(
                id=c.id.replace("-", ""),
                title=f"acceptance criterion not met: {c.text}",
                details=c.reason,
            )
            for c in failed
        ]

    def _review(
        self, round_number: int, seeded: list[review.ReviewFinding], dispatch_reviewer: bool
    ) -> review.Review:
        """The round's review, scaffolded with ``seeded`` findings; the reviewer adds its own."""
        ctx = self.ctx
        scaffold = review.Review(ticket=ctx.ref.ticket, round=round_number, findings=seeded)
        path = runstate.write_artifact(ctx.ref, "reviewer", "review", review.render(scaffold))
        if not dispatch_reviewer:
            return review.load(path)
        checkpoints.enter_phase(ctx, "review", round_number)
        self._single_turn("reviewer", prompting.review_prompt(ctx, round_number))
        found = progress.catch_up_review(ctx.ref, path)
        ctx.sink.event(
            "review",
            round=round_number,
            findings=len(found.findings),
            blocking=len(found.blocking()),
        )
        return found
