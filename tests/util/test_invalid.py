"""``cairn.util.invalid``: msgspec's ValidationError as cairn's one line, ``where: why``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
import pytest
from msgspec import Meta, Struct

from cairn.util.invalid import line


class Inner(Struct, kw_only=True, forbid_unknown_fields=True):
    turns: Annotated[int, Meta(ge=1)] = 1
    cost: Annotated[float, Meta(gt=0)] = 1.0
    phases: Annotated[list[Literal["implement", "review"]], Meta(min_length=1)] = []
    command: str | list[str] | None = None
    name: str

    def __post_init__(self) -> None:
        if self.name == "-":
            raise ValueError("name: '-' is not a name; give one such as main")
        if self.name == "both":
            raise ValueError("turns and cost go together")


class Outer(Struct, kw_only=True, forbid_unknown_fields=True):
    inner: Inner
    mode: Literal["a", "b"] = "a"


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (
            {"inner": {"name": "x", "turns": 0}},
            "inner.turns: Input should be greater than or equal to 1",
        ),
        ({"inner": {"name": "x", "cost": 0}}, "inner.cost: Input should be greater than 0"),
        ({"inner": {"name": "x", "turns": "2"}}, "inner.turns: Input should be a valid integer"),
        ({"inner": {"name": "x", "phases": []}}, "inner.phases: List should have at least 1 item"),
        (
            {"inner": {"name": "x", "phases": ["implement", "fix"]}},
            "inner.phases.1: Input should be 'implement' or 'review'",
        ),
        (
            {"inner": {"name": "x", "command": 3}},
            "inner.command: Input should be a valid string or a valid list",
        ),
        ({"inner": {"name": "x", "bogus": 1}}, "inner.bogus: unknown key"),
        ({"inner": {}}, "inner.name: Field required"),
        ({"inner": 3}, "inner: Input should be a valid dictionary"),
        ({"inner": {"name": "x"}, "mode": "c"}, "mode: Input should be 'a' or 'b'"),
        ({"inner": {"name": "-"}}, "inner.name: '-' is not a name; give one such as main"),
        ({"inner": {"name": "both"}}, "inner: turns and cost go together"),
    ],
)
def test_each_error_is_one_line_naming_where(data: dict[str, Any], said: str) -> None:
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.convert(data, Outer, strict=True)
    assert line(caught.value, Outer) == said


def test_without_the_type_a_choice_is_msgspec_s_words() -> None:
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.convert({"inner": {"name": "x"}, "mode": "c"}, Outer)
    assert line(caught.value) == "mode: Invalid enum value 'c'"
