"""Printing results: JSON for machines, short plain lines for people, errors as one line.

Nothing here imports Typer, Click or Rich: the commands the fast path serves print
through it, and so do the same commands under Typer, so both print the same bytes.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

import msgspec

from cairn.errors import explain

P = ParamSpec("P")
R = TypeVar("R")

# What Rich, which printed these lines before, dropped: bell, backspace, vertical tab, form
# feed and carriage return (a line that rewrites itself on a terminal).
_CONTROL = str.maketrans("", "", "\a\b\v\f\r")


class PlainConsole:
    """``print`` for lines of text, the way the old Rich console printed them (tabs expanded,
    terminal control characters dropped), without Rich."""

    def __init__(self, stderr: bool = False) -> None:
        self._stderr = stderr

    def print(self, *objects: Any, **_style: Any) -> None:
        stream = sys.stderr if self._stderr else sys.stdout
        text = " ".join(str(item) for item in objects)
        lines = (line.translate(_CONTROL).expandtabs(8) for line in text.split("\n"))
        stream.write("\n".join(lines) + "\n")


console = PlainConsole()
err_console = PlainConsole(stderr=True)


def emit_json(data: Any) -> None:
    """A result as indented JSON: records as objects, times as ISO-8601 text."""
    sys.stdout.write(_escape_surrogates(json_text(data)) + "\n")


def json_text(data: Any) -> str:
    """``data`` (records, lists, dicts) as JSON indented by two spaces."""
    try:
        return msgspec.json.format(msgspec.json.encode(data), indent=2).decode()
    except UnicodeEncodeError:  # a path held with lone surrogates: written as escapes
        return json.dumps(msgspec.to_builtins(data), indent=2, ensure_ascii=False)


def _escape_surrogates(text: str) -> str:
    """A path that is not UTF-8 is held with lone surrogates (``surrogateescape``); in JSON they
    are written as ``\\udcXX`` escapes, which read back to the same path, not as "?"."""
    try:
        text.encode()
        return text
    except UnicodeEncodeError:
        return "".join(f"\\u{ord(c):04x}" if "\ud800" <= c <= "\udfff" else c for c in text)


def report_error(exc: BaseException, json: bool = False) -> int:
    """Print an error and return its exit code: ``cairn: error: …`` on stderr, or under
    ``--json`` the error object on stdout (``error_json``). An unexpected error is re-raised
    when ``CAIRN_DEBUG`` is set, so its traceback shows. Stdout's reader having gone
    (``cairn status | head``) is no error: nothing is said, and the exit code is 0."""
    if stdout_gone(exc):
        drop_stdout()
        return 0
    code, message = explain(exc)
    say_error(message, int(code), json)
    return int(code)


def stdout_gone(exc: BaseException) -> bool:
    """Whether ``exc`` is a write to a stdout whose reader has gone (a pipe into ``head``
    that ``head`` closed): a broken pipe, and fd 1 a pipe with no reader."""
    if not (isinstance(exc, OSError) and exc.errno == errno.EPIPE):
        return False
    import select

    poller = select.poll()
    poller.register(1, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def drop_stdout() -> None:
    """Point fd 1 at the null device: what Python still holds for stdout goes nowhere at
    exit, instead of failing again there."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)


def flush_streams(code: int) -> int:
    """Flush stdout and stderr before exiting with ``code``; stdout's reader having gone is
    not reported (``report_error``). Any other failure is raised."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError as exc:
        if not stdout_gone(exc):
            raise
        drop_stdout()
    return code


def say_error(message: str, code: int, json: bool) -> None:
    if json:
        sys.stdout.write(_escape_surrogates(error_json(message, code)) + "\n")
    else:
        err_console.print(f"cairn: error: {message}")


def say_warning(message: str) -> None:
    """``cairn: warning: <message>`` on stderr, whatever the output mode: what cairn drops or
    skips is said where people look."""
    sys.stderr.write(f"cairn: warning: {message}\n")
    sys.stderr.flush()


def error_json(message: str, code: int) -> str:
    """``{"error": {"message", "problem", "fix", "exit_code"}}`` on one line: ``message`` is the
    line ``cairn: error:`` would show, split at its first ``; `` into the problem and the fix
    (``fix`` is null when the message names none)."""
    problem, sep, fix = message.partition("; ")
    error = {"message": message, "problem": problem, "fix": fix if sep else None}
    return json.dumps({"error": {**error, "exit_code": code}}, ensure_ascii=False)


def wants_json(argv: Sequence[str]) -> bool:
    """Whether a command line asks for JSON: ``--json`` among its options (before ``--``)."""
    for word in argv:
        if word == "--":
            return False
        if word == "--json":
            return True
    return False


def guarded(fn: Callable[P, R]) -> Callable[P, R]:
    """For Typer commands: errors become their exit code and one line on stderr, or the error
    object on stdout when the command was given ``--json``."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        from typer import Exit  # loaded already: only Typer commands are guarded this way

        try:
            return fn(*args, **kwargs)
        except Exit:
            raise
        except (Exception, KeyboardInterrupt) as exc:
            raise Exit(report_error(exc, bool(kwargs.get("json")))) from None

    return wrapper
