"""Whose fault a segment's failure is, as the type of the ``ApplicationError`` the segment
activity raises (the workflow's retry policy reads it):

- ``cairn_infra``: the infrastructure's — the shared remote unreachable or gone, a push or
  fetch that failed, Temporal unavailable, a full disk, a newer attempt holding the refs.
  Retried without a count limit at a capped backoff (``[temporal] max_backoff``): an outage
  of any length never fails a ticket; status shows ``waiting: <reason>`` meanwhile.
- ``cairn_ticket``: the ticket's own — a bad configuration or plan (``BadInput``), a state the
  run cannot read, a bug. Not retried by Temporal; the workflow runs the segment again until
  ``[fleet] max_attempts`` of them failed, then the ticket is ``failed`` with the reason.

Also the one line a cancelled attempt leaves in the worker's output (not a traceback)."""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from cairn.errors import BadInput, GitError, SaveTimeout

INFRA = "cairn_infra"
TICKET = "cairn_ticket"
REASON_CHARS = 300
# a git failure that says the remote, the network or the disk failed (not the ticket)
_INFRA_TEXT = ("No space left on device",)


def is_infra(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is the infrastructure's fault: git (the clone, the
    remote), the operating system (network, disk), Temporal's client, a fenced push, a
    snapshot out of time. Everything else, bad input first, is the ticket's own."""
    from temporalio.service import RPCError

    from cairn.remote.refs import Fenced, PushFailed

    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        seen.add(id(found))
        if isinstance(found, BadInput):
            return False
        # OSError: the network, a full disk (ENOSPC), a file the worker cannot write
        infra = (GitError, Fenced, PushFailed, SaveTimeout, OSError, RPCError, TimeoutError)
        if isinstance(found, infra):
            return True
        if any(text in str(found) for text in _INFRA_TEXT):
            return True
        found = found.__cause__ or found.__context__
    return False


def reason(exc: BaseException) -> str:
    """One line of what went wrong: the message, else the type's name."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:REASON_CHARS]


def classify(exc: BaseException) -> ApplicationError:
    """The error the segment activity raises for ``exc``: retried without limit when it is
    the infrastructure's (``cairn_infra``), not retried when it is the ticket's own
    (``cairn_ticket``: the workflow counts it against ``max_attempts``)."""
    if is_infra(exc):
        return ApplicationError(reason(exc), type=INFRA)
    return ApplicationError(reason(exc), type=TICKET, non_retryable=True)


def failed(ticket: str, exc: Exception) -> ApplicationError:
    """``classify(exc)``, said in one line instead of a traceback when a newer attempt fenced
    this one (at-least-once at work, not an error: the benign category, which temporalio
    logs without a traceback); a real error keeps its traceback in the worker's output."""
    error = classify(exc)
    if not _fenced(exc):
        return error
    activity.logger.warning("cairn: %s: attempt %d stops: %s", ticket, _attempt(), error.message)
    return ApplicationError(error.message, type=INFRA, category=ApplicationErrorCategory.BENIGN)


def _fenced(exc: BaseException) -> bool:
    from cairn.remote.refs import Fenced

    return isinstance(exc, Fenced) or isinstance(exc.__cause__, Fenced)


def _attempt() -> int:
    return activity.info().attempt


def cancelled(ticket: str) -> ApplicationError | None:
    """Say in one line why the running attempt of ``ticket`` was cancelled. None when a
    person asked (pause, stop: the cancellation goes on as one); else (a timeout the server
    noticed, the worker shutting down) the failure to raise in its place, of the benign
    category, which temporalio logs without a traceback: the attempt is retried."""
    details = activity.cancellation_details()
    attempt = _attempt()
    asked = details is None or details.cancel_requested or details.paused or details.reset
    if details is not None and details.timed_out:
        why = "timed out at the server (no heartbeat reached it in time)"
    elif details is not None and details.worker_shutdown:
        why = "the worker shuts down"
    elif details is not None and details.not_found:
        why = "the server no longer knows it"
    elif details is not None and details.paused:
        why = "the activity was paused at the server"
    elif details is not None and details.reset:
        why = "the activity was reset at the server"
    else:
        why = "a pause or stop was asked"
    activity.logger.warning("cairn: %s: attempt %d cancelled: %s", ticket, attempt, why)
    if asked:
        return None
    return ApplicationError(
        f"attempt {attempt} cancelled: {why}",
        type=INFRA,
        category=ApplicationErrorCategory.BENIGN,
    )
