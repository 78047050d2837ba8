"""The proof of a no-op (``cairn.wip.proof``): a save whose inputs have not changed since the last
one answers from ``git status`` alone, and no change of any input a snapshot depends on gets past
it, which a property test checks against the full save on random edit sequences. Real git, real
files; the racy window is set to 0 where a test cannot wait two seconds (the stamp and the file
times still come from the same filesystem clock)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    pass
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cairn import wip
from cairn.config import load
from cairn.git.status import STATUS_ARGS, start_early
from cairn.wip import proof
from cairn.wip.saving import paths_of
from helpers import fresh_repo, git, make_repo, snapshot_files, write
from wip.wip_setup import git_calls

TICK = 0.01  # longer than the kernel's timestamp tick: a later change gets a later ctime


@pytest.fixture
def no_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proof, "RACY_WINDOW_NS", 0)


@pytest.fixture
def dirty(repo: Path, no_window: None) -> Path:
    for i in range(5):
        write(repo, f"new/file{i}.txt", f"untracked {i}\n")
    write(repo, "src/app.py", "print('edited')\n")
    time.sleep(TICK)
    return repo


def proven(repo: Path, ticket: str | None = "T", run: str | None = None) -> proof.Proof | None:
    from cairn.git import Repo

    found_repo = Repo.discover(repo)
    found = paths_of(found_repo)
    status = found_repo.git.run(STATUS_ARGS).stdout
    return proof.holds(found, proof.key(found, status, ticket, run), ticket, run)


def full_save(repo: Path, ticket: str = "T") -> wip.SaveResult:
    """The save without the proof (a config passed in: the proof neither read nor written)."""
    return wip.save(repo, ticket=ticket, config=load(repo))


def settled(repo: Path, ticket: str = "T") -> wip.SaveResult:
    """Save until the proof is kept: the save that records, then the one that proves."""
    first = wip.save(repo, ticket=ticket)
    time.sleep(TICK)
    wip.save(repo, ticket=ticket)
    assert proven(repo, ticket) is not None
    return first


def test_a_no_op_is_answered_from_git_status_alone(dirty: Path) -> None:
    first = settled(dirty)
    assert first.created
    with git_calls(spawned=True) as calls:
        again = wip.save(dirty, ticket="T", reason="stop")
    assert calls == ["status", "rev-parse"]  # and the repository found: no object read, no hash
    slow = full_save(dirty)
    fields = ("ref", "commit", "created", "base", "branch", "files_changed", "ticket", "skipped")
    assert [getattr(again, f) for f in fields] == [getattr(slow, f) for f in fields]
    assert (again.commit, again.created, again.reason) == (first.commit, False, "stop")
    assert again.summary == slow.summary


def test_a_clean_tree_without_a_snapshot_is_proven_too(repo: Path, no_window: None) -> None:
    time.sleep(TICK)
    assert wip.save(repo, ticket="T").commit is None
    kept = proven(repo)
    assert kept is not None and kept.commit is None
    assert wip.save(repo, ticket="T").summary == full_save(repo).summary
    write(repo, "fresh.txt", "new\n")
    assert proven(repo) is None
    assert wip.save(repo, ticket="T").created


def same_size_same_mtime(repo: Path) -> None:
    """The edit a stat cache can miss: same size, the old mtime put back (only ctime moves)."""
    target = repo / "src" / "app.py"
    st = target.stat()
    target.write_text("print('EDITED')\n")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))


def cap_new_files(repo: Path) -> None:
    write(repo, "cairn.toml", "[snapshot]\nmax_new_file_bytes = 5\n")


CHANGES: dict[str, Callable[[Path], object]] = {
    "same size, same mtime": same_size_same_mtime,
    "chmod": lambda r: (r / "new" / "file1.txt").chmod(0o755),
    "an untracked file added": lambda r: write(r, "new/another.txt", "more\n"),
    "an untracked file deleted": lambda r: (r / "new" / "file2.txt").unlink(),
    "staged": lambda r: git(r, "add", "src/app.py"),
    "committed": lambda r: git(r, "commit", "-qam", "more"),
    "another branch": lambda r: git(r, "checkout", "-q", "-b", "other"),
    "attributes": lambda r: write(r, "new/.gitattributes", "*.txt text eol=crlf\n"),
    "git config": lambda r: git(r, "config", "core.fileMode", "false"),
    "cairn config": cap_new_files,
    "ref moved": lambda r: git(r, "update-ref", "refs/cairn/wip/T", "HEAD"),
    "ref deleted": lambda r: git(r, "update-ref", "-d", "refs/cairn/wip/T"),
    "lock left by a killed git": lambda r: write(r, ".git/refs/cairn/wip/T.lock", ""),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_every_input_of_a_snapshot_unsettles_the_proof(dirty: Path, change: str) -> None:
    settled(dirty)
    CHANGES[change](dirty)
    time.sleep(TICK)
    assert proven(dirty) is None
    expected = full_save_in_a_copy(dirty)
    result = wip.save(dirty, ticket="T")
    assert (result.created, result.summary.split(" (")[0]) == expected
    if result.created:
        assert result.commit is not None
        assert snapshot_files(dirty, result.commit) == snapshot_files_of_work_tree(dirty)


def full_save_in_a_copy(repo: Path) -> tuple[bool, str]:
    """What the full save would answer, found in a copy (so the real one still decides)."""
    copy = Path(tempfile.mkdtemp(prefix="cairn-proof-")) / "repo"
    try:
        shutil.copytree(repo, copy, symlinks=True)
        shutil.rmtree(copy / ".git" / "cairn" / "cache", ignore_errors=True)
        result = full_save(copy)
        return result.created, result.summary.split(" (")[0]
    finally:
        shutil.rmtree(copy.parent, ignore_errors=True)


def snapshot_files_of_work_tree(repo: Path) -> dict[str, bytes]:
    cap = 5 if (repo / "cairn.toml").exists() else None
    found: dict[str, bytes] = {}
    for path in repo.rglob("*"):
        rel = path.relative_to(repo).as_posix()
        if rel.startswith(".git/") or rel == ".git" or not path.is_file():
            continue
        tracked = bool(git(repo, "ls-files", "--", rel).strip())
        if not tracked and cap is not None and path.stat().st_size > cap:
            continue
        found[rel] = path.read_bytes()
    return found


def test_cairn_s_config_counts_even_when_git_status_does_not_list_it(dirty: Path) -> None:
    write(dirty, ".git/info/exclude", "cairn.toml\n")
    write(dirty, "cairn.toml", "[snapshot]\nmax_new_file_bytes = 100\n")
    time.sleep(TICK)
    settled(dirty)
    cap_new_files(dirty)  # "untracked 0\n" is over five bytes now
    time.sleep(TICK)
    assert proven(dirty) is None
    again = wip.save(dirty, ticket="T")
    assert again.created and len(again.skipped) == 5


def test_packed_refs_still_prove_and_other_tickets_and_runs_have_their_own(dirty: Path) -> None:
    first = settled(dirty)
    git(dirty, "pack-refs", "--all")
    assert not (dirty / ".git" / "refs" / "cairn" / "wip" / "T").exists()
    kept = proven(dirty)
    assert kept is not None and kept.commit == first.commit
    assert proven(dirty, "U") is None and proven(dirty, "T", "run-1") is None
    settled(dirty, "U")
    assert proven(dirty, "T") is not None and proven(dirty, "U") is not None


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"garbage\n",
        b"cairn no-op proofs 1\n0.0.0\n",
        b"\xff\xfe\x00",
        b"cairn no-op proofs 1\n",
    ],
)
def test_a_corrupt_or_old_proof_file_is_ignored_and_replaced(dirty: Path, content: bytes) -> None:
    settled(dirty)
    (file,) = (dirty / ".git" / "cairn" / "cache").glob("noop-*")
    file.write_bytes(content)
    assert proven(dirty) is None
    assert not wip.save(dirty, ticket="T").created
    assert proven(dirty) is not None


def test_a_file_changed_within_the_racy_window_keeps_saves_on_the_full_path(repo: Path) -> None:
    write(repo, "new.txt", "just now\n")  # the real two-second window: ctime is now
    wip.save(repo, ticket="T")
    wip.save(repo, ticket="T")
    assert proven(repo) is None


@pytest.mark.parametrize("case", ["over the size cap", "nested repository", "conflict"])
def test_what_a_proof_cannot_repeat_is_never_proven(repo: Path, no_window: None, case: str) -> None:
    if case == "over the size cap":
        write(repo, "cairn.toml", "[snapshot]\nmax_new_file_bytes = 5\n")
        write(repo, "big.bin", "more than five bytes\n")
    elif case == "nested repository":
        make_repo(repo / "vendor" / "lib")
    else:
        git(repo, "checkout", "-q", "-b", "side")
        write(repo, "README.md", "side\n")
        git(repo, "commit", "-qam", "side")
        git(repo, "checkout", "-q", "main")
        write(repo, "README.md", "main\n")
        git(repo, "commit", "-qam", "main")
        git(repo, "merge", "-q", "side", check=False)
    time.sleep(TICK)
    saves = [wip.save(repo, ticket="T") for _ in range(2)]
    assert saves[-1].skipped or saves[-1].conflicted
    assert proven(repo) is None


# --- the command line -------------------------------------------------------------------------


def cairn(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys; from cairn.cli.main import main; sys.argv = ['cairn', *sys.argv[1:]]; main()"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=repo,
        capture_output=True,
        text=True,
    )


def test_the_command_line_s_no_op_is_the_save_s(repo: Path) -> None:
    write(repo, "notes.md", "draft\n")
    first = cairn(repo, "wip", "save", "-t", "T-1")
    assert first.returncode == 0 and "saved 1 changed file " in first.stdout
    time.sleep(proof.RACY_WINDOW_NS / 1e9 + 0.1)  # the real window: the next save keeps a proof
    again = cairn(repo, "wip", "save", "-t", "T-1")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("nothing changed since the last snapshot")
    assert proven(repo, "T-1") is not None


def test_a_save_computes_the_key_once(dirty: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bytes] = []
    real = proof.key

    def counted(found: Any, status: bytes, ticket: str | None, run: str | None) -> Any:
        calls.append(status)
        return real(found, status, ticket, run)

    monkeypatch.setattr(proof, "key", counted)
    assert wip.save(dirty, ticket="T").created  # records, and keeps the proof
    time.sleep(TICK)
    assert not wip.save(dirty, ticket="T").created  # proven
    assert len(calls) == 2


def test_a_status_that_misses_the_time_budget_is_handed_to_the_save(repo: Path) -> None:
    write(repo, "notes.md", "draft\n")
    assert cairn(repo, "wip", "save", "-t", "T-1").returncode == 0
    time.sleep(proof.RACY_WINDOW_NS / 1e9 + 0.1)
    assert cairn(repo, "wip", "save", "-t", "T-1").returncode == 0
    assert proven(repo, "T-1") is not None
    hook = write(repo, ".git/slow-fsmonitor", "#!/bin/sh\nsleep 2\n", mode=0o755)
    git(repo, "config", "core.fsmonitor", str(hook))  # git status now takes two seconds
    tight = [cairn(repo, "wip", "save", "-t", "T-1", "--timeout-ms", "300") for _ in "12"]
    assert [t.returncode for t in tight] == [1, 1]  # SaveTimeout's, as before the proof
    assert tight[0].stderr == tight[1].stderr
    assert "snapshot abandoned after 300 ms" in tight[0].stderr


# --- the property: a proof never hides a change -----------------------------------------------

TRACKED = {"a.txt": "tracked a\n", "d/c.txt": "tracked c\n"}
NAMES = ["a.txt", "d/c.txt", "d/e/f.bin", "run.sh"]
OPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "write",
                "sneaky",
                "delete",
                "chmod",
                "stage",
                "commit",
                "attributes",
                "cap",
                "ignore-config",
                "move-ref",
                "pack-refs",
            ]
        ),
        st.sampled_from(NAMES),
        st.binary(min_size=1, max_size=6),
    ),
    min_size=1,
    max_size=8,
)


def apply(repo: Path, op: str, name: str, data: bytes) -> None:
    target = repo / name
    if op == "write":
        write(repo, name, data)
    elif op == "sneaky" and target.is_file() and target.stat().st_size:
        st = target.stat()  # the same size and mtime, other bytes: only ctime tells
        old = target.read_bytes()
        target.write_bytes(bytes([old[0] ^ 1]) + old[1:])
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    elif op == "delete" and target.is_file():
        target.unlink()
    elif op == "chmod" and target.is_file():
        target.chmod(target.stat().st_mode ^ 0o100)
    elif op == "stage":
        git(repo, "add", "-A")
    elif op == "commit":
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "step", "--allow-empty")
    elif op == "attributes":
        write(repo, "d/.gitattributes", "*.txt text eol=crlf\n" if data[0] % 2 else "* -text\n")
    elif op == "cap":
        write(repo, "cairn.toml", f"[snapshot]\nmax_new_file_bytes = {data[0] % 8}\n")
    elif op == "ignore-config":  # git status no longer lists cairn.toml: its stat still counts
        write(repo, ".git/info/exclude", "cairn.toml\n")
    elif op == "move-ref":
        git(repo, "update-ref", "refs/cairn/wip/T", "HEAD")
    elif op == "pack-refs":
        git(repo, "pack-refs", "--all")


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
@example(ops=[("write", "run.sh", b"ab"), ("sneaky", "run.sh", b"-")])  # untracked
@example(ops=[("write", "a.txt", b"ab"), ("sneaky", "a.txt", b"-")])  # tracked, modified
@example(ops=[("write", "d/c.txt", b"ab"), ("stage", "", b"-"), ("chmod", "d/c.txt", b"-")])
def test_a_proof_never_hides_a_change(ops: list[tuple[str, str, bytes]]) -> None:
    """After every step: when the proof kept by the last save holds, the full save agrees that
    nothing changed; then a save keeps the proof of this state for the next step."""
    with pytest.MonkeyPatch.context() as patch, fresh_repo("cairn-proof-", TRACKED) as repo:
        patch.setattr(proof, "RACY_WINDOW_NS", 0)
        wip.save(repo, ticket="T")
        for op, name, data in ops:
            time.sleep(TICK)
            apply(repo, op, name, data)
            time.sleep(TICK)
            kept = proven(repo)
            full = full_save(repo)
            if kept is not None:
                assert not full.created and full.commit == kept.commit
                assert full.summary == proof.unchanged_line(kept.ref, kept.commit)
            wip.save(repo, ticket="T")


def test_the_save_leaves_no_early_git_process_behind(dirty: Path) -> None:
    """The status pass and discovery started before the save are used up or stopped whether
    the proof holds or not."""
    settled(dirty)
    for change in ("", "new/later.txt"):
        if change:
            write(dirty, change, "later\n")
        early = start_early(str(dirty))
        wip.save(str(dirty), ticket="T", early=early)
        for started in (early.status, early.discovery):
            assert started is not None and started.proc.returncode is not None
