"""Atomicity under real kills: a writer SIGKILLed at random instants never leaves a torn marker
or change summary, only the old or the new version, and its temp files are cleaned up."""

from __future__ import annotations

import functools
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cairn import summary
from cairn.errors import BadInput
from cairn.state import marker
from cairn.state.layout import Layout
from cairn.state.marker import DispatchRecord, Marker, SnapshotRef
from cairn.state.owner import Owner
from cairn.terms import ENV_KILL_SEED
from cairn.util import durable, procs

VERSIONS = 20
KILLS = 520
TICKET = "T-7"
RUN = "20260101-100000Z"
T0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)


def make_markers() -> list[Marker]:
    owner = Owner(host="builder", pid=4242, pid_started_at=T0, boot_id="b00t")
    out = []
    for v in range(VERSIONS):
        at = T0 + timedelta(minutes=v)
        out.append(
            Marker(
                phase=("plan", "implement", "review", "fix")[v % 4],
                round=v // 4,
                task=v,
                started_at=T0,
                last_updated=at,
                ticket=TICKET,
                run=RUN,
                owner=owner,
                dispatch=DispatchRecord(role="coder", turn=v, max_turns=40) if v % 2 else None,
                snapshot=SnapshotRef(ref=f"refs/cairn/{TICKET}/{v}", commit=f"{v:040x}", at=at)
                if v % 3 == 0
                else None,
            )
        )
    return out


def make_summaries() -> list[summary.Summary]:
    """Growing from a few KiB to about 150 KiB; few tasks with long text keep parsing quick."""
    out = []
    for v in range(VERSIONS):
        tasks = [
            summary.Task(
                number=n,
                title=f"task {n} of version {v}: change the thing",
                status="completed",
                files=[f"src/pkg/module_{n}_{i}.py" for i in range(4)],
                outcome=f"v{v} " + "implemented and tested " * (2 + 22 * v),
                notes=f"version {v}",
            )
            if n % 3
            else summary.Task(number=n, title=f"task {n} of version {v}: " + "later " * 70 * v)
            for n in range(6 + v // 2)
        ]
        out.append(
            summary.Summary(
                ticket=TICKET,
                run=RUN,
                mode="implementation",
                updated=T0 + timedelta(minutes=v),
                status=summary.Status(state="in_progress", item=1),
                tasks=tasks,
            )
        )
    return out


@functools.cache
def versions() -> tuple[list[Marker], list[bytes], list[summary.Summary], list[bytes]]:
    """The markers and summaries the writer cycles through, and their exact bytes."""
    markers = make_markers()
    summaries = make_summaries()
    return (
        markers,
        [marker.render(m).encode() for m in markers],
        summaries,
        [summary.render(s).encode() for s in summaries],
    )


def test_versions_are_distinct_round_trip_and_large() -> None:
    markers, marker_texts, summaries, summary_texts = versions()
    assert len(set(marker_texts)) == VERSIONS
    assert len(set(summary_texts)) == VERSIONS
    sizes = [len(text) for text in summary_texts]
    assert sizes == sorted(sizes)
    assert sum(size > 64 * 1024 for size in sizes) >= 5, sizes
    for m, text in zip(markers, marker_texts, strict=True):
        assert marker.parse(text.decode(), Path("m")) == m
    for s, text in zip(summaries, summary_texts, strict=True):
        assert summary.parse(text.decode()) == s


def atomic_writers(marker_path: Path, summary_path: Path) -> list[Callable[[int], None]]:
    markers, _, summaries, _ = versions()
    return [
        lambda v: marker.write(marker_path, markers[v]),
        lambda v: summary.save(summary_path, summaries[v]),
    ]


def naive_writers(marker_path: Path, summary_path: Path) -> list[Callable[[int], None]]:
    """What atomic_write protects against: truncate and write in place."""
    _, marker_texts, _, summary_texts = versions()

    def write_marker(v: int) -> None:
        marker_path.write_bytes(marker_texts[v])

    def write_summary(v: int) -> None:
        summary_path.write_bytes(summary_texts[v])

    return [write_marker, write_summary]


@dataclass
class Hammer:
    """Fork a writer that continues the sequence marker 0, summary 0, marker 1, summary 1, ...
    from where the last one was killed, SIGKILL it at a random instant, check what is left."""

    root: Path
    seed: int
    writers: Callable[[Path, Path], list[Callable[[int], None]]]
    rng: random.Random = field(init=False)
    step: int = 0  # the next write in the sequence; marker v is step 2v, summary v is 2v + 1
    kills: int = 0
    leftover_temps: int = 0
    temps_cleaned: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        layout = Layout(self.root)
        self.marker_path = layout.marker_path(TICKET)
        self.summary_path = layout.run_dir(TICKET, RUN) / "01_coder_change-summary.md"
        durable.ensure_dir(self.summary_path.parent)
        self.dirs = (self.marker_path.parent, self.summary_path.parent)

    def where(self) -> str:
        return f"seed {self.seed}, kill {self.kills}, step {self.step}"

    def spawn(self) -> int:
        start = self.step
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child never returns into pytest
            try:
                writers = self.writers(self.marker_path, self.summary_path)
                step = start
                while True:
                    writers[step % 2]((step // 2) % VERSIONS)
                    step += 1
            finally:
                os._exit(70)
        return pid

    def pause(self) -> None:
        roll = self.rng.random()
        if roll < 0.1:
            return  # kill at once, often before the child has done anything
        if roll < 0.3:
            time.sleep(self.rng.uniform(0, 0.001))
            return
        time.sleep(self.rng.uniform(0, 0.015))

    def kill_once(self) -> None:
        pid = self.spawn()
        try:
            self.pause()
        finally:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
        self.kills += 1
        assert os.waitstatus_to_exitcode(status) == -signal.SIGKILL, self.where()
        self.check_temps(pid)

    def state(self) -> tuple[int | None, int | None]:
        """The version index of the marker and of the summary on disk (None when absent).

        Each file must parse (through the real readers) to one of the versions written, and
        hold exactly that version's bytes.
        """
        markers, marker_texts, summaries, summary_texts = versions()
        found_marker = marker.read(self.marker_path)
        found_summary = summary.load(self.summary_path)
        found: list[int | None] = []
        for path, model, models, texts in (
            (self.marker_path, found_marker, markers, marker_texts),
            (self.summary_path, found_summary, summaries, summary_texts),
        ):
            if model is None:
                found.append(None)
                continue
            raw = path.read_bytes()
            assert raw in texts, f"{path.name}: {len(raw)} bytes that no version has"
            index = texts.index(raw)
            assert model == models[index], f"{path.name}: parsed differently from version {index}"
            found.append(index)
        return found[0], found[1]

    def check(self) -> str | None:
        """None when the files hold the old or the new version of each write; else what is wrong.

        The killed writer completed some number of writes of the sequence (often none, a few
        at most with fsync); what is on disk must be the state after exactly that many writes,
        so each file holds a complete version and the summary never gets ahead of the marker.
        """
        try:
            found = self.state()
        except (BadInput, ValueError, AssertionError) as exc:
            return f"{self.where()}: torn or foreign file: {type(exc).__name__}: {exc}"
        # the pattern repeats every 2 * VERSIONS writes, so a lap more or less is the same state
        for done in range(2 * VERSIONS):
            if self.expected(self.step + done) == found:
                self.step += done
                return None
        marker_v, summary_v = found
        return (
            f"{self.where()}: marker version {marker_v} with summary version {summary_v} "
            f"is no state the write sequence passes through (was {self.expected(self.step)})"
        )

    @staticmethod
    def expected(step: int) -> tuple[int | None, int | None]:
        """(marker, summary) versions on disk once the first ``step`` writes completed."""
        markers_done = (step + 1) // 2
        summaries_done = step // 2
        m = (markers_done - 1) % VERSIONS if markers_done else None
        s = (summaries_done - 1) % VERSIONS if summaries_done else None
        return m, s

    def temps(self) -> list[Path]:
        return [
            entry
            for directory in self.dirs
            for entry in directory.iterdir()
            if entry.name.startswith(durable.TEMP_PREFIX)
        ]

    def check_temps(self, pid: int) -> None:
        mine = [t for t in self.temps() if f".{pid}." in t.name]
        # one write at a time: a kill leaves at most the temp of the write it interrupted
        assert len(mine) <= 1, (self.where(), mine)
        self.leftover_temps += len(mine)
        present = self.temps()
        assert len(present) <= 60, (self.where(), len(present))
        if len(present) >= 10 or self.kills % 100 == 0:
            self.clean()

    def clean(self) -> None:
        before = self.temps()
        for directory in self.dirs:
            durable.remove_stale_temps(directory)
        after = self.temps()
        # a temp survives only when its pid was reused by a live process meanwhile
        for temp in after:
            pid = int(temp.name.rsplit(".", 2)[-2])
            assert procs.pid_alive(pid), (self.where(), temp)
        assert len(after) <= 1, (self.where(), after)
        self.temps_cleaned += len(before) - len(after)
        for directory in self.dirs:
            assert {p.name for p in directory.iterdir()} <= {
                ".in-progress.yaml",
                RUN,
                "01_coder_change-summary.md",
            }


def seed_for_run() -> int:
    return int(os.environ.get(ENV_KILL_SEED, str(random.randrange(2**32))))


@pytest.mark.slow
def test_sigkilled_writer_leaves_old_or_new_version(tmp_path: Path) -> None:
    seed = seed_for_run()
    print(f"seed {seed} (rerun with {ENV_KILL_SEED}={seed})")
    hammer = Hammer(tmp_path / "state", seed, atomic_writers)
    assert hammer.check() is None  # nothing yet: both absent
    while hammer.kills < KILLS:
        hammer.kill_once()
        problem = hammer.check()
        assert problem is None, problem
    hammer.clean()
    assert hammer.temps() == [] or all(
        procs.pid_alive(int(t.name.rsplit(".", 2)[-2])) for t in hammer.temps()
    )
    # the kills really landed everywhere: mid-sequence progress, versions wrapped around, the
    # big summaries were written, and some kills interrupted a write (leaving its temp file)
    assert hammer.step > 2 * VERSIONS + 1, hammer.where()
    assert hammer.leftover_temps > 0, hammer.where()
    assert hammer.temps_cleaned >= hammer.leftover_temps - len(hammer.temps()), hammer.where()
    m, s = hammer.state()
    assert m is not None and s is not None


def test_the_check_catches_torn_in_place_writes(tmp_path: Path) -> None:
    """Control: the same harness with a truncate-and-write writer finds a torn file."""
    seed = seed_for_run()
    print(f"seed {seed} (rerun with {ENV_KILL_SEED}={seed})")
    hammer = Hammer(tmp_path / "state", seed, naive_writers)
    problems: list[str] = []
    while hammer.kills < 400 and not problems:
        hammer.kill_once()
        problem = hammer.check()
        if problem:
            problems.append(problem)
    assert problems, f"seed {seed}: {hammer.kills} kills and no torn write seen"
