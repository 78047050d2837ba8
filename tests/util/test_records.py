"""Records: the exact-shape path, pydantic behind it, and a pydantic model of the same fields all
agree, on generated input, for every record cairn declares."""

from __future__ import annotations

import json
import typing
from datetime import UTC, datetime, timedelta, timezone
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pydantic
import pydantic_core
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import cairn.config
import cairn.state.catchup
import cairn.state.marker
import cairn.state.owner
import cairn.state.status
import cairn.summary.model
import cairn.wip.models
from cairn.util.records import Record, first_error, plain, pydantic_json
from cairn.util.shapes import Defer


def _all_records() -> list[type[Record]]:
    found: list[type[Record]] = []
    stack = list(Record.__subclasses__())
    while stack:
        cls = stack.pop()
        if cls.__module__.startswith("cairn."):
            found.append(cls)
        stack += cls.__subclasses__()
    return sorted(found, key=lambda c: (c.__module__, c.__name__))


RECORDS = _all_records()
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, width=32),
    st.sampled_from(["", "12", "x y", "2026-11-30T10:15:00+00:00", "2026-11-30", "F1"]),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 3), max_size=2),
)
TIMES = st.datetimes(
    min_value=datetime(2000, 1, 1), timezones=st.sampled_from([UTC, timezone(timedelta(hours=2))])
)


def _strategy(tp: Any) -> st.SearchStrategy[Any]:
    """Values of annotation ``tp``, mostly in shape, sometimes only coercible."""
    origin = get_origin(tp)
    if origin is Annotated:
        return _strategy(get_args(tp)[0])
    if origin in (Union, type(int | None)):
        return st.one_of([_strategy(arg) for arg in get_args(tp)])
    if origin is Literal:
        return st.sampled_from(get_args(tp))
    if origin is list:
        return st.lists(_strategy(get_args(tp)[0]), max_size=3)
    if origin is dict:
        key, value = get_args(tp)
        return st.dictionaries(_strategy(key), _strategy(value), max_size=3)
    if isinstance(tp, type) and issubclass(tp, Record):
        return _data(tp)
    simple: dict[Any, st.SearchStrategy[Any]] = {
        str: st.one_of(
            st.sampled_from(["T-1", "F1", "refs/cairn/wip", "deadbeef12", "24h", "pass", "x"]),
            st.text(max_size=6),
        ),
        int: st.one_of(st.integers(0, 200), st.integers(-3, -1), st.just(70000)),
        float: st.one_of(st.floats(0.5, 1e6), st.just(0.0), st.integers(1, 9)),
        bool: st.booleans(),
        datetime: st.one_of(TIMES, TIMES.map(lambda t: t.isoformat()), st.datetimes()),
        type(None): st.none(),
        Any: JUNK,
    }
    return simple[tp]


@st.composite
def _data(draw: st.DrawFn, cls: type[Record]) -> dict[str, Any]:
    """A record's fields, every required one and some optional ones; then, half the time, one
    change that a record must handle like a model: a wrong value, a missing field, a stranger."""
    hints = typing.get_type_hints(cls, include_extras=True)
    data = {
        name: draw(_strategy(hints[name]))
        for name, field in cls.model_fields.items()
        if field.required or draw(st.booleans())
    }
    change = draw(st.sampled_from(["none", "none", "junk", "drop", "extra"]))
    names = sorted(cls.model_fields)
    if change == "junk" and names:
        data[draw(st.sampled_from(names))] = draw(JUNK)
    elif change == "drop" and data:
        del data[draw(st.sampled_from(sorted(data)))]
    elif change == "extra":
        data["unknown_key"] = draw(JUNK)
    return data


def _model_twin(cls: type[Record]) -> type[pydantic.BaseModel]:
    """A pydantic model with the record's fields, configuration and check: what the record's
    behaviour has to match."""
    hints = typing.get_type_hints(cls, include_extras=True)
    fields: dict[str, Any] = {}
    for name, field in cls.model_fields.items():
        if field.factory is not None:
            fields[name] = (hints[name], pydantic.Field(default_factory=field.factory))
        else:
            fields[name] = (hints[name], ... if field.required else field.default)

    class Base(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(
            extra="forbid" if cls._forbid_extra else "ignore",
            frozen=cls._frozen,
            strict=cls._strict,
        )

        @pydantic.model_validator(mode="after")
        def _check(self) -> Any:
            cls.model_construct(**dict(self)).check()
            return self

    return pydantic.create_model(cls.__name__, __base__=Base, **fields)  # type: ignore[no-any-return, call-overload]


TWINS = {cls: _model_twin(cls) for cls in RECORDS}


def _outcome(validate: Any, data: Any) -> tuple[str, Any]:
    try:
        return "ok", validate(data)
    except pydantic.ValidationError as exc:
        error = exc.errors()[0]
        return "error", (error["loc"], error["msg"], error["type"])


def test_every_record_is_found() -> None:
    names = {cls.__name__ for cls in RECORDS}
    assert {"Marker", "Owner", "Summary", "StatusRow", "CatchupReport", "SaveResult"} <= names
    assert {"Config", "SnapshotConfig"} <= names


@pytest.mark.slow
@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: f"{c.__module__}.{c.__name__}")
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fast_path_pydantic_and_a_model_agree(cls: type[Record], data: st.DataObject) -> None:
    raw = data.draw(_data(cls))
    twin = TWINS[cls]
    kind, expected = _outcome(twin.model_validate, raw)
    got_kind, got = _outcome(cls.model_validate, raw)
    assert got_kind == kind, (raw, expected, got)
    if kind == "error":
        assert got == expected
        return
    assert plain(got) == plain(dict(expected))
    try:
        fast = cls._fast(raw)
    except Defer:
        return
    assert fast == got


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_what_cairn_writes_takes_the_fast_path(cls: type[Record]) -> None:
    """A record dumped and read back (a marker, a summary, a config) never needs pydantic."""

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def round_trip(data: st.DataObject) -> None:
        raw = data.draw(_data(cls))
        try:
            made = cls.model_validate(raw)
        except pydantic.ValidationError:
            return
        assume(not _naive_times(made.model_dump()))  # cairn writes times with their offset
        assert cls._fast(made.model_dump()) == made
        assert cls._fast(json.loads(made.model_dump_json())) == made

    round_trip()


def _naive_times(value: Any) -> bool:
    if isinstance(value, datetime):
        return value.tzinfo is None
    if isinstance(value, dict):
        return any(_naive_times(v) for v in value.values())
    if isinstance(value, list):
        return any(_naive_times(v) for v in value)
    return False


def test_errors_read_as_a_models() -> None:
    with pytest.raises(ValueError) as caught:
        cairn.state.marker.Marker.model_validate(
            {"phase": "x", "started_at": NOW, "last_updated": NOW, "owner": 5}
        )
    assert first_error(caught.value) == (
        "owner",
        "Input should be a valid dictionary or instance of Owner",
        "model_type",
    )
    with pytest.raises(ValueError) as caught:
        cairn.config.SnapshotConfig.model_validate({"bogus": 1})
    assert first_error(caught.value) == (
        "bogus",
        "Extra inputs are not permitted",
        "extra_forbidden",
    )


NOW = datetime(2026, 11, 30, 10, 15, tzinfo=UTC)
JSONISH = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(value=JSONISH, indent=st.sampled_from([None, 2]))
def test_json_text_is_pydantics(value: Any, indent: int | None) -> None:
    assert pydantic_json(value, indent) == pydantic_core.to_json(value, indent=indent).decode()


@settings(max_examples=300, deadline=None)
@given(
    when=st.datetimes(
        timezones=st.one_of(
            st.none(),
            st.just(UTC),
            st.timedeltas(timedelta(hours=-23), timedelta(hours=23)).map(timezone),
        )
    )
)
def test_times_are_written_as_pydantic_writes_them(when: datetime) -> None:
    expected = pydantic.TypeAdapter(datetime).dump_python(when, mode="json")
    assert plain({"t": when}, json_mode=True) == {"t": expected}


def test_records_behave_like_frozen_dataclasses() -> None:
    owner = cairn.state.owner.Owner(host="h", pid=1)
    assert owner == cairn.state.owner.Owner(host="h", pid=1)
    assert hash(owner) == hash(cairn.state.owner.Owner(host="h", pid=1))
    assert repr(owner) == "Owner(host='h', pid=1, pid_started_at=None, boot_id=None)"
    with pytest.raises(AttributeError):
        owner.pid = 2  # type: ignore[misc]
    assert owner.model_copy(update={"pid": 2}).pid == 2
    row = cairn.state.status.StatusRow(ticket="T", state="none")
    row.snapshot = "abc"
    assert row.snapshot == "abc"
    first = cairn.state.catchup.CatchupReport(ticket="T", state="none", inferred=False)
    second = cairn.state.catchup.CatchupReport(ticket="T", state="none", inferred=False)
    first.warnings.append("x")
    assert second.warnings == []
