"""The exact-shape validator behind records (``cairn.util.records``).

``checker(annotation)`` turns an annotation pydantic understands (``str``, ``int | None``,
``Literal[…]``, ``list[T]``, ``dict[K, V]``, ``datetime``, a record, ``Annotated[T, Ge(0),
After(f)]``…) into a function that returns the validated value when the input has exactly that
shape, and raises ``Defer`` for anything else: a value pydantic would coerce ("3" for an int),
reject, or word an error about. The caller then asks pydantic, so the fast path only ever
decides what pydantic would decide the same way.

The constraint and validator markers here (``Ge``, ``Gt``, ``After``, ``Before``) carry
``__get_pydantic_core_schema__``, so pydantic applies them exactly as ``Field(ge=…)``,
``AfterValidator`` and ``BeforeValidator`` would, without cairn importing pydantic to declare
them.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal, Union

Check = Callable[[Any], Any]


class Defer(Exception):
    """The value is not in an exact shape: pydantic decides."""


# The timestamps cairn writes: ISO-8601 with seconds, optional microseconds and an offset.
_ISO = re.compile(
    r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d"
    r"(?:\.\d{1,6})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)"
)


class Ge:
    """``value >= bound`` (pydantic's ``Field(ge=…)``)."""

    kind = "greater_than_equal"
    key = "ge"

    def __init__(self, bound: float) -> None:
        self.bound = bound

    def ok(self, value: Any) -> bool:
        return bool(value >= self.bound)

    def wrap(self, check: Check) -> Check:
        def constrained(value: Any) -> Any:
            value = check(value)
            if not self.ok(value):
                raise Defer
            return value

        return constrained

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import PydanticKnownError, core_schema

        schema = handler(source)
        if schema.get("type") in ("int", "float"):
            return {**schema, self.key: self.bound}

        def enforce(value: Any) -> Any:
            if not self.ok(value):
                raise PydanticKnownError(self.kind, {self.key: self.bound})  # type: ignore[arg-type]
            return value

        return core_schema.no_info_after_validator_function(enforce, schema)


class Gt(Ge):
    """``value > bound`` (pydantic's ``Field(gt=…)``)."""

    kind = "greater_than"
    key = "gt"

    def ok(self, value: Any) -> bool:
        return bool(value > self.bound)


class MinLen:
    """At least ``length`` items (pydantic's ``Field(min_length=…)`` on a list)."""

    def __init__(self, length: int) -> None:
        self.length = length

    def wrap(self, check: Check) -> Check:
        def long_enough(value: Any) -> Any:
            value = check(value)
            if len(value) < self.length:
                raise Defer
            return value

        return long_enough

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        schema = handler(source)
        if schema.get("type") != "list":
            raise TypeError("MinLen applies to a list")
        return {**schema, "min_length": self.length}


class After:
    """Run ``fn`` on the validated value (pydantic's ``AfterValidator``); a ValueError it raises
    is a validation error."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def wrap(self, check: Check) -> Check:
        fn = self.fn

        def after(value: Any) -> Any:
            value = check(value)
            try:
                return fn(value)
            except (ValueError, AssertionError):
                raise Defer from None

        return after

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(self.fn, handler(source))


class Before(After):
    """Run ``fn`` on the raw value first (pydantic's ``BeforeValidator``)."""

    def wrap(self, check: Check) -> Check:
        fn = self.fn

        def before(value: Any) -> Any:
            try:
                value = fn(value)
            except (ValueError, AssertionError):
                raise Defer from None
            return check(value)

        return before

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_before_validator_function(self.fn, handler(source))


def _exact(kind: type) -> Check:
    def check(value: Any) -> Any:
        if type(value) is not kind:
            raise Defer
        return value

    return check


def _datetime(value: Any) -> Any:
    if type(value) is datetime:
        return value
    if type(value) is str and _ISO.fullmatch(value):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    raise Defer


def _none(value: Any) -> Any:
    if value is not None:
        raise Defer
    return None


def _any(value: Any) -> Any:
    return value


def checker(tp: Any) -> Check:
    """The exact-shape check of annotation ``tp``."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        inner, *metadata = typing.get_args(tp)
        check = checker(inner)
        for item in metadata:
            if hasattr(item, "wrap"):
                check = item.wrap(check)
        return check
    if origin in (Union, types.UnionType):
        return _union([checker(member) for member in typing.get_args(tp)])
    if origin is Literal:
        return _literal(typing.get_args(tp))
    if origin is list:
        (item_type,) = typing.get_args(tp) or (Any,)
        return _list(checker(item_type))
    if origin is dict or tp is dict:
        key_type, value_type = typing.get_args(tp) or (Any, Any)
        return _dict(checker(key_type), checker(value_type))
    if tp is Any:
        return _any
    if tp is type(None):
        return _none
    if tp is datetime:
        return _datetime
    if isinstance(tp, type) and hasattr(tp, "_fast"):  # a record
        return _record(tp)
    if tp in (str, int, float, bool):
        return _exact(tp)
    raise TypeError(f"records cannot validate {tp!r}")


def _union(checks: list[Check]) -> Check:
    def union(value: Any) -> Any:
        found = []
        for check in checks:
            try:
                found.append(check(value))
            except Defer:
                continue
        if len(found) != 1:
            raise Defer
        return found[0]

    return union


def _literal(allowed: tuple[Any, ...]) -> Check:
    def literal(value: Any) -> Any:
        for option in allowed:
            if type(value) is type(option) and value == option:
                return option
        raise Defer

    return literal


def _list(item: Check) -> Check:
    def listing(value: Any) -> Any:
        if type(value) is not list:
            raise Defer
        return [item(element) for element in value]

    return listing


def _dict(key: Check, val: Check) -> Check:
    def mapping(value: Any) -> Any:
        if type(value) is not dict:
            raise Defer
        return {key(k): val(v) for k, v in value.items()}

    return mapping


def _record(record_type: Any) -> Check:
    def nested(value: Any) -> Any:
        if type(value) is record_type:
            return value
        if type(value) is dict:
            return record_type._fast(value)
        raise Defer

    return nested


_VALUE_CHECKS: dict[Any, Check] = {}


def check_value(kind: Any, value: Any) -> Any:
    """``value`` validated as ``kind`` (an annotation such as ``Annotated[str, After(f)]``):
    by the exact-shape check, else by pydantic's ``TypeAdapter(kind)``."""
    check = _VALUE_CHECKS.get(kind)
    if check is None:
        check = _VALUE_CHECKS[kind] = checker(kind)
    try:
        return check(value)
    except Defer:
        from pydantic import TypeAdapter

        return TypeAdapter(kind).validate_python(value)
