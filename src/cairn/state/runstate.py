"""A run's durable state: begin, record transitions, finish. Marker, summary and journal together.

Every transition takes the ticket's short ``.lock``, checks its input against the files as they
are, then appends its journal event (the write-ahead record) and rewrites the change summary and
the marker atomically, in that order. A writer killed in between leaves files that lag behind the
journal; the next transition repairs them first (``cairn.state.repair``), so a kill at any
instant leaves a truthful record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from cairn import summary
from cairn.errors import BadInput
from cairn.state import journal, marker, repair, transition
from cairn.state.layout import (
    JOURNAL,
    SUMMARY_ARTIFACT,
    SUMMARY_ROLE,
    Layout,
    artifact_path,
    latest_artifact,
)
from cairn.state.lease import Lease, acquire
from cairn.summary import Summary
from cairn.summary.store import READ_LIMIT as SUMMARY_LIMIT
from cairn.terms import JournalEvent
from cairn.util import clock, durable

# A run does not start (or resume) with less room than this for its state and snapshots.
MIN_FREE_BYTES = 1024 * 1024


class RunRef(NamedTuple):
    layout: Layout
    ticket: str
    run_id: str

    @property
    def run_dir(self) -> Path:
        return self.layout.run_dir(self.ticket, self.run_id)

    @property
    def marker_path(self) -> Path:
        return self.layout.marker_path(self.ticket)

    @property
    def lock_path(self) -> Path:
        return self.layout.lock_path(self.ticket)

    def summary_path(self) -> Path | None:
        found = latest_artifact(self.run_dir, SUMMARY_ROLE, SUMMARY_ARTIFACT)
        return found.path if found else None

    def load_summary(self) -> tuple[Path, Summary]:
        path = self.summary_path()
        loaded = summary.load(path) if path is not None else None
        return self._need_summary(path, loaded)

    def read(self, with_summary: bool = True) -> repair.RunState:
        """The run's files under the lock, caught up with the journal in memory."""
        return repair.read(self.run_dir, self.run_id, self.marker_path, with_summary)

    def summary_of(self, state: repair.RunState) -> tuple[Path, Summary]:
        return self._need_summary(state.summary_path, state.summary)

    def _need_summary(self, path: Path | None, loaded: Summary | None) -> tuple[Path, Summary]:
        if path is None or loaded is None:
            raise BadInput(
                f"run {self.run_id} of ticket {self.ticket} has no change summary; "
                "start a run with cairn run"
            )
        return path, loaded


def begin(
    layout: Layout,
    ticket: str,
    scaffold: Callable[[str], Summary],
    *,
    stale_after: float,
    takeover: bool = False,
    skill: str = "impl",
    phase: str = "implement",
    round: int | None = None,
    first_artifacts: Sequence[tuple[str, str, str, str]] = (),
    started: dict[str, Any] | None = None,
) -> tuple[RunRef, Lease]:
    """Take the lease, create the run directory, and write journal, summary and marker.

    ``scaffold(run_id)`` builds the first change summary; it exists before any agent turn.
    ``first_artifacts`` (role, name, extension, content) are written before it, sharing one NN
    when role and name repeat (a plan's ``.md`` and ``.json``).
    """
    check_writable(layout, ticket)
    lease = acquire(layout, ticket, stale_after=stale_after, takeover=takeover)
    try:
        now = clock.now()
        run_id, run_dir = layout.create_run(ticket, now)
        ref = RunRef(layout, ticket, run_id)
        owner = msgspec.to_builtins(lease.me)
        journal.record(
            run_dir,
            "run_started",
            ticket=ticket,
            run=run_id,
            skill=skill,
            owner=owner,
            **(started or {}),
        )
        if lease.takeover is not None and lease.previous is not None:
            previous = lease.previous
            journal.record(
                run_dir,
                "takeover",
                reason=lease.takeover,
                previous_run=previous.run,
                previous_owner=msgspec.to_builtins(previous.owner) if previous.owner else None,
            )
        with durable.locked(ref.lock_path):
            durable.remove_stale_temps(run_dir.parent)
            first = summary_text(scaffold(run_id))
            numbers: dict[tuple[str, str], int] = {}
            for role, name, ext, content in first_artifacts:
                path = artifact_path(run_dir, role, name, ext, numbers.get((role, name)))
                numbers[(role, name)] = int(path.name.split("_", 1)[0])
                durable.atomic_write(path, content)
            durable.atomic_write(artifact_path(run_dir, SUMMARY_ROLE, SUMMARY_ARTIFACT), first)
            marker.write(
                ref.marker_path,
                marker.Marker(
                    skill=skill,
                    phase=phase,
                    round=round,
                    started_at=now,
                    last_updated=now,
                    ticket=ticket,
                    run=run_id,
                    owner=lease.me,
                ),
            )
    except BaseException:
        lease.release()
        raise
    return ref, lease


def check_writable(layout: Layout, ticket: str, run_id: str | None = None) -> None:
    """Before a run takes the lease (and records itself in it): the ticket's files, and the
    run's when it goes on, can be written, and the disk has room; a read-only state tree or a
    full disk stops it with nothing written."""
    durable.check_free_space(layout.ticket_dir(ticket), MIN_FREE_BYTES)
    if layout.ticket_dir(ticket).is_dir():
        durable.check_writable(layout.lease_path(ticket))
        durable.check_writable(layout.marker_path(ticket))
    if run_id is not None:
        durable.check_writable(layout.run_dir(ticket, run_id) / JOURNAL, replace=False)


def write_artifact(
    ref: RunRef, role: str, name: str, content: str, ext: str = "md", number: int | None = None
) -> Path:
    """Write the run's next ``{NN}_{role}_{name}.{ext}``; NN is unique under concurrency."""
    with durable.locked(ref.lock_path):
        path = artifact_path(ref.run_dir, role, name, ext, number)
        if number is None and path.exists():
            raise BadInput(f"artifact {path.name} already exists in run {ref.run_id}")
        durable.atomic_write(path, content)
    return path


def edit_summary(
    ref: RunRef,
    operation: Callable[[Summary], Summary] | None,
    event: JournalEvent,
    **fields: Any,
) -> Summary:
    """Apply one summary operation, then move the marker to the summary's current item.

    ``operation`` None applies the change the event itself records (what a repair applies
    again after a kill); the event's fields then say everything about it."""
    with durable.locked(ref.lock_path):
        state = ref.read()
        path, before = ref.summary_of(state)
        record = journal.entry(event, **fields)
        change = operation or repair.summary_change(record)
        if change is None:
            raise ValueError(f"journal event {record} does not say how the summary changes")
        after = change(before)
        item = after.status.item
        writes = [(path, summary_text(after))]
        writes += transition.marker_write(state, task=item if isinstance(item, int) else None)
        transition.commit(state, record, writes)
    return after


def record(ref: RunRef, event: JournalEvent, **fields: Any) -> dict[str, Any]:
    """Journal an event that changes neither summary nor marker, once the files have caught
    up with the journal (an event appended on top of a lagging one would hide it)."""
    with durable.locked(ref.lock_path):
        made = journal.entry(event, **fields)
        transition.commit(ref.read(with_summary=False), made, [])
        return made


def catch_up(ref: RunRef) -> bool:
    """Repair the run's summary and marker if they lag behind its journal (a writer was killed
    between its journal event and its files); True when something was repaired. Reads without
    the lock first, so a run whose files are up to date is never written."""
    if not ref.read(with_summary=False).lagging:
        return False
    with durable.locked(ref.lock_path):
        state = ref.read(with_summary=False)
        if not state.lagging:
            return False
        repair.write(state)
    return True


def catch_up_ticket(layout: Layout, ticket: str) -> bool:
    """``catch_up`` for the run a ticket's marker names, or else its latest run."""
    current = marker.read(layout.marker_path(ticket))
    run_id = current.run if current is not None else None
    if run_id is None or not layout.run_dir(ticket, run_id).is_dir():
        run_id = layout.latest_run(ticket)
    return run_id is not None and catch_up(RunRef(layout, ticket, run_id))


def update_marker(
    ref: RunRef,
    event: JournalEvent | None = None,
    fields: dict[str, Any] | None = None,
    **changes: Any,
) -> None:
    """Rewrite the marker (phase, round, dispatch, snapshot…) and optionally journal an event
    first: ``fields``, or by default the changes themselves; the change to the summary the
    event records (``repair.summary_change``: a dispatch's start) is written with them."""
    with durable.locked(ref.lock_path):
        state = ref.read(with_summary=event in repair.SUMMARY_EVENTS)
        made, writes = None, []
        if event is not None:
            made = journal.entry(event, **(_plain(changes) if fields is None else fields))
            change = repair.summary_change(made)
            before, path = state.summary, state.summary_path
            if change is not None and before is not None and path is not None:
                after = change(before)
                writes += [(path, summary_text(after))] if after != before else []
        transition.commit(state, made, writes + transition.marker_write(state, **changes))


def finalise_summary(ref: RunRef) -> Summary:
    """Mark the current change summary Completed (a phase's work is all done)."""
    with durable.locked(ref.lock_path):
        state = ref.read()
        path, current = ref.summary_of(state)
        writes = []
        if current.status.state != "completed":
            current = summary.finalise(current, clock.now())
            writes.append((path, summary_text(current)))
        transition.commit(state, None, writes)
    return current


def finish(ref: RunRef, lease: Lease) -> Summary:
    """A clean end: journal it, finalise the summary, remove the marker, release the lease."""
    end(ref, "completed")
    lease.release()
    return ref.load_summary()[1]


def end(ref: RunRef, status: str) -> None:
    """The run's work is over (``completed``, or blocking findings left for a person): journal
    it, finalise a completed run's summary, remove the marker. Checked before anything is
    written: a completed run's summary must have every item resolved."""
    with durable.locked(ref.lock_path):
        state = ref.read()
        record = journal.entry("run_finished", status=status)
        writes = []
        if status == "completed":
            path, current = ref.summary_of(state)
            change = repair.summary_change(record)
            if change is not None and current.status.state != "completed":
                writes.append((path, summary_text(change(current))))
        transition.commit(state, record, writes, remove_marker=True)


def interrupt(
    ref: RunRef,
    lease: Lease | None,
    reason: str,
    snapshot: marker.SnapshotRef | None = None,
    detail: str | None = None,
) -> Summary:
    """A cut-off end: the summary says where and why (with the agent's error text,
    ``detail``), the marker stays without an owner."""
    current = _stopped(ref, reason, snapshot, {"owner": None}, "run_interrupted", detail)
    if lease is not None:
        lease.release()
    return current


def record_cutoff(
    ref: RunRef, reason: str, snapshot: marker.SnapshotRef | None, detail: str | None = None
) -> Summary:
    """A dispatch was cut off but the run goes on: the summary and journal say so, the
    marker keeps its owner and points at the snapshot."""
    return _stopped(ref, reason, snapshot, {}, "cutoff", detail)


def account(ref: RunRef, usage: dict[str, Any] | None, blocked: str | None) -> Summary:
    """The current change summary gets the run's usage so far and its Blocked note. Not
    journaled: both are sums of the journal's ``dispatch_finished`` events."""
    return _rewrite(ref, lambda current: summary.account(current, usage, blocked, clock.now()))


def list_files(ref: RunRef, files: list[str]) -> Summary:
    """The current change summary's Files changed says ``files``. Not journaled: it is what
    git holds (the branch and the latest snapshot), read again whenever it is written."""
    return _rewrite(ref, lambda current: summary.list_files(current, files, clock.now()))


def _rewrite(ref: RunRef, change: Callable[[Summary], Summary]) -> Summary:
    with durable.locked(ref.lock_path):
        state = ref.read()
        path, current = ref.summary_of(state)
        after = change(current)
        if after is not current:
            transition.commit(state, None, [(path, summary_text(after))])
    return after


def _stopped(
    ref: RunRef,
    reason: str,
    snapshot: marker.SnapshotRef | None,
    marker_changes: dict[str, Any],
    event: JournalEvent,
    detail: str | None = None,
) -> Summary:
    with durable.locked(ref.lock_path):
        state = ref.read()
        path, current = ref.summary_of(state)
        record = journal.entry(
            event,
            reason=reason,
            snapshot=snapshot.commit if snapshot else None,
            ref=snapshot.ref if snapshot else None,
            detail=detail,
        )
        current = summary.mark_interrupted(
            current,
            reason,
            clock.now(),
            ref=snapshot.ref if snapshot else None,
            commit=snapshot.commit[:12] if snapshot else None,
            detail=detail,
        )
        changes: dict[str, Any] = {"dispatch": None, **marker_changes}
        if snapshot is not None:
            changes["snapshot"] = snapshot
        writes = [(path, summary_text(current)), *transition.marker_write(state, **changes)]
        transition.commit(state, record, writes)
    return current


def new_summary(ref: RunRef, scaffold: Summary) -> Path:
    """Start a new change summary artifact (a review round's response) in the run."""
    with durable.locked(ref.lock_path):
        state = ref.read(with_summary=False)
        text = summary_text(scaffold)
        path = artifact_path(ref.run_dir, SUMMARY_ROLE, SUMMARY_ARTIFACT)
        transition.commit(state, None, [(path, text)])
    return path


def summary_text(current: Summary) -> str:
    """The summary rendered, refused (nothing written) when it would not be read back: a
    summary over its read limit would lock every later report of the run out."""
    text = summary.render(current)
    size = len(text.encode("utf-8"))
    if size > SUMMARY_LIMIT:
        raise BadInput(
            f"this report would grow the change summary of run {current.run} to {size} bytes, "
            f"over its {SUMMARY_LIMIT} byte limit; report shorter files, outcome "
            "and notes (nothing was written)"
        )
    return text


def _plain(changes: dict[str, Any]) -> dict[str, Any]:
    return {
        k: marker.as_data(v) if isinstance(v, msgspec.Struct) else v for k, v in changes.items()
    }
