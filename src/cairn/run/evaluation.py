"""An evaluator's check of the plan's acceptance criteria: ``{NN}_evaluator_eval-round-{R}.md``.

```
# Evaluation — ticket PROJ-12, round 1

## Status: FAIL

- [x] AC-1: sub(5, 3) == 2 (task 0)
- [ ] AC-2: div(1, 0) raises ZeroDivisionError (task 2) — FAILED: it returns inf
- [ ] AC-3: README lists every function (task 3)
```

cairn scaffolds the file with every criterion unchecked under ``## Status: IN_PROGRESS``; the
evaluator checks each with ``cairn ac AC-n --result pass|fail [--reason …]``; cairn sets the
status when the dispatch ends (PASS only when every criterion passed).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import msgspec
from msgspec import Struct

from cairn.errors import BadInput
from cairn.run.plan import Plan
from cairn.terms import VERDICTS, Verdict
from cairn.util import durable
from cairn.util.text import printable

Result = Literal["pending"] | Verdict
_HEAD = re.compile(r"# Evaluation — ticket (\S+), round (\d+)")
_STATUS = re.compile(r"## Status: (IN_PROGRESS|PASS|FAIL)")
_ITEM = re.compile(r"- \[( |x)\] (AC-\d+): (.*?)(?: \(task (\d+)\))?(?: — FAILED: (.*))?")


class Criterion(Struct, kw_only=True):
    id: str
    text: str
    task: int | None = None
    result: Result = "pending"
    reason: str | None = None


class Evaluation(Struct, kw_only=True):
    ticket: str
    round: int
    status: Literal["IN_PROGRESS", "PASS", "FAIL"] = "IN_PROGRESS"
    criteria: list[Criterion] = []

    def failed(self) -> list[Criterion]:
        return [c for c in self.criteria if c.result != "pass"]


def scaffold(plan: Plan, ticket: str, round_number: int) -> Evaluation:
    criteria = [
        Criterion(id=f"AC-{n}", text=" ".join(text.split()), task=task.number)
        for n, (task, text) in enumerate(
            ((task, text) for task in plan.tasks for text in task.acceptance), start=1
        )
    ]
    return Evaluation(ticket=ticket, round=round_number, criteria=criteria)


def render(evaluation: Evaluation) -> str:
    lines = [
        f"# Evaluation — ticket {evaluation.ticket}, round {evaluation.round}",
        "",
        f"## Status: {evaluation.status}",
        "",
    ]
    for c in evaluation.criteria:
        box = "x" if c.result == "pass" else " "
        task = f" (task {c.task})" if c.task is not None else ""
        failed = ""
        if c.result == "fail":
            failed = " — FAILED: " + (c.reason or "no reason given")
        lines.append(f"- [{box}] {c.id}: {c.text}{task}{failed}")
    return "\n".join(lines) + "\n"


def parse(text: str, source: str) -> Evaluation:
    lines = text.splitlines()
    head = _HEAD.fullmatch(lines[0].strip()) if lines else None
    if head is None:
        raise BadInput(f"{source}:1: not a cairn evaluation; it starts '# Evaluation — ticket'")
    evaluation = Evaluation(ticket=head.group(1), round=int(head.group(2)))
    for number, raw in enumerate(lines[1:], start=2):
        line = raw.rstrip()
        status = _STATUS.fullmatch(line)
        if status:
            evaluation.status = status.group(1)  # type: ignore[assignment]
            continue
        item = _ITEM.fullmatch(line)
        if item is None:
            continue
        box, ident, body, task, reason = item.groups()
        if any(c.id == ident for c in evaluation.criteria):
            raise BadInput(f"{source}:{number}: {ident} appears twice")
        result: Result = "pass" if box == "x" else ("fail" if reason is not None else "pending")
        evaluation.criteria.append(
            Criterion(
                id=ident,
                text=body,
                task=int(task) if task else None,
                result=result,
                reason=reason,
            )
        )
    return evaluation


def load(path: Path) -> Evaluation:
    data = durable.read_state_file(path, "evaluation", 4 * 1024 * 1024)
    if data is None:
        raise BadInput(f"evaluation {path} is missing")
    return parse(durable.decode_text(data, path, "evaluation"), str(path))


def save(path: Path, evaluation: Evaluation) -> None:
    durable.atomic_write(path, render(evaluation))


def record(evaluation: Evaluation, ident: str, result: str, reason: str | None) -> Evaluation:
    if result not in VERDICTS:
        raise BadInput(f"--result must be pass or fail (got {result!r}); pass one of them")
    if not any(c.id == ident for c in evaluation.criteria):
        known = ", ".join(c.id for c in evaluation.criteria) or "none"
        raise BadInput(f"no acceptance criterion {ident} in this evaluation (criteria: {known})")
    criteria = [
        msgspec.structs.replace(
            c, result=result, reason=printable(reason) if reason and result == "fail" else None
        )
        if c.id == ident
        else c
        for c in evaluation.criteria
    ]
    return msgspec.structs.replace(evaluation, criteria=criteria)


def conclude(evaluation: Evaluation) -> Evaluation:
    status = "PASS" if not evaluation.failed() else "FAIL"
    return msgspec.structs.replace(evaluation, status=status)
