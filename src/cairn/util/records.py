"""Typed records that cost nothing to import: validated without pydantic when the data is
already in shape, and by pydantic (imported only then) when it is not.

A record declares its fields as annotations pydantic understands. Building one checks each
field with the exact-shape validator of ``cairn.util.shapes``, which accepts only values of
exactly the declared type (what cairn writes and reads back) and runs the field's normalisers.
Anything else (a value pydantic would coerce, a broken constraint, a wrong type, a missing
field) goes to pydantic, which validates the same record through the schema the record gives
it (a typed dict of its fields, then its ``check``) and raises the ValidationError a pydantic
model would. Both paths give the same records and the same messages, which
``tests/util/test_records.py`` checks against pydantic on generated input; the hot commands
never import pydantic.

The methods carry pydantic's names (``model_dump``, ``model_copy``, ``model_validate``, …), so
code and tests written for pydantic models keep working.
"""

from __future__ import annotations

import json
import sys
import typing
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, ClassVar, TypeVar, dataclass_transform

from cairn.util.shapes import After, Before, Check, Defer, Ge, Gt, MinLen, checker

__all__ = ["After", "Before", "Ge", "Gt", "MinLen", "Record", "field", "first_error", "plain"]

R = TypeVar("R", bound="Record")
_ZERO = timedelta(0)
_MISSING: Any = object()


class Factory:
    """A field default made fresh for each record (``field(default_factory=…)``)."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


def field(*, default_factory: Callable[[], Any]) -> Any:
    """``items: list[str] = field(default_factory=list)``: a new default for each record."""
    return Factory(default_factory)


class FrozenRecordError(AttributeError):
    """A frozen record was assigned to."""


class Field:
    """A declared field: its name, its annotation, and its default or default factory."""

    __slots__ = ("annotation", "default", "factory", "name")

    def __init__(self, name: str, annotation: Any, default: Any, make: Any) -> None:
        self.name = name
        self.annotation = annotation
        self.default = default
        self.factory = make

    @property
    def required(self) -> bool:
        return self.default is _MISSING and self.factory is None

    def make_default(self) -> Any:
        return self.factory() if self.factory is not None else self.default


def _is_classvar(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.startswith(("ClassVar", "typing.ClassVar"))
    return annotation is ClassVar or typing.get_origin(annotation) is ClassVar


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(field,))
class Record:
    """A typed record. Subclasses declare fields as annotations with optional defaults
    (``field(default_factory=list)`` for mutable ones) and may override ``check``. Class keywords:
    ``frozen=False`` makes fields assignable, ``forbid_extra=True`` makes unknown keys an error
    (pydantic's ``extra="forbid"``), ``strict=True`` refuses what pydantic would coerce ("yes"
    for a bool, "5" for an int: pydantic's strict mode)."""

    model_fields: ClassVar[dict[str, Field]] = {}
    _frozen: ClassVar[bool] = True
    _forbid_extra: ClassVar[bool] = False
    _strict: ClassVar[bool] = False
    _checks: ClassVar[list[tuple[str, Check, Field]] | None] = None

    def __init_subclass__(
        cls, *, frozen: bool = True, forbid_extra: bool = False, strict: bool = False
    ) -> None:
        super().__init_subclass__()
        fields = dict(cls.model_fields)
        # not inspect.get_annotations: importing inspect costs more than the whole lookup
        for name, annotation in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063
            if _is_classvar(annotation):
                continue
            default = cls.__dict__.get(name, _MISSING)
            make = None
            if isinstance(default, Factory):
                make, default = default.make, _MISSING
                delattr(cls, name)
            fields[name] = Field(name, annotation, default, make)
        cls.model_fields = fields
        cls._frozen = frozen
        cls._forbid_extra = forbid_extra
        cls._strict = strict
        cls._checks = None
        if not frozen:
            cls.__hash__ = None  # type: ignore[assignment]

    def __init__(self, **data: Any) -> None:
        object.__setattr__(self, "__dict__", type(self).model_validate(data).__dict__)

    def check(self) -> None:
        """Checks across fields; raise ValueError. Runs after the fields validate."""

    # --- what a dataclass gives -------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.model_fields)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, n) for n in self.model_fields))

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.model_fields)
        return f"{type(self).__qualname__}({inner})"

    def __setattr__(self, name: str, value: Any) -> None:
        if self._frozen:
            raise FrozenRecordError(f"{type(self).__name__} is frozen; use model_copy")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if self._frozen:
            raise FrozenRecordError(f"{type(self).__name__} is frozen")
        object.__delattr__(self, name)

    # --- validation ---------------------------------------------------------------------------

    @classmethod
    def _compiled(cls) -> list[tuple[str, Check, Field]]:
        checks = cls.__dict__.get("_checks")
        if checks is None:
            hints = cls._hints()
            checks = [(name, checker(hints[name]), f) for name, f in cls.model_fields.items()]
            cls._checks = checks
        return checks

    @classmethod
    def _hints(cls) -> dict[str, Any]:
        """The fields' annotations as objects: a string annotation (``from __future__ import
        annotations``) is evaluated in its module, like ``typing.get_type_hints`` but without
        its walk over every base class."""
        namespace = vars(sys.modules[cls.__module__])
        return {
            name: eval(f.annotation, namespace) if isinstance(f.annotation, str) else f.annotation
            for name, f in cls.model_fields.items()
        }

    @classmethod
    def _fast(cls: type[R], data: dict[str, Any]) -> R:
        checks = cls._compiled()
        values = {}
        seen = 0
        for name, check, field in checks:
            if name in data:
                values[name] = check(data[name])
                seen += 1
            elif field.required:
                raise Defer
            else:
                values[name] = field.make_default()
        if cls._forbid_extra and seen != len(data):
            raise Defer
        obj = object.__new__(cls)
        object.__setattr__(obj, "__dict__", values)
        try:
            obj.check()
        except (ValueError, AssertionError):
            raise Defer from None
        return obj

    @classmethod
    def _adapter(cls) -> Any:
        adapter = cls.__dict__.get("_pydantic_adapter")
        if adapter is None:
            from pydantic import TypeAdapter

            adapter = TypeAdapter(cls)
            type.__setattr__(cls, "_pydantic_adapter", adapter)
        return adapter

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """How pydantic validates and writes a record: a typed dict of its fields (a model's
        errors and locations), then ``check``; a record given as such is taken as it is."""
        from pydantic_core import PydanticKnownError, core_schema

        hints = cls._hints()
        fields = {}
        for name, field in cls.model_fields.items():
            schema = handler.generate_schema(hints[name])
            if field.factory is not None:
                schema = core_schema.with_default_schema(schema, default_factory=field.factory)
            elif not field.required:
                schema = core_schema.with_default_schema(schema, default=field.default)
            fields[name] = core_schema.typed_dict_field(schema, required=field.required)
        as_dict = core_schema.typed_dict_schema(
            fields,
            cls_name=cls.__name__,
            extra_behavior="forbid" if cls._forbid_extra else "ignore",
            config=core_schema.CoreConfig(strict=True) if cls._strict else None,
        )

        def build(values: dict[str, Any]) -> Any:
            obj = object.__new__(cls)
            object.__setattr__(obj, "__dict__", values)
            obj.check()
            return obj

        def keep_records(value: Any, validate: Any) -> Any:
            if type(value) is cls:
                return value
            if not isinstance(value, dict):
                raise PydanticKnownError("model_type", {"class_name": cls.__name__})
            return validate(value)

        def dump(value: Any, info: Any) -> Any:
            return plain(value, json_mode=info.mode == "json")

        return core_schema.no_info_wrap_validator_function(
            keep_records,
            core_schema.no_info_after_validator_function(build, as_dict),
            serialization=core_schema.plain_serializer_function_ser_schema(dump, info_arg=True),
        )

    @classmethod
    def model_validate(cls: type[R], obj: Any) -> R:
        if type(obj) is cls:
            return obj
        if type(obj) is dict:
            try:
                return cls._fast(obj)
            except Defer:
                pass
        return cls._adapter().validate_python(obj)  # type: ignore[no-any-return]

    @classmethod
    def model_validate_json(cls: type[R], text: str | bytes) -> R:
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if type(data) is dict:
            try:
                return cls._fast(data)
            except Defer:
                pass
        return cls._adapter().validate_json(text)  # type: ignore[no-any-return]

    @classmethod
    def model_construct(cls: type[R], **values: Any) -> R:
        """A record from trusted values, without validation."""
        for name, field in cls.model_fields.items():
            if name not in values and not field.required:
                values[name] = field.make_default()
        obj = object.__new__(cls)
        object.__setattr__(obj, "__dict__", values)
        return obj

    def model_copy(self: R, *, update: dict[str, Any] | None = None) -> R:
        """A copy with ``update`` applied, without validation (as pydantic's)."""
        obj = object.__new__(type(self))
        object.__setattr__(obj, "__dict__", {**self.__dict__, **(update or {})})
        return obj

    # --- output -------------------------------------------------------------------------------

    def model_dump(self, *, mode: str = "python", exclude_none: bool = False) -> dict[str, Any]:
        dumped: dict[str, Any] = plain(self, json_mode=mode == "json", exclude_none=exclude_none)
        return dumped

    def model_dump_json(self, *, indent: int | None = None, exclude_none: bool = False) -> str:
        return pydantic_json(self.model_dump(mode="json", exclude_none=exclude_none), indent)


# --- serialisation, as pydantic does it -----------------------------------------------------------


def _iso(value: datetime) -> str:
    offset = value.utcoffset()
    if offset is not None and (offset.seconds % 60 or offset.microseconds):
        from pydantic_core import to_json

        return str(json.loads(to_json(value)))
    text = value.isoformat()
    return text[:-6] + "Z" if offset == _ZERO else text


def plain(value: Any, *, json_mode: bool = False, exclude_none: bool = False) -> Any:
    """Records as dicts, recursively (``model_dump``); in JSON mode datetimes as pydantic
    writes them (``Z`` for UTC)."""
    if isinstance(value, Record):
        out = {}
        for name in value.model_fields:
            item = getattr(value, name)
            if item is None and exclude_none:
                continue
            kind = type(item)
            if kind is str or kind is int or item is None:  # most fields: nothing to convert
                out[name] = item
            else:
                out[name] = plain(item, json_mode=json_mode, exclude_none=exclude_none)
        return out
    if isinstance(value, list | tuple):
        return [plain(item, json_mode=json_mode, exclude_none=exclude_none) for item in value]
    if isinstance(value, dict):
        return {
            k: plain(v, json_mode=json_mode, exclude_none=exclude_none) for k, v in value.items()
        }
    if json_mode and isinstance(value, datetime):
        return _iso(value)
    if hasattr(value, "model_dump"):  # a pydantic model inside a record
        return value.model_dump(mode="json" if json_mode else "python", exclude_none=exclude_none)
    return value


def _floats_written_alike(value: Any) -> bool:
    """True when every float in ``value`` is one ``json`` and pydantic write the same way."""
    if isinstance(value, float):
        text = repr(value)
        return "e" not in text and "n" not in text
    if isinstance(value, dict):
        return all(_floats_written_alike(v) for v in value.values())
    if isinstance(value, list):
        return all(_floats_written_alike(v) for v in value)
    return True


def pydantic_json(value: Any, indent: int | None = None) -> str:
    """JSON text of plain data exactly as pydantic's ``dump_json`` writes it."""
    if not _floats_written_alike(value):
        from pydantic_core import to_json

        return to_json(value, indent=indent).decode()
    if indent is not None:
        from cairn.util.jsontext import indented

        return indented(value, indent)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --- errors ---------------------------------------------------------------------------------------


def first_error(exc: ValueError) -> tuple[str, str, str]:
    """(where, message, kind) of the first error of pydantic's ValidationError: the dotted
    location, the message without pydantic's "Value error, " prefix, and the error type.
    Any other ValueError is re-raised."""
    errors = getattr(exc, "errors", None)
    if errors is None:
        raise exc
    first = errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    kind = str(first["type"])
    return where, str(first["msg"]).removeprefix("Value error, "), kind
