"""cairn's stat cache: a no-op save does not hash unchanged files again, and the cache never makes
a snapshot miss a change (a racy entry, a pruned blob, a corrupt or old cache file, changed
attributes), which a property test checks against the uncached path on random edit sequences."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn import wip
from cairn.config import load
from cairn.git import Repo
from cairn.wip.hashcache import FORMAT, HashCache
from cairn.wip.preparing import plainly_valid, prepare
from cairn.wip.proof import RACY_WINDOW_NS
from cairn.wip.scratch import scratch_dir
from helpers import fresh_repo, git, snapshot_files, write
from wip.wip_setup import git_calls

OLD = 1_600_000_000  # a file time long before any save: never racy


def age(repo: Path, *paths: str, seconds: int = OLD) -> None:
    for rel in paths:
        os.utime(repo / rel, ns=(seconds * 10**9, seconds * 10**9))


def cache_file(repo: Path) -> Path:
    found = list((repo / ".git" / "cairn" / "cache").glob("hashes-*.json"))
    assert len(found) == 1
    return found[0]


def uncached_tree(repo: Path, ticket: str) -> str:
    """The work-tree tree git's own index code builds for the same state."""
    found = Repo.discover(repo)
    with scratch_dir(found.state_root(), "test") as scratch:
        return prepare(found, load(found.toplevel), scratch, ticket, None, via_index=True).tree


def tree_of(repo: Path, commit: str | None) -> str:
    assert commit is not None
    return git(repo, "rev-parse", f"{commit}^{{tree}}").strip()


@pytest.fixture
def dirty(repo: Path) -> Path:
    for i in range(20):
        write(repo, f"new/file{i}.txt", f"untracked {i}\n")
    write(repo, "src/app.py", "print('edited')\n")
    age(repo, "src/app.py", *(f"new/file{i}.txt" for i in range(20)))
    return repo


def index_state(repo: Path) -> tuple[bytes, int]:
    index = repo / ".git" / "index"
    return index.read_bytes(), index.stat().st_mtime_ns


def test_a_no_op_save_hashes_nothing_and_builds_no_tree(dirty: Path) -> None:
    before = index_state(dirty)  # the status pass reads the index in place: never writes it
    first = wip.save(dirty, ticket="T")
    assert first.created
    with git_calls() as calls:
        again = wip.save(dirty, ticket="T")
    assert not again.created and again.commit == first.commit
    assert "hash-object" not in calls and "config" not in calls
    assert "cat-file --batch-check" not in calls  # the blobs are the snapshot's: no check
    data = json.loads(cache_file(dirty).read_text())
    assert data["anchors"] == {"refs/cairn/wip/T": first.commit}
    assert len(data["entries"]) == 21
    assert index_state(dirty) == before


def test_another_ticket_needs_no_hashing_while_an_anchor_stands(dirty: Path) -> None:
    first = wip.save(dirty, ticket="T")
    with git_calls() as calls:
        other = wip.save(dirty, ticket="U")
    assert other.created
    assert "hash-object" not in calls
    assert "cat-file --batch-check" not in calls  # T's ref still holds them all
    assert snapshot_files(dirty, other.commit)["new/file3.txt"] == b"untracked 3\n"
    anchors = json.loads(cache_file(dirty).read_text())["anchors"]
    assert anchors == {"refs/cairn/wip/T": first.commit, "refs/cairn/wip/U": other.commit}
    git(dirty, "update-ref", "-d", "refs/cairn/wip/T")
    git(dirty, "update-ref", "-d", "refs/cairn/wip/U")
    with git_calls() as calls:
        third = wip.save(dirty, ticket="V")
    assert "hash-object" not in calls and calls.count("cat-file --batch-check") == 1
    assert tree_of(dirty, third.commit) == tree_of(dirty, other.commit)


def test_a_changed_file_is_hashed_again(dirty: Path) -> None:
    wip.save(dirty, ticket="T")
    write(dirty, "new/file3.txt", "UNTRACKED 3\n")  # same size
    age(dirty, "new/file3.txt")  # same mtime as before: only the ctime tells
    result = wip.save(dirty, ticket="T")
    assert result.created
    assert snapshot_files(dirty, result.commit)["new/file3.txt"] == b"UNTRACKED 3\n"
    assert tree_of(dirty, result.commit) == uncached_tree(dirty, "T")


def forge_entry(repo: Path, rel: str, stale_oid: str, stamp: int) -> None:
    """Make the cache claim that ``rel``, exactly as it is on disk now, has blob ``stale_oid``:
    what a change within the same clock tick as the last read would look like."""
    path = cache_file(repo)
    data = json.loads(path.read_text())
    st = os.lstat(repo / rel)
    entry = [rel, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode, stale_oid]
    data["entries"] = [e for e in data["entries"] if e[0] != rel] + [entry]
    data["stamp"] = stamp
    path.write_text(json.dumps(data))


def test_a_racy_entry_is_treated_as_dirty(repo: Path) -> None:
    write(repo, "notes.txt", "old text\n")
    age(repo, "notes.txt")
    first = wip.save(repo, ticket="T")
    stale = git(repo, "rev-parse", f"{first.commit}:notes.txt").strip()
    write(repo, "notes.txt", "new text\n")  # now, within the window of the stamp below
    mtime = os.lstat(repo / "notes.txt").st_mtime_ns
    forge_entry(repo, "notes.txt", stale, stamp=mtime + RACY_WINDOW_NS // 2)
    result = wip.save(repo, ticket="T")
    assert snapshot_files(repo, result.commit)["notes.txt"] == b"new text\n"
    # The same forged entry outside the window would be believed: the window is what saves it.
    forge_entry(repo, "notes.txt", stale, stamp=mtime + 2 * RACY_WINDOW_NS)
    cache = HashCache.load(Repo.discover(repo), 0)
    assert cache.blob(b"notes.txt", os.lstat(repo / "notes.txt")) == stale


def test_a_blob_pruned_by_gc_is_hashed_again(dirty: Path) -> None:
    first = wip.save(dirty, ticket="T")
    blob = git(dirty, "rev-parse", f"{first.commit}:new/file3.txt").strip()
    git(dirty, "update-ref", "-d", "refs/cairn/wip/T")
    git(dirty, "reflog", "expire", "--expire=now", "--all")
    git(dirty, "gc", "-q", "--prune=now")
    gone = subprocess.run(["git", "cat-file", "-e", blob], cwd=dirty, check=False)
    assert gone.returncode != 0  # the snapshot is gone, blobs and all
    result = wip.save(dirty, ticket="T")
    assert result.created
    git(dirty, "fsck", "--no-dangling", "--connectivity-only")
    assert snapshot_files(dirty, result.commit)["new/file3.txt"] == b"untracked 3\n"
    assert tree_of(dirty, result.commit) == uncached_tree(dirty, "T")


def test_a_pruned_tree_is_built_again_even_when_its_blobs_survive(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "other")
    write(repo, "z.txt", "shared\n")
    git(repo, "add", "z.txt")
    git(repo, "commit", "-q", "-m", "keeps the blob alive")
    git(repo, "checkout", "-q", "main")
    write(repo, "new.txt", "shared\n")
    age(repo, "new.txt")
    first = wip.save(repo, ticket="T")
    tree = tree_of(repo, first.commit)
    git(repo, "update-ref", "-d", "refs/cairn/wip/T")
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "-q", "--prune=now")
    assert subprocess.run(["git", "cat-file", "-e", tree], cwd=repo, check=False).returncode
    result = wip.save(repo, ticket="T")
    assert tree_of(repo, result.commit) == tree == uncached_tree(repo, "T")


def test_a_new_blob_is_anchored_only_to_the_snapshot_that_holds_it(dirty: Path) -> None:
    wip.save(dirty, ticket="T")
    write(dirty, "new/file5.txt", "a brand new blob\n")
    age(dirty, "new/file5.txt", seconds=OLD + 1)
    second = wip.save(dirty, ticket="U")  # T's tree does not have the new blob
    assert json.loads(cache_file(dirty).read_text())["anchors"] == {
        "refs/cairn/wip/U": second.commit
    }
    git(dirty, "update-ref", "-d", "refs/cairn/wip/U")
    git(dirty, "reflog", "expire", "--expire=now", "--all")
    git(dirty, "gc", "-q", "--prune=now")  # the new blob is gone; T's snapshot is not
    result = wip.save(dirty, ticket="V")
    git(dirty, "fsck", "--no-dangling", "--connectivity-only")
    assert snapshot_files(dirty, result.commit)["new/file5.txt"] == b"a brand new blob\n"


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"\x00\xff",
        b'{"format": 1, "stamp": 0, "anchor": null, "entries": [], "fingerprint": []}',
        b"[]",
        b'{"format": 2}',
    ],
)
def test_a_corrupt_or_old_cache_is_replaced_silently(dirty: Path, content: bytes) -> None:
    wip.save(dirty, ticket="T")
    cache_file(dirty).write_bytes(content)
    write(dirty, "new/file1.txt", "changed\n")
    result = wip.save(dirty, ticket="T")
    assert result.created and result.warnings == []
    assert tree_of(dirty, result.commit) == uncached_tree(dirty, "T")
    assert json.loads(cache_file(dirty).read_text())["format"] == FORMAT


def test_new_attributes_invalidate_the_cache(repo: Path) -> None:
    write(repo, "id.txt", "$Id: not collapsed yet $\n")
    age(repo, "id.txt")
    wip.save(repo, ticket="T")
    write(repo, ".gitattributes", "*.txt ident\n")  # git now stores this file differently
    result = wip.save(repo, ticket="T")
    assert snapshot_files(repo, result.commit)["id.txt"] == b"$Id$\n"
    assert tree_of(repo, result.commit) == uncached_tree(repo, "T")


@pytest.mark.parametrize(
    ("ref", "valid"),
    [
        ("refs/cairn/wip/PROJ-12", True),
        ("refs/cairn/wip/a.b_c-d", True),
        ("refs/cairn/wip/x.lock", False),
        ("refs/cairn/x.lock/y", False),
        ("refs/cairn/wip/.hidden", False),
        ("refs/cairn/wip/a..b", False),
        ("refs/ca irn/wip/T", False),
        ("heads/T", False),
    ],
)
def test_refs_taken_as_valid_without_git_are_valid_for_git(
    repo: Path, ref: str, valid: bool
) -> None:
    assert plainly_valid(ref) == valid
    if valid:
        git(repo, "check-ref-format", ref)


# --- the property: the cache never changes a snapshot ----------------------------------------

TRACKED = {"a.txt": "tracked a\n", "d/c.txt": "tracked c\n"}
NAMES = ["a.txt", "b.txt", "d/c.txt", "d/e/f.bin", "g h.txt", "run.sh"]
OPS = st.lists(
    st.tuples(
        st.sampled_from(["write", "same-size", "delete", "chmod", "symlink", "stage", "save"]),
        st.sampled_from(NAMES),
        st.binary(min_size=1, max_size=6),
    ),
    min_size=1,
    max_size=12,
)


def apply(repo: Path, op: str, name: str, data: bytes, clock: list[int]) -> None:
    target = repo / name
    if op in ("write", "same-size"):
        if target.is_symlink() or (op == "same-size" and not target.is_file()):
            return
        old = target.read_bytes() if target.exists() else b""
        body = bytes(reversed(old)) if op == "same-size" and old else data
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)
    elif op == "delete" and (target.is_file() or target.is_symlink()):
        target.unlink()
    elif op == "chmod" and target.is_file() and not target.is_symlink():
        target.chmod(target.stat().st_mode ^ 0o100)
    elif op == "symlink" and not target.exists() and not target.is_symlink():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to("a.txt")
    elif op == "stage":
        git(repo, "add", "-A")
    if target.is_file() and not target.is_symlink():
        clock[0] += 1  # every change gets its own old mtime, so it never looks unchanged
        os.utime(target, ns=(clock[0] * 10**9, clock[0] * 10**9))


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_cached_saves_equal_the_uncached_path(ops: list[tuple[str, str, bytes]]) -> None:
    with fresh_repo("cairn-cache-", TRACKED) as repo:
        clock = [OLD]
        for op, name, data in [*ops, ("save", "", b"")]:
            if op != "save":
                apply(repo, op, name, data, clock)
                continue
            result = wip.save(repo, ticket="T")
            if result.commit is None:
                continue
            assert tree_of(repo, result.commit) == uncached_tree(repo, "T")
