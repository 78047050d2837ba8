"""What travels through Temporal: a segment's input, the progress it heartbeats, its result, and
the ticket workflow's input. Small on purpose (markers and shas, never diffs or transcripts),
plain dataclasses so the workflow sandbox and the payload converter both take them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Progress:
    """A segment's heartbeat: every sha in it is on the shared remote before it is sent."""

    attempt: int
    branch: str | None = None  # the sha of refs/heads/cairn/<ticket>
    snapshot: str | None = None  # the sha of refs/cairn/wip/<ticket>
    state: str | None = None  # the sha of refs/cairn/state/<ticket>
    marker: dict[str, str] = field(default_factory=dict)  # phase, task, status of the marker
    worker: str = ""  # host:pid of the worker that sent it
    generation: int = 0  # the fencing token of the attempt that sent it (its state commits')


@dataclass
class Carried:
    """What a ticket workflow hands to the run it continues as (history stays bounded)."""

    segments: int = 0  # segments run so far, across runs
    interrupted: int = 0  # segments that ended interrupted, counted against max_segments
    failures: int = 0  # segments that failed on the ticket's own error, against max_attempts
    paused: bool = False
    progress: Progress | None = None
    detail: str = ""
    # what people asked of the ticket, newest last: {"action", "by", "at"} (the last ASKED_KEPT)
    asked: list[dict[str, str]] = field(default_factory=list)


@dataclass
class TicketInput:
    ticket: str
    plan_name: str  # the plan's file name, e.g. PROJ-7.md (its suffix says its format)
    plan: str  # the plan's text: workers never read the user's queue
    remote: str  # the shared git remote every worker reaches (a URL or a path)
    base: str  # the branch cairn/<ticket> starts from
    max_segments: int = 3  # interrupted segments resumed before the ticket is left interrupted
    heartbeat_seconds: float = 30.0  # [temporal] heartbeat_timeout: a silent worker is dead
    max_attempts: int = 3  # segments failed on the ticket's own error before it is failed
    max_backoff_seconds: float = 60.0  # [temporal] max_backoff: the cap of a retry's backoff
    continue_every: int = 20  # segments per workflow run before it continues as new
    carried: Carried | None = None  # from the run this one continues


@dataclass
class SegmentInput:
    ticket: TicketInput
    segment: int  # 1 for the first, counting the workflow's segments


@dataclass
class SegmentResult:
    exit_code: int
    progress: Progress
    detail: str = ""


def workflow_id(fleet: str, ticket: str) -> str:
    """The ticket's workflow id: ``fleet`` is the repository's key (``[fleet] id`` or its root
    commit, ``cairn.scale.remote.fleet_key``), the same in every clone whatever the spelling of
    its remote, so a second start finds the first workflow instead of duplicating it."""
    return f"cairn:{fleet}:{ticket}"
