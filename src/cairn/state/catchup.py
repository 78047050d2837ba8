"""Where did the last run of a ticket get to? Marker first, then summary, snapshot, journal, files.

States: ``in_progress`` (owner alive), ``interrupted`` (owner gone, run not finished),
``needs_input`` (interrupted by the no-progress stop: the agent waits for a person), ``stale``
(no sign of life for ``marker.stale_after``), ``done`` and ``none``. Without a marker the state is
inferred from the latest run's files, and the report says so.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from cairn import summary, tickets
from cairn.config.records import Config
from cairn.errors import BadInput
from cairn.git import Repo
from cairn.state import accounting, branches, journal, marker, runstate, transcripts
from cairn.state.layout import SUMMARY_ARTIFACT, SUMMARY_ROLE, Layout, artifacts, discover
from cairn.state.owner import Liveness, Owner
from cairn.state.runstate import RunRef
from cairn.summary import Summary
from cairn.summary.render import status_line
from cairn.terms import TicketState
from cairn.util import clock
from cairn.util.durations import parse_duration

FORMAT = 1
RESOLVED_TASK = frozenset({"completed", "skipped", "deferred"})  # a task that needs no more work


class SnapshotBrief(Struct, kw_only=True):
    ref: str
    commit: str
    time: str
    reason: str
    run: str | None = None


class TaskBrief(Struct, kw_only=True):
    id: str
    title: str
    status: str


class CatchupReport(Struct, kw_only=True):
    format: int = FORMAT
    ticket: str
    state: TicketState
    inferred: bool
    skill: str | None = None
    phase: str | None = None
    round: int | None = None
    task: int | None = None
    task_title: str | None = None
    finding: str | None = None
    mode: str | None = None
    total: int = 0
    done: list[str] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)
    items: list[TaskBrief] = field(default_factory=list)
    tasks: list[TaskBrief] = field(default_factory=list)  # the plan's, also in a review round
    run: str | None = None
    run_dir: str | None = None
    summary_path: str | None = None
    summary_status: str | None = None
    marker_path: str | None = None
    started_at: datetime | None = None
    last_updated: datetime | None = None
    age_seconds: int | None = None
    owner: Owner | None = None
    owner_state: Liveness | None = None
    owner_detail: str | None = None
    snapshot: SnapshotBrief | None = None
    last_event: dict[str, Any] | None = None
    artifacts: list[str] = field(default_factory=list)
    usage: dict[str, Any] | None = None  # the run's, every session of it
    error: str | None = None  # the agent's error text that cut the run off
    denials: list[dict[str, str]] = field(default_factory=list)  # the run's, every session
    agent: str | None = None  # the agent kind of the run's latest session
    usage_by_agent: dict[str, Any] = field(default_factory=dict)  # None values: unknown
    dispatches: list[dict[str, Any]] = field(default_factory=list)
    transcripts: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    next_command: str | None = None
    cleared: bool = False


def default_ticket(repo: Repo) -> str:
    """The current branch's own ticket (see ``branches.default_ticket`` for the one a command
    uses when none is given)."""
    return tickets.from_branch(repo.current_branch())


def catchup(
    workspace: Path | str = ".",
    ticket: str | None = None,
    *,
    clear_stale: bool = False,
) -> CatchupReport:
    notes: list[str] = []  # a config that does not load: the defaults, and a warning
    repo, config, layout = discover(workspace, notes)
    given = ticket is not None
    if ticket is None:
        ticket, mapped = branches.default_ticket(repo, layout)
        notes += [mapped] if mapped is not None else []
    else:
        ticket = tickets.validate(ticket)
    stale_after = parse_duration(config.marker.stale_after)
    runstate.catch_up_ticket(layout, ticket)
    report = build(repo, config, layout, ticket, stale_after)
    report.warnings[:0] = notes
    if given and _unknown(report, layout):
        raise tickets.unknown(ticket, known_tickets(repo, config, layout), "cairn status")
    if clear_stale:
        if report.state != "stale":
            raise BadInput(
                f"ticket {ticket} has no stale marker (state: {report.state}); nothing removed"
            )
        if report.run_dir and Path(report.run_dir).is_dir():
            journal.record(
                Path(report.run_dir), "marker_cleared", detail=report.owner_detail, by="catchup"
            )
        marker.remove(layout.marker_path(ticket))
        report = build(repo, config, layout, ticket, stale_after)
        report.cleared = True
        report.warnings[:0] = notes
    return report


def build(
    repo: Repo, config: Config, layout: Layout, ticket: str, stale_after: float
) -> CatchupReport:
    now = clock.now()
    report = CatchupReport(ticket=ticket, state="none", inferred=False)
    current = marker.read(layout.marker_path(ticket))
    run_id = layout.latest_run(ticket)
    if current is not None:
        _from_marker(report, current, layout, ticket, stale_after, now)
        if current.run is not None:
            if layout.run_dir(ticket, current.run).is_dir():
                run_id = current.run
            else:
                report.warnings.append(f"the marker names run {current.run}, which is missing")
    loaded: Summary | None = None
    if run_id is not None:
        ref = RunRef(layout, ticket, run_id)
        report.run, report.run_dir = run_id, str(ref.run_dir)
        loaded = _read_summary(report, ref)
        events, warnings = journal.read(ref.run_dir)
        report.warnings += warnings
        report.last_event = events[-1] if events else None
        report.artifacts = [a.path.name for a in artifacts(ref.run_dir)]
        _account(report, ref, events, loaded)
        report.tasks = _plan_tasks(report, ref, loaded)
        if current is None:
            _infer(report, loaded, events)
        blocked = loaded is not None and loaded.status.reason == "no_progress"
        if report.state == "interrupted" and blocked:  # the agent waits for a person
            report.state = "needs_input"
    report.snapshot = _latest_snapshot(repo, config, ticket)
    report.next_command = _next_command(report)
    return report


def _account(
    report: CatchupReport, ref: RunRef, events: list[dict[str, Any]], loaded: Summary | None
) -> None:
    """What the run's dispatches used, were denied and failed with, and their transcripts."""
    report.dispatches = accounting.dispatches(events)
    report.usage = accounting.total(d["usage"] for d in report.dispatches)
    report.denials = [denial for d in report.dispatches for denial in d["denials"]]
    report.agent = accounting.agent_kind(events)
    report.usage_by_agent = accounting.by_agent(report.dispatches)
    report.transcripts = [t.path.name for t in transcripts.listing(ref.run_dir)]
    if loaded is not None and loaded.status.state == "interrupted":
        report.error = loaded.status.detail


def _from_marker(
    report: CatchupReport,
    current: marker.Marker,
    layout: Layout,
    ticket: str,
    stale_after: float,
    now: datetime,
) -> None:
    report.marker_path = str(layout.marker_path(ticket))
    report.skill, report.phase, report.round = current.skill, current.phase, current.round
    report.task = current.task
    report.started_at, report.last_updated = current.started_at, current.last_updated
    report.age_seconds = max(0, int((now - current.last_updated).total_seconds()))
    report.owner = current.owner
    report.state, report.owner_state, report.owner_detail = marker.judge(current, stale_after, now)


def _read_summary(report: CatchupReport, ref: RunRef) -> Summary | None:
    path = ref.summary_path()
    if path is None:
        return None
    report.summary_path = str(path)
    loaded = summary.load(path)
    if loaded is None:
        return None
    report.mode = loaded.mode
    report.summary_status = status_line(loaded)
    if loaded.mode == "implementation":
        report.items = [_task(t) for t in loaded.tasks]
        resolved = set(RESOLVED_TASK)
    else:
        report.items = [TaskBrief(id=f.id, title=f.title, status=f.status) for f in loaded.findings]
        resolved = {"FIXED", "NOT_FIXED", "ALREADY_RESOLVED"}
    report.total = len(report.items)
    report.done = [i.id for i in report.items if i.status in resolved]
    report.remaining = [i.id for i in report.items if i.status not in resolved]
    item = loaded.status.item
    if report.task is None and isinstance(item, int):
        report.task = item
    if isinstance(item, str):
        report.finding = item
    if report.task is not None and loaded.mode == "implementation":
        match = [t.title for t in loaded.tasks if t.number == report.task]
        report.task_title = match[0] if match else None
    if report.round is None:
        report.round = loaded.round
    return loaded


def _plan_tasks(report: CatchupReport, ref: RunRef, loaded: Summary | None) -> list[TaskBrief]:
    """The plan's tasks and how far they got: the summary's own in the implementation phase,
    else (a review round's summary lists its findings) the run's last implementation summary."""
    if loaded is not None and loaded.mode == "implementation":
        return list(report.items)
    for artifact in reversed(artifacts(ref.run_dir)):
        if (artifact.role, artifact.name) != (SUMMARY_ROLE, SUMMARY_ARTIFACT):
            continue
        try:
            earlier = summary.load(artifact.path)
        except BadInput:
            continue  # a broken earlier summary hides only the task list
        if earlier is not None and earlier.mode == "implementation":
            return [_task(t) for t in earlier.tasks]
    return []


def _task(task: Any) -> TaskBrief:
    return TaskBrief(id=str(task.number), title=task.title, status=task.status)


def _unknown(report: CatchupReport, layout: Layout) -> bool:
    """A ticket given by name that this repository has no trace of: no ticket directory (run,
    marker, lease), no snapshot, no fleet record."""
    if report.run is not None or report.snapshot is not None or report.marker_path is not None:
        return False
    if layout.ticket_dir(report.ticket).is_dir():
        return False
    return report.ticket not in layout.list_fleet_tickets()


def known_tickets(repo: Repo, config: Config, layout: Layout) -> list[str]:
    """Every ticket with a trace here: a ticket directory, a snapshot or a fleet record."""
    from cairn.wip.history import ticket_refs

    found = set(layout.list_tickets()) | set(ticket_refs(repo, config))
    return sorted(found | {n for n in layout.list_fleet_tickets() if tickets.problem(n) is None})


def _infer(report: CatchupReport, loaded: Summary | None, events: list[dict[str, Any]]) -> None:
    report.inferred = True
    ends = [e for e in events if e.get("event") == "run_finished"]
    finished = bool(ends)
    if ends and ends[-1].get("status") == "needs_review":
        report.warnings.append(
            "the run ended needing manual review: blocking findings remain in its last review"
        )
    if (loaded is not None and loaded.status.state == "completed") or finished:
        report.state = "done"
        report.phase = "done"
    else:
        report.state = "interrupted"
    started = next((e for e in events if e.get("event") == "run_started"), None)
    if started is not None:
        report.skill = started.get("skill")
    phases = [e for e in events if e.get("event") == "phase"]
    if phases and report.phase is None:
        report.phase = phases[-1].get("phase")
        report.round = phases[-1].get("round", report.round)


def _latest_snapshot(repo: Repo, config: Config, ticket: str) -> SnapshotBrief | None:
    from cairn.wip.history import chain
    from cairn.wip.naming import wip_ref

    found = chain(repo.git, wip_ref(config, ticket), 1)
    if not found:
        return None
    top = found[0]
    return SnapshotBrief(
        ref=top.ref or wip_ref(config, ticket),
        commit=top.commit,
        time=top.time,
        reason=top.reason,
        run=top.run,
    )


def _next_command(report: CatchupReport) -> str | None:
    if report.state in ("interrupted", "needs_input", "stale"):
        return f"cairn resume {report.ticket}"
    if report.state == "none" and report.snapshot is not None:
        return f"cairn wip restore {report.snapshot.ref}"
    return None
