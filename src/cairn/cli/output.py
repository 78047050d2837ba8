"""Printing results: JSON for machines, short plain lines for people, errors and warnings as one
line each. The one way a command prints; Rich is the live view of ``cairn run`` only
(``cairn.cli.display``).
"""

from __future__ import annotations

import errno
import os
import sys

from cairn.errors import explain

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from typing import Any

# Terminal control characters a line for people never carries: bell, backspace, vertical tab,
# form feed and carriage return (a line that rewrites itself on a terminal).
_CONTROL = str.maketrans("", "", "\a\b\v\f\r")


def say(text: str, stream: Any = None) -> None:
    """``text`` as lines for people on stdout (or ``stream``): tabs expanded, terminal control
    characters dropped."""
    lines = (line.translate(_CONTROL).expandtabs(8) for line in str(text).split("\n"))
    (stream or sys.stdout).write("\n".join(lines) + "\n")


def emit_json(data: Any) -> None:
    """A result as indented JSON: records as objects, times as ISO-8601 text."""
    sys.stdout.write(_escape_surrogates(json_text(data)) + "\n")


def json_text(data: Any) -> str:
    """``data`` (records, lists, dicts) as JSON indented by two spaces."""
    import msgspec

    try:
        return msgspec.json.format(msgspec.json.encode(data), indent=2).decode()
    except UnicodeEncodeError:  # a path held with lone surrogates: written as escapes
        import json

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


def say_error(message: str, code: int, json: bool) -> None:
    if json:
        sys.stdout.write(_escape_surrogates(error_json(message, code)) + "\n")
    else:
        say(f"cairn: error: {message}", sys.stderr)


def say_warning(message: str) -> None:
    """``cairn: warning: <message>`` on stderr, whatever the output mode: what cairn drops or
    skips is said where people look."""
    sys.stderr.write(f"cairn: warning: {message}\n")
    sys.stderr.flush()


def error_json(message: str, code: int) -> str:
    """``{"error": {"message", "problem", "fix", "exit_code"}}`` on one line: ``message`` is the
    line ``cairn: error:`` would show, split at its first ``; `` into the problem and the fix
    (``fix`` is null when the message names none)."""
    import json

    problem, sep, fix = message.partition("; ")
    error = {"message": message, "problem": problem, "fix": fix if sep else None}
    return json.dumps({"error": {**error, "exit_code": code}}, ensure_ascii=False)
