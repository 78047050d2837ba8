"""Errors and exit codes: one tree of error types, one table of exit codes, one way to explain an
error to a user (the CLI and the MCP server both go through ``explain``)."""

from __future__ import annotations

import enum
import os

from cairn.envnames import ENV_DEBUG


class ExitCode(enum.IntEnum):
    """Every exit code cairn returns; docs/cli.md lists the same table."""

    OK = 0
    FAILURE = 1  # something went wrong, or a run needs review
    BAD_INPUT = 2  # bad input or a refused request: one line naming the fix, nothing written
    INTERRUPTED = 3  # a run was cut off; everything is saved and `cairn resume` continues
    SIGINT = 130  # Ctrl+C outside a run


class CairnError(Exception):
    """Base class: `str(err)` is the one-line message shown to the user."""

    exit_code: ExitCode = ExitCode.FAILURE


class BadInput(CairnError):
    """The user asked for something invalid; nothing was written."""

    exit_code = ExitCode.BAD_INPUT


class NotARepository(BadInput):
    pass


class Refused(BadInput):
    """A fleet request refused before anything changed, with the HTTP ``status`` and ``code``
    the dashboard's API answers it with (``{"error": {"code", "message"}}``); the command line
    exits 2 with the message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


class UnknownTicket(Refused):
    """No fleet ticket has the id asked for (404)."""

    def __init__(self, message: str) -> None:
        super().__init__(404, "unknown_ticket", message)


class NotApplicable(Refused):
    """The ticket's state does not allow what was asked: pause a completed ticket (409)."""

    def __init__(self, message: str) -> None:
        super().__init__(409, "not_applicable", message)


class LeaseBusy(BadInput):
    """The ticket has a live (or not yet stale) owner; nothing was written."""


class CorruptState(BadInput):
    """A state file (marker, summary, journal, review) cannot be read as what it should be."""


class GitError(CairnError):
    """A git command failed unexpectedly."""

    def __init__(self, args: list[str], returncode: int, problem: str) -> None:
        self.git_args = args
        self.returncode = returncode
        super().__init__(f"git {' '.join(args[:2])} failed: {problem}")


class SaveTimeout(CairnError):
    """The snapshot did not finish within its time budget; no ref was moved."""


class RestoreRefused(CairnError):
    """A restore would overwrite something no snapshot holds."""


def explain(exc: BaseException, debug_hint: str = "shows the traceback") -> tuple[ExitCode, str]:
    """The exit code and the one-line message for an error that reached the user.

    Re-raises an error cairn did not expect when ``CAIRN_DEBUG`` is set, so its traceback shows.
    """
    if isinstance(exc, CairnError):
        return exc.exit_code, str(exc)
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.SIGINT, "interrupted"
    if os.environ.get(ENV_DEBUG):
        raise exc
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        return (
            ExitCode.FAILURE,
            f"{exc.strerror or exc}{where}; check the permissions and free space",
        )
    what = " ".join(str(exc).split())
    return (
        ExitCode.FAILURE,
        f"internal error: {type(exc).__name__}: {what} ({ENV_DEBUG}=1 {debug_hint})",
    )
