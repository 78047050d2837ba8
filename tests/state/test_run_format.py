"""The run format: a run that needs a person says ``needs_review`` (format 2); a journal written
in format 1 said ``needs_manual_review`` and reads back the same."""

from __future__ import annotations

import json
from pathlib import Path

from cairn.config import load
from cairn.fleet.watch import outcome_on_disk
from cairn.git import Repo
from cairn.state import journal
from cairn.state.layout import JOURNAL, Layout
from cairn.state.runstate import end
from cairn.terms import RUN_FORMAT
from helpers import begin_run, cairn

WARNING = "the run ended needing manual review: blocking findings remain in its last review"


def _needs_review(repo: Path, ticket: str) -> Path:
    ref, lease = begin_run(repo, ticket, ["Only task"])
    end(ref, "needs_review")
    lease.release()
    return ref.run_dir


def _as_format_1(run_dir: Path) -> None:
    """Rewrite the journal as format 1 wrote it: no ``format``, the old word."""
    lines = []
    for line in (run_dir / JOURNAL).read_text().splitlines():
        event = json.loads(line)
        event.pop("format", None)
        if event["event"] == "run_finished":
            event["status"] = "needs_manual_review"
        lines.append(json.dumps(event))
    (run_dir / JOURNAL).write_text("\n".join(lines) + "\n")


def _catchup_warnings(repo: Path, ticket: str) -> list[str]:
    result = cairn("catchup", ticket, "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    return list(json.loads(result.stdout)["warnings"])


def test_a_run_needing_review_writes_format_2(repo: Path) -> None:
    run_dir = _needs_review(repo, "T-1")
    written = [json.loads(line) for line in (run_dir / JOURNAL).read_text().splitlines()]
    assert written[0]["event"] == "run_started" and written[0]["format"] == RUN_FORMAT == 2
    assert written[-1] == {**written[-1], "event": "run_finished", "status": "needs_review"}
    assert WARNING in _catchup_warnings(repo, "T-1")


def test_a_format_1_journal_reads_as_needs_review(repo: Path) -> None:
    run_dir = _needs_review(repo, "T-2")
    _as_format_1(run_dir)
    assert '"needs_manual_review"' in (run_dir / JOURNAL).read_text()
    assert journal.read(run_dir)[0][-1]["status"] == "needs_review"
    assert (journal.last(run_dir) or {})["status"] == "needs_review"
    assert WARNING in _catchup_warnings(repo, "T-2")
    found = Repo.discover(repo)
    assert outcome_on_disk(Layout.for_repo(found, load(found.toplevel)), "T-2") == (
        "needs_review",
        None,
    )
