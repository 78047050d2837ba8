"""``NamedTuple`` for the hot paths: to the type checker it is ``typing.NamedTuple``; at run time
a class declared on it is built by ``collections.namedtuple`` from the same annotated body, so a
hook's tuples (the layout, the repository, a staged write) do not import ``typing``, which costs
a call about 8 ms. One declaration per tuple: its annotated fields, defaults last, and methods."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:
    from collections import namedtuple

    class _Builder(type):
        """Builds each class declared on ``NamedTuple`` as a subclass of a
        ``collections.namedtuple`` of its annotated fields (``__slots__ = ()``: no dict)."""

        def __new__(cls, name: str, bases: tuple[type, ...], body: dict[str, object]) -> type:
            if not bases:  # NamedTuple itself
                return super().__new__(cls, name, bases, body)
            fields = list(body.get("__annotations__", {}))
            given = [field for field in fields if field in body]
            if given != fields[len(fields) - len(given) :]:
                raise TypeError(f"{name}: a field without a default follows one with a default")
            base = namedtuple(
                name, fields, defaults=[body.pop(f) for f in given], module=body["__module__"]
            )
            body.pop("__annotations__", None)
            body.setdefault("__slots__", ())
            return type(name, (base,), body)

    class NamedTuple(metaclass=_Builder):
        """Declare fields by annotation, as on ``typing.NamedTuple``."""
