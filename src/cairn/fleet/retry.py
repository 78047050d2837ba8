"""``cairn fleet retry TICKET…`` on the embedded engine: a failed, interrupted, stopped or
needs-input ticket is queued again, its attempts counted afresh; its next attempt resumes its
run (``cairn resume``: the run's summary says which tasks are done, none is redone), or starts
it when it never began. With ``--fresh-config`` the base branch's ``cairn.toml`` is committed
onto the ticket branch first (its worktree is where the run reads its configuration).

The change is a request like pause or stop (``cairn.fleet.control``): the running supervisor
carries it out, else the command itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cairn.config.records import Config
from cairn.defaults import CONFIG_FILE
from cairn.errors import BadInput
from cairn.fleet.fleetstate import FleetTicket
from cairn.fleet.fleetstatus import SHORT_SHA
from cairn.git import Repo, base_runner
from cairn.terms import RETRYABLE_STATES, FleetState

RETRIED = "retried"  # the record's last_reason once retried: its next attempt resumes


def refusal(record: FleetTicket) -> str | None:
    """Why ``record``'s ticket cannot be retried, or None."""
    state, ticket = record.state, record.ticket
    if state in RETRYABLE_STATES:
        return None
    if state == "completed":
        return (
            f"ticket {ticket} is completed, so there is nothing to retry; to run its plan "
            "again, give it a new ticket id"
        )
    if state == "needs_review":
        return (
            f"ticket {ticket} needs review (its run finished), so there is nothing to retry; "
            f"review its branch cairn/{ticket}"
        )
    if state == "approved":
        return (
            f"ticket {ticket} is approved (its run finished), so there is nothing to retry; "
            f"cairn review {ticket} --request-changes asks its agent for changes"
        )
    if state == "paused":
        return f"ticket {ticket} is paused, not ended; cairn fleet resume {ticket} lets it run"
    if state == "budget":
        return (
            f"ticket {ticket} waits for the fleet's budget; raise fleet.max_cost_usd and start "
            "the fleet again"
        )
    if state == "waiting":
        return (
            f"ticket {ticket} waits for its agents' limit to reset, not ended; the fleet starts "
            "it again at the reset (cairn fleet status shows when)"
        )
    return f"ticket {ticket} is {state}, not ended, so there is nothing to retry"


def changes(record: FleetTicket) -> dict[str, Any]:
    state: FleetState = "retrying"
    return {
        "state": state,
        "attempt": 0,
        "last_reason": RETRIED,
        "next_attempt_at": None,
        "detail": f"retried by a person (it was {record.state.replace('_', ' ')})",
    }


def base_of(repo: Repo, config: Config) -> str:
    """The branch new ticket branches start from (``cairn.fleet.workspaces``)."""
    return config.fleet.base or repo.current_branch() or "HEAD"


def used(record: FleetTicket, base: str) -> str:
    """Which configuration the ticket's next attempt reads, in words."""
    if record.worktree is None or not Path(record.worktree).is_dir():
        return f"{CONFIG_FILE} of {base} (the ticket has no worktree yet: it starts there)"
    tip = base_runner(Path(record.worktree)).out(["rev-parse", "HEAD"]).strip()
    fresh = f"(--fresh-config takes {base}'s)"
    return f"{CONFIG_FILE} of cairn/{record.ticket} at {tip[:SHORT_SHA]} {fresh}"


def check_fresh(repo: Repo, record: FleetTicket, base: str) -> None:
    """Refuse ``--fresh-config`` when it cannot be done without touching a person's work."""
    if repo.git.run(["rev-parse", "--verify", "-q", f"{base}:{CONFIG_FILE}"], check=False).ok:
        pass
    else:
        raise BadInput(
            f"{base} has no {CONFIG_FILE} to take; commit one there or retry without --fresh-config"
        )
    if record.worktree is None or not Path(record.worktree).is_dir():
        return
    git = base_runner(Path(record.worktree))
    if git.out(["status", "--porcelain", "--", CONFIG_FILE]).strip():
        raise BadInput(
            f"{CONFIG_FILE} has uncommitted changes in {record.worktree}; commit or discard "
            "them, then retry"
        )


def take_fresh(repo: Repo, record: FleetTicket, base: str) -> str:
    """Commit ``base``'s ``cairn.toml`` onto the ticket branch in its worktree; what was done,
    in words."""
    if record.worktree is None or not Path(record.worktree).is_dir():
        return f"{CONFIG_FILE} of {base} (the ticket has no worktree yet: it starts there)"
    sha = repo.git.out(["rev-parse", "--verify", f"{base}^{{commit}}"]).strip()
    git = base_runner(Path(record.worktree))
    git.run(["checkout", "-q", sha, "--", CONFIG_FILE])
    if not git.out(["status", "--porcelain", "--", CONFIG_FILE]).strip():
        tip = git.out(["rev-parse", "HEAD"]).strip()
        return f"{CONFIG_FILE} of cairn/{record.ticket} at {tip[:SHORT_SHA]}, the same as {base}'s"
    message = (
        f"cairn: take {base}'s {CONFIG_FILE} for the retry of {record.ticket}\n\n"
        "cairn fleet retry --fresh-config: the resumed run reads this configuration.\n"
    )
    git.run(["commit", "-q", "--no-verify", "-m", message, "--", CONFIG_FILE])
    tip = git.out(["rev-parse", "HEAD"]).strip()
    return f"{base}'s {CONFIG_FILE} committed onto cairn/{record.ticket} as {tip[:SHORT_SHA]}"
