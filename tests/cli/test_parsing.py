"""One declaration, two readers: what an empty command line parses to without argparse (the
declared defaults, ``Parser.defaults``) is what argparse makes of it, for every command of the
table; where argparse refuses an empty command line, the defaults are not offered, so its usage
error is what the command prints."""

from __future__ import annotations

from typing import NoReturn

import pytest

from cairn.cli.commands import COMMANDS
from cairn.cli.main import function
from cairn.cli.parsing import Parser, UsageError, integer, one_of


class Declared(Exception):
    """A command reached ``parse()``: all it declares is declared, and nothing is run."""


class Probe(Parser):
    def parse(self) -> NoReturn:
        raise Declared


def declaration(words: tuple[str, ...]) -> Parser:
    """What the command of ``words`` declares, on a parser over an empty command line."""
    command = COMMANDS[words]
    probe = Probe(words, [], "A command.")
    target = function(command.target)
    with pytest.raises(Declared):
        target(probe, early=None) if command.early else target(probe)
    return probe


def typed(values: dict[str, object]) -> dict[str, tuple[type, object]]:
    """``values`` with each one's type beside it: ``False`` is not ``None``, nor ``0``."""
    return {name: (type(value), value) for name, value in values.items()}


@pytest.mark.parametrize("words", list(COMMANDS), ids=" ".join)
def test_the_defaults_are_what_argparse_makes_of_an_empty_command_line(
    words: tuple[str, ...],
) -> None:
    parser = declaration(words)
    try:
        expected = vars(parser.argparser().parse_args([]))
    except UsageError:
        assert parser.defaults() is None  # argparse's usage error is the command's
        return
    found = parser.defaults()
    if found is None:  # only an action argparse defines (a class) is left to argparse
        actions = [options.get("action") for _, options in parser.declared]
        assert any(isinstance(action, type) for action in actions)
        return
    assert typed(vars(found)) == typed(expected)


def test_the_hooks_called_per_tool_call_take_the_defaults() -> None:
    """The hooks declare nothing: their empty command line is answered from the record alone
    (tests/test_imports.py runs them and finds no argparse loaded)."""
    hooks = ("heartbeat", "post-tool-use", "session-start")
    for words in (("hook", "claude", hook) for hook in hooks):
        found = declaration(words).defaults()
        assert found is not None and vars(found) == {}
        parser = Parser(words, [], "A hook.")
        assert vars(parser.parse()) == {} and parser.json is False


def test_what_the_defaults_cannot_say_argparse_says() -> None:
    """A required option, a choice, a string default its type refuses: argparse's answer, the
    usage error included."""
    required = Parser(("x",), [], None)
    required.add_argument("--name", required=True)
    chosen = Parser(("x",), [], None)
    chosen.add_argument("--kind", choices=["a", "b"], default="a")
    refused = Parser(("x",), [], None)
    refused.add_argument("--count", type=integer(minimum=1), default="0")
    converted = Parser(("x",), [], None)
    converted.add_argument("--count", type=integer(), default="7")
    converted.add_argument("--verdict", type=one_of(["pass", "fail"]), default="pass")
    converted.add_argument("rest", nargs="*")
    assert required.defaults() is None and chosen.defaults() is None
    assert refused.defaults() is None
    with pytest.raises(UsageError) as error:
        required.parse()
    assert str(error.value) == "Missing argument '--name'; see `cairn x --help`"
    assert vars(chosen.parse()) == {"kind": "a"}
    with pytest.raises(UsageError) as error:
        refused.parse()
    assert str(error.value) == (
        "Invalid value for '--count': 0 is not in the range x>=1; see `cairn x --help`"
    )
    found = converted.defaults()
    assert found is not None
    assert vars(found) == {"count": 7, "verdict": "pass", "rest": []}
