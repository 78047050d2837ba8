"""Indented JSON text, the same as ``json.dumps(value, ensure_ascii=False, indent=N,
separators=(",", ": "))`` writes, three times faster: with an indent ``json`` leaves its C
encoder for a generator per value, which cost ``cairn status --json`` over 10,000 tickets a
tenth of a second. Here every array or object that holds no non-empty array or object is
written by the C encoder, its item separator carrying the line break and the indent of its
depth; the rest is walked in Python. Anything ``json`` would write otherwise, or refuse, is
handed to ``json`` itself, so the text and the errors stay its own."""

from __future__ import annotations

import json
from json import encoder as _json_encoder

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_make_encoder = getattr(_json_encoder, "c_make_encoder", None)


_CONTAINERS = (dict, list, tuple)


class _Other(Exception):
    """A value written here otherwise than ``json`` writes it: ``json`` writes it all."""


def indented(value: Any, indent: int = 2) -> str:
    if _make_encoder is None:  # an interpreter without json's C speed-ups
        return _json(value, indent)
    out: list[str] = []
    encoders: dict[int, Callable[[Any, int], list[str]]] = {}
    try:
        _write(value, 0, indent, out, encoders)
    except (_Other, TypeError, ValueError, RecursionError):
        return _json(value, indent)
    return "".join(out)


def _json(value: Any, indent: int) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent, separators=(",", ": "))


def _flat(value: Any) -> bool:
    """Whether ``value`` (a non-empty array or object) holds no non-empty array or object."""
    for item in value.values() if isinstance(value, dict) else value:
        if item and isinstance(item, _CONTAINERS):
            return False
    return True


def _encoder(
    level: int, indent: int, encoders: dict[int, Callable[[Any, int], list[str]]]
) -> Callable[[Any, int], list[str]]:
    found = encoders.get(level)
    if found is None:
        assert _make_encoder is not None  # indented() checked
        separator = ",\n" + " " * (indent * level)
        found = _make_encoder(  # markers, default, encoder, indent, separators, sort, skip, nan
            None, None, _json_encoder.encode_basestring, None, ": ", separator, False, False, True
        )
        encoders[level] = found
    return found


def _write(
    value: Any,
    level: int,
    indent: int,
    out: list[str],
    encoders: dict[int, Callable[[Any, int], list[str]]],
) -> None:
    is_dict = isinstance(value, dict)
    if not value or not (is_dict or isinstance(value, _CONTAINERS)):
        out.append("".join(_encoder(level, indent, encoders)(value, 0)))  # a scalar, {} or []
        return
    opening, closing = ("{", "}") if is_dict else ("[", "]")
    inner = "\n" + " " * (indent * (level + 1))
    if _flat(value):
        text = "".join(_encoder(level + 1, indent, encoders)(value, 0))
        out.append(opening + inner + text[1:-1] + "\n" + " " * (indent * level) + closing)
        return
    out.append(opening)
    separator = inner
    for key, item in value.items() if is_dict else ((None, item) for item in value):
        out.append(separator)
        if is_dict:
            if type(key) is not str:
                raise _Other  # json turns such keys into text its own way
            out.append(_json_encoder.encode_basestring(key) + ": ")
        _write(item, level + 1, indent, out, encoders)
        separator = "," + inner
    out.append("\n" + " " * (indent * level) + closing)
