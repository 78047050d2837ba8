"""What a run's report in Actions says, gathered once from its outcome and the job's environment:
the status line, the tasks done, the cost as measured, the ticket's branch and the job's run.
The step summary and the comment word the same facts (``cairn.ci.markdown``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from msgspec import Struct

from cairn.errors import CairnError
from cairn.fleet.gitworktree import BRANCH_PREFIX
from cairn.run.orchestrator.outcome import RunOutcome
from cairn.state import accounting
from cairn.state.layout import SUMMARY_ARTIFACT, SUMMARY_ROLE, artifacts
from cairn.summary import Summary, Task, load
from cairn.terms import RunStatus
from cairn.util.text import counted

RERUN = "re-run this job to continue"
DEFAULT_SERVER = "https://github.com"


class Facts(Struct, frozen=True, kw_only=True):
    ticket: str
    status: RunStatus
    headline: str  # the status line, without markup: "ticket GH-7 was interrupted (signal)"
    tasks: str  # "3 of 5", "3 of 5 (1 skipped or deferred)" or "unknown"
    cost: str  # "$0.84 (182k tokens)", "unknown", "at least $0.84 (…)"
    activity: str  # "12 turns in 3 dispatches, 1 review round, 4m 12s"
    branch: str  # cairn/<ticket>
    branch_url: str | None
    job: str | None  # "run 4242, attempt 2"
    job_url: str | None
    snapshot: str | None  # the last snapshot's commit, short
    resumable: bool  # stopped before its end, its work on the remote: a re-run continues it
    pushed: str  # where the run's work is: "origin (cairn/GH-7 at 1a2b3c4d5e6f)", or why not


def gather(outcome: RunOutcome, environ: Mapping[str, str]) -> Facts:
    """The facts of ``outcome`` in the job ``environ`` describes; reads the change summaries
    (a summary that cannot be read makes the tasks ``unknown``, never an error)."""
    server = (environ.get("GITHUB_SERVER_URL") or DEFAULT_SERVER).rstrip("/")
    repo = environ.get("GITHUB_REPOSITORY") or None
    run_id = environ.get("GITHUB_RUN_ID") or None
    attempt = environ.get("GITHUB_RUN_ATTEMPT") or None
    remote = outcome.remote
    branch = remote.branch if remote is not None else f"{BRANCH_PREFIX}{outcome.ticket}"
    stopped = outcome.status in ("interrupted", "needs_input")
    job = None
    if run_id is not None:
        job = f"run {run_id}" + (f", attempt {attempt}" if attempt else "")
    return Facts(
        ticket=outcome.ticket,
        status=outcome.status,
        headline=headline(outcome),
        tasks=tasks_text(outcome),
        cost=cost_text(outcome.usage, outcome.usage_unknown),
        activity=activity_text(outcome),
        branch=branch,
        branch_url=f"{server}/{repo}/tree/{branch}" if repo else None,
        job=job,
        job_url=f"{server}/{repo}/actions/runs/{run_id}" if repo and run_id else None,
        snapshot=outcome.snapshot[:12] if outcome.snapshot else None,
        resumable=stopped and remote is not None and remote.pushed,
        pushed=pushed_text(outcome),
    )


def pushed_text(outcome: RunOutcome) -> str:
    """Where the run's work is when the job ends: on the remote (a re-run continues it), or
    only on this runner, which does not outlive the job (and why)."""
    remote = outcome.remote
    if remote is None:
        return "nowhere: the run had no --remote, so its work ends with this runner"
    if remote.fenced is not None:
        return f"not pushed: {remote.fenced}"
    if not remote.pushed:
        return f"NOT pushed to {remote.name} ({remote.error}): its last work ends with this runner"
    at = f" at `{remote.commit[:12]}`" if remote.commit else ""
    return f"{remote.name} (`{remote.branch}`{at}, its snapshot and run state)"


def headline(outcome: RunOutcome) -> str:
    """One line: what became of the ticket, and for a stop, why."""
    ticket = outcome.ticket
    error = accounting.error_text(outcome.error)
    if outcome.status == "completed":
        return f"ticket {ticket} completed"
    if outcome.status == "needs_review":
        return f"ticket {ticket} needs review: blocking findings remain in its last review"
    if outcome.status == "needs_input":
        return f"ticket {ticket} needs input: {error or 'the agent made no progress'}"
    why = f"{outcome.reason}: {error}" if error else (outcome.reason or "stopped")
    return f"ticket {ticket} was interrupted ({why})"


def cost_text(usage: Mapping[str, object], unknown: int) -> str:
    """The run's cost as its agents reported it: ``$0.84 (182k tokens)``; ``unknown`` when no
    agent reported one (never a made-up 0); ``at least …`` when some dispatches' usage is
    unknown."""
    made = accounting.usage(usage)
    cost = made["cost_usd"]
    extra = []
    if made["total_tokens"]:
        extra.append(f"{accounting.tokens_text(made['total_tokens'])} tokens")
    if unknown:
        extra.append(f"usage of {counted(unknown, 'dispatch', 'dispatches')} unknown")
    text = "unknown" if cost is None else ("at least " if unknown else "") + f"${cost:.2f}"
    return text + (f" ({'; '.join(extra)})" if extra else "")


def activity_text(outcome: RunOutcome) -> str:
    dispatches = counted(outcome.dispatches, "dispatch", "dispatches")
    parts = [f"{counted(outcome.turns, 'turn')} in {dispatches}"]
    if outcome.rounds:
        parts.append(counted(outcome.rounds, "review round"))
    parts.append(elapsed_text(outcome.elapsed_seconds))
    return ", ".join(parts)


def elapsed_text(seconds: float) -> str:
    """``42s``, ``4m 12s``, ``1h 05m``."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def tasks_text(outcome: RunOutcome) -> str:
    """``3 of 5`` tasks completed (and how many were skipped or deferred); ``unknown`` when no
    change summary of the run can be read."""
    tasks = plan_tasks(outcome)
    if tasks is None:
        return "unknown"
    done = sum(1 for t in tasks if t.status == "completed")
    aside = sum(1 for t in tasks if t.status in ("skipped", "deferred"))
    return f"{done} of {len(tasks)}" + (f" ({aside} skipped or deferred)" if aside else "")


def plan_tasks(outcome: RunOutcome) -> list[Task] | None:
    """The plan's tasks as the run left them: the last change summary's, or, when that one is a
    review round's (it lists findings), the run's last implementation summary's."""
    latest = _load(Path(outcome.summary_path)) if outcome.summary_path else None
    if latest is not None and latest.mode == "implementation":
        return list(latest.tasks)
    for artifact in reversed(artifacts(Path(outcome.run_dir))):
        if (artifact.role, artifact.name) != (SUMMARY_ROLE, SUMMARY_ARTIFACT):
            continue
        earlier = _load(artifact.path)
        if earlier is not None and earlier.mode == "implementation":
            return list(earlier.tasks)
    return None


def _load(path: Path) -> Summary | None:
    try:
        return load(path)
    except (OSError, ValueError, CairnError):  # unreadable: the tasks are unknown
        return None
