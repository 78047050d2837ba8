"""The ``cairn`` entry point: look the command up in the table (``cairn.cli.commands``), import
only its module, let it parse and run, print its error as one line, and exit: the only place
cairn exits."""

from __future__ import annotations

import gc
import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, NoReturn

    from cairn.cli.commands import Command
    from cairn.cli.parsing import Parser


def main() -> None:
    # A quick command lives for tens of milliseconds and frees what it allocates by reference
    # counting; the cycle collector's passes over the modules being imported cost it ~3 ms.
    gc.disable()
    argv = sys.argv[1:]
    found = find(argv)
    if found is None:
        leave(no_command(argv))
    words, command = found
    if not command.quick:
        gc.enable()  # runs, the fleet, the MCP server: they live long
    leave(run(words, command, argv[len(words) :], argv), teardown=not command.quick)


def find(argv: Sequence[str]) -> tuple[tuple[str, ...], Command] | None:
    """The command ``argv`` names by its leading words; None when it names none."""
    from cairn.cli.commands import COMMANDS, LONGEST

    for size in range(min(LONGEST, len(argv)), 0, -1):
        words = tuple(argv[:size])
        if words in COMMANDS:
            return words, COMMANDS[words]
    return None


def run(words: tuple[str, ...], command: Command, rest: list[str], argv: list[str]) -> int:
    """Run one command; its exit code. What ``command.early`` started is given to it, or
    abandoned when the command line is bad."""
    early = function(command.early)(workspace_text(rest)) if command.early else None
    from cairn.cli.parsing import Done, UsageError  # argparse: once what starts early runs

    parser: Parser | None = None
    try:
        target = function(command.target)
        from cairn.cli.parsing import Parser

        parser = Parser(words, rest, target.__doc__)
        code = target(parser, early=early) if command.early else target(parser)
    except (UsageError, Done) as exc:
        if early is not None:
            early.abandon()
        if isinstance(exc, Done):
            return int(exc.args[0]) if exc.args else 0
        from cairn.cli.output import say_error

        say_error(str(exc), 2, wants_json(argv))
        return 2
    except (Exception, KeyboardInterrupt) as exc:
        from cairn.cli.output import report_error

        return report_error(exc, parser.json if parser is not None else wants_json(argv))
    return int(code or 0)


def no_command(argv: list[str]) -> int:
    """``cairn``, ``cairn wip``, ``cairn --help``, ``cairn --version``, or a word that names no
    command: the group's help, the version, or a usage error."""
    from cairn.cli.commands import GROUPS

    size = len(argv)
    while tuple(argv[:size]) not in GROUPS:
        size -= 1
    words, rest = tuple(argv[:size]), argv[size:]
    if not words and rest[:1] == ["--version"]:
        from cairn import __version__

        sys.stdout.write(f"cairn {__version__}\n")
        return 0
    if not rest or rest[0] in ("-h", "--help"):
        sys.stdout.write(group_help(words))
        return 0
    word = rest[0]
    what = f"No such option: {word}" if word.startswith("-") else f"No such command '{word}'"
    from cairn.cli.output import say_error

    say_error(f"{what}; see `{' '.join(('cairn', *words))} --help`", 2, wants_json(argv))
    return 2


def group_help(words: tuple[str, ...]) -> str:
    from cairn.cli.commands import COMMANDS, GROUPS, HIDDEN
    from cairn.cli.parsing import group_help as render
    from cairn.cli.parsing import summary

    entries: dict[str, str] = {}
    for key, command in COMMANDS.items():
        if len(key) <= len(words) or key[: len(words)] != words or key[len(words)] in entries:
            continue
        below = key[: len(words) + 1]
        if below in HIDDEN:
            continue
        entries[key[len(words)]] = (
            summary(function(command.target).__doc__) if below == key else GROUPS[below]
        )
    return render(words, GROUPS[words], list(entries.items()))


def function(spec: str) -> Callable[..., Any]:
    """The function a ``"module:function"`` names, its module imported (by ``__import__``, which
    ``-X importtime`` sees)."""
    module, _, name = spec.partition(":")
    return getattr(__import__(module, fromlist=[name]), name)  # type: ignore[no-any-return]


def workspace_text(words: Sequence[str]) -> str:
    """The work tree a command line names, as typed (``""`` when it names none), read before
    the line is parsed; the parse decides whether the command runs at all."""
    found = ""
    for i, word in enumerate(words):
        if word == "--":
            break
        if word in ("-C", "--workspace") and i + 1 < len(words):
            found = words[i + 1]
        elif word.startswith("--workspace="):
            found = word.partition("=")[2]
        elif word.startswith("-C") and not word.startswith("--"):
            found = word[2:]
    return found


def wants_json(argv: Sequence[str]) -> bool:
    """Whether a command line asks for JSON: ``--json`` among its options (before ``--``); what
    a usage error goes by, the line not having parsed."""
    for word in argv:
        if word == "--":
            return False
        if word == "--json":
            return True
    return False


def leave(code: int, teardown: bool = False) -> NoReturn:
    """Exit with ``code`` once the standard streams are flushed. Without ``teardown`` (a quick
    command), or once temporalio is loaded (it may abort as the interpreter exits:
    temporalio/sdk-python#300), without tearing the interpreter down, which costs a quick
    command about 6 ms and serves nothing: every state file is written and every git process
    waited for. A stdout whose reader has gone (``cairn status | head``) ends quietly; any
    other stream that cannot be flushed is left to Python's own exit, which reports it."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError) as exc:
        from cairn.cli.output import drop_stdout, stdout_gone

        if not stdout_gone(exc):
            sys.exit(code)
        drop_stdout()
    if teardown and "temporalio" not in sys.modules:
        sys.exit(code)
    os._exit(code)
