"""No jargon in what people read (issue 22): a cutoff without a snapshot said ``work saved at
nothing to save``; catch-up said ``impl at implement`` (tests/state/test_catchup.py)."""

from __future__ import annotations

import pytest

from cairn.cli.display import Display


def test_a_cutoff_says_where_the_work_was_saved_or_that_nothing_was(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shown = Display("plain")
    shown.event("cutoff", reason="max_turns", role="coder", snapshot="5aa0bec17542")
    shown.event("cutoff", reason="max_turns", role="coder", snapshot=None)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "cutoff: max_turns in coder dispatch; work saved at 5aa0bec17542",
        "cutoff: max_turns in coder dispatch; no snapshot taken",
    ]
