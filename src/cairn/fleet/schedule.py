"""The supervisor's rules, without side effects: the retry backoff, which ticket goes next, what
a finished attempt means for its ticket, and the free-memory cap."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

from cairn.config import FleetConfig
from cairn.state.fleetstate import FleetState, FleetTicket
from cairn.util.durations import parse_duration

MEMINFO = "/proc/meminfo"
# The cutoff reason of an attempt cut short by the fleet's own stop: it does not count against
# fleet.max_attempts, and the next supervisor resumes it first.
STOPPED = "signal"


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


def after_attempt(
    config: FleetConfig,
    record: FleetTicket,
    exit_code: int | None,
    reason: str | None,
    detail: str | None,
    needs_input: bool,
    now: datetime,
) -> Verdict:
    """Where a ticket stands once an attempt has ended with ``exit_code`` (None: killed)."""
    if exit_code == 0:
        return Verdict("completed", None, None)
    if exit_code == 1 and reason == "needs_manual_review":
        return Verdict("needs_review", None, detail or "blocking findings remain")
    if exit_code == 2:
        return Verdict("failed", None, detail or "cairn refused the run (exit 2)")
    if needs_input:
        return Verdict("needs_input", None, detail or "the agent waits for a person")
    if reason == STOPPED:
        return Verdict("interrupted", None, "stopped with the fleet; the next start resumes it")
    why = reason or ("crash" if exit_code is None or exit_code < 0 else f"exit {exit_code}")
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
    return Verdict("retrying", now + timedelta(seconds=wait), f"{why}; retry in {wait:g}s")


def runnable(config: FleetConfig, record: FleetTicket, now: datetime) -> bool:
    """Whether a ticket not running now may start an attempt now."""
    if record.state == "queued":
        return True
    if record.state == "retrying":
        return record.next_attempt_at is None or record.next_attempt_at <= now
    return record.state == "interrupted" and record.last_reason == STOPPED


def pending(config: FleetConfig, record: FleetTicket) -> bool:
    """Whether a ticket still has an attempt ahead of it (now or after its backoff)."""
    return record.state in ("queued", "retrying") or (
        record.state == "interrupted" and record.last_reason == STOPPED
    )


def order(record: FleetTicket) -> tuple[int, str]:
    """Resumed work first (stopped, then retries due), then new tickets, by ticket id."""
    rank = {"interrupted": 0, "retrying": 1}.get(record.state, 2)
    return rank, record.ticket


def free_memory() -> int | None:
    """MemAvailable in bytes (Linux); None when unknown."""
    try:
        with open(MEMINFO, encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def memory_note(config: FleetConfig) -> str | None:
    """Why no new ticket may start for want of memory; None when it may."""
    free = free_memory()
    if free is None or free >= config.min_free_memory:
        return None
    mib = 1024 * 1024
    return (
        f"waiting: free memory {free // mib} MiB is below fleet.min_free_memory "
        f"{config.min_free_memory // mib} MiB"
    )
