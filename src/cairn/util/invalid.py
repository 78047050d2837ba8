"""What a record that did not validate is told: msgspec's ValidationError as cairn's one line.

msgspec says ``Expected `int` >= 1 - at `$.agent.max_turns```; cairn says
``agent.max_turns: Input should be greater than or equal to 1``. A check in a record's
``__post_init__`` that names its field first (``"stale_after: 'soon' is not a duration"``) is
placed at that field.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any

_AT = re.compile(r"(.*) - at `\$(.*)`", re.DOTALL)
_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+|\.\.\.)\]")
_BOUND = re.compile(r"Expected `(\w+)` (>=|>|<=|<) (\S+)")
_LENGTH = re.compile(r"Expected `(?:array|object)` of length >= (\d+)")
_TYPE = re.compile(r"Expected `([^`]+)`, got `(\w+)`")
_FIELD = re.compile(r"Object (contains unknown|missing required) field `([^`]+)`")
_NAMED = re.compile(r"([a-z_][a-z0-9_]*): (.*)", re.DOTALL)
_WORDS = {
    "int": "a valid integer",
    "float": "a valid number",
    "str": "a valid string",
    "bool": "a valid boolean",
    "array": "a valid list",
    "object": "a valid dictionary",
    "datetime": "a valid datetime",
    "null": "None",
}
_BOUNDS = {
    ">=": "greater than or equal to",
    ">": "greater than",
    "<=": "less than or equal to",
    "<": "less than",
}


def problem(exc: Exception, kind: Any = None) -> tuple[str, str]:
    """(where, why) of ``exc``, a msgspec.ValidationError: the dotted location
    (``loop.phases.1``, empty for the whole value) and the message in words. ``kind``, the type
    that was validated, lets an unknown choice list the ones there are."""
    text = str(exc)
    match = _AT.fullmatch(text)
    message, path = (match.group(1), match.group(2)) if match else (text, "")
    steps = [name or index for name, index in _STEP.findall(path)]
    found = _FIELD.fullmatch(message)
    named = _NAMED.fullmatch(message)
    if found:
        steps.append(found.group(2))
        why = "unknown key" if found.group(1) == "contains unknown" else "Field required"
    elif named:
        steps.append(named.group(1))
        why = named.group(2)
    else:
        why = _words(message, steps, kind)
    return ".".join(steps), why


def line(exc: Exception, kind: Any = None) -> str:
    """``where: why`` of ``exc`` (``why`` alone for the whole value)."""
    where, why = problem(exc, kind)
    return f"{where}: {why}" if where else why


def _words(message: str, steps: list[str], kind: Any) -> str:
    if match := _BOUND.fullmatch(message):
        bound = match.group(3).removesuffix(".0")
        return f"Input should be {_BOUNDS[match.group(2)]} {bound}"
    if match := _LENGTH.fullmatch(message):
        count = match.group(1)
        return f"List should have at least {count} item{'s' if count != '1' else ''}"
    if match := _TYPE.fullmatch(message):
        wanted = [part for part in match.group(1).split(" | ") if part != "null"]
        choices = _choices(kind, steps)
        if choices:
            return f"Input should be {choices}"
        return "Input should be " + " or ".join(_WORDS.get(part, part) for part in wanted)
    if message.startswith("Invalid enum value"):
        choices = _choices(kind, steps)
        return f"Input should be {choices}" if choices else message
    if message.startswith("Invalid RFC3339"):
        return "Input should be a valid datetime with a UTC offset"
    return message


def _choices(kind: Any, steps: list[str]) -> str:
    """The values a Literal at ``steps`` in ``kind`` allows, as ``'a', 'b' or 'c'``."""
    for step in steps:
        kind = _inner(kind)
        if kind is None:
            return ""
        if isinstance(kind, type) and hasattr(kind, "__struct_fields__"):
            kind = typing.get_type_hints(kind).get(step)
        elif typing.get_origin(kind) in (list, dict):
            kind = typing.get_args(kind)[-1]
        else:
            return ""
    kind = _inner(kind)
    if typing.get_origin(kind) is not typing.Literal:
        return ""
    shown = [repr(value) for value in typing.get_args(kind)]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def _inner(kind: Any) -> Any:
    """``kind`` without ``Annotated`` and ``| None``."""
    while True:
        origin = typing.get_origin(kind)
        args = [arg for arg in typing.get_args(kind) if arg is not type(None)]
        unwrapped = origin is typing.Annotated
        if not unwrapped and not (origin in (typing.Union, types.UnionType) and len(args) == 1):
            return kind
        kind = args[0]
