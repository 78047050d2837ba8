"""Render a Summary as the change-summary markdown file."""

from __future__ import annotations

import re

from msgspec import structs

from cairn.summary.model import SECTIONS, Finding, Gate, Summary, Task
from cairn.util import yaml_io

_BACKTICKS = re.compile(r"`+")
BLOCKED = "- **Blocked:** "  # the note under the status line: what the agent was denied


def render(summary: Summary) -> str:
    s = summary
    headings = dict(SECTIONS[s.mode])
    chunks: list[list[str]] = [[*_front_matter(s), title(s)], s.prose.get("preamble", [])]
    blocked = [f"{BLOCKED}{escape(s.blocked)}"] if s.blocked else []
    chunks += [[headings["status"], status_line(s), *blocked], s.prose.get("status", [])]
    if s.mode == "implementation":
        chunks += [[headings["tasks"]], s.prose.get("tasks", [])]
        chunks += [[*_task(task), *_after(task.prose)] for task in s.tasks]
        files = None if s.files_changed is None else [f"- {code_span(f)}" for f in s.files_changed]
        chunks += [[headings["files"], *_listing(files)], s.prose.get("files", [])]
    else:
        chunks += [[headings["findings"]], s.prose.get("findings", [])]
        chunks += [[*_finding(finding), *_after(finding.prose)] for finding in s.findings]
    gates = None if s.gates is None else [_gate(gate) for gate in s.gates]
    chunks += [[headings["gates"], *_listing(gates)], s.prose.get("gates", [])]
    if s.mode == "implementation":
        deferred = None if s.deferred is None else [f"- {escape(d)}" for d in s.deferred]
        chunks += [[headings["deferred"], *_listing(deferred)], s.prose.get("deferred", [])]
    return "\n\n".join("\n".join(chunk) for chunk in chunks if chunk) + "\n"


def title(s: Summary) -> str:
    return heading(s.ticket, s.mode, s.round)


def heading(ticket: str, mode: str, round: int | None) -> str:
    """The title line of a summary of ``ticket`` in ``mode`` (review ``round``)."""
    suffix = f", review round {round}" if mode == "review" else ""
    return f"# Change summary — ticket {ticket}{suffix}"


def status_line(s: Summary) -> str:
    st = s.status
    noun, unit = ("task", "tasks") if s.mode == "implementation" else ("finding", "findings")
    total, resolved = s.total(), s.resolved()
    position = None
    if st.item is not None:
        ids = [f.id for f in s.findings]
        position = st.item if s.mode == "implementation" else ids.index(str(st.item)) + 1
    if st.state == "interrupted":
        where = (
            f"after {noun} {resolved} of {total}"
            if position is None
            else f"during {noun} {position} of {total}"
        )
        if st.ref is None:
            saved = "no snapshot"
        else:
            saved = f"work saved at {st.ref}" + (f" ({st.commit})" if st.commit else "")
        detail = f"; {st.detail}" if st.detail else ""
        return f"Interrupted — {st.reason} {where}; {saved}{detail}"
    if st.state == "in_progress" and position is not None:
        return f"In progress — {noun} {position} of {total}"
    label = {"not_started": "Not started", "in_progress": "In progress", "completed": "Completed"}
    return f"{label[st.state]} — {resolved} of {total} {unit}"


def escape(text: str) -> str:
    """Free text starting with ``(`` or ``\\`` gets one backslash, so ``(pending)`` survives."""
    return "\\" + text if text.startswith(("(", "\\")) else text


def code_span(text: str) -> str:
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = text.strip(" ") != "" and (text[0] in "` " or text[-1] in "` ")
    inner = f" {text} " if pad else text
    return f"{fence}{inner}{fence}"


def _front_matter(s: Summary) -> list[str]:
    data = {
        "format": s.format,
        "ticket": s.ticket,
        "run": s.run,
        "mode": s.mode,
        "round": s.round,
        "updated": s.updated.isoformat(timespec="seconds"),
    }
    if s.usage is not None:
        data["usage"] = structs.asdict(s.usage)
    return ["---", *yaml_io.dump(data).split("\n"), "---"]


def _after(prose: list[str]) -> list[str]:
    return ["", *prose] if prose else []


def _listing(lines: list[str] | None) -> list[str]:
    if lines is None:
        return ["(pending)"]
    return lines or ["(none)"]


def _value(text: str | None, resolved: bool) -> str:
    if text is None:
        return "(none)" if resolved else "(pending)"
    return escape(text)


def _task(task: Task) -> list[str]:
    if task.files is None:
        files = "(pending)"
    else:
        files = ", ".join(code_span(f) for f in task.files) or "(none)"
    return [
        f"### Task {task.number}: {task.title} — {task.status}",
        f"- **Files:** {files}",
        f"- **Outcome:** {_value(task.outcome, task.resolved)}",
        f"- **Notes:** {_value(task.notes, task.resolved)}",
        *([f"- **Agent:** {escape(task.agent)}"] if task.agent else []),
    ]


def _finding(finding: Finding) -> list[str]:
    return [
        f"### {finding.id}: {finding.title} — {finding.status}",
        f"- **Action:** {_value(finding.action, finding.resolved)}",
    ]


def _gate(gate: Gate) -> str:
    command = f" ({code_span(gate.command)})" if gate.command is not None else ""
    return f"- {gate.name}{command}: {gate.result}"
