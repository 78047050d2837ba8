"""cairn's vocabulary: every status, reason, event and environment name, spelled once (the
environment's in ``cairn.envnames``, which imports nothing, re-exported here).

docs/architecture.md has the glossary; the names here are what the state files, the journal and
``--json`` carry, so they never change without a format version bump.
"""

from __future__ import annotations

from typing import Literal, TypeGuard, get_args

# The environment's names, spelled in cairn.envnames: it imports nothing, for the hot paths.
from cairn.envnames import *  # noqa: F403

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
# How a run ends (RunOutcome.status, the journal's run_finished): "needs_review" when blocking
# findings remain after loop.max_rounds, "needs_input" when the agent made no progress. The
# fleet's tickets end in the same words (FleetState).
RunStatus = Literal["completed", "interrupted", "needs_review", "needs_input"]
# The run's work is over (the journal's run_finished): the marker is gone, nothing to resume;
# a fleet ticket whose run finished ends in the same state.
Finished = Literal["completed", "needs_review"]
FINISHED: tuple[Finished, ...] = get_args(Finished)
# The format of what a run writes: its journal (run_started's "format") and its RunOutcome.
# Format 1 wrote no "format" and said OLD_NEEDS_REVIEW for "needs_review"; run_status() reads
# either.
RUN_FORMAT = 2
OLD_NEEDS_REVIEW = "needs_manual_review"


def run_status(written: object) -> str:
    """A run status as any format wrote it, in today's words."""
    text = str(written) if written is not None else ""
    return "needs_review" if text == OLD_NEEDS_REVIEW else text


def finished(status: str) -> TypeGuard[Finished]:
    """Whether a run that ended with ``status`` finished its work."""
    return status in FINISHED


# agent.permissions: cairn's permission preset for the agent, or only the user's own flags.
AgentPermissions = Literal["preset", "user"]

# Why a dispatch ended, as the agent adapter reports it.
StopReason = Literal["completed", "max_turns", "timeout", "interrupted", "crashed", "error"]
STOP_REASONS: tuple[StopReason, ...] = get_args(StopReason)

# A cutoff: a dispatch that ended without finishing its work. The names are what the summary's
# status line, the marker and the journal say; a stop reason maps to one by CUTOFF_FOR.
# "disk_full": cairn could not write its state (ENOSPC): the run stops, resumable.
# "budget": the run's cost passed agent.max_cost_usd, or the fleet's spend reached
# fleet.max_cost_usd (SIGUSR2 to cairn: it stops after the turn in flight): resumable.
# "stall": the fleet supervisor saw no progress for fleet.stall_timeout (SIGUSR1 to cairn).
# "no_progress": dispatches in a row changed nothing: the run needs input (status needs_input).
# "fenced": a --remote run's push was refused, since another machine continued the ticket.
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
    "rate_limit",
    "usage_limit",
    "fenced",
]
CUTOFF_FOR: dict[StopReason, CutoffReason] = {
    "completed": "incomplete",  # the agent stopped, but its tasks are not all done
    "max_turns": "max_turns",
    "timeout": "timeout",
    "interrupted": "signal",
    "crashed": "crash",
    "error": "error",
}

# How an agent's failed dispatch is classified (cairn.agents.limits): the API's rate limit (429,
# an overload), the plan's quota spent (a usage limit, often with its reset time), refused
# credentials, or any other error. A limit is where on_limit applies.
FailureKind = Literal["rate_limit", "usage_limit", "auth", "error"]
FAILURE_KINDS: tuple[FailureKind, ...] = get_args(FailureKind)
LimitKind = Literal["rate_limit", "usage_limit"]
LIMIT_KINDS: tuple[LimitKind, ...] = get_args(LimitKind)
# agent.on_limit: what a run does when its agent hits a limit: move to the next agent of its
# fallback chain, wait for the reset, or stop (resumable).
OnLimit = Literal["failover", "wait", "stop"]
ON_LIMIT: tuple[OnLimit, ...] = get_args(OnLimit)

# The phases a run's loop can be configured with (loop.phases); a marker also says "done".
LoopPhase = Literal["implement", "evaluate", "review", "fix"]
LOOP_PHASES: tuple[LoopPhase, ...] = get_args(LoopPhase)

# Where a ticket stands, as catch-up and status see it: from its marker (or none), and
# "needs_input" from its run's journal (the no-progress stop).
TicketState = Literal["in_progress", "interrupted", "stale", "done", "none", "needs_input"]

# Where a ticket stands in the embedded fleet (its fleet record, ``cairn fleet status``):
# "waiting": its run stopped on an agent's usage or rate limit and no fallback was free; it starts
# again at the reset, and the wait is not an attempt.
# "budget" waits for the fleet's spend to fall under fleet.max_cost_usd (a new supervisor with a
# higher cap); "paused" and "stopped" are a person's (cairn fleet pause|stop TICKET); "approved"
# is a person's verdict on a finished ticket's branch (cairn review TICKET --approve).
FleetState = Literal[
    "queued",
    "running",
    "retrying",
    "waiting",
    "budget",
    "paused",
    "interrupted",
    "stopped",
    "needs_review",
    "needs_input",
    "completed",
    "failed",
    "approved",
]
FLEET_STATES: tuple[FleetState, ...] = get_args(FleetState)

# Where a ticket's workflow stands on Temporal (its status query and memo): live ones, then the
# ones it ends in.
WorkflowState = Literal[
    "queued",
    "running",
    "retrying",
    "pausing",
    "paused",
    "stopping",
    "completed",
    "needs_review",
    "interrupted",
    "failed",
    "stopped",
]
WORKFLOW_STATES: tuple[WorkflowState, ...] = get_args(WorkflowState)

# The final states of a ticket, on either engine: the fleet does not run it again by itself.
# "interrupted" is final once its attempts (segments) are spent, "stopped" until the next
# `cairn fleet start`; the other four are final whatever comes next (SETTLED_STATES). Every final
# state but a finished run's ("completed", "needs_review") may be retried: cairn fleet retry.
FINAL_STATES: frozenset[FleetState] = frozenset(
    {"completed", "needs_review", "needs_input", "failed", "interrupted", "stopped", "approved"}
)
SETTLED_STATES: frozenset[FleetState] = FINAL_STATES - {"interrupted", "stopped"}
RETRYABLE_STATES: frozenset[FleetState] = FINAL_STATES - {*FINISHED, "approved"}
# A person reviews a ticket whose run finished: its branch is there to read, no run is in flight.
# A review that requests changes starts a fix round (cairn.fleet.fixround); approving it makes it
# "approved". The verdicts, as POST /api/v1/tickets/{id}/review and `cairn review` take them.
REVIEWABLE_STATES: frozenset[FleetState] = frozenset({*FINISHED, "approved"})
ReviewVerdict = Literal["request_changes", "approve"]
REVIEW_VERDICTS: tuple[ReviewVerdict, ...] = get_args(ReviewVerdict)

# Whom a notified state is for ([fleet] notify_attention, docs/fleet.md "Notifications"): a
# person must act ("needs_you": a question, a review, the budget, a failure, a usage limit no
# fallback agent can take over, attempts spent) or it is news (done, retrying, started). The
# states that always need a person; "waiting" does on a usage limit (a rate limit passes by
# itself) and "interrupted" once its attempts are spent (which is when it is final):
# ``cairn.fleet.notify.attention`` decides.
Attention = Literal["needs_you", "news"]
NEEDS_YOU_STATES: frozenset[FleetState] = frozenset(
    {"needs_input", "needs_review", "budget", "failed", "waiting", "interrupted"}
)
NEWS_STATES: frozenset[FleetState] = frozenset({"completed", "retrying", "running"})
# What a person does about each need, as the message says it ({ticket}: the ticket).
TO_DO: dict[FleetState, str] = {
    "needs_input": 'answer in cairn: cairn answer {ticket} "…" / cairn resume {ticket}',
    "needs_review": (
        "approve or request changes: cairn review {ticket} --approve | --request-changes"
    ),
    "budget": "raise the budget: [fleet] max_cost_usd in cairn.toml, then cairn fleet start",
    "failed": "see why: cairn catchup {ticket}, then cairn fleet retry {ticket}",
    "waiting": (
        "nothing, it starts again at the reset; to go on sooner, add a fallback agent "
        "([agent] fallback) or raise the plan's limit"
    ),
    "interrupted": "see why: cairn catchup {ticket}, then cairn fleet retry {ticket}",
}
# A webhook's message format ([fleet] notify entries): each chat service's native message, or
# cairn's own JSON.
ChatFormat = Literal["slack", "discord", "teams", "json"]
CHAT_FORMATS: tuple[ChatFormat, ...] = get_args(ChatFormat)

# What runs the fleet's tickets ([fleet] engine): a supervisor here, or workflows on Temporal.
Engine = Literal["embedded", "temporal"]
ENGINES: tuple[Engine, ...] = get_args(Engine)
# What a person asks of one fleet ticket: cairn fleet pause|resume|stop|retry TICKET; "fix" (a
# fix round of its finished run, cairn.fleet.fixround) and "approve" (cairn review TICKET).
FleetAction = Literal["pause", "resume", "stop", "retry", "fix", "approve"]
FLEET_ACTIONS: tuple[FleetAction, ...] = get_args(FleetAction)
# The actions of the dashboard's buttons and its POST /api/v1/tickets/{id}/<action>, as
# cairn fleet pause|resume|stop|retry (a fix round and an approval come from a review).
CONTROL_ACTIONS: tuple[FleetAction, ...] = ("pause", "resume", "stop", "retry")
# Who asked it, as the ticket's journal records: the command line, the dashboard's buttons,
# another program through the dashboard's JSON API, the fleet itself (a land that waited for
# its fix round), or a person's `/cairn …` comment on the tracker's issue.
Asker = Literal["cli", "dashboard", "api", "fleet", "tracker"]
ASKERS: tuple[Asker, ...] = get_args(Asker)

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
    "agent_switched",
    "turn",
    "task",
    "finding",
    "gate",
    "deferred",
    "snapshot",
    "cutoff",
    "marker_cleared",
    "asked",
    "answered",
    "need_raised",
    "need_met",
    "fix_round",
    "approved",
    "landed",
]
JOURNAL_EVENTS: tuple[JournalEvent, ...] = get_args(JournalEvent)

# Named crash points (cairn.faults, docs/reliability.md "Crash points"): where a test or a
# chaos campaign kills the process, the way databases test recovery. Each names what is done
# when the process dies there, and what is not.
CrashPoint = Literal[
    "run.snapshot",  # the run's last snapshot taken; its summary not written
    "run.summary",  # the run summary written; the end not journaled
    "run.ended",  # the end journaled and the marker removed; the lease not released
    "fleet.record",  # a ticket's new state written; the tracker and webhooks not told
    "fleet.told",  # the tracker's messages and the webhooks' in the outbox; nothing sent
    "fleet.sending",  # a message marked as being sent; its request not made
    "fleet.push",  # the ticket's branch pushed; no pull request looked for
    "fleet.pull_request",  # the pull request opened or adopted; not recorded as sent
    "fleet.comment",  # a comment posted; not recorded as sent
    "fleet.labels",  # the labels changed; not recorded as sent
    "fleet.state",  # a Linear issue moved to its workflow state; not recorded as sent
    "fleet.link",  # a Linear issue's link to the branch or pull request attached; not recorded
    "fleet.approve",  # the approving review posted; not recorded as sent
    "fleet.notify",  # a webhook delivered; not recorded as sent
    "fleet.worktree_removed",  # prune: the worktree removed; its record not updated
]
CRASH_POINTS: tuple[CrashPoint, ...] = get_args(CrashPoint)

# --- agents' own words ---------------------------------------------------------------------------
# The model Claude Code names on a message of its own in its stream (an API error's text).
CLAUDE_SYNTHETIC_MODEL = "<synthetic>"
