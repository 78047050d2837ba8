"""The change summary: a markdown record of an agent run, rewritten atomically at every step.

scaffold_tasks / scaffold_findings -> Summary, then pure ops (start_task, complete_task, ...)
render(summary) -> str and parse(text) -> Summary, with parse(render(x)) == x
load(path) -> Summary | None and save(path, summary)
"""

from cairn.summary.model import (
    Finding,
    FindingStatus,
    Gate,
    Status,
    Summary,
    SummaryError,
    Task,
    TaskStatus,
    Usage,
)
from cairn.summary.ops import (
    account,
    add_deferred,
    address_finding,
    complete_task,
    defer_task,
    finalise,
    list_files,
    mark_interrupted,
    resume_status,
    scaffold_findings,
    scaffold_tasks,
    set_gate,
    skip_task,
    start_task,
)
from cairn.summary.parse import parse
from cairn.summary.render import render
from cairn.summary.store import load, save

__all__ = [
    "Finding",
    "FindingStatus",
    "Gate",
    "Status",
    "Summary",
    "SummaryError",
    "Task",
    "TaskStatus",
    "Usage",
    "account",
    "add_deferred",
    "address_finding",
    "complete_task",
    "defer_task",
    "finalise",
    "list_files",
    "load",
    "mark_interrupted",
    "parse",
    "render",
    "resume_status",
    "save",
    "scaffold_findings",
    "scaffold_tasks",
    "set_gate",
    "skip_task",
    "start_task",
]
