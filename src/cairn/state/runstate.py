"""A run's durable state: begin, record transitions, finish. Marker, summary and journal together.

Every transition takes the ticket's short ``.lock``, rewrites the change summary and the marker
atomically, and appends one journal event, so a kill at any instant leaves a truthful record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cairn import summary
from cairn.errors import BadInput
from cairn.state import journal, marker
from cairn.state.layout import (
    SUMMARY_ARTIFACT,
    SUMMARY_ROLE,
    Layout,
    artifact_path,
    latest_artifact,
)
from cairn.state.lease import Lease, acquire
from cairn.summary import Summary
from cairn.terms import JournalEvent
from cairn.util import clock, durable


@dataclass(frozen=True)
class RunRef:
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
    lease = acquire(layout, ticket, stale_after=stale_after, takeover=takeover)
    try:
        now = clock.now()
        run_id, run_dir = layout.create_run(ticket, now)
        ref = RunRef(layout, ticket, run_id)
        owner = lease.me.model_dump(mode="json")
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
                previous_owner=previous.owner.model_dump(mode="json") if previous.owner else None,
            )
        with durable.locked(ref.lock_path):
            numbers: dict[tuple[str, str], int] = {}
            for role, name, ext, content in first_artifacts:
                path = artifact_path(run_dir, role, name, ext, numbers.get((role, name)))
                numbers[(role, name)] = int(path.name.split("_", 1)[0])
                durable.atomic_write(path, content)
            summary.save(artifact_path(run_dir, SUMMARY_ROLE, SUMMARY_ARTIFACT), scaffold(run_id))
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
    operation: Callable[[Summary], Summary],
    event: JournalEvent,
    **fields: Any,
) -> Summary:
    """Apply one summary operation, then move the marker to the summary's current item."""
    with durable.locked(ref.lock_path):
        path, before = ref.load_summary()
        after = operation(before)
        summary.save(path, after)
        item = after.status.item
        _touch_marker(ref, task=item if isinstance(item, int) else None)
        journal.record(ref.run_dir, event, **fields)
    return after


def update_marker(ref: RunRef, event: JournalEvent | None = None, **changes: Any) -> None:
    """Rewrite the marker (phase, round, dispatch, snapshot…) and optionally journal an event."""
    with durable.locked(ref.lock_path):
        _touch_marker(ref, **changes)
        if event is not None:
            journal.record(ref.run_dir, event, **_plain(changes))


def finalise_summary(ref: RunRef) -> Summary:
    """Mark the current change summary Completed (a phase's work is all done)."""
    with durable.locked(ref.lock_path):
        path, current = ref.load_summary()
        if current.status.state != "completed":
            current = summary.finalise(current, clock.now())
            summary.save(path, current)
    return current


def finish(ref: RunRef, lease: Lease) -> Summary:
    """A clean end: finalise the summary, journal it, remove the marker, release the lease."""
    with durable.locked(ref.lock_path):
        path, current = ref.load_summary()
        if current.status.state != "completed":
            current = summary.finalise(current, clock.now())
            summary.save(path, current)
        journal.record(ref.run_dir, "run_finished", status="completed")
        _remove_own_marker(ref)
    lease.release()
    return current


def interrupt(
    ref: RunRef,
    lease: Lease | None,
    reason: str,
    snapshot: marker.SnapshotRef | None = None,
) -> Summary:
    """A cut-off end: the summary says where and why, the marker stays without an owner."""
    current = _stopped(ref, reason, snapshot, {"owner": None}, "run_interrupted")
    if lease is not None:
        lease.release()
    return current


def record_cutoff(ref: RunRef, reason: str, snapshot: marker.SnapshotRef | None) -> Summary:
    """A dispatch was cut off but the run goes on: the summary and journal say so, the
    marker keeps its owner and points at the snapshot."""
    return _stopped(ref, reason, snapshot, {}, "cutoff")


def _stopped(
    ref: RunRef,
    reason: str,
    snapshot: marker.SnapshotRef | None,
    marker_changes: dict[str, Any],
    event: JournalEvent,
) -> Summary:
    with durable.locked(ref.lock_path):
        path, current = ref.load_summary()
        current = summary.mark_interrupted(
            current,
            reason,
            clock.now(),
            ref=snapshot.ref if snapshot else None,
            commit=snapshot.commit[:12] if snapshot else None,
        )
        summary.save(path, current)
        changes: dict[str, Any] = {"dispatch": None, **marker_changes}
        if snapshot is not None:
            changes["snapshot"] = snapshot
        _touch_marker(ref, **changes)
        journal.record(
            ref.run_dir, event, reason=reason, snapshot=snapshot.commit if snapshot else None
        )
    return current


def new_summary(ref: RunRef, scaffold: Summary) -> Path:
    """Start a new change summary artifact (a review round's response) in the run."""
    with durable.locked(ref.lock_path):
        path = artifact_path(ref.run_dir, SUMMARY_ROLE, SUMMARY_ARTIFACT)
        summary.save(path, scaffold)
    return path


def _touch_marker(ref: RunRef, **changes: Any) -> None:
    current = marker.read(ref.marker_path)
    if current is not None and current.run == ref.run_id:
        marker.write(ref.marker_path, current.touched(**changes))


def _remove_own_marker(ref: RunRef) -> None:
    current = marker.read(ref.marker_path)
    if current is not None and current.run == ref.run_id:
        marker.remove(ref.marker_path)


def _plain(changes: dict[str, Any]) -> dict[str, Any]:
    return {
        key: value.model_dump(mode="json", exclude_none=True)
        if hasattr(value, "model_dump")
        else value
        for key, value in changes.items()
    }
