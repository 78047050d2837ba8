"""The fast path and the Typer tree are one design: the table serves the hot commands with the
Typer commands' own names, options and handlers, parses what it accepts exactly as Typer does,
and every command gives the same output, exit code and state files either way."""

from __future__ import annotations

import inspect
import os
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.cli import fast
from cairn.cli.app import app

ROOT = typer.main.get_command(app)
HOT = {
    ("hook", "claude", "post-tool-use"),
    ("hook", "claude", "session-start"),
    ("hook", "claude", "snapshot"),
    ("hook", "claude", "heartbeat"),
    ("wip", "save"),
    ("task", "start"),
    ("task", "done"),
    ("task", "skip"),
    ("task", "defer"),
    ("finding",),
    ("gate",),
    ("defer",),
    ("catchup",),
    ("status",),
}


def typer_commands(command: Any = ROOT, path: tuple[str, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every leaf command of the Typer tree with its path."""
    subcommands = getattr(command, "commands", None)
    if subcommands is None:
        yield path, command
        return
    for name, sub in subcommands.items():
        yield from typer_commands(sub, (*path, name))


TREE = dict(typer_commands())


def test_the_table_serves_the_hot_commands_and_only_commands_of_the_tree() -> None:
    assert set(fast.COMMANDS) >= HOT
    assert set(fast.COMMANDS) <= set(TREE)


@pytest.mark.parametrize("path", sorted(fast.COMMANDS), ids=" ".join)
def test_the_table_agrees_with_the_typer_tree(path: tuple[str, ...]) -> None:
    """Names, option strings, flags, repeatable options, arguments, bounds and defaults."""
    entry, command = fast.COMMANDS[path], TREE[path]
    handler = fast.handler_of(entry)
    signature = inspect.signature(handler)
    params = {p.name: p for p in command.params}
    assert list(options_of(handler)) == [p.name for p in command.params]
    for name, param in params.items():
        default = signature.parameters[name].default
        if param.required:
            assert default is inspect.Parameter.empty, name
        elif isinstance(param.default, Path):  # a handler may take the path as text
            assert Path(default) == param.default, name
        else:
            assert default == param.default, name
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    assert [a.dest for a in entry.arguments] == [a.name for a in arguments]
    for arg, param in zip(entry.arguments, arguments, strict=True):
        assert arg.required == param.required
        assert arg.variadic == (param.nargs == -1)
    declared = {}
    for param in command.params:
        if param.param_type_name != "option":
            continue
        kind = "flag" if param.is_flag else "multiple" if param.multiple else "value"
        for flag in (*param.opts, *param.secondary_opts):
            declared[flag] = (param.name, kind)
        annotation = param.type_descriptor.annotation
        opt = entry.options[param.opts[0]]
        if annotation is int:
            assert opt.convert == fast.IntAtLeast(param.min), name
        elif annotation is Path and opt.convert is fast.as_path_text:  # the handler takes text
            hint = str(signature.parameters[param.name].annotation)  # postponed: text
            assert "str" in [part.strip() for part in hint.split("|")], name
        elif annotation is Path:
            assert opt.convert is fast.as_path
        elif typing.get_origin(annotation) is typing.Literal:
            assert opt.convert == fast.OneOf(*typing.get_args(annotation)), name
        else:
            assert opt.convert is str
    assert {flag: (o.dest, o.kind) for flag, o in entry.options.items()} == declared


def test_the_typer_commands_call_the_same_handlers() -> None:
    """Each Typer command's body is its handler: same parameters, same defaults."""
    for path, entry in fast.COMMANDS.items():
        callback = inspect.unwrap(TREE[path].callback)
        handler = fast.handler_of(entry)
        assert handler.__name__ in callback.__code__.co_names, path
        ours = [(p.name, p.default) for p in options_of(handler).values()]
        typers = [(p.name, p.default) for p in inspect.signature(callback).parameters.values()]
        ours = [
            (n, Path(d) if isinstance(t, Path) else d)
            for (n, d), (_, t) in zip(ours, typers, strict=True)
        ]
        assert ours == typers, path


WORDS = st.one_of(
    st.sampled_from(["1", "0", "x", "F1", "add", "T-1", "-", "--", "", "a,b", "7", "٣", "5.0"]),
    st.sampled_from(["-x", "--bogus", "--json=1", "-1", "--help", "-h"]),
    st.text(max_size=4),
)


@st.composite
def command_lines(draw: st.DrawFn, entry: fast.Command) -> list[str]:
    options = sorted(entry.options)
    words: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        choice = draw(st.sampled_from(["option", "option=", "short", "word"]))
        if choice == "word" or not options:
            words.append(draw(WORDS))
            continue
        name = draw(st.sampled_from(options))
        if choice == "option=" and name.startswith("--"):
            words.append(f"{name}={draw(WORDS)}")
        elif choice == "short" and not name.startswith("--"):
            words.append(name + draw(WORDS))
        else:
            words += [name, draw(WORDS)][: draw(st.integers(1, 2))]
    return words


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(fast.COMMANDS), ids=" ".join)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_what_the_fast_parser_accepts_typer_reads_the_same(
    path: tuple[str, ...], data: st.DataObject
) -> None:
    entry = fast.COMMANDS[path]
    words = data.draw(command_lines(entry))
    try:
        parsed = fast.parse(entry, words)
    except fast.Unsure:
        return
    under_typer = handler_call_under_typer(path, words)
    assert as_text(under_typer) == as_text({**defaults_of(entry), **parsed})


def as_text(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Paths as text: a handler may default its work tree to ``"."`` where Typer gives
    ``Path(".")``, the same directory."""
    return {k: os.fspath(v) if isinstance(v, Path) else v for k, v in kwargs.items()}


def options_of(handler: Any) -> dict[str, inspect.Parameter]:
    """A handler's parameters from the command line (not ``early``, what the dispatcher
    started before it imported the handler)."""
    return {n: p for n, p in inspect.signature(handler).parameters.items() if n != "early"}


def defaults_of(entry: fast.Command) -> dict[str, Any]:
    parameters = options_of(fast.handler_of(entry))
    return {n: p.default for n, p in parameters.items() if p.default is not inspect.Parameter.empty}


def handler_call_under_typer(path: tuple[str, ...], words: list[str]) -> dict[str, Any]:
    """The keyword arguments the Typer command passes to its handler for ``words``."""
    module, _, name = fast.COMMANDS[path].handler.partition(":")
    calls: list[dict[str, Any]] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(f"{module}.{name}", lambda **kwargs: calls.append(kwargs))
        TREE[path].main(list(words), prog_name="cairn", standalone_mode=False)
    assert len(calls) == 1
    return calls[0]


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (
            ["task", "done", "3", "--files", "a.py,b.py", "-f", "c.py", "--outcome", "works"],
            {"number": "3", "files": ["a.py,b.py", "c.py"], "outcome": "works"},
        ),
        (
            ["wip", "save", "--reason=stop", "-tT-1", "--json", "-C", "repo"],
            {"reason": "stop", "ticket": "T-1", "json": True, "workspace": "repo"},
        ),
        (
            ["finding", "F1", "--status", "FIXED", "--action", "guarded"],
            {"words": ["F1"], "status": "FIXED", "action": "guarded"},
        ),
        (["catchup", "T-1", "--format", "context"], {"ticket": "T-1", "format_": "context"}),
        (["hook", "claude", "snapshot", "--reason", "stop"], {"reason": "stop"}),
        (["status", "--json"], {"json": True}),
    ],
)
def test_the_usual_command_lines_take_the_fast_path(
    words: list[str], expected: dict[str, Any]
) -> None:
    found = fast.find(words)
    assert found is not None
    path, entry = found
    assert fast.parse(entry, words[len(path) :]) == expected


@pytest.mark.parametrize(
    "words",
    [
        ["wip", "save", "--help"],
        ["wip", "save", "--timeout-ms", "0"],
        ["wip", "save", "--bogus"],
        ["task", "done"],
        ["task", "done", "1", "2"],
        ["status", "--json=yes"],
        ["wip", "list"],
        ["--version"],
        [],
    ],
)
def test_anything_else_goes_to_typer(words: list[str]) -> None:
    found = fast.find(words)
    if found is not None:
        with pytest.raises(fast.Unsure):
            fast.parse(found[1], words[len(found[0]) :])
