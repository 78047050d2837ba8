"""An agent's own to-do list (Codex ``todo_list``, the ``plan_updated`` event): a checked item
that names a plan task completes that task, when the task is still open in the summary."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cairn.run.orchestrator.context import RunContext
from cairn.state import runstate
from cairn.summary.model import Task

NOTES = "checked off in the agent's own to-do list"


def complete_checked_tasks(ctx: RunContext, items: list[dict[str, Any]]) -> None:
    current = ctx.summary()
    if current.mode != "implementation":
        return
    for item in items:
        if not item.get("completed"):
            continue
        task = match_task(str(item.get("text", "")), current.tasks)
        if task is None or task.resolved:
            continue
        runstate.edit_summary(
            ctx.ref,
            None,
            "task",
            task=task.number,
            status="completed",
            notes=NOTES,
            source="todo_list",
            agent=ctx.agents.now.name,
        )


def match_task(text: str, tasks: Sequence[Task]) -> Task | None:
    """The plan task a to-do item names: "Task 3…", or the task's exact title; None if unsure."""
    words = _normal(text)
    for task in tasks:
        title = _normal(task.title)
        if words == title or words.startswith(f"task {task.number} "):
            return task
        if words == f"task {task.number}" or (title and words.endswith(f" {title}")):
            return task
    return None


def _normal(text: str) -> str:
    return " ".join("".join(c.lower() if c.isalnum() else " " for c in text).split())
