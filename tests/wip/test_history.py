"""`cairn wip list / show / diff`: reading snapshots back, and the commit message format."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

import cairn as cairn_pkg
from cairn import wip
from cairn.errors import BadInput
from cairn.wip.models import DiffStat, ShowResult, SnapshotInfo
from helpers import (
    assert_one_line_error,
    cairn,
    git,
    isolate_git_env,
    make_repo,
    rev,
    save,
    untouched_state,
    write,
)


def commit_time(repo: Path, commit: str) -> int:
    return int(git(repo, "log", "-1", "--format=%ct", commit).strip())


@contextlib.contextmanager
def isolated_env(factory: pytest.TempPathFactory) -> Iterator[None]:
    """What conftest's autouse ``isolated_git`` does, for fixtures shared by a module."""
    with pytest.MonkeyPatch.context() as mp:
        isolate_git_env(mp, factory.mktemp("home"))
        yield


def forge(repo: Path, tmp: Path, message: str, tree: str, *parents: str) -> str:
    """A commit written by the test's own git with exactly this message."""
    msg = tmp / "forged-message"
    msg.write_text(message)
    args = [a for p in parents for a in ("-p", p)]
    return git(repo, "commit-tree", tree, *args, "-F", str(msg)).strip()


# --- list -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Two tickets: A with three snapshots (across a user commit), B with two. Read-only."""
    with isolated_env(tmp_path_factory):
        return build_history(tmp_path_factory.mktemp("history") / "repo")


def build_history(repo: Path) -> dict[str, object]:
    make_repo(repo)
    c0 = rev(repo, "HEAD")
    write(repo, "README.md", "hello\nA1\n")
    a1 = save(repo, "A", "r-a1")
    b1 = save(repo, "B", "r-b1")
    git(repo, "commit", "-q", "-am", "user work")
    c1 = rev(repo, "HEAD")
    write(repo, "a2.txt", "two\n")
    write(repo, "src/app.py", "print('changed')\n")
    a2 = save(repo, "A", "r-a2")
    write(repo, "a3.txt", "three\n")
    a3 = save(repo, "A", "r-a3")
    b2 = save(repo, "B", "r-b2")
    return {"repo": repo, "c0": c0, "c1": c1, "A": [a3, a2, a1], "B": [b2, b1]}


def test_list_all_tickets_newest_first_with_correct_fields(history: dict) -> None:
    repo, c0, c1 = history["repo"], history["c0"], history["c1"]
    result = cairn("wip", "list", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [r["commit"] for r in rows if r["ticket"] == "A"] == history["A"]
    assert [r["commit"] for r in rows if r["ticket"] == "B"] == history["B"]
    assert len(rows) == 5
    expected = {
        history["A"][0]: ("A", 3, "r-a3", c1, 3),
        history["A"][1]: ("A", 2, "r-a2", c1, 2),
        history["A"][2]: ("A", 1, "r-a1", c0, 1),
        history["B"][0]: ("B", 2, "r-b2", c1, 3),
        history["B"][1]: ("B", 1, "r-b1", c0, 1),
    }
    for row in rows:
        ticket, seq, reason, base, files = expected[row["commit"]]
        assert (row["ticket"], row["seq"], row["reason"], row["base"]) == (
            ticket,
            seq,
            reason,
            base,
        )
        assert row["files_changed"] == files
        assert row["ref"] == f"refs/cairn/wip/{ticket}"
        assert row["branch"] == "main"
        assert row["skipped_count"] == 0
        assert row["tree"] == rev(repo, row["commit"] + "^{tree}")
        stamp = datetime.fromisoformat(row["time"])
        assert stamp.tzinfo is not None
        assert int(stamp.timestamp()) == commit_time(repo, row["commit"])

    human = cairn("wip", "list", cwd=repo)
    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    assert lines[0].split() == ["ticket", "#", "time", "reason", "base", "files", "commit"]
    assert len(lines) == 6
    a3_line = next(line for line in lines if history["A"][0][:12] in line)
    assert a3_line.split()[:2] == ["A", "3"]
    assert "r-a3" in a3_line and c1[:12] in a3_line


def test_list_chain_is_the_first_parent_log_and_stops_before_user_commits(history: dict) -> None:
    repo = history["repo"]
    for ticket in ("A", "B"):
        log = git(repo, "log", "--first-parent", "--format=%H", f"refs/cairn/wip/{ticket}").split()
        listed = [s.commit for s in wip.list_snapshots(repo, ticket=ticket, limit=None)]
        assert listed == log[: len(listed)]
        assert listed == history[ticket]
        # the first snapshot's first parent is the user's HEAD at the time: never listed
        assert log[len(listed)] == history["c0"]
    everything = {s.commit for s in wip.list_snapshots(repo, limit=None)}
    assert not everything & {history["c0"], history["c1"]}


def test_list_stops_at_the_first_non_snapshot_commit(tmp_path: Path) -> None:
    """A tip claiming a long chain (Cairn-Seq: 9) must not walk into the user's commits."""
    repo = make_repo(tmp_path / "repo")
    write(repo, "README.md", "changed\n")
    a1 = save(repo, "A", "r-a1")
    b1 = save(repo, "B", "r-b1")
    git(repo, "commit", "-q", "-am", "user work")
    c1 = rev(repo, "HEAD")
    message = git(repo, "cat-file", "commit", a1).split("\n\n", 1)[1]
    assert "Cairn-Seq: 1\n" in message
    forged_message = message.replace("Cairn-Ticket: A\n", "Cairn-Ticket: X\n").replace(
        "Cairn-Seq: 1\n", "Cairn-Seq: 9\n"
    )
    tip = forge(repo, tmp_path, forged_message, rev(repo, f"{a1}^{{tree}}"), c1)
    git(repo, "update-ref", "refs/cairn/wip/X", tip)
    listed = wip.list_snapshots(repo, ticket="X", limit=None)
    assert [s.commit for s in listed] == [tip]
    assert listed[0].seq == 9

    # the user's own commit carries another ticket's trailers (e.g. `git commit -C <snapshot>`)
    b_message = git(repo, "cat-file", "commit", b1).split("\n\n", 1)[1]
    lookalike = forge(repo, tmp_path, b_message, rev(repo, "HEAD^{tree}"), c1)
    tip2 = forge(repo, tmp_path, forged_message, rev(repo, f"{a1}^{{tree}}"), lookalike)
    git(repo, "update-ref", "refs/cairn/wip/X", tip2)
    assert [s.commit for s in wip.list_snapshots(repo, ticket="X", limit=None)] == [tip2]


def test_list_when_a_work_tree_path_is_named_like_the_ref(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo", files={"README.md": "hi\n", "refs/cairn/wip/A": "not a ref\n"}
    )
    write(repo, "README.md", "changed\n")
    commit = save(repo, "A", "r")
    assert [s.commit for s in wip.list_snapshots(repo)] == [commit]


def test_list_ticket_filter_and_limit(history: dict) -> None:
    repo = history["repo"]
    only_b = json.loads(cairn("wip", "list", "--ticket", "B", "--json", cwd=repo).stdout)
    assert [r["commit"] for r in only_b] == history["B"]

    capped = json.loads(cairn("wip", "list", "-n", "2", "-t", "A", "--json", cwd=repo).stdout)
    assert [r["commit"] for r in capped] == history["A"][:2]
    two = wip.list_snapshots(repo, limit=2)
    assert [s.commit for s in two] == history["A"][:2] + history["B"][:2]

    one = wip.list_snapshots(repo, limit=1)
    assert [s.commit for s in one] == [history["A"][0], history["B"][0]]
    # --limit 0 means all
    everything = cairn("wip", "list", "--limit", "0", "--ticket", "A", cwd=repo)
    assert len(everything.stdout.splitlines()) == 1 + 3
    assert [s.commit for s in wip.list_snapshots(repo, ticket="A", limit=None)] == history["A"]

    missing = cairn("wip", "list", "--ticket", "nosuch", cwd=repo)
    assert missing.returncode == 0
    assert missing.stdout.strip() == "no snapshots for ticket nosuch"
    assert wip.list_snapshots(repo, ticket="nosuch") == []
    with pytest.raises(BadInput, match="invalid ticket id"):
        wip.list_snapshots(repo, ticket="../A")


def test_list_api_returns_typed_models(history: dict) -> None:
    found = wip.list_snapshots(history["repo"])
    assert found and all(isinstance(s, SnapshotInfo) for s in found)
    assert found[0].cairn_version == cairn_pkg.__version__


@pytest.mark.parametrize("with_commit", [True, False], ids=["no-snapshots", "unborn"])
def test_list_with_no_snapshots(tmp_path: Path, with_commit: bool) -> None:
    repo = make_repo(tmp_path / "repo", files=None if with_commit else {})
    human = cairn("wip", "list", cwd=repo)
    assert human.returncode == 0, human.stderr
    assert human.stdout.strip() == "no snapshots"
    machine = cairn("wip", "list", "--json", cwd=repo)
    assert machine.returncode == 0, machine.stderr
    assert json.loads(machine.stdout) == []


# --- show -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shown(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """T1~1: text edits, a deletion, new text and binary files and one over the 100-byte cap.
    T1: one more line in new.txt. Read-only."""
    with isolated_env(tmp_path_factory):
        return build_shown(tmp_path_factory.mktemp("shown") / "repo")


def build_shown(path: Path) -> dict[str, object]:
    repo = make_repo(
        path,
        files={
            "README.md": "hello\n",
            "src/app.py": "print('app')\n",
            "cairn.toml": "[snapshot]\nmax_new_file_bytes = 100\n",
        },
    )
    head = rev(repo, "HEAD")
    write(repo, "README.md", "hi\nworld\n")
    (repo / "src/app.py").unlink()
    write(repo, "new.txt", "one\ntwo\nthree\n")
    write(repo, "blob.bin", b"\x00\x01\x02binary\x00\xff")
    write(repo, "big.txt", "x" * 500)
    first = cairn(
        "wip", "save", "-t", "T1", "-r", "first pass", "--run", "run-42", "--json", cwd=repo
    )
    assert first.returncode == 0, first.stderr
    s1 = json.loads(first.stdout)["commit"]
    write(repo, "new.txt", "one\ntwo\nthree\nfour\n")
    s2 = save(repo, "T1", "second")
    return {"repo": repo, "head": head, "s1": s1, "s2": s2}


def stats(result: dict) -> dict[str, tuple[object, object]]:
    return {d["path"]: (d["added"], d["deleted"]) for d in result["diffstat"]}


def test_show_metadata_skipped_and_diffstat(shown: dict) -> None:
    repo, head = shown["repo"], shown["head"]
    result = cairn("wip", "show", "T1~1", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    snap = out["snapshot"]
    assert snap["commit"] == shown["s1"]
    assert snap["ticket"] == "T1" and snap["seq"] == 1
    assert snap["ref"] == "refs/cairn/wip/T1"
    assert snap["reason"] == "first pass"
    assert snap["base"] == head
    assert snap["branch"] == "main"
    assert snap["run"] == "run-42"
    assert snap["files_changed"] == 4
    assert snap["skipped_count"] == 1
    assert [{k: v for k, v in s.items() if v is not None} for s in snap["skipped"]] == [
        {"path": "big.txt", "reason": "too_large", "bytes": 500}
    ]
    assert snap["cairn_version"] == cairn_pkg.__version__
    assert out["against"] == head
    assert stats(out) == {
        "README.md": (2, 1),
        "src/app.py": (0, 1),
        "new.txt": (3, 0),
        "blob.bin": (None, None),
    }

    latest = json.loads(cairn("wip", "show", "T1", "--json", cwd=repo).stdout)
    assert latest["snapshot"]["commit"] == shown["s2"]
    assert latest["snapshot"]["seq"] == 2
    assert latest["snapshot"]["run"] is None
    assert latest["snapshot"]["reason"] == "second"
    assert stats(latest)["new.txt"] == (4, 0)


def test_show_human_output(shown: dict) -> None:
    result = cairn("wip", "show", "T1~1", cwd=shown["repo"])
    assert result.returncode == 0, result.stderr
    lines = [line.split() for line in result.stdout.splitlines()]
    assert ["commit", shown["s1"]] in lines
    assert ["reason", "first", "pass"] in lines
    assert ["run", "run-42"] in lines
    assert ["branch", "main"] in lines
    assert ["binary", "blob.bin"] in lines
    assert ["+3", "-0", "new.txt"] in lines
    assert ["+0", "-1", "src/app.py"] in lines
    assert any(line[:2] == ["skipped", "big.txt"] and "cap" in " ".join(line) for line in lines)


def test_show_by_ticket_tilde_full_and_short_sha(shown: dict) -> None:
    repo, s1, s2 = shown["repo"], shown["s1"], shown["s2"]
    assert wip.show(repo, "T1").snapshot.commit == s2
    for spec in ("T1~1", s1, s1[:10], "refs/cairn/wip/T1~1"):
        got = wip.show(repo, spec)
        assert got.snapshot.commit == s1, spec
        assert got.snapshot.run == "run-42"
    # a snapshot reached by commit id still reports its ticket
    assert wip.show(repo, s2[:12]).snapshot.ticket == "T1"
    via_cli = json.loads(cairn("wip", "show", s1[:8], "--json", cwd=repo).stdout)
    assert via_cli["snapshot"]["commit"] == s1


def test_show_api_returns_typed_model(shown: dict) -> None:
    result = wip.show(shown["repo"], "T1~1")
    assert isinstance(result, ShowResult)
    assert isinstance(result.snapshot, SnapshotInfo)
    assert all(isinstance(d, DiffStat) for d in result.diffstat)
    by_path = {d.path: d for d in result.diffstat}
    assert by_path["blob.bin"].added is None and by_path["blob.bin"].deleted is None
    assert (by_path["README.md"].added, by_path["README.md"].deleted) == (2, 1)


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("nosuch", "nosuch"),
        ("T1~7", "T1~7"),  # past the start of the history
        ("T1~2", "not a cairn snapshot"),  # the user's commit under the first snapshot
        ("HEAD", "not a cairn snapshot"),
        ("main", "not a cairn snapshot"),
    ],
)
def test_show_unknown_or_not_a_snapshot(shown: dict, spec: str, says: str) -> None:
    with pytest.raises(BadInput, match=re.escape(says)):
        wip.show(shown["repo"], spec)


def test_show_cli_unknown_and_not_a_snapshot_exit_2(shown: dict) -> None:
    repo = shown["repo"]
    before = untouched_state(repo)
    unknown = cairn("wip", "show", "nosuch", cwd=repo)
    assert_one_line_error(unknown, 2)
    assert "nosuch" in unknown.stderr
    head = cairn("wip", "show", "HEAD", cwd=repo)
    assert_one_line_error(head, 2)
    assert "not a cairn snapshot" in head.stderr
    assert untouched_state(repo) == before


HOSTILE = ["--upload-pack=x", "-x", "a\x01b", "T1\n", "\x1b[31mT1", "T1\x7f", ""]


@pytest.mark.parametrize("spec", HOSTILE)
def test_show_and_diff_api_refuse_hostile_names(shown: dict, spec: str) -> None:
    repo = shown["repo"]
    before = untouched_state(repo)
    with pytest.raises(BadInput):
        wip.show(repo, spec)
    with pytest.raises(BadInput):
        wip.diff(repo, spec)
    with pytest.raises(BadInput):
        wip.diff(repo, "T1", spec)
    assert untouched_state(repo) == before


def test_show_cli_refuses_hostile_names(shown: dict, tmp_path: Path) -> None:
    repo = shown["repo"]
    before = untouched_state(repo)
    marker = tmp_path / "pwned"
    for spec in (f"--upload-pack=touch {marker}", "T1\x1b[2J"):
        result = cairn("wip", "show", "--", spec, cwd=repo)
        assert_one_line_error(result, 2)
        assert "not a snapshot name" in result.stderr
    # without `--` the option parser refuses it: still exit 2
    assert cairn("wip", "show", "-x", cwd=repo).returncode == 2
    assert not marker.exists()
    assert untouched_state(repo) == before


def test_show_snapshot_of_unborn_branch_diffs_against_empty_tree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", files={})
    write(repo, "first.txt", "a\nb\n")
    commit = save(repo, "U", "before any commit")
    result = wip.show(repo, "U")
    assert result.snapshot.commit == commit
    assert result.snapshot.base is None
    assert result.against == git(repo, "hash-object", "-t", "tree", os.devnull).strip()
    assert [(d.path, d.added, d.deleted) for d in result.diffstat] == [("first.txt", 2, 0)]
    assert "+b" in wip.diff(repo, "U")


def test_show_diffstat_paths_with_tabs_newlines_and_unicode(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    names = ["we\tird\nname.txt", "ünï/cødé.txt", 'sp ace "q".txt']
    for i, name in enumerate(names):
        write(repo, name, "x\n" * (i + 1))
    save(repo, "W", "weird names")
    got = {(d.path, d.added, d.deleted) for d in wip.show(repo, "W").diffstat}
    assert got == {(name, i + 1, 0) for i, name in enumerate(names)}


# --- diff -----------------------------------------------------------------------------------------


def test_diff_one_snapshot_against_its_base(shown: dict) -> None:
    repo = shown["repo"]
    result = cairn("wip", "diff", "T1~1", cwd=repo)
    assert result.returncode == 0, result.stderr
    patch = result.stdout
    assert "diff --git a/new.txt b/new.txt" in patch
    assert "+one\n+two\n+three\n" in patch
    assert "-hello\n+hi\n+world\n" in patch
    assert "deleted file mode" in patch and "-print('app')" in patch
    assert "Binary files /dev/null and b/blob.bin differ" in patch
    assert "big.txt" not in patch
    assert "four" not in patch
    assert wip.diff(repo, "T1~1") == patch
    # the newest snapshot is diffed against its base too, not against the previous snapshot
    assert "+one\n+two\n+three\n+four\n" in wip.diff(repo, "T1")


def test_diff_between_two_snapshots(shown: dict) -> None:
    repo = shown["repo"]
    result = cairn("wip", "diff", "T1~1", "T1", cwd=repo)
    assert result.returncode == 0, result.stderr
    patch = result.stdout
    assert "diff --git a/new.txt b/new.txt" in patch
    assert " three\n+four\n" in patch
    assert "README.md" not in patch and "+one" not in patch
    assert patch.count("diff --git") == 1
    assert wip.diff(repo, shown["s1"], shown["s2"]) == patch
    # reversed order reverses the patch
    assert "-four\n" in wip.diff(repo, "T1", "T1~1")


def test_diff_stat(shown: dict) -> None:
    repo = shown["repo"]
    result = cairn("wip", "diff", "T1~1", "--stat", cwd=repo)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "@@" not in out
    assert any(line.split()[:3] == ["new.txt", "|", "3"] for line in out.splitlines())
    assert "4 files changed" in out
    two = wip.diff(repo, "T1~1", "T1", stat=True)
    assert "1 file changed, 1 insertion(+)" in two and "@@" not in two


def test_diff_unknown_snapshot_is_bad_input(shown: dict) -> None:
    repo = shown["repo"]
    before = untouched_state(repo)
    assert_one_line_error(cairn("wip", "diff", "T1", "nosuch", cwd=repo), 2)
    with pytest.raises(BadInput, match="nosuch"):
        wip.diff(repo, "nosuch")
    with pytest.raises(BadInput, match="not a cairn snapshot"):
        wip.diff(repo, "HEAD")
    assert untouched_state(repo) == before


# --- the commit message, as git reads it ----------------------------------------------------------


def git_trailers(repo: Path, commit: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The message body lines and the trailers `git interpret-trailers --parse` finds in it."""
    message = git(repo, "cat-file", "commit", commit).split("\n\n", 1)[1]
    parsed = subprocess.run(
        ["git", "interpret-trailers", "--parse"],
        cwd=repo,
        input=message.encode(),
        capture_output=True,
        check=True,
    ).stdout.decode()
    pairs = [(key, value) for key, value in (line.split(": ", 1) for line in parsed.splitlines())]
    return message.splitlines(), pairs


def test_commit_message_trailers_are_recognised_by_git(shown: dict) -> None:
    repo, head, s1, s2 = shown["repo"], shown["head"], shown["s1"], shown["s2"]
    lines, pairs = git_trailers(repo, s1)
    assert lines[0] == "cairn wip T1: first pass"
    assert lines[1] == ""
    # every line after the subject is a trailer git recognises, in order
    assert [f"{k}: {v}" for k, v in pairs] == lines[2:]
    trailers = dict(pairs)
    assert trailers["Cairn-Ticket"] == "T1"
    assert trailers["Cairn-Base"] == head
    assert json.loads(trailers["Cairn-Branch"]) == "main"
    assert trailers["Cairn-Reason"] == "first pass"
    assert trailers["Cairn-Run"] == "run-42"
    assert trailers["Cairn-Skipped"] == "1"
    assert trailers["Cairn-Seq"] == "1"
    assert trailers["Cairn-Files-Changed"] == "4"
    assert trailers["Cairn-Version"] == cairn_pkg.__version__
    assert trailers["Cairn-Index-Tree"] == rev(repo, f"{head}^{{tree}}")  # nothing staged
    assert trailers["Cairn-Conflicted"] == "0"
    skipped = json.loads(trailers["Cairn-Skipped-Path"])
    assert skipped == {"path": "big.txt", "reason": "too_large", "bytes": 500}

    lines2, pairs2 = git_trailers(repo, s2)
    assert [f"{k}: {v}" for k, v in pairs2] == lines2[2:]
    keys2 = [k for k, _ in pairs2]
    assert "Cairn-Run" not in keys2
    assert "Cairn-Skipped-Path" in keys2  # big.txt is still over the cap
    assert dict(pairs2)["Cairn-Seq"] == "2"


def test_trailers_survive_awkward_reasons_and_unborn_base(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", files={})
    write(repo, "f.txt", "x\n")
    commit = save(repo, "U", "fix: it\nCairn-Ticket: evil\x1b[0m  and\tmore")
    lines, pairs = git_trailers(repo, commit)
    assert [f"{k}: {v}" for k, v in pairs] == lines[2:]
    trailers = dict(pairs)
    assert trailers["Cairn-Ticket"] == "U"
    assert trailers["Cairn-Reason"] == "fix: it Cairn-Ticket: evil [0m and more"
    assert trailers["Cairn-Base"] == "none"
    assert json.loads(trailers["Cairn-Branch"]) == "main"
    assert [k for k, _ in pairs].count("Cairn-Ticket") == 1
    assert wip.show(repo, "U").snapshot.ticket == "U"

    git(repo, "add", "f.txt")
    git(repo, "commit", "-q", "-m", "first")
    git(repo, "checkout", "-q", "--detach")
    write(repo, "f.txt", "y\n")
    detached = save(repo, "D", "detached")
    lines, pairs = git_trailers(repo, detached)
    assert [f"{k}: {v}" for k, v in pairs] == lines[2:]
    assert dict(pairs)["Cairn-Branch"] == "null"
    assert dict(pairs)["Cairn-Base"] == rev(repo, "HEAD")
    assert wip.show(repo, "D").snapshot.branch is None
