"""The marker: JSON that YAML reads alike, round-trip, the five original fields in hand-written
YAML, and ``touch`` (the heartbeat's) moving ``last_updated`` alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import msgspec
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.errors import BadInput
from cairn.state import marker
from cairn.state.owner import Owner
from cairn.util import clock

WHEN = datetime(2026, 11, 30, 10, 15, tzinfo=UTC)
# any text, controls, line separators and byte order marks included: YAML must read it alike
texts = st.text(st.characters(codec="utf-8"), min_size=1, max_size=30)
times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
).map(lambda d: d.replace(microsecond=0))
markers = st.builds(
    marker.Marker,
    skill=texts,
    phase=texts,
    round=st.none() | st.integers(0, 99),
    task=st.none() | st.integers(0, 999),
    started_at=times,
    last_updated=times,
    ticket=st.none() | st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,20}", fullmatch=True),
    run=st.none() | st.just("20261130-101500Z-2"),
    owner=st.none()
    | st.builds(
        Owner,
        host=texts,
        pid=st.integers(1, 2**22),
        pid_started_at=st.none() | times,
        boot_id=st.none() | texts,
    ),
    dispatch=st.none()
    | st.builds(
        marker.DispatchRecord,
        role=texts,
        turn=st.integers(0, 500),
        max_turns=st.none() | st.integers(1, 500),
    ),
    snapshot=st.none()
    | st.builds(marker.SnapshotRef, ref=texts, commit=st.just("ab" * 20), at=times),
)


@settings(max_examples=300, deadline=None)
@given(markers)
def test_render_parse_round_trip(m: marker.Marker) -> None:
    text = marker.render(m)
    assert marker.parse(text, Path("m")) == m
    assert yaml.load(text, Loader=yaml.SafeLoader) == json.loads(text)  # any YAML tool alike


TYPICAL = """\
{
  "version": 1,
  "skill": "impl",
  "phase": "implement",
  "round": 2,
  "task": 5,
  "started_at": "2026-11-30T10:15:00+00:00",
  "last_updated": "2026-11-30T10:15:00+00:00",
  "ticket": "PROJ-12",
  "run": "20261130-101500Z",
  "owner": {
    "host": "build-3",
    "pid": 42,
    "pid_started_at": "2026-11-30T10:15:00+00:00",
    "boot_id": "0f6c-2a8e"
  },
  "dispatch": {
    "role": "coder",
    "turn": 3,
    "max_turns": 150
  },
  "snapshot": {
    "ref": "refs/cairn/wip/PROJ-12",
    "commit": "abababababababababababababababababababab",
    "at": "2026-11-30T10:15:00+00:00"
  }
}
"""


def test_a_typical_marker_s_bytes_are_pinned() -> None:
    m = marker.Marker(
        phase="implement",
        round=2,
        task=5,
        started_at=WHEN,
        last_updated=WHEN,
        ticket="PROJ-12",
        run="20261130-101500Z",
        owner=Owner(host="build-3", pid=42, pid_started_at=WHEN, boot_id="0f6c-2a8e"),
        dispatch=marker.DispatchRecord(role="coder", turn=3, max_turns=150),
        snapshot=marker.SnapshotRef(ref="refs/cairn/wip/PROJ-12", commit="ab" * 20, at=WHEN),
    )
    assert marker.render(m) == TYPICAL
    assert marker.parse(TYPICAL, Path("m")) == m


def test_five_original_fields_and_offsets() -> None:
    m = marker.parse(
        "skill: impl\nphase: code-reviewer\nround: 2\n"
        "started_at: 2026-11-29T10:00:00+02:00\nlast_updated: 2026-11-29 11:00:00\n",
        Path("m"),
    )
    assert m.started_at == datetime(2026, 11, 29, 10, tzinfo=timezone(timedelta(hours=2)))
    assert m.last_updated == datetime(2026, 11, 29, 11, tzinfo=UTC)
    assert (m.owner, m.task, m.version) == (None, None, 1)


def test_rendered_times_carry_an_offset() -> None:
    text = marker.render(marker.Marker(phase="p", started_at=WHEN, last_updated=WHEN))
    assert '"started_at": "2026-11-30T10:15:00+00:00",' in text


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("phase: [unclosed\n", "not valid YAML at line"),
        ("just text\n", "not a YAML mapping"),
        ("phase: p\nstarted_at: soon\nlast_updated: 2026-11-29\n", "started_at"),
        ("skill: impl\n", "phase"),
        ("version: 2\nphase: p\nstarted_at: 2026-11-29\nlast_updated: 2026-11-29\n", "newer"),
    ],
)
def test_bad_markers_name_the_problem(text: str, needle: str) -> None:
    with pytest.raises(BadInput, match=needle) as caught:
        marker.parse(text, Path("/state/m.yaml"))
    assert "/state/m.yaml" in str(caught.value)
    assert "\n" not in str(caught.value)


HAND_WRITTEN = (
    "skill: impl\nphase: code-reviewer\nround: 2\n"
    "started_at: 2026-11-29T10:00:00+02:00\nlast_updated: 2026-11-29 11:00:00\n"
)


def test_a_hand_written_yaml_marker_is_rewritten_as_json(tmp_path: Path) -> None:
    path = tmp_path / ".in-progress.yaml"
    path.write_text(HAND_WRITTEN)
    before = marker.read(path)
    assert before is not None
    assert marker.touch(path) is True
    text = path.read_text()
    assert json.loads(text)["phase"] == "code-reviewer"
    after = marker.parse(text, path)
    assert after.last_updated > before.last_updated
    assert msgspec.structs.replace(after, last_updated=before.last_updated) == before
    assert text == marker.render(after)


def in_one_second(act: object) -> None:
    """Retry ``act`` (a callable returning whether it saw one clock second throughout)."""
    assert callable(act)
    for _ in range(5):
        if act():
            return
    raise AssertionError("the clock's second changed five times in a row")


def test_touch_moves_last_updated_alone(tmp_path: Path) -> None:
    """A JSON marker gets its ``last_updated`` replaced and nothing else: the text is what
    ``render`` writes for the touched marker, keys ``Marker`` does not know are kept, and a
    second touch in the same second writes nothing."""
    path = tmp_path / ".in-progress.yaml"
    m = msgspec.structs.replace(marker.parse(TYPICAL, path), last_updated=WHEN - timedelta(hours=1))
    marker.write(path, m)

    def same_second() -> bool:
        now = clock.stamp()
        assert marker.touch(path) is True
        return clock.stamp() == now and path.read_text() == marker.render(
            msgspec.structs.replace(m, last_updated=datetime.fromisoformat(now))
        )

    in_one_second(same_second)

    def unchanged() -> bool:
        now, inode = clock.stamp(), path.stat().st_ino
        marker.touch(path)
        return clock.stamp() == now and path.stat().st_ino == inode  # not replaced

    in_one_second(unchanged)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "future_key": [1], "last_updated": "soon"}))
    assert marker.touch(path) is True
    touched = json.loads(path.read_text())
    assert touched["future_key"] == [1] and touched["last_updated"] != "soon"
    assert marker.parse(path.read_text(), path).last_updated >= clock.now() - timedelta(seconds=2)
    assert marker.touch(tmp_path / "absent") is False


T = "2026-11-29T10:00:00+00:00"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"phase": "p", "last_updated": ', "not valid YAML"),
        ("[1, 2]", "not a YAML mapping"),
        (json.dumps({"phase": "p", "started_at": T, "last_updated": [5]}), "last_updated"),
        (
            json.dumps({"version": 2, "phase": "p", "started_at": T, "last_updated": T}),
            "newer",
        ),
        ('{"version": "1", "phase": "p", "started_at": "x", "last_updated": "x"}', "started_at"),
        ("phase: p\nstarted_at: soon\nlast_updated: 2026-11-29\n", "started_at"),
    ],
)
def test_touch_writes_nothing_to_a_marker_that_does_not_validate(
    tmp_path: Path, text: str, needle: str
) -> None:
    """A marker not in cairn's JSON form is read whole: one that does not validate is the
    error ``read`` gives (a newer cairn's marker included), and is left as it is."""
    path = tmp_path / ".in-progress.yaml"
    path.write_text(text)
    with pytest.raises(BadInput, match=needle):
        marker.touch(path)
    assert path.read_text() == text
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/St_Johns", "Africa/Monrovia"])
def test_the_heartbeat_s_stamp_is_now_as_iso_text(zone: str) -> None:
    """``clock.stamp`` (no ``datetime``) is ``clock.now().isoformat()`` in any zone, offsets
    of half hours and of seconds (Monrovia before 1972: -0:44:30) included."""
    code = (
        "import os, time\n"
        "from datetime import datetime\n"
        "from cairn.util import clock\n"
        "for _ in range(5):  # a second may turn between two reads (datetime rounds, time floors)\n"
        "    a, b, c = clock.stamp(), clock.now().isoformat(), clock.stamp()\n"
        "    if a == b == c: break\n"
        "print(a == b, a)\n"
    )
    env = {**os.environ, "TZ": zone}
    if zone == "Africa/Monrovia":  # the offset of 1970, with its seconds: faked by a POSIX TZ
        env["TZ"] = "LMT0:44:30"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith("True "), done.stdout
