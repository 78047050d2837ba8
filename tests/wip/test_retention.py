"""`cairn wip prune` and `cairn wip push`: bounded refs, durable copies, never a gc."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from pathlib import Path

import pytest

from cairn import wip
from cairn.errors import BadInput, CairnError
from cairn.wip.models import PruneResult, PushResult
from helpers import assert_one_line_error, cairn, fingerprint, git, make_repo, rev, save, write

DAY = 86400
MIRROR_CONFIG = "[agent]\npreserve_uncommitted_work_branch = true\n"


def refs(repo: Path, pattern: str = "refs/") -> dict[str, str]:
    out = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", pattern)
    return dict(line.split(" ") for line in out.splitlines())


def backdate(repo: Path, ref: str, days: int, tmp: Path, *also: str) -> tuple[str, int]:
    """Re-commit the tip of ``ref`` (same tree, parents, message) with a date ``days`` ago.

    ``also`` are further refs (e.g. the mirror branch) moved along with it."""
    old = rev(repo, ref)
    raw = git(repo, "cat-file", "commit", old)
    header, message = raw.split("\n\n", 1)
    found = re.search(r"^tree (\w+)$", header, re.M)
    assert found is not None, header
    tree = found.group(1)
    parents = re.findall(r"^parent (\w+)$", header, re.M)
    msg = tmp / f"msg-{old}"
    msg.write_text(message)
    stamp = int(time.time()) - days * DAY
    date = {"GIT_COMMITTER_DATE": f"{stamp} +0000", "GIT_AUTHOR_DATE": f"{stamp} +0000"}
    args = [a for p in parents for a in ("-p", p)]
    new = git(repo, "commit-tree", tree, *args, "-F", str(msg), env=date).strip()
    assert git(repo, "cat-file", "commit", new).split("\n\n", 1)[1] == message
    for name in (ref, *also):
        git(repo, "update-ref", name, new, old)
    return new, stamp


def objects(repo: Path) -> dict[str, str]:
    """`git count-objects -v` as a dict: a gc would pack the loose objects."""
    out = git(repo, "count-objects", "-v")
    return dict(line.split(": ", 1) for line in out.splitlines())


def reflog_exists(repo: Path, ref: str) -> bool:
    return (
        git(repo, "reflog", "exists", ref, check=False) == ""
        and (repo / ".git" / "logs" / ref).exists()
    )


# --- prune ----------------------------------------------------------------------------------------


@pytest.fixture
def aged(tmp_path: Path) -> dict[str, object]:
    """Ticket ``old`` (last snapshot 30 days ago, with content of its own) and ``fresh``."""
    repo = make_repo(tmp_path / "repo")
    write(repo, "old-only.txt", "".join(f"old line {i}\n" for i in range(2000)))
    save(repo, "old")
    (repo / "old-only.txt").unlink()
    write(repo, "fresh.txt", "fresh\n")
    fresh = save(repo, "fresh")
    old, stamp = backdate(repo, "refs/cairn/wip/old", 30, tmp_path)
    return {"repo": repo, "old": old, "fresh": fresh, "stamp": stamp}


def test_prune_dry_run_lists_the_old_ticket_and_deletes_nothing(aged: dict) -> None:
    repo = aged["repo"]
    before_refs, before_print = refs(repo), fingerprint(repo)
    result = cairn("wip", "prune", "--dry-run", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["dry_run"] is True
    assert out["older_than_seconds"] == 14 * DAY
    assert [(p["ticket"], p["ref"], p["commit"]) for p in out["pruned"]] == [
        ("old", "refs/cairn/wip/old", aged["old"])
    ]
    last = datetime.fromisoformat(out["pruned"][0]["last_snapshot"])
    assert int(last.timestamp()) == aged["stamp"]
    assert out["kept"] == 1
    assert out["disk_bytes_before"] > 0
    assert out["disk_bytes_after"] == out["disk_bytes_before"]
    assert refs(repo) == before_refs
    assert reflog_exists(repo, "refs/cairn/wip/old")
    assert fingerprint(repo) == before_print

    human = cairn("wip", "prune", "--dry-run", cwd=repo)
    assert human.returncode == 0, human.stderr
    assert "would prune old" in human.stdout
    assert "fresh" not in human.stdout
    assert refs(repo) == before_refs


def test_prune_deletes_only_old_refs_and_never_gcs(aged: dict) -> None:
    repo = aged["repo"]
    assert reflog_exists(repo, "refs/cairn/wip/old")
    before_refs, before_print, before_objects = refs(repo), fingerprint(repo), objects(repo)
    result = cairn("wip", "prune", "--older-than", "14d", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["dry_run"] is False
    assert [p["ticket"] for p in out["pruned"]] == ["old"]
    assert out["kept"] == 1
    assert out["disk_bytes_before"] >= out["disk_bytes_after"]
    assert out["disk_bytes_before"] > out["disk_bytes_after"] > 0  # old-only.txt is gone

    after_refs = refs(repo)
    expected = dict(before_refs)
    del expected["refs/cairn/wip/old"]
    assert after_refs == expected
    assert after_refs["refs/cairn/wip/fresh"] == aged["fresh"]
    assert not reflog_exists(repo, "refs/cairn/wip/old")
    assert reflog_exists(repo, "refs/cairn/wip/fresh")
    assert fingerprint(repo) == before_print  # HEAD, index, branches, files untouched
    # no gc: the pruned commit is still in the object store, nothing was packed or dropped
    git(repo, "cat-file", "-e", aged["old"])
    assert objects(repo) == before_objects
    assert [s.ticket for s in wip.list_snapshots(repo)] == ["fresh"]

    again = wip.prune(repo)
    assert isinstance(again, PruneResult)
    assert again.pruned == [] and again.kept == 1
    assert refs(repo) == after_refs

    # undo: the commit named in the report brings the whole ticket back
    git(repo, "update-ref", "refs/cairn/wip/old", out["pruned"][0]["commit"])
    assert [s.ticket for s in wip.list_snapshots(repo)] == ["fresh", "old"]
    assert wip.show(repo, "old").snapshot.commit == aged["old"]


def test_prune_cutoff(aged: dict) -> None:
    repo = aged["repo"]
    assert wip.prune(repo, older_than=60 * DAY, dry_run=True).pruned == []
    near = wip.prune(repo, older_than=29 * DAY, dry_run=True)
    assert [p.ticket for p in near.pruned] == ["old"]
    everything = wip.prune(repo, older_than=0, dry_run=True)
    assert sorted(p.ticket for p in everything.pruned) == ["fresh", "old"]
    human = cairn("wip", "prune", "--older-than", "60d", cwd=repo)
    assert human.returncode == 0, human.stderr
    assert "pruned 0 tickets older than 60d, kept 2" in human.stdout
    assert set(refs(repo, "refs/cairn")) == {"refs/cairn/wip/old", "refs/cairn/wip/fresh"}


def test_prune_works_on_packed_refs(aged: dict) -> None:
    repo = aged["repo"]
    git(repo, "pack-refs", "--all")
    assert not (repo / ".git/refs/cairn/wip/old").exists()
    result = wip.prune(repo)
    assert [p.ticket for p in result.pruned] == ["old"]
    assert set(refs(repo, "refs/cairn")) == {"refs/cairn/wip/fresh"}
    assert "refs/cairn/wip/old" not in (repo / ".git/packed-refs").read_text()
    git(repo, "cat-file", "-e", aged["old"])


def test_prune_deletes_the_mirror_branch_with_its_ticket(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", files={"README.md": "hi\n", "cairn.toml": MIRROR_CONFIG})
    head = rev(repo, "HEAD")
    for ticket in ("old", "moved", "fresh"):
        write(repo, f"{ticket}.txt", f"{ticket}\n")
        commit = save(repo, ticket)
        assert rev(repo, f"refs/heads/cairn/wip/{ticket}") == commit  # the mirror exists
    backdate(repo, "refs/cairn/wip/old", 30, tmp_path, "refs/heads/cairn/wip/old")
    backdate(repo, "refs/cairn/wip/moved", 30, tmp_path, "refs/heads/cairn/wip/moved")
    # the user reused the `moved` mirror branch for their own work: it no longer names the tip
    git(repo, "update-ref", "refs/heads/cairn/wip/moved", head)

    result = cairn("wip", "prune", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert sorted(p["ticket"] for p in json.loads(result.stdout)["pruned"]) == ["moved", "old"]
    left = refs(repo)
    assert "refs/cairn/wip/old" not in left and "refs/heads/cairn/wip/old" not in left
    assert "refs/cairn/wip/moved" not in left
    assert left["refs/heads/cairn/wip/moved"] == head
    assert left["refs/heads/cairn/wip/fresh"] == left["refs/cairn/wip/fresh"]
    assert left["refs/heads/main"] == head
    assert git(repo, "symbolic-ref", "HEAD").strip() == "refs/heads/main"


def test_prune_refuses_bad_durations(aged: dict) -> None:
    repo = aged["repo"]
    before_refs, before_print = refs(repo), fingerprint(repo)
    for value in ("abc", "-3d", "14x"):
        result = cairn("wip", "prune", f"--older-than={value}", cwd=repo)
        assert_one_line_error(result, 2)
        assert value in result.stderr and "--older-than" in result.stderr
    assert_one_line_error(cairn("wip", "prune", "--older-than", "-3d", cwd=repo), 2)
    for bare in ("5", "0"):  # once read as seconds: every ticket pruned
        result = cairn("wip", "prune", "--older-than", bare, cwd=repo)
        assert_one_line_error(result, 2)
        assert f"'{bare}' has no unit" in result.stderr and f"{bare}d" in result.stderr
    with pytest.raises(BadInput, match="negative"):
        wip.prune(repo, older_than=-1)
    assert refs(repo) == before_refs
    assert fingerprint(repo) == before_print


# --- push -----------------------------------------------------------------------------------------


@pytest.fixture
def pushable(tmp_path: Path) -> dict[str, object]:
    repo = make_repo(tmp_path / "repo")
    write(repo, "a.txt", "a one\n")
    a1 = save(repo, "A")
    write(repo, "b.txt", "b\n")
    b1 = save(repo, "B")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    return {"repo": repo, "remote": remote, "A": a1, "B": b1}


def test_push_to_a_bare_path_then_fast_forward(pushable: dict) -> None:
    repo, remote = pushable["repo"], pushable["remote"]
    before_print = fingerprint(repo)
    result = cairn("wip", "push", str(remote), "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["remote"] == str(remote)
    assert out["refspec"] == "refs/cairn/wip/*:refs/cairn/wip/*"
    assert sorted(out["pushed"]) == ["refs/cairn/wip/A", "refs/cairn/wip/B"]
    assert refs(remote) == refs(repo, "refs/cairn")  # only the snapshot refs, same shas
    assert refs(remote) == {"refs/cairn/wip/A": pushable["A"], "refs/cairn/wip/B": pushable["B"]}
    assert git(remote, "cat-file", "blob", f"{pushable['A']}:a.txt") == "a one\n"
    assert fingerprint(repo) == before_print

    write(repo, "a.txt", "a two\n")
    a2 = save(repo, "A")
    before_print = fingerprint(repo)
    second = wip.push(repo, str(remote))
    assert isinstance(second, PushResult)
    assert second.pushed == ["refs/cairn/wip/A"]  # a fast-forward (checked below)
    assert second.up_to_date == ["refs/cairn/wip/B"]
    assert refs(remote) == {"refs/cairn/wip/A": a2, "refs/cairn/wip/B": pushable["B"]}
    assert git(remote, "merge-base", "--is-ancestor", pushable["A"], a2, check=False) == ""
    assert fingerprint(repo) == before_print


def test_push_diverged_ref_needs_force(pushable: dict) -> None:
    repo, remote = pushable["repo"], pushable["remote"]
    wip.push(repo, str(remote))
    # start ticket A over: its new history does not contain what the remote has
    git(repo, "update-ref", "-d", "refs/cairn/wip/A")
    write(repo, "a.txt", "a again\n")
    restarted = save(repo, "A")

    refused = cairn("wip", "push", str(remote), cwd=repo)
    assert_one_line_error(refused, 1)
    assert str(remote) in refused.stderr
    assert refs(remote)["refs/cairn/wip/A"] == pushable["A"]

    forced = cairn("wip", "push", str(remote), "--force", "--json", cwd=repo)
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)["refspec"] == "+refs/cairn/wip/*:refs/cairn/wip/*"
    assert refs(remote)["refs/cairn/wip/A"] == restarted


def test_push_defaults_to_origin(pushable: dict) -> None:
    repo, remote = pushable["repo"], pushable["remote"]
    git(repo, "remote", "add", "origin", str(remote))
    result = cairn("wip", "push", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "pushed 2 snapshot refs to origin (0 already up to date)"
    assert refs(remote) == refs(repo, "refs/cairn")
    assert "refs/heads/main" not in refs(remote)


def test_push_with_no_snapshots_pushes_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    result = wip.push(repo, str(remote))
    assert result.pushed == []
    assert refs(remote) == {}


def test_push_to_a_nonexistent_remote_is_a_one_line_failure(pushable: dict) -> None:
    repo = pushable["repo"]
    before = refs(repo), fingerprint(repo)
    result = cairn("wip", "push", "nosuchremote", cwd=repo)
    assert_one_line_error(result, 1)
    assert "nosuchremote" in result.stderr
    assert (refs(repo), fingerprint(repo)) == before


@pytest.mark.parametrize("case", ["no-such-remote", "non-fast-forward"])
def test_push_failure_message_names_the_problem(pushable: dict, case: str) -> None:
    repo, remote = pushable["repo"], str(pushable["remote"])
    if case == "no-such-remote":
        remote, expected = "nosuchremote", "does not appear to be a git repository"
    else:
        wip.push(repo, remote)
        git(repo, "update-ref", "-d", "refs/cairn/wip/A")
        write(repo, "a.txt", "a again\n")
        save(repo, "A")
        expected = "rejected"
    with pytest.raises(CairnError) as caught:
        wip.push(repo, remote)
    assert expected in str(caught.value)


def test_push_refuses_remote_names_that_look_like_options(pushable: dict, tmp_path: Path) -> None:
    repo = pushable["repo"]
    marker = tmp_path / "pwned"
    before = refs(repo), fingerprint(repo)
    result = cairn("wip", "push", "--", f"--receive-pack=touch {marker}", cwd=repo)
    assert_one_line_error(result, 2)
    assert "not a remote name" in result.stderr
    assert cairn("wip", "push", "-x", cwd=repo).returncode == 2
    for name in ("-x", "--exec=touch x", "", "a\nb", "origin\x1b[0m"):
        with pytest.raises(BadInput):
            wip.push(repo, name)
    assert not marker.exists()
    assert (refs(repo), fingerprint(repo)) == before
