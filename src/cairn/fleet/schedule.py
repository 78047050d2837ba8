"""The supervisor's rules: the retry backoff, which ticket goes next, what a finished attempt
means for its ticket, when the agents' limits hold tickets back (``waiting``), and the
free-memory and free-disk caps (the only things here that look at the machine)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import NamedTuple

from cairn.agents import limits
from cairn.config.records import FleetConfig
from cairn.fleet.fleetstate import RETRY_IN, FleetTicket
from cairn.state.limited import Held
from cairn.state.runstate import MIN_FREE_BYTES
from cairn.terms import LIMIT_KINDS, FleetAction, FleetState
from cairn.util import durable
from cairn.util.durations import parse_duration

# The cutoff reason of an attempt cut short by the fleet's own stop: it does not count against
# fleet.max_attempts, and the next supervisor resumes it first.
STOPPED = "signal"
# Tickets that wait for a person (paused, stopped) or for the fleet's budget: never started by
# this supervisor, and not finished either (the tracker lists them; `--once` exits 3).
HELD: tuple[FleetState, ...] = ("budget", "paused", "stopped")
MiB = 1024 * 1024


def backoff(config: FleetConfig, attempt: int) -> float:
    """Seconds to wait before attempt ``attempt + 1``: ``retry_backoff`` doubling after each
    attempt, capped at ``retry_backoff_cap``."""
    base = parse_duration(config.retry_backoff)
    cap = parse_duration(config.retry_backoff_cap)
    return float(min(cap, base * 2 ** max(0, attempt - 1)))


class Verdict(NamedTuple):
    state: FleetState
    next_attempt_at: datetime | None
    detail: str | None
    counted: bool = True  # False: the attempt does not count against fleet.max_attempts


def after_attempt(
    config: FleetConfig,
    record: FleetTicket,
    exit_code: int | None,
    reason: str | None,
    detail: str | None,
    needs_input: bool,
    now: datetime,
    *,
    held: FleetAction | None = None,
    budget: str | None = None,
    disk: str | None = None,
    reset: datetime | None = None,
) -> Verdict:
    """Where a ticket stands once an attempt has ended with ``exit_code`` (None: killed).
    ``held``: a person's pause or stop cut it off; ``budget``: the fleet's spend reached its
    cap and the run was told so; ``disk``: free disk space is under fleet.min_free_disk now;
    ``reset``: the soonest reset of the run's agents at a limit now (``soonest``)."""
    if exit_code == 0:
        return Verdict("completed", None, None)
    if exit_code == 1 and reason == "needs_review":
        return Verdict("needs_review", None, detail or "blocking findings remain")
    if exit_code == 2:
        return Verdict("failed", None, detail or "cairn refused the run (exit 2)")
    if needs_input or reason == "no_progress":
        return Verdict("needs_input", None, detail or "the agent made no progress")
    if held is not None:
        return Verdict(HOLDS[held], None, held_detail(held, record.ticket), False)
    if budget is not None:
        return Verdict("budget", None, budget, False)
    if reason == STOPPED:
        detail = "stopped with the fleet; the next start resumes it"
        return Verdict("interrupted", None, detail, False)
    if reason in LIMIT_KINDS:  # the run's agents are at a limit: not an attempt, it waits
        wait = backoff(config, max(1, record.attempt))  # none held any more: soon
        return Verdict("waiting", reset or now + timedelta(seconds=wait), detail or reason, False)
    why = reason or ("crash" if exit_code is None or exit_code < 0 else f"exit {exit_code}")
    if why == "disk_full" and disk is not None:  # no attempt is spent while the disk is full
        wait = backoff(config, max(1, record.attempt))
        return Verdict("retrying", now + timedelta(seconds=wait), f"disk full; {disk}", False)
    if detail:  # the run's own error line (an agent error, a crash): kept, not only its reason
        why = f"{why}: {detail}"
    if record.attempt >= config.max_attempts:
        return Verdict(
            "interrupted",
            None,
            f"{why}; {record.attempt} of {config.max_attempts} attempts used: "
            f"cairn resume {record.ticket} continues it",
        )
    wait = backoff(config, record.attempt)
    retry = f"{why}{RETRY_IN}{wait:g}s"
    return Verdict("retrying", now + timedelta(seconds=wait), retry)


def runnable(config: FleetConfig, record: FleetTicket, now: datetime) -> bool:
    """Whether a ticket not running now may start an attempt now."""
    if record.state == "queued":
        return True
    if record.state in ("retrying", "waiting"):
        return record.next_attempt_at is None or record.next_attempt_at <= now
    return record.state == "interrupted" and record.last_reason == STOPPED


def pending(config: FleetConfig, record: FleetTicket) -> bool:
    """Whether a ticket still has an attempt ahead of it (now, after its backoff, or after its
    agents' limits reset)."""
    return record.state in ("queued", "retrying", "waiting") or (
        record.state == "interrupted" and record.last_reason == STOPPED
    )


def soonest(chain: list[str], held: list[Held]) -> Held | None:
    """The limit of the chain's agents ``chain`` that resets first, among those ``held`` now
    (``state.limited.all_held``); None when none is."""
    found = [h for h in held if h.agent in chain]
    return min(found, key=lambda h: h.resets_at) if found else None


def blocked(chain: list[str], held: list[Held]) -> Held | None:
    """``soonest`` when every agent of the chain is at a limit now (a ticket started now would
    run into one), else None: a free agent takes the ticket's run."""
    names = {h.agent for h in held}
    return soonest(chain, held) if chain and all(n in names for n in chain) else None


def limit_detail(held: Held, now: datetime) -> str:
    """Why a ticket waits for ``held``'s reset, in one line: ``waiting: every agent is at a
    limit; usage limit of claude-code; resets 14:00 UTC``."""
    failure = limits.Failure(held.limit, held.text, resets_at=held.resets_at)
    guess = "" if held.reset_known else " (a guess: the agent did not say when)"
    return f"waiting: every agent is at a limit; {limits.describe(failure, held.agent, now)}{guess}"


HOLDS: dict[FleetAction, FleetState] = {"pause": "paused", "stop": "stopped"}


def held_detail(action: FleetAction, ticket: str) -> str:
    if action == "pause":
        return f"paused by a person; cairn fleet resume {ticket} lets it run again"
    return "stopped by a person; the next cairn fleet start starts it again"


def released(record: FleetTicket) -> FleetState:
    """The state a held ticket (paused, stopped, waiting for the budget) goes back to when it may
    run again: ``queued`` before its first run, else ``retrying`` (due now; the next attempt is
    a ``cairn resume``)."""
    return "queued" if record.attempt == 0 and record.last_reason is None else "retrying"


def ahead(config: FleetConfig, record: FleetTicket) -> bool:
    """Whether a ticket is not finished: it has an attempt ahead of it, or waits for a person or
    the budget (the tracker hears a transition, not an end; ``--once`` counts it)."""
    return pending(config, record) or record.state in HELD


# An error line that says cairn could not write for want of space.
NO_SPACE = ("No space left on device", "ENOSPC", "Disk quota exceeded")


def out_of_space(
    exit_code: int | None, reason: str | None, detail: str | None, disk: str | None
) -> bool:
    """Whether an attempt ended for want of disk space: its cutoff says ``disk_full``, or it
    failed with no outcome (a crash, exit 1) and its error says the disk is full, or the free
    space is under fleet.min_free_disk now (``disk``: the note that says so)."""
    if reason == "disk_full":
        return True
    if exit_code in (0, 2, 3) or reason not in (None, "crash", "error"):
        return False
    return any(words in (detail or "") for words in NO_SPACE) or disk is not None


def order(record: FleetTicket) -> tuple[int, str]:
    """Resumed work first (stopped, then retries and waits due), then new tickets, by ticket
    id."""
    rank = {"interrupted": 0, "retrying": 1, "waiting": 1}.get(record.state, 2)
    return rank, record.ticket


def free_memory() -> int | None:
    """The memory available to new processes without swapping, in bytes; None when unknown."""
    import psutil

    try:
        return int(psutil.virtual_memory().available)
    except (OSError, RuntimeError):
        return None


def memory_note(config: FleetConfig) -> str | None:
    """Why no new ticket may start for want of memory; None when it may."""
    free = free_memory()
    if free is None or free >= config.min_free_memory:
        return None
    return (
        f"waiting: free memory {free // MiB} MiB is below fleet.min_free_memory "
        f"{config.min_free_memory // MiB} MiB"
    )


def disk_note(config: FleetConfig, paths: Iterable[Path]) -> str | None:
    """Why no attempt may start for want of disk space (on the file system of the state root or
    of the worktrees): under ``fleet.min_free_disk``, or under what a run needs to start at
    all; None when it may, or when the space cannot be read."""
    need = max(config.min_free_disk, MIN_FREE_BYTES)
    for path in paths:
        try:
            free, probe = durable.free_space(path)
        except OSError:
            continue
        if free < need:
            return (
                f"waiting: free disk space {_mib(free)} on {probe} is below "
                f"fleet.min_free_disk {_mib(need)}"
            )
    return None


def _mib(size: int) -> str:
    whole = size % MiB == 0 or size >= 10 * MiB
    return f"{size // MiB} MiB" if whole else f"{size / MiB:.1f} MiB"
