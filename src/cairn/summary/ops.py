"""Pure operations on a Summary: each returns a new, validated Summary stamped with ``now``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar

import msgspec
from msgspec import Struct

from cairn.errors import BadInput
from cairn.summary.model import Finding, Gate, Status, Summary, Task, TaskStatus, Usage
from cairn.terms import FINDING_RESOLUTIONS

M = TypeVar("M", bound=Struct)

_NEXT: dict[str, frozenset[str]] = {
    "pending": frozenset({"in progress", "completed", "skipped", "deferred"}),
    "in progress": frozenset({"in progress", "completed", "skipped", "deferred"}),
    "skipped": frozenset({"in progress", "completed", "skipped", "deferred"}),
    "deferred": frozenset({"in progress", "completed", "skipped", "deferred"}),
    "completed": frozenset({"completed"}),
}


def _make(cls: type[M], **data: Any) -> M:
    """Build and validate: the types checked, as a plain constructor does not."""
    try:
        return msgspec.convert(data, cls, strict=False)
    except msgspec.ValidationError as exc:  # the data was not in shape
        from cairn.util.invalid import problem

        where, message = problem(exc, cls)
        where = where or cls.__name__.lower()
        raise BadInput(f"invalid change summary {where}: {message}; pass a valid value") from None


def _replace(model: M, **changes: Any) -> M:
    return _make(type(model), **{**msgspec.structs.asdict(model), **changes})


def scaffold_tasks(
    ticket: str, run: str | None, tasks: Sequence[tuple[int, str]], now: datetime
) -> Summary:
    """A not-started implementation summary with every task of the plan pending."""
    if not tasks:
        raise BadInput("the plan has no tasks; give at least one task to track")
    items = [_make(Task, number=number, title=title) for number, title in tasks]
    return _make(
        Summary,
        ticket=ticket,
        run=run,
        mode="implementation",
        updated=now,
        status=Status(state="not_started"),
        tasks=items,
    )


def scaffold_findings(
    ticket: str, run: str | None, round: int, findings: Sequence[tuple[str, str]], now: datetime
) -> Summary:
    """A not-started review summary with every finding pending."""
    if not findings:
        raise BadInput("the review has no findings; give at least one finding to track")
    items = [_make(Finding, id=ident, title=title) for ident, title in findings]
    return _make(
        Summary,
        ticket=ticket,
        run=run,
        mode="review",
        round=round,
        updated=now,
        status=Status(state="not_started"),
        findings=items,
    )


def start_task(s: Summary, n: int, now: datetime) -> Summary:
    return _move(s, n, now, "in progress", {})


def complete_task(
    s: Summary,
    n: int,
    now: datetime,
    files: Sequence[str] | None = None,
    outcome: str | None = None,
    notes: str | None = None,
    agent: str | None = None,
) -> Summary:
    """Mark task ``n`` completed (by ``agent``, when the run names it); the files, outcome and
    notes given replace what it held. A task reported again keeps the agent that completed it
    first."""
    done = s.task(n)
    if done is not None and done.status == "completed" and done.agent:
        agent = done.agent
    given = {
        "files": list(files) if files else None,
        "outcome": outcome,
        "notes": notes,
        "agent": agent,
    }
    return _move(s, n, now, "completed", {k: v for k, v in given.items() if v is not None})


def skip_task(s: Summary, n: int, now: datetime, notes: str | None) -> Summary:
    return _move(s, n, now, "skipped", {"notes": notes})


def defer_task(s: Summary, n: int, now: datetime, notes: str | None) -> Summary:
    return _move(s, n, now, "deferred", {"notes": notes})


def address_finding(
    s: Summary, finding_id: str, status: str, now: datetime, action: str | None = None
) -> Summary:
    _need(s, "review", "address a finding")
    if status not in FINDING_RESOLUTIONS:
        raise BadInput(f"finding status {status!r} is not one of {', '.join(FINDING_RESOLUTIONS)}")
    found = s.finding(finding_id)
    if found is None:
        ids = ", ".join(f.id for f in s.findings)
        raise BadInput(f"no finding {finding_id} in this review (findings {ids}); use one of them")
    changed = _replace(found, status=status, action=action)
    findings = [changed if f.id == finding_id else f for f in s.findings]
    item = next((f.id for f in findings if not f.resolved), finding_id)
    return _replace(
        s, findings=findings, status=Status(state="in_progress", item=item), updated=now
    )


def set_gate(
    s: Summary, name: str, result: str, now: datetime, command: str | None = None
) -> Summary:
    """Record a quality gate, replacing an earlier result with the same name."""
    gate = _make(Gate, name=name, result=result, command=command)
    gates = list(s.gates or [])
    at = next((i for i, g in enumerate(gates) if g.name == gate.name), None)
    if at is None:
        gates.append(gate)
    else:
        gates[at] = gate
    return _replace(s, gates=gates, updated=now)


def add_deferred(s: Summary, item: str, now: datetime) -> Summary:
    _need(s, "implementation", "add a deferred item")
    return _replace(s, deferred=[*(s.deferred or []), item], updated=now)


def finalise(s: Summary, now: datetime) -> Summary:
    """The completed summary; every task must be resolved (or every finding addressed)."""
    changes: dict[str, Any] = {"gates": s.gates or [], "updated": now}
    if s.mode == "implementation":
        for task in s.tasks:
            if not task.resolved:
                raise BadInput(
                    f"task {task.number} ({task.title}) is {task.status}; "
                    "complete, skip or defer it before finalising"
                )
        if s.files_changed is None:
            changes["files_changed"] = sorted({f for t in s.tasks for f in t.files or []})
        changes["deferred"] = s.deferred or []
    else:
        for finding in s.findings:
            if not finding.resolved:
                raise BadInput(
                    f"finding {finding.id} ({finding.title}) is pending; "
                    "address it before finalising"
                )
    return _replace(s, status=Status(state="completed"), **changes)


def mark_interrupted(
    s: Summary,
    reason: str,
    now: datetime,
    ref: str | None = None,
    commit: str | None = None,
    detail: str | None = None,
) -> Summary:
    """Record that the run stopped, where its work was saved if it was, and the agent's error
    text (``detail``) if it gave one. The status names a task ("during task N") only when that
    task is in progress; otherwise it counts the resolved ones ("after task K of M"). A finding
    has no in-progress state, so a review response always counts."""
    item: int | str | None = None
    if s.mode == "implementation":
        item = next((t.number for t in s.tasks if t.status == "in progress"), None)
    status = _make(
        Status,
        state="interrupted",
        item=item,
        reason=reason,
        ref=ref,
        commit=commit,
        detail=detail,
    )
    return _replace(s, status=status, updated=now)


def resume_status(s: Summary, now: datetime) -> Summary:
    """An interrupted run goes on (a dispatch starts): the status says where it is again, the
    task in progress (or the first finding left) if any; unchanged when not interrupted."""
    if s.status.state != "interrupted":
        return s
    left: list[int | str] = [t.number for t in s.tasks if t.status == "in progress"]
    left += [f.id for f in s.findings if not f.resolved]  # a review response's
    item = left[0] if left else None
    done = item is None and s.total() > 0 and s.resolved() == s.total()
    status = Status(state="completed") if done else Status(state="in_progress", item=item)
    return _replace(s, status=status, updated=now)


def list_files(s: Summary, files: Sequence[str], now: datetime) -> Summary:
    """``## Files changed`` of an implementation summary says ``files`` (a review response has
    no such section: it is left as it is)."""
    listed = sorted(set(files))
    if s.mode != "implementation" or listed == s.files_changed:
        return s
    return _replace(s, files_changed=listed, updated=now)


def account(
    s: Summary, usage: dict[str, Any] | None, blocked: str | None, now: datetime
) -> Summary:
    """Record what the run's dispatches used (tokens, cost) and what the agent was denied."""
    made = None if usage is None else _make(Usage, **usage)
    if made == s.usage and blocked == s.blocked:
        return s
    return _replace(s, usage=made, blocked=blocked, updated=now)


def _need(s: Summary, mode: str, what: str) -> None:
    if s.mode != mode:
        raise BadInput(
            f"cannot {what}: the change summary for {s.ticket} is in {s.mode} mode, "
            f"not {mode}; use the operations for {s.mode} mode"
        )


def _task_range(s: Summary) -> str:
    numbers = [t.number for t in s.tasks]
    if not numbers:
        return "no tasks"
    if len(numbers) == 1:
        return f"task {numbers[0]}"
    if sorted(numbers) == list(range(min(numbers), max(numbers) + 1)):
        return f"tasks {min(numbers)}–{max(numbers)}"
    return "tasks " + ", ".join(str(n) for n in numbers)


def _move(s: Summary, n: int, now: datetime, target: TaskStatus, fields: dict[str, Any]) -> Summary:
    _need(s, "implementation", f"change task {n}")
    task = s.task(n)
    if task is None:
        raise BadInput(f"no task {n} in the plan ({_task_range(s)}); use a task number from it")
    if target not in _NEXT[task.status]:
        raise BadInput(f"task {n} is {task.status}; it cannot go back to {target}")
    if target in ("completed", "skipped", "deferred") and task.files is None:
        fields = {"files": [], **fields}
    changed = _replace(task, status=target, **fields)
    tasks = [changed if t.number == n else t for t in s.tasks]
    if target == "in progress":
        item = n
    else:
        active = [t for t in tasks if t.status == "in progress"]
        pending = [t for t in tasks if t.status == "pending"]
        item = (active or pending)[0].number if active or pending else n
    return _replace(s, tasks=tasks, status=Status(state="in_progress", item=item), updated=now)
