"""Printing results: JSON for machines, short plain lines for people, errors as one line.

Nothing here imports Typer, Click, Rich or pydantic: the commands the fast path serves print
through it, and so do the same commands under Typer, so both print the same bytes.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

from cairn.errors import explain
from cairn.util.records import Record, plain, pydantic_json

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


def _plain(data: Any) -> Any:
    return data.model_dump(mode="json") if hasattr(data, "model_dump") else data


def emit_json(data: Any) -> None:
    """A result as indented JSON: a list of records as pydantic wrote lists of models, anything
    else through ``json``."""
    if isinstance(data, list) and data and all(isinstance(d, Record) for d in data):
        text = pydantic_json(plain(data, json_mode=True), indent=2)
    else:
        payload = [_plain(d) for d in data] if isinstance(data, list) else _plain(data)
        text = json.dumps(payload, indent=2, ensure_ascii=False)
    sys.stdout.write(_escape_surrogates(text) + "\n")


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
    when ``CAIRN_DEBUG`` is set, so its traceback shows."""
    code, message = explain(exc)
    say_error(message, int(code), json)
    return int(code)


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


def human_bytes(size: int | None) -> str:
    if size is None:
        return "?"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"
