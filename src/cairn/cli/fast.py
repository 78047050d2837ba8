"""The lazy command table: the commands agents and hooks run per tool call or per task, parsed
without Typer and run by the same handler the Typer command calls.

Typer stays the command tree: it declares every command, writes every ``--help`` and serves
every command not listed here. This table lists, for each command it serves, the handler and
the options and arguments of its Typer declaration; ``tests/cli/test_fast_path.py`` walks the
Typer tree and fails when the two disagree. The parser here accepts only command lines it is
sure of (known options, values present and valid); anything else (``--help``, an unknown
option, a missing argument, a bad number) is handed to Typer, so usage errors are Typer's own.

``CAIRN_FAST=0`` sends every command through Typer.
"""

from __future__ import annotations

import importlib
import os

from cairn.envnames import ENV_FAST

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path
    from typing import Any, Literal


class Unsure(Exception):
    """The command line is not one this parser is sure of: Typer decides."""


def as_path(value: str) -> Path:
    from pathlib import Path

    return Path(as_path_text(value))


def as_path_text(value: str) -> str:
    """A path option for a handler that takes it as text (``Path | str``): no ``pathlib``."""
    if not value or "\0" in value:
        raise Unsure
    return value


class IntAtLeast:
    """An integer option with a lower bound (Typer's ``min=``)."""

    def __init__(self, minimum: int) -> None:
        self.minimum = minimum

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IntAtLeast) and other.minimum == self.minimum

    def __hash__(self) -> int:
        return hash(self.minimum)

    def __call__(self, value: str) -> int:
        if not (value.isascii() and value.isdigit()):
            raise Unsure  # signs, spaces, "5.0", "1_000": Typer's own rules decide
        number = int(value)
        if number < self.minimum:
            raise Unsure
        return number


class OneOf:
    """A choice option (a ``Literal`` in the Typer declaration): any other value is Typer's
    usage error to report."""

    def __init__(self, *choices: str) -> None:
        self.choices = choices

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OneOf) and other.choices == self.choices

    def __hash__(self) -> int:
        return hash(self.choices)

    def __call__(self, value: str) -> str:
        if value not in self.choices:
            raise Unsure
        return value


# Plain classes, not dataclasses: building a dataclass costs more than parsing a command line.


class Opt:
    """An option: the handler parameter it sets, how it takes a value, how that converts."""

    __slots__ = ("convert", "dest", "kind")

    def __init__(
        self,
        dest: str,
        kind: Literal["value", "flag", "multiple"] = "value",
        convert: Callable[[str], Any] = str,
    ) -> None:
        self.dest, self.kind, self.convert = dest, kind, convert


class Arg:
    """A positional argument: ``variadic`` takes all the remaining ones (at least one)."""

    __slots__ = ("dest", "required", "variadic")

    def __init__(self, dest: str, required: bool = True, variadic: bool = False) -> None:
        self.dest, self.required, self.variadic = dest, required, variadic


class Command:
    """A command of the table: its handler (``"module:function"``), arguments and options, and
    what to start before the handler's modules are imported (``early``: ``"module:function"``,
    called with the work tree's path as typed, ``.`` by default; what it returns is passed to
    the handler as ``early``, and its ``abandon()`` is called when the command does not run)."""

    __slots__ = ("arguments", "early", "handler", "options")

    def __init__(
        self,
        handler: str,
        arguments: tuple[Arg, ...] = (),
        options: Mapping[str, Opt] | None = None,
        early: str | None = None,
    ) -> None:
        self.handler, self.arguments, self.options = handler, arguments, options or {}
        self.early = early


def _options(*groups: Mapping[str, Opt], **single: Opt) -> dict[str, Opt]:
    merged: dict[str, Opt] = {}
    for group in groups:
        merged.update(group)
    merged.update({"--" + name.replace("_", "-"): opt for name, opt in single.items()})
    return merged


JSON = {"--json": Opt("json", "flag")}
WORKSPACE = {
    "-C": Opt("workspace", convert=as_path),
    "--workspace": Opt("workspace", convert=as_path),
}
WORKSPACE_TEXT = {flag: Opt("workspace", convert=as_path_text) for flag in WORKSPACE}
TICKET = {"--ticket": Opt("ticket"), "-t": Opt("ticket")}
REPORT = _options(TICKET, JSON, WORKSPACE)
NUMBER = (Arg("number"),)
VERDICT = OneOf("pass", "fail")
HOOKS = "cairn.cli.handlers.hook:"
PROGRESS = "cairn.cli.handlers.progress:"

COMMANDS: dict[tuple[str, ...], Command] = {
    ("hook", "claude", "post-tool-use"): Command(HOOKS + "post_tool_use"),
    ("hook", "claude", "session-start"): Command(HOOKS + "session_start"),
    ("hook", "claude", "snapshot"): Command(
        HOOKS + "snapshot", options=_options(reason=Opt("reason"))
    ),
    ("hook", "claude", "heartbeat"): Command(HOOKS + "heartbeat"),
    ("wip", "save"): Command(
        "cairn.cli.handlers.wip:save",
        # git status, most of a save's time on a big repository, runs while cairn is imported
        early="cairn.git.status:start_early",
        options=_options(
            TICKET,
            JSON,
            WORKSPACE_TEXT,
            {"-r": Opt("reason")},
            reason=Opt("reason"),
            run=Opt("run"),
            timeout_ms=Opt("timeout_ms", convert=IntAtLeast(1)),
        ),
    ),
    ("task", "start"): Command(PROGRESS + "task_start", NUMBER, REPORT),
    ("task", "done"): Command(
        PROGRESS + "task_done",
        NUMBER,
        _options(
            REPORT,
            {"-f": Opt("files", "multiple")},
            files=Opt("files", "multiple"),
            outcome=Opt("outcome"),
            notes=Opt("notes"),
        ),
    ),
    ("task", "skip"): Command(PROGRESS + "task_skip", NUMBER, _options(REPORT, notes=Opt("notes"))),
    ("task", "defer"): Command(
        PROGRESS + "task_defer", NUMBER, _options(REPORT, notes=Opt("notes"))
    ),
    ("finding",): Command(
        PROGRESS + "finding",
        (Arg("words", variadic=True),),
        _options(
            REPORT,
            status=Opt("status", convert=OneOf("FIXED", "NOT_FIXED", "ALREADY_RESOLVED")),
            action=Opt("action"),
            location=Opt("location"),
            details=Opt("details"),
        ),
    ),
    ("gate",): Command(
        PROGRESS + "gate",
        (Arg("name"),),
        _options(REPORT, result=Opt("result", convert=VERDICT), command=Opt("command")),
    ),
    ("defer",): Command(PROGRESS + "defer", (Arg("item"),), REPORT),
    ("ac",): Command(
        PROGRESS + "ac",
        (Arg("criterion"),),
        _options(REPORT, result=Opt("result", convert=VERDICT), reason=Opt("reason")),
    ),
    ("catchup",): Command(
        "cairn.cli.handlers.catchup:catchup",
        (Arg("ticket", required=False),),
        _options(
            JSON,
            WORKSPACE,
            format=Opt("format_", convert=OneOf("text", "context")),
            clear_stale=Opt("clear_stale", "flag"),
        ),
    ),
    ("status",): Command("cairn.cli.handlers.status:status", options=_options(JSON, WORKSPACE)),
    ("fleet", "status"): Command(
        "cairn.cli.handlers.fleet_status:status",
        options=_options(JSON, WORKSPACE, engine=Opt("engine")),
    ),
    ("logs",): Command(
        "cairn.cli.handlers.logs:logs",
        (Arg("ticket", required=False),),
        _options(
            JSON,
            WORKSPACE,
            {"-f": Opt("follow", "flag")},
            follow=Opt("follow", "flag"),
            dispatch=Opt("dispatch", convert=IntAtLeast(1)),
        ),
    ),
}
LONGEST = max(len(path) for path in COMMANDS)


def find(argv: Sequence[str]) -> tuple[tuple[str, ...], Command] | None:
    """The command ``argv`` names, by its leading words; None when it names none of ours."""
    for size in range(min(LONGEST, len(argv)), 0, -1):
        path = tuple(argv[:size])
        if path in COMMANDS:
            return path, COMMANDS[path]
    return None


def parse(command: Command, words: Sequence[str]) -> dict[str, Any]:
    """The handler's keyword arguments for ``words`` (what follows the command's name), parsed
    as Click would; Unsure for anything Click might read differently or reject."""
    values: dict[str, Any] = {}
    positional: list[str] = []
    rest = list(words)
    while rest:
        word = rest.pop(0)
        if word == "--":
            positional += rest
            break
        if not word.startswith("-") or word == "-":
            positional.append(word)
            continue
        if word.startswith("--"):
            name, equals, attached = word.partition("=")
            value: str | None = attached if equals else None
        else:
            name, attached = word[:2], word[2:]
            value = attached or None
        opt = command.options.get(name)
        if opt is None:
            raise Unsure
        if opt.kind == "flag":
            if value is not None:
                raise Unsure
            values[opt.dest] = True
            continue
        if value is None:
            if not rest or rest[0].startswith("-"):
                raise Unsure
            value = rest.pop(0)
        converted = opt.convert(value)
        if opt.kind == "multiple":
            values.setdefault(opt.dest, []).append(converted)
        else:
            values[opt.dest] = converted
    for arg in command.arguments:
        if arg.variadic:
            if arg.required and not positional:
                raise Unsure
            values[arg.dest], positional = positional, []
        elif positional:
            values[arg.dest] = positional.pop(0)
        elif arg.required:
            raise Unsure
    if positional:
        raise Unsure
    return values


def handler_of(command: Command) -> Callable[..., Any]:
    return _function(command.handler)


def _function(spec: str) -> Callable[..., Any]:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def _workspace_text(words: Sequence[str]) -> str:
    """The work tree a command line names, as typed (``.`` when it names none), read before
    the line is parsed; the parse decides whether the command runs at all."""
    found = "."
    for i, word in enumerate(words):
        if word in ("-C", "--workspace") and i + 1 < len(words):
            found = words[i + 1]
        elif word.startswith("--workspace="):
            found = word.partition("=")[2]
    return found


def dispatch(argv: Sequence[str]) -> int | None:
    """Run ``argv`` if it is a command of the table; its exit code, or None for Typer."""
    if os.environ.get(ENV_FAST) == "0":
        return None
    found = find(argv)
    if found is None:
        return None
    path, command = found
    words = argv[len(path) :]
    early = _function(command.early)(_workspace_text(words)) if command.early else None
    try:
        kwargs = parse(command, words)
    except Unsure:
        if early is not None:
            early.abandon()
        return None
    if early is not None:
        kwargs["early"] = early
    try:
        handler_of(command)(**kwargs)
    except (Exception, KeyboardInterrupt) as exc:
        from cairn.cli.output import report_error

        return report_error(exc, bool(kwargs.get("json")))
    return 0
