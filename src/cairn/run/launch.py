"""Starting and resuming runs: ``cairn run PLAN`` and ``cairn resume``.

Everything that can be checked is checked before any state is written (plan, ticket, agent
kind and version, every role's script or program); then the lease is taken and the
orchestrator's loop runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from cairn import summary
from cairn.agents.base import DispatchRequest
from cairn.config.records import Config, pressure_given
from cairn.errors import BadInput
from cairn.git import Repo
from cairn.run import carried, portable, reclaiming
from cairn.run.budget import session_budget
from cairn.run.chain import Agents, resolve
from cairn.run.events import EventSink, NoEvents
from cairn.run.orchestrator import Orchestrator, RunOutcome
from cairn.run.orchestrator.context import agent_script
from cairn.run.plan import PLAN_READ_LIMIT, Plan
from cairn.state import layout, runstate, sharing
from cairn.state.runstate import RunRef
from cairn.summary import Summary
from cairn.summary.store import READ_LIMIT as SUMMARY_LIMIT
from cairn.util import clock, durable

# A plan's scaffold may use a quarter of the change summary's limit; see check_plan_size.
PLAN_SHARE = 4
SIZING_RUN_ID = "20000101-000000Z"
# The plan's JSON artifact: the plan (at most PLAN_READ_LIMIT) with JSON escaping.
PLAN_ARTIFACT_LIMIT = 4 * PLAN_READ_LIMIT

if TYPE_CHECKING:
    from cairn.state.catchup import CatchupReport


def check_plan_size(path: Path, tasks: int, scaffold: Summary) -> None:
    """A plan's change summary may start at most at ``PLAN_SHARE`` of the summary's limit: the
    rest is room for what the agents report. Checked before anything is written."""
    size = len(summary.render(scaffold).encode("utf-8"))
    allowed = SUMMARY_LIMIT // PLAN_SHARE
    if size > allowed:
        raise BadInput(
            f"plan {path} has {tasks} tasks: their change summary would start at {size} bytes, "
            f"over the {allowed} a plan may use of the summary's {SUMMARY_LIMIT} byte limit; "
            "split the plan into smaller ones"
        )


def agents_for(config: Config, chosen: str | None, max_turns: int | None) -> Agents:
    """The run's agent (``--agent``: a named agent or a kind; else ``agent.kind``) and its
    fallback chain."""
    pressure = config.agent.budget_pressure_turns
    if max_turns is not None and max_turns <= pressure and pressure_given(config):
        raise BadInput(
            f"--max-turns {max_turns} must be larger than agent.budget_pressure_turns "
            f"({pressure}, set in {config.source}); pass a larger --max-turns, or leave "
            "budget_pressure_turns out (its default stays below the cap)"
        )
    return resolve(config, chosen)


def preflight(agents: Agents, repo: Repo, config: Config, plan: Plan) -> None:
    """Every role the phases need can start on every agent of the chain; checked before any
    state is written."""
    criteria = any(task.acceptance for task in plan.tasks)
    roles = ["coder"]
    roles += ["evaluator"] if "evaluate" in config.loop.phases and criteria else []
    roles += ["reviewer"] if "review" in config.loop.phases else []
    for member in agents.members:
        script_path = agent_script(repo.toplevel, member.config)
        for role in roles:
            member.adapter.preflight(
                DispatchRequest(
                    role=role,
                    workspace=repo.toplevel,
                    run_dir=repo.toplevel,
                    max_turns=1,
                    next_prompt=lambda turn: None,
                    command=member.config.command,
                    script=script_path,
                    agent=member.name,
                )
            )


def run(
    workspace: Path | str,
    plan_path: Path,
    *,
    ticket: str | None = None,
    agent: str | None = None,
    max_turns: int | None = None,
    takeover: bool = False,
    allow_shared: bool = False,
    sink: EventSink | None = None,
    remote: str | None = None,
    max_cost_usd: float | None = None,
) -> RunOutcome:
    """``cairn run PLAN``: a new run of the plan's ticket, to completion or a saved stop.
    Refused while another ticket runs in this work tree, unless ``allow_shared``."""
    from cairn import tickets
    from cairn.run import plan as plans
    from cairn.util.durations import parse_duration

    repo, config, state = layout.discover(workspace)
    config = with_cost(config, max_cost_usd)
    loaded = plans.load(Path(plan_path))
    ticket = tickets.validate(ticket) if ticket else plans.ticket_for(loaded, Path(plan_path))
    chain = agents_for(config, agent, max_turns)
    kind = chain.primary.name
    preflight(chain, repo, config, loaded)
    sink = sink or NoEvents()
    pairs = [(t.number, t.title) for t in loaded.tasks]

    def scaffold(run_id: str) -> Summary:
        first = summary.scaffold_tasks(ticket, run_id, pairs, clock.now())
        for task in loaded.tasks:
            if getattr(task, "done", False):
                first = summary.complete_task(
                    first, task.number, clock.now(), notes="done in the plan"
                )
        return first

    check_plan_size(Path(plan_path), len(pairs), scaffold(SIZING_RUN_ID))
    stale_after = parse_duration(config.marker.stale_after)
    if not allow_shared:
        sharing.refuse_shared(state, repo.toplevel, ticket, stale_after, "run")
    side = portable.opened(repo, config, state, ticket, portable.chosen(config, remote), new=True)

    plan_json = msgspec.json.encode(loaded)
    ref, lease = runstate.begin(
        state,
        ticket,
        scaffold,
        stale_after=stale_after,
        takeover=takeover,
        started={
            "agent": kind,
            "plan": str(plan_path),
            "workspace": str(repo.toplevel),
            "head": _head(repo),
        }
        | carried.given(max_turns),
        first_artifacts=[
            ("orchestrator", "plan", "md", _plan_markdown(loaded)),
            ("orchestrator", "plan", "json", msgspec.json.format(plan_json, indent=2).decode()),
        ],
    )
    budget = session_budget(config, max_turns, chain)
    sink.event("run_started", run=ref.run_id, ticket=ticket, tasks=len(pairs), agent=kind, **budget)
    _remember_branch(repo, state, ticket, sink)
    if lease.warning is not None:
        sink.event("warning", message=lease.warning)
    if lease.previous is not None and lease.previous.run:
        sink.event(
            "warning",
            message=(
                f"ticket {ticket} had an unfinished run {lease.previous.run}; this is a new run "
                f"(cairn resume {ticket} continues the latest run)"
            ),
        )
    orchestrator = Orchestrator(repo, config, ref, lease, loaded, chain, sink, max_turns)
    return portable.execute(orchestrator, side, sink)


def remote_vet(
    repo: Repo,
    config: Config,
    ticket: str,
    takeover: bool,
    also: Callable[[layout.Layout], None] | None = None,
) -> Callable[[layout.Layout], None]:
    """What a resume checks of the run a remote holds before it takes it (``--remote``): that
    it can be resumed (not finished, not owned elsewhere unless ``takeover``), and ``also``."""
    from cairn.state import catchup
    from cairn.util.durations import parse_duration

    stale_after = parse_duration(config.marker.stale_after)

    def vet(pushed: layout.Layout) -> None:
        _resumable(catchup.build(repo, config, pushed, ticket, stale_after), takeover)
        if also is not None:
            also(pushed)

    return vet


def with_cost(config: Config, max_cost_usd: float | None) -> Config:
    """``config`` with ``--max-cost-usd`` as ``agent.max_cost_usd`` (None: as it is)."""
    if max_cost_usd is None:
        return config
    agent = msgspec.structs.replace(config.agent, max_cost_usd=max_cost_usd)
    changed = msgspec.structs.replace(config, agent=agent)
    changed.__dict__.update(config.__dict__)  # the file it came from, and its tables
    return changed


def _head(repo: Repo) -> str | None:
    """The commit HEAD is at (None on a branch with no commit yet): the run's base."""
    found = repo.git.run(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], check=False)
    return (found.text.strip() or None) if found.ok else None


def _remember_branch(repo: Repo, state: layout.Layout, ticket: str, sink: EventSink) -> None:
    """When the branch names another ticket: say which one this run is, and remember it so
    that catchup, resume and the hooks on this branch find it."""
    from cairn.state import branches

    branch, note = branches.branch_note(repo, ticket)
    if branch is None or note is None:
        return
    sink.event("note", message=note, branch=branch)
    try:
        branches.remember(state, branch, ticket)
    except OSError as exc:
        sink.event("warning", message=f"could not record branch {branch} → {ticket}: {exc}")


def resume(
    workspace: Path | str,
    ticket: str | None = None,
    *,
    agent: str | None = None,
    max_turns: int | None = None,
    takeover: bool = False,
    allow_shared: bool = False,
    sink: EventSink | None = None,
    remote: str | None = None,
    max_cost_usd: float | None = None,
) -> RunOutcome:
    """``cairn resume``: continue an interrupted run in its own run directory. Refused while
    another ticket runs in this work tree, unless ``allow_shared``."""
    from cairn import tickets
    from cairn.state import branches, catchup
    from cairn.state.lease import acquire
    from cairn.util.durations import parse_duration

    repo, config, state = layout.discover(workspace)
    config = with_cost(config, max_cost_usd)
    note = None
    if ticket:
        ticket = tickets.validate(ticket)
    else:
        ticket, note = branches.default_ticket(repo, state)
    chosen = portable.chosen(config, remote)
    vet = remote_vet(repo, config, ticket, takeover)
    side = portable.opened(repo, config, state, ticket, chosen, new=False, vet=vet)
    if side is not None:  # a rebuilt work tree is on the ticket's branch: its cairn.toml counts
        repo, config, state = layout.discover(workspace)
        config = with_cost(config, max_cost_usd)
    stale_after = parse_duration(config.marker.stale_after)
    report = catchup.build(repo, config, state, ticket, stale_after)
    run_id = _resumable(report, takeover)
    ref = RunRef(state, ticket, run_id)
    max_turns = max_turns if max_turns is not None else carried.max_turns(ref)
    chain = agents_for(config, agent, max_turns)
    kind = chain.primary.name
    sink = sink or NoEvents()
    loaded = _run_plan(ref)
    preflight(chain, repo, config, loaded)
    runstate.check_writable(state, ticket, run_id)
    if not allow_shared:
        sharing.refuse_shared(state, repo.toplevel, ticket, stale_after, "resume")
    lease = acquire(state, ticket, stale_after=stale_after, takeover=takeover)
    try:
        runstate.catch_up(ref)
        reclaiming.after_a_dead_owner(ref, lease, config.agent.cutoff_timeout_ms / 1000, sink)
        runstate.record(
            ref,
            "run_started",
            ticket=ticket,
            run=ref.run_id,
            resumed=True,
            agent=kind,
            workspace=str(repo.toplevel),
            owner=msgspec.to_builtins(lease.me),
            **carried.given(max_turns),
        )
        phase, round_number = reclaiming.reclaim(ref, lease, report)
    except BaseException:
        lease.release()
        raise
    budget = session_budget(config, max_turns, chain)
    sink.event("run_resumed", run=ref.run_id, ticket=ticket, phase=phase, agent=kind, **budget)
    if note is not None:
        sink.event("note", message=note)
    if lease.warning is not None:
        sink.event("warning", message=lease.warning)
    orchestrator = Orchestrator(repo, config, ref, lease, loaded, chain, sink, max_turns)
    orchestrator.resumed_from = carried.resumed_from(ref)
    orchestrator.resume_session_id = carried.session_id(ref, "coder", chain.primary.name)
    orchestrator.check_tree(report.snapshot.commit if report.snapshot else None)
    return portable.execute(orchestrator, side, sink, phase, round_number)


def _resumable(report: CatchupReport, takeover: bool) -> str:
    """The run to resume; BadInput when the ticket's last run is live, finished or absent.
    ``--takeover`` goes ahead over an owner on another host, which cannot be checked."""
    ticket = report.ticket
    remote = report.owner_state == "remote"
    if report.state == "in_progress" and remote and not takeover:
        raise BadInput(
            f"ticket {ticket} is being run on another host ({report.owner_detail}); wait for "
            "it, or pass --takeover if that run is dead"
        )
    if report.state == "in_progress" and not remote:
        raise BadInput(
            f"ticket {ticket} is being run right now ({report.owner_detail}); wait for it, "
            "or stop it first"
        )
    if report.state == "none" or report.run is None:
        raise BadInput(f"ticket {ticket} has no run to resume; start one with cairn run PLAN")
    if report.state == "done":
        raise BadInput(f"the last run of ticket {ticket} finished; there is nothing to resume")
    return report.run


def _run_plan(ref: RunRef) -> Plan:
    """The plan the run started with (its ``01_orchestrator_plan.json``)."""
    plan_file = layout.latest_artifact(ref.run_dir, "orchestrator", "plan")
    missing = BadInput(f"run {ref.run_id} has no plan artifact; start a new run with cairn run")
    if plan_file is None:
        raise missing
    json_plan = plan_file.path.with_suffix(".json")
    data = durable.read_state_file(json_plan, "plan artifact", PLAN_ARTIFACT_LIMIT)
    if data is None:
        raise missing
    try:
        return msgspec.json.decode(
            durable.decode_text(data, json_plan, "plan artifact"), type=Plan, strict=False
        )
    except ValueError:
        raise BadInput(
            f"plan artifact {json_plan} is not a plan cairn wrote; restore it, or start a new "
            "run with cairn run"
        ) from None


def _plan_markdown(loaded: Plan) -> str:
    lines = [f"# Plan{': ' + loaded.title if loaded.title else ''}", ""]
    for task in loaded.tasks:
        lines += [f"### Task {task.number}: {task.title}", ""]
        if task.details:
            lines += [task.details, ""]
        if task.acceptance:
            lines += ["Acceptance criteria:", *[f"- {a}" for a in task.acceptance], ""]
    return "\n".join(lines)
