"""cairn's vocabulary: every status, reason, event and environment name, spelled once.

docs/architecture.md has the glossary; the names here are what the state files, the journal and
``--json`` carry, so they never change without a format version bump.
"""

from __future__ import annotations

from typing import Literal, get_args

# --- the change summary ------------------------------------------------------------------------
# A task's status as the summary writes it ("in progress" with a space: it is read by people).
TaskStatus = Literal["pending", "in progress", "completed", "skipped", "deferred"]
TASK_STATUSES: tuple[TaskStatus, ...] = get_args(TaskStatus)
SetAside = Literal["skipped", "deferred"]

# How a review finding was addressed; "pending" until it is.
FindingResolution = Literal["FIXED", "NOT_FIXED", "ALREADY_RESOLVED"]
FINDING_RESOLUTIONS: tuple[FindingResolution, ...] = get_args(FindingResolution)
FindingStatus = Literal["pending", "FIXED", "NOT_FIXED", "ALREADY_RESOLVED"]
FINDING_STATUSES: tuple[FindingStatus, ...] = get_args(FindingStatus)

# A quality gate's or an acceptance criterion's verdict.
Verdict = Literal["pass", "fail"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)

# Where the work a summary tracks stands, as its "## Status" line says ("In progress — task 2 of
# 5"). Not a TicketState: a ticket is "in_progress" only while a live owner runs it.
SummaryState = Literal["not_started", "in_progress", "completed", "interrupted"]

# --- runs --------------------------------------------------------------------------------------
# How a run ends (RunOutcome.status).
RunStatus = Literal["completed", "interrupted", "needs_manual_review", "needs_input"]

# Why a dispatch ended, as the agent adapter reports it.
# agent.permissions: cairn's permission preset for the agent, or only the user's own flags.
AgentPermissions = Literal["preset", "user"]

StopReason = Literal["completed", "max_turns", "timeout", "interrupted", "crashed", "error"]
STOP_REASONS: tuple[StopReason, ...] = get_args(StopReason)

# A cutoff: a dispatch that ended without finishing its work. The names are what the summary's
# status line, the marker and the journal say; a stop reason maps to one by CUTOFF_FOR.
# "disk_full": cairn could not write its state (ENOSPC): the run stops, resumable.
# "budget": the run's cost passed agent.max_cost_usd, or the fleet's spend reached
# fleet.max_cost_usd (SIGUSR2 to cairn: it stops after the turn in flight): resumable.
# "stall": the fleet supervisor saw no progress for fleet.stall_timeout (SIGUSR1 to cairn).
# "no_progress": dispatches in a row changed nothing: the run needs input (status needs_input).
CutoffReason = Literal[
    "max_turns",
    "timeout",
    "signal",
    "crash",
    "error",
    "incomplete",
    "disk_full",
    "budget",
    "stall",
    "no_progress",
]
CUTOFF_FOR: dict[StopReason, CutoffReason] = {
    "completed": "incomplete",  # the agent stopped, but its tasks are not all done
    "max_turns": "max_turns",
    "timeout": "timeout",
    "interrupted": "signal",
    "crashed": "crash",
    "error": "error",
}

# The phases a run's loop can be configured with (loop.phases); a marker also says "done".
LoopPhase = Literal["implement", "evaluate", "review", "fix"]
LOOP_PHASES: tuple[LoopPhase, ...] = get_args(LoopPhase)

# Where a ticket stands, as catch-up and status see it.
TicketState = Literal["in_progress", "interrupted", "stale", "done", "none"]

# Where a ticket stands in the embedded fleet (its fleet record, ``cairn fleet status``):
# "budget" waits for the fleet's spend to fall under fleet.max_cost_usd (a new supervisor with a
# higher cap); "paused" and "stopped" are a person's (cairn fleet pause|stop TICKET).
FleetState = Literal[
    "queued",
    "running",
    "retrying",
    "budget",
    "paused",
    "interrupted",
    "stopped",
    "needs_review",
    "needs_input",
    "completed",
    "failed",
]
FLEET_STATES: tuple[FleetState, ...] = get_args(FleetState)
# What a person asks of one fleet ticket: cairn fleet pause|resume|stop|retry TICKET.
FleetAction = Literal["pause", "resume", "stop", "retry"]

# Whether the owner of a run is still running it (catch-up's "owner_state").
Liveness = Literal["alive", "dead", "remote", "remote_stale", "unknown"]

# What a run's journal records, one event a line.
JournalEvent = Literal[
    "run_started",
    "run_finished",
    "run_interrupted",
    "takeover",
    "phase",
    "dispatch_started",
    "dispatch_finished",
    "dispatch_retried",
    "turn",
    "task",
    "finding",
    "gate",
    "deferred",
    "snapshot",
    "cutoff",
    "marker_cleared",
]
JOURNAL_EVENTS: tuple[JournalEvent, ...] = get_args(JournalEvent)

# --- environment -------------------------------------------------------------------------------
# What cairn sets for the agent it runs (and reads back in `cairn task …`, hooks and MCP).
ENV_RUN_DIR = "CAIRN_RUN_DIR"
ENV_TICKET = "CAIRN_TICKET"
ENV_DISPATCH_ID = "CAIRN_DISPATCH_ID"
ENV_MAX_TURNS = "CAIRN_MAX_TURNS"
ENV_PRESSURE_TURNS = "CAIRN_PRESSURE_TURNS"
ENV_TASK = "CAIRN_TASK"
ENV_TURN = "CAIRN_TURN"
# What the embedded fleet's supervisor sets for the attempts it starts: the ticket (a `cairn
# resume` with it is the fleet's own, not a person's by hand: cairn.fleet.byhand).
ENV_FLEET_ATTEMPT = "CAIRN_FLEET_ATTEMPT"
# What a worker of the fleet on Temporal sets for its runs (cairn.util.barrier).
ENV_CHECKPOINT_DIR = "CAIRN_CHECKPOINT_DIR"
ENV_CHECKPOINT_WAIT = "CAIRN_CHECKPOINT_WAIT"  # seconds a report waits for the worker's push
# What people set.
ENV_DEBUG = "CAIRN_DEBUG"  # show the traceback of an unexpected error

# --- agents' own words ---------------------------------------------------------------------------
# The model Claude Code names on a message of its own in its stream (an API error's text).
CLAUDE_SYNTHETIC_MODEL = "<synthetic>"
