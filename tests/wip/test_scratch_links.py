"""The snapshot engine's scratch directory, ``.git/cairn/tmp``, is never followed through a
symlink (issue 22, item 15). ``wip save`` wrote its temporary index files inside the link's
target, outside the repository, and the clean-up of abandoned scratch directories deleted what
a link inside ``tmp`` pointed to. Now a ``tmp`` link is replaced by a real directory (the link
alone goes; the warning says so), a link inside ``tmp`` is removed as a link, a state root that
resolves outside the repository is refused, and a file where ``tmp`` belongs is refused: never
a byte written or removed outside the repository. Corpus cases: state_tree.yaml
(``state-root-symlink/wip-save``, ``…/wip-restore``, ``scratch-dir-a-file/wip-save``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cairn.wip.scratch import _host
from helpers import assert_one_line_error, cairn, dead_pid, git, rev, state_root, write


def listing(root: Path) -> list[tuple[str, int, int]]:
    """Every entry under ``root`` (and ``root`` itself) with its size and mtime: a file made
    and removed again still moves its directory's mtime."""
    found = [(".", 0, root.stat().st_mtime_ns)]
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            info = path.lstat()
            found.append((str(path.relative_to(root)), info.st_size, info.st_mtime_ns))
    return sorted(found)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the repository, holding what an abandoned scratch directory of
    this host would hold (a dead owner's), so that a clean-up through a link would show."""
    root = tmp_path / "outside"
    write(root, f"save.{_host()}.{dead_pid()}.0badf00d/index", "precious\n")
    write(root, "keep.txt", "precious\n")
    return root


def test_wip_save_replaces_a_linked_tmp_and_writes_nothing_outside(
    repo: Path, outside: Path
) -> None:
    tmp = state_root(repo) / "tmp"
    tmp.parent.mkdir(parents=True)
    tmp.symlink_to(outside)
    write(repo, "new.txt", "unsaved work\n")
    before = listing(outside)
    done = cairn("wip", "save", "--ticket", "T-1", "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    saved = json.loads(done.stdout)
    assert saved["created"] and "new.txt" in git(repo, "ls-tree", "-r", saved["commit"])
    (warning,) = [w for w in saved["warnings"] if "symlink" in w]
    assert str(tmp) in warning and str(outside) in warning and "replaced" in warning
    assert listing(outside) == before
    assert tmp.is_dir() and not tmp.is_symlink()
    write(repo, "new.txt", "more work\n")
    again = cairn("wip", "save", "--ticket", "T-1", cwd=repo)  # the directory is used now
    assert again.returncode == 0 and "warning" not in again.stdout


def test_wip_restore_replaces_a_linked_tmp_and_writes_nothing_outside(
    repo: Path, outside: Path
) -> None:
    write(repo, "src/app.py", "saved version\n")
    assert cairn("wip", "save", "--ticket", "T-1", cwd=repo).returncode == 0
    git(repo, "checkout", "--", "src/app.py")
    tmp = state_root(repo) / "tmp"
    os.rmdir(tmp)
    tmp.symlink_to(outside)
    before = listing(outside)
    done = cairn("wip", "restore", "T-1", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "replaced it with a directory" in done.stdout
    assert (repo / "src" / "app.py").read_text() == "saved version\n"
    assert listing(outside) == before


def test_a_link_inside_tmp_is_removed_as_a_link(repo: Path, outside: Path) -> None:
    """A link named like a dead owner's scratch directory: the clean-up used to empty its
    target (scandir follows links)."""
    tmp = state_root(repo) / "tmp"
    tmp.mkdir(parents=True)
    link = tmp / f"save.{_host()}.{dead_pid()}.deadbeef"
    link.symlink_to(outside / next(p.name for p in outside.iterdir() if p.is_dir()))
    write(repo, "new.txt", "unsaved work\n")
    before = listing(outside)
    done = cairn("wip", "save", "--ticket", "T-1", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert not os.path.lexists(link)
    assert listing(outside) == before


def test_a_state_root_linked_outside_is_refused_before_anything_is_written(
    repo: Path, outside: Path
) -> None:
    state_root(repo).symlink_to(outside)
    write(repo, "new.txt", "unsaved work\n")
    before = listing(outside)
    done = cairn("wip", "save", "--ticket", "T-1", cwd=repo)
    assert_one_line_error(done, 2)
    assert "outside the repository" in done.stderr and "remove the symlink" in done.stderr
    assert git(repo, "for-each-ref", "refs/cairn") == ""
    assert listing(outside) == before


def test_a_file_where_tmp_belongs_is_refused(repo: Path) -> None:
    write(state_root(repo), "tmp", "an agent's notes\n")
    write(repo, "new.txt", "unsaved work\n")
    done = cairn("wip", "save", "--ticket", "T-1", cwd=repo)
    assert_one_line_error(done, 2)
    assert "tmp is not a directory" in done.stderr and "move it away" in done.stderr
    assert (state_root(repo) / "tmp").read_text() == "an agent's notes\n"


def test_a_linked_cache_is_not_written_and_does_not_fail_the_save(
    repo: Path, outside: Path
) -> None:
    """The stat cache and the no-op proof are caches: a link where their directory goes is
    left alone (never written through) and the snapshot, already recorded, succeeds."""
    cache = state_root(repo) / "cache"
    cache.parent.mkdir(parents=True)
    cache.symlink_to(outside)
    write(repo, "new.txt", "unsaved work\n")
    before = listing(outside)
    done = cairn("wip", "save", "--ticket", "T-1", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert rev(repo, "refs/cairn/wip/T-1")
    status = cairn("status", cwd=repo)  # its row cache lives there too
    assert status.returncode == 0 and "T-1" in status.stdout
    assert listing(outside) == before
