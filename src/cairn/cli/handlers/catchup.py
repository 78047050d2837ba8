"""``cairn catchup``: where the last run of a ticket got to, and the next command."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cairn.cli.output import emit_json, say

if TYPE_CHECKING:
    from cairn.state.catchup import CatchupReport


def catchup(
    ticket: str | None = None,
    json: bool = False,
    format_: str = "text",
    clear_stale: bool = False,
    workspace: Path = Path("."),
    remote: str | None = None,
) -> None:
    from cairn.state.catchup import catchup as build_report
    from cairn.state.catchup_text import context_paragraph

    if remote is not None:
        report = _pushed(workspace, ticket, remote, clear_stale)
    else:
        report = build_report(workspace, ticket, clear_stale=clear_stale)
    if json:
        emit_json(report)
    elif format_ == "context":
        say(context_paragraph(report))
    else:
        for line in _lines(report):
            say(line)


def _pushed(workspace: Path, ticket: str | None, remote: str, clear_stale: bool) -> CatchupReport:
    """The report of what ``remote`` holds of the ticket's run (``--remote``)."""
    from cairn import tickets
    from cairn.errors import BadInput
    from cairn.remote.portable import pushed_state
    from cairn.state import branches
    from cairn.state.catchup import build
    from cairn.state.layout import discover
    from cairn.util.durations import parse_duration

    if clear_stale:
        raise BadInput("--clear-stale removes a marker here; it does not go with --remote")
    repo, config, layout = discover(workspace)
    named = tickets.validate(ticket) if ticket else branches.default_ticket(repo, layout)[0]
    seen = pushed_state(repo, layout, named, remote, config.snapshot.ref_prefix)
    report = build(repo, config, seen, named, parse_duration(config.marker.stale_after))
    if report.next_command and report.next_command.startswith("cairn resume"):
        report.next_command = f"cairn resume {named} --remote {remote}"
    elif report.state == "none":
        report.warnings.append(f"{remote} holds no run of ticket {named}")
        report.next_command = f"cairn run PLAN --ticket {named} --remote {remote}"
    return report


def _lines(report: CatchupReport) -> list[str]:
    from cairn.state.catchup_text import doing, split_done
    from cairn.state.owner import format_age

    head = f"ticket {report.ticket}: {report.state.replace('_', ' ')}"
    if report.inferred:
        head += " (inferred from the run's files; no marker)"
    if report.cleared:
        head += " · stale marker removed"
    lines = [head]
    if report.owner_detail and not report.inferred:
        age = f", last update {format_age(report.age_seconds)} ago" if report.age_seconds else ""
        lines.append(f"  owner: {report.owner_detail}{age}")
    where = [doing(report.phase)]
    if report.round is not None:
        where.append(f"round {report.round}")
    if report.task is not None:
        title = f' "{report.task_title}"' if report.task_title else ""
        where.append(f"task {report.task} of {report.total}{title}")
    if report.finding is not None:
        where.append(f"finding {report.finding} of {report.total}")
    if report.state != "none":
        lines.append(f"  where: {', '.join(where)}")
    if report.tasks:  # the plan's tasks, in a review round too
        done, remaining = split_done(report.tasks)
        lines.append(f"  tasks done: {done} · remaining: {remaining}")
    if report.items and report.mode != "implementation":
        done, remaining = ", ".join(report.done) or "none", ", ".join(report.remaining) or "none"
        lines.append(f"  findings done: {done} · remaining: {remaining}")
    if report.summary_status:
        lines.append(f"  summary: {report.summary_status} ({report.summary_path})")
    lines += _accounting(report)
    if report.snapshot:
        snap = report.snapshot
        lines.append(f"  snapshot: {snap.ref} {snap.commit[:12]} ({snap.reason}, {snap.time})")
    if report.last_event:
        event = report.last_event
        lines.append(f"  last event: {event.get('event')} at {event.get('t')}")
    for warning in report.warnings:
        lines.append(f"  warning: {warning}")
    if report.next_command:
        lines.append(f"  next: {report.next_command}")
    return lines


def _accounting(report: CatchupReport) -> list[str]:
    """The error that cut the run off, what the agent was denied, what the run used, and
    the transcripts ``cairn logs`` prints."""
    from cairn.state import accounting
    from cairn.util.text import counted

    lines = []
    if report.error:
        lines.append(f"  error: {report.error}")
    if report.denials:
        denied = accounting.denials_text(report.denials)
        lines.append(f"  blocked: {denied} — {accounting.denial_hint(report.agent)}")
    unknown = sum(d["usage"] is None for d in report.dispatches)
    used = accounting.usage_text(report.usage)
    dispatches = counted(len(report.dispatches), "dispatch", "dispatches")
    if used:
        lost = f" (usage of {unknown} unknown)" if unknown else ""
        lines.append(f"  usage: {used} in {dispatches}{lost}")
    elif unknown:
        lines.append(f"  usage: unknown ({dispatches})")
    if len(report.usage_by_agent) > 1:  # the run moved between agents
        each = [
            f"{name} {accounting.usage_text(used) or 'unknown'}"
            for name, used in report.usage_by_agent.items()
        ]
        lines.append(f"  by agent: {'; '.join(each)}")
    if report.transcripts:
        lines.append(f"  transcripts: {', '.join(report.transcripts)} (cairn logs {report.ticket})")
    return lines
