"""Writing one transition of a run: its files staged, its journal event, its files in place.

A transition's input is checked before it gets here. Then, in order: the files are checked
writable, what lags behind the journal is repaired, the new files are written to temp files
beside their targets, the event is appended to the journal (the commit point), and the temps are
renamed into place. Anything that fails before the journal append (a read-only file, a full
disk) leaves nothing of the transition written; a kill after it leaves files that lag behind the
journal, which the next writer repairs (``cairn.state.repair``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cairn.state import journal, marker, repair
from cairn.state.layout import JOURNAL
from cairn.util import durable

Write = tuple[Path, str]


def commit(
    state: repair.RunState,
    record: dict[str, Any] | None,
    writes: Sequence[Write],
    remove_marker: bool = False,
) -> None:
    """Write ``writes`` and append ``record`` as one transition; the caller holds the lock.
    ``remove_marker`` removes the ticket's marker last, when it is this run's."""
    for path, _ in writes:
        durable.check_writable(path)
    if record is not None:
        durable.check_writable(state.run_dir / JOURNAL, replace=False)
    repair.write(state)
    staged: list[durable.Staged] = []
    try:
        for path, text in writes:
            staged.append(durable.stage(path, text))
        if record is not None:
            journal.append(state.run_dir, record)
    except BaseException:
        durable.discard(staged)
        raise
    durable.put_in_place(staged)
    if remove_marker and state.marker is not None:
        marker.remove(state.marker_path)


def marker_write(state: repair.RunState, **changes: Any) -> list[Write]:
    """The marker with ``changes`` (and ``last_updated`` now), when it is this run's."""
    if state.marker is None:
        return []
    return [(state.marker_path, marker.render(state.marker.touched(**changes)))]
