"""Every prompt the loop sends: a dispatch's first prompt (dispatch, handoff, fix, review,
evaluate), the continuation prompts of later turns, and the wrap-up directive appended to them
when the budget runs low. The templates are ``cairn/run/prompts/*.md``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from cairn import summary
from cairn.errors import BadInput
from cairn.run import answers, evaluation, prompts, review
from cairn.run.budget import Budget
from cairn.run.orchestrator import checkpoints
from cairn.run.orchestrator.context import RunContext
from cairn.state import layout
from cairn.summary.render import status_line

# The prompt of turn n (1-based) of a dispatch; None when its work is done.
PromptFor = Callable[[int], str | None]


def turn_prompts(ctx: RunContext, first: str) -> PromptFor:
    """Turn 1 gets ``first``; every later turn a continuation prompt with what is left, until
    every item of the current summary is resolved."""

    def prompt_for(turn: int) -> str | None:
        current = ctx.summary()
        if turn == 1:
            return first
        if current.resolved() == current.total():
            return None
        remaining = "\n".join(
            f"- Task {t.number}: {t.title}" for t in current.tasks if not t.resolved
        ) or "\n".join(f"- {f.id}: {f.title}" for f in current.findings if not f.resolved)
        return _render(
            ctx,
            "continuation",
            ticket=ctx.ref.ticket,
            turn=turn,
            max_turns=ctx.max_turns("coder"),
            status_line=status_line(current),
            remaining=remaining,
        )

    return prompt_for


class PressuredPrompts:
    """A dispatch's prompts, with the wrap-up directive appended on the turns its budget runs
    low; ``pressured`` records which turns got it."""

    def __init__(self, ctx: RunContext, budget: Budget, prompt_for: PromptFor) -> None:
        self.ctx, self.budget, self.prompt_for = ctx, budget, prompt_for
        self.pressured: dict[int, bool] = {}

    def __call__(self, turn: int) -> str | None:
        text = self.prompt_for(turn)
        if text is None:
            return None
        under = self.budget.under_pressure(turn)
        self.pressured[turn] = under
        if under:
            left = self.budget.seconds_left()
            text += "\n" + _render(
                self.ctx,
                "pressure",
                remaining_turns=self.budget.turns_left(turn),
                time_note="" if left is None else f" and about {max(0, int(left))}s",
            )
        return text


def coder_prompts(ctx: RunContext, handoff_reason: str | None) -> PromptFor:
    """The coder's prompts: the plan (the run's first dispatch), or the handoff after a cutoff
    (``handoff_reason``): what is done, in progress and left, the files, the snapshot."""
    values: dict[str, Any] = {
        "ticket": ctx.ref.ticket,
        "run": ctx.ref.run_id,
        "workspace": ctx.repo.toplevel,
        "summary_path": ctx.ref.summary_path(),
        "max_turns": ctx.max_turns("coder"),
    }
    if handoff_reason is None:
        text = _render(
            ctx, "dispatch", plan_title=ctx.plan.title or "", tasks=task_list(ctx), **values
        )
        return turn_prompts(ctx, text)
    tasks = ctx.summary().tasks
    snap = ctx.last_snapshot
    text = _render(
        ctx,
        "handoff",
        reason=handoff_reason,
        completed=_bullets(f"Task {t.number}: {t.title} ({t.status})" for t in tasks if t.resolved),
        in_progress=_bullets(
            f"Task {t.number}: {t.title}" for t in tasks if t.status == "in progress"
        ),
        remaining=_bullets(f"Task {t.number}: {t.title}" for t in tasks if t.status == "pending"),
        files=", ".join(checkpoints.files_changed(ctx)) or "none reported",
        snapshot=f"{snap.ref} ({snap.commit[:12]})" if snap else "no snapshot",
        last_message=ctx.last_message or "(none)",
        **values,
    )
    answered = answers.given(ctx.ref.run_dir)  # a person's answers to a stop for input
    if answered:
        text += "\n" + answers.prompt_block(answered)
    return turn_prompts(ctx, text)


def fix_prompts(ctx: RunContext, round_number: int, found: review.Review) -> PromptFor:
    """The coder's prompts in a fix round: the findings to fix (blocking and warnings)."""
    findings = "\n".join(
        f"- {f.id}: {f.title}"
        + (f" ({f.location})" if f.location else "")
        + (f"\n    {f.details}" if found.by is not None and f.details else "")
        for f in found.to_fix()
    )
    text = _render(
        ctx,
        "fix",
        ticket=ctx.ref.ticket,
        run=ctx.ref.run_id,
        round=round_number,
        workspace=ctx.repo.toplevel,
        review_path=latest_review_path(ctx),
        findings=findings,
        summary_path=ctx.ref.summary_path(),
        max_turns=ctx.max_turns("coder"),
    )
    return turn_prompts(ctx, text)


def review_prompt(ctx: RunContext, round_number: int) -> str:
    return _render(
        ctx,
        "review",
        ticket=ctx.ref.ticket,
        run=ctx.ref.run_id,
        round=round_number,
        workspace=ctx.repo.toplevel,
        tasks=task_list(ctx),
        summary_path=ctx.ref.summary_path(),
        max_turns=ctx.max_turns("reviewer"),
    )


def evaluate_prompt(ctx: RunContext, round_number: int, checked: evaluation.Evaluation) -> str:
    return _render(
        ctx,
        "evaluate",
        ticket=ctx.ref.ticket,
        run=ctx.ref.run_id,
        round=round_number,
        workspace=ctx.repo.toplevel,
        criteria="\n".join(f"- {c.id}: {c.text} (task {c.task})" for c in checked.criteria),
        max_turns=ctx.max_turns("evaluator"),
    )


def task_list(ctx: RunContext) -> str:
    """The plan's tasks with their status in the implementation summary, details and
    acceptance criteria."""
    current = ctx.summary()
    if current.mode != "implementation":
        current = summary.load(_first_summary_path(ctx)) or current
    lines = []
    for task in ctx.plan.tasks:
        entry = current.task(task.number)
        status = entry.status if entry else "pending"
        lines.append(f"- Task {task.number}: {task.title} [{status}]")
        if task.details:
            lines += [f"    {line}" for line in task.details.splitlines()]
        for criterion in task.acceptance:
            if criterion not in task.details:
                lines.append(f"    - acceptance: {criterion}")
    return "\n".join(lines)


def latest_review_path(ctx: RunContext) -> Path:
    found = layout.latest_artifact(ctx.ref.run_dir, "reviewer", "review")
    if found is None:
        raise BadInput(f"run {ctx.ref.run_id} has no review to fix")
    return found.path


def _first_summary_path(ctx: RunContext) -> Path:
    found = [
        a.path
        for a in layout.artifacts(ctx.ref.run_dir)
        if a.role == layout.SUMMARY_ROLE and a.name == layout.SUMMARY_ARTIFACT
    ]
    return found[0]


def _render(ctx: RunContext, name: str, **values: Any) -> str:
    return prompts.render(name, ctx.repo.toplevel, **values)


def _bullets(items: Iterable[str]) -> str:
    lines = [f"- {item}" for item in items]
    return "\n".join(lines) or "- (none)"
