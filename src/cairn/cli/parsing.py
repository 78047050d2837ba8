"""The one way a command declares its options and arguments: a ``Parser`` that records what the
command declares (``add_argument``, argparse's signature) and parses the command line with an
``argparse`` parser built from that record, whose usage errors are one line
(``cairn: error: <problem>; see `cairn … --help```, exit 2) and whose ``--help`` and
``--version`` end the command with exit 0, both raised, never exiting. A command line with no
words, for a command that requires none, parses to the declared defaults without ``argparse``
(the hooks, called per tool call, take no arguments); ``tests/cli/test_parsing.py`` holds the two
to the same answer for every command.

A command is a function of ``cairn.cli.commands`` that takes a ``Parser``, declares on it,
calls ``parse()`` and runs: its docstring is its help. The options several commands share are
declared by the functions below, once.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from types import SimpleNamespace
    from typing import Any, NoReturn


class UsageError(Exception):
    """A command line that names no command, or a command's options or arguments that do not
    parse: ``str`` is the one-line message, its fix included."""


class Done(Exception):
    """The command line asked for what the parser prints itself (``--help``, ``--version``):
    printed, nothing to run, exit 0."""


# What each of argparse's actions holds when its option is not given and no default is declared.
_UNSET = {
    "store": None,
    "store_true": False,
    "store_false": True,
    "store_const": None,
    "append": None,
}
_NO_VALUE = ("help", "version")  # actions that hold no value


class Parser:
    """The parser of one command (``words``, e.g. ``("task", "done")``) over ``argv``, the words
    that follow them. ``json`` says, once parsed, whether the command line asked for JSON."""

    def __init__(self, words: Sequence[str], argv: Sequence[str], description: str | None) -> None:
        self.prog = " ".join(("cairn", *words))
        self.description = description
        self.argv = list(argv)
        self.json = False
        self.declared: list[tuple[tuple[str, ...], dict[str, Any]]] = []
        _help(self)

    def add_argument(self, *names: str, **options: Any) -> None:
        """Declare an option or argument, as ``argparse.ArgumentParser.add_argument``."""
        self.declared.append((names, options))

    def parse(self) -> SimpleNamespace:
        """The command's options and arguments; UsageError for a line they do not fit. An
        option that takes a value takes the word after it, whatever it starts with
        (``--ticket -rf``: the ticket ``-rf``, refused as a ticket id, not as a missing value)."""
        found = None if self.argv else self.defaults()
        if found is None:
            from types import SimpleNamespace

            parser = self.argparser()
            found = SimpleNamespace(**vars(parser.parse_args(_joined(parser, self.argv))))
        self.json = bool(getattr(found, "json", False))
        return found

    def defaults(self) -> SimpleNamespace | None:
        """What argparse makes of an empty command line, without argparse: each declared
        value's default (a string one through its ``type``). None when argparse alone can
        say: an argument or option is required (its usage error), or the declaration uses what
        this does not know (another action, ``choices``, a default argparse would refuse)."""
        values: dict[str, object] = {}
        for names, options in self.declared:
            action = options.get("action", "store")
            if action in _NO_VALUE:
                continue
            positional = not names[0].startswith("-")
            nargs = options.get("nargs")
            if (
                action not in _UNSET
                or "choices" in options
                or options.get("required")
                or (positional and nargs not in ("?", "*"))
            ):
                return None
            dest = names[0] if positional else options.get("dest") or _dest(names)
            value = options.get("default", _UNSET[action])
            if value == "==SUPPRESS==":  # argparse.SUPPRESS: no attribute at all
                return None
            if positional and nargs == "*":
                if value is not None:
                    return None
                value = []
            elif isinstance(value, str) and options.get("type") is not None:
                try:
                    value = options["type"](value)
                except Exception:  # argparse words the error
                    return None
            if dest in values:  # an option sharing another's dest: argparse keeps the first's
                continue
            values[dest] = value
        from types import SimpleNamespace

        return SimpleNamespace(**values)

    def argparser(self) -> argparse.ArgumentParser:
        """The ``argparse`` parser of what the command declared."""
        parser = _argparser_class()(self.prog, self.description)
        for names, options in self.declared:
            parser.add_argument(*names, **options)
        return parser


def _dest(names: Sequence[str]) -> str:
    """An option's attribute, as argparse names it: its first long name, else its first."""
    long = [name for name in names if len(name) > 1 and name[1] == "-"]
    return (long or list(names))[0].lstrip("-").replace("-", "_")


def _joined(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """``argv`` with each option that takes a value joined to the word after it."""
    takes = {
        name: max(action.option_strings, key=len)
        for action in parser._actions
        if action.nargs is None
        for name in action.option_strings
    }
    words, joined = iter(argv), []
    for word in words:
        joined.append(word)
        if word == "--":
            joined += words
        elif word in takes:
            value = next(words, None)
            if value is not None:
                joined[-1] = f"{takes[word]}={value}"
    return joined


def _argparser_class() -> Callable[[str, str | None], argparse.ArgumentParser]:
    """argparse's parser as cairn's commands use it: usage errors raised as ``UsageError``,
    ``--help`` as ``Done``; argparse is imported here, when a command line has to be parsed."""
    import argparse

    class Formatter(argparse.HelpFormatter):
        """argparse's help formatter, the terminal's width read without ``shutil``: argparse
        builds one for every option declared, and ``shutil`` brings ``bz2``, ``lzma`` and
        ``zlib``."""

        def __init__(self, prog: str) -> None:
            super().__init__(prog, width=_columns() - 2)

    class ArgumentParser(argparse.ArgumentParser):
        def __init__(self, prog: str, description: str | None) -> None:
            super().__init__(
                prog=prog,
                description=description,
                allow_abbrev=False,
                add_help=False,
                formatter_class=Formatter,
            )

        def error(self, message: str) -> NoReturn:
            raise UsageError(f"{plain_words(message)}; see `{self.prog} --help`")

        def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
            if message:
                sys.stderr.write(message)
            raise Done(status)

    return ArgumentParser


def _columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` reads it: ``COLUMNS``, else the
    terminal's, else 80."""
    import os

    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


def plain_words(message: str) -> str:
    """argparse's wording of a usage error in cairn's words (Click's, which came first)."""
    head, sep, rest = message.partition(": ")
    if head == "unrecognized arguments":
        first = rest.split()[0]
        if first.startswith("-"):
            return f"No such option: {first}"
        return f"Got unexpected extra argument ({rest})"
    if head == "the following arguments are required":
        return "Missing argument " + ", ".join(f"'{name}'" for name in rest.split(", "))
    if sep and head.startswith("argument "):
        names = " / ".join(f"'{name}'" for name in head.removeprefix("argument ").split("/"))
        if rest == "expected one argument":
            return f"Option {names} requires an argument"
        if rest.startswith("ignored explicit argument"):
            return f"Option {names} does not take a value"
        return f"Invalid value for {names}: {rest}"
    return message


def one_of(choices: Sequence[str]) -> Callable[[str], str]:
    """The type of a choice option (``choices`` from ``cairn.terms``); its metavar
    (``choices_metavar``) lists them."""

    def choice(value: str) -> str:
        if value not in choices:
            listed = ", ".join(f"'{c}'" for c in choices)
            raise _type_error(f"{value!r} is not one of {listed}")
        return value

    return choice


def choices_metavar(choices: Sequence[str]) -> str:
    return "<" + "|".join(choices) + ">"


def integer(minimum: int | None = None) -> Callable[[str], int]:
    """The type of a whole-number option, at least ``minimum`` when given."""

    def number(value: str) -> int:
        try:
            found = int(value)
        except ValueError:
            raise _type_error(f"{value!r} is not a valid integer") from None
        if minimum is not None and found < minimum:
            raise _type_error(f"{found} is not in the range x>={minimum}")
        return found

    return number


def amount(value: str) -> float:
    """The type of an option in money or another non-negative decimal (``--max-cost-usd 5``)."""
    import math

    try:
        found = float(value)
    except ValueError:
        raise _type_error(f"{value!r} is not a number") from None
    if not math.isfinite(found) or found < 0:
        raise _type_error(f"{value} is not a number of 0 or more")
    return found


def remote_name(value: str) -> str:
    """The type of ``--remote``: a remote's name, never blank (``--no-remote`` says none)."""
    if not value.strip():
        raise _type_error("is empty; give a remote's name, such as origin (--no-remote: none)")
    return value


def _type_error(message: str) -> Exception:
    """The error a type raises for argparse to word as a usage error."""
    from argparse import ArgumentTypeError

    return ArgumentTypeError(message)


def as_path(value: str) -> object:
    from pathlib import Path

    return Path(value)


def json_flag(parser: Parser, help: str = "Print JSON.") -> None:
    parser.add_argument("--json", action="store_true", help=help)


def workspace(parser: Parser, text: bool = False) -> None:
    """``-C DIR``: a ``Path``, or with ``text`` the path as typed (no ``pathlib`` imported)."""
    parser.add_argument(
        "-C",
        "--workspace",
        metavar="DIR",
        type=str if text else as_path,
        default="." if text else as_path("."),
        help="Run in this directory instead of the current one.",
    )


def ticket(parser: Parser, help: str = "Ticket id (default: the branch name).") -> None:
    parser.add_argument("-t", "--ticket", help=help)


def summary(text: str | None) -> str:
    """A command's line in its group's listing: its help up to the first full stop or
    semicolon."""
    first = " ".join((text or "").split())
    for stop in (". ", "; "):
        first = first.partition(stop)[0]
    return first.rstrip(".") + "."


def group_help(words: Sequence[str], description: str, entries: Sequence[tuple[str, str]]) -> str:
    """The help of a group of commands (``cairn``, ``cairn wip``): its commands and their
    summaries."""
    width = max(len(name) for name, _ in entries) + 2
    listing = "\n".join(f"  {name.ljust(width)}{text}" for name, text in entries)
    import argparse

    parser = argparse.ArgumentParser(
        prog=" ".join(("cairn", *words)),
        usage="%(prog)s" + (" [--version]" if not words else "") + " [-h] COMMAND ...",
        description=description,
        epilog=f"commands:\n{listing}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    _help(parser)
    if not words:
        parser.add_argument("--version", action="store_true", help="Print the version.")
    return parser.format_help()


def _help(parser: Parser | argparse.ArgumentParser) -> None:
    parser.add_argument("-h", "--help", action="help", help="Show this message and exit.")
