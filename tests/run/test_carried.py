"""What a resumed run carries over: the coder's agent session, only on the machine that made it
(an agent keeps its sessions in its own home, which does not travel with the run state)."""

from __future__ import annotations

from pathlib import Path

from cairn.run import carried
from cairn.state import journal
from cairn.state.layout import Layout
from cairn.state.owner import this_host
from cairn.state.runstate import RunRef


def run_ref(tmp_path: Path) -> RunRef:
    ref = RunRef(Layout(tmp_path / "state"), "T-1", "20261203-100000Z")
    ref.run_dir.mkdir(parents=True)
    return ref


def session_on(ref: RunRef, host: str, session: str) -> None:
    journal.record(ref.run_dir, "run_started", owner={"host": host, "pid": 1})
    journal.record(
        ref.run_dir, "dispatch_finished", role="coder", agent="claude-code", session_id=session
    )


def test_a_session_made_on_this_machine_is_continued(tmp_path: Path) -> None:
    ref = run_ref(tmp_path)
    session_on(ref, this_host(), "s-1")
    assert carried.session_id(ref, "coder", "claude-code") == "s-1"


def test_a_session_made_on_another_machine_is_not_asked_for(tmp_path: Path) -> None:
    ref = run_ref(tmp_path)
    session_on(ref, this_host(), "s-1")
    session_on(ref, f"{this_host()}-runner-2", "s-2")  # the run moved on, then came back here
    assert carried.session_id(ref, "coder", "claude-code") is None
    session_on(ref, this_host(), "s-3")
    assert carried.session_id(ref, "coder", "claude-code") == "s-3"


def test_a_session_of_another_agent_of_the_chain_is_not_continued(tmp_path: Path) -> None:
    ref = run_ref(tmp_path)
    session_on(ref, this_host(), "s-1")
    assert carried.session_id(ref, "coder", "codex") is None
