"""Free text with control characters is stored and printed safely (issue 12, defect 14):
a ``--reason`` holding an ESC must never reach a terminal raw, whoever wrote the snapshot."""

from __future__ import annotations

import json
from pathlib import Path

from cairn.run import evaluation
from cairn.wip.meta import SnapshotMeta
from helpers import cairn, git, write

HOSTILE = "turn cap\x1b[31m red \x1b]0;title\x07 \x9b2J\r\nnext line\x00"
CONTROL = [chr(c) for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]]


def clean(text: str) -> bool:
    return not any(c in text for c in CONTROL if c != "\n")


def test_a_reason_given_to_wip_save_is_stored_and_listed_without_control_characters(
    repo: Path,
) -> None:
    write(repo, "new.txt", "x\n")
    saved = cairn(
        "wip", "save", "--ticket", "T-1", "--reason", HOSTILE.replace("\x00", ""), cwd=repo
    )
    assert saved.returncode == 0, saved.stderr
    message = git(repo, "log", "-1", "--format=%B", "refs/cairn/wip/T-1")
    assert clean(message) and "turn cap [31m red" in message
    for args in (("wip", "list"), ("wip", "list", "--json"), ("wip", "show", "T-1")):
        shown = cairn(*args, cwd=repo)
        assert shown.returncode == 0 and clean(shown.stdout), (args, shown.stdout)


def test_a_snapshot_cairn_did_not_write_is_printed_without_control_characters(
    repo: Path, tmp_path: Path
) -> None:
    """An older cairn, or anything else, may have put an ESC into the trailers."""
    message = (
        "cairn wip T-1: forged\n\nCairn-Ticket: T-1\x1b[2J\nCairn-Seq: 1\n"
        'Cairn-Reason: evil\x1b[31m red\x07\nCairn-Base: none\nCairn-Branch: "ma\\u001bin"\n'
        "Cairn-Index-Tree: conflicted\nCairn-Files-Changed: 0\nCairn-Skipped: 0\n"
        "Cairn-Conflicted: 0\nCairn-Run: 2026\x1b[0m\nCairn-Version: 0.1\x1b[1m\n"
    )
    (tmp_path / "msg").write_text(message)
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    commit = git(repo, "commit-tree", tree, "-F", str(tmp_path / "msg")).strip()
    git(repo, "update-ref", "refs/cairn/wip/T-1", commit)
    meta = SnapshotMeta.parse(message)
    assert meta is not None and meta.reason == "evil [31m red"
    for text in (meta.ticket, meta.reason, meta.branch or "", meta.run or "", meta.version):
        assert clean(text), text
    listed = cairn("wip", "list", cwd=repo)
    assert listed.returncode == 0 and clean(listed.stdout), listed.stdout
    as_json = cairn("wip", "list", "--json", cwd=repo)
    assert "\\u001b" not in as_json.stdout and clean(json.loads(as_json.stdout)[0]["reason"])
    shown = cairn("wip", "show", "T-1", cwd=repo)
    assert shown.returncode == 0 and clean(shown.stdout), shown.stdout


def test_an_acceptance_criterion_reason_is_kept_on_one_clean_line() -> None:
    checked = evaluation.Evaluation(
        ticket="T-1", round=1, criteria=[evaluation.Criterion(id="AC-1", text="works")]
    )
    after = evaluation.record(checked, "AC-1", "fail", HOSTILE)
    reason = after.criteria[0].reason
    assert reason is not None and clean(reason) and "\n" not in reason
    assert clean(evaluation.render(after))
