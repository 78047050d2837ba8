"""Random work trees → ``cairn wip save`` → ``cairn wip restore --to DIR``: the restored tree must
be the work tree, byte for byte, and the save must not touch anything of the user's.

    .venv/bin/python bench/chaos/snapshot_fuzz.py --quick        # CI: 15 trees, about 15 s
    .venv/bin/python bench/chaos/snapshot_fuzz.py                # 300 trees, about 6 minutes
    .venv/bin/python bench/chaos/snapshot_fuzz.py --replay SEED --keep  # rebuild one tree
    .venv/bin/python bench/chaos/snapshot_fuzz.py --self-test    # damaged restores: exit 1

Each tree is a fresh repository built from its own seed by ``trees.build`` (odd names,
symlinks, exec bits, type changes, renames, staged-then-modified files, ignored files, files
over the size cap of 4,096 bytes, deletions, sometimes no commit at all). Then, through the
real CLI:

1. the fingerprint: HEAD, the index file's bytes, branches, config, hooks, every work-tree file;
2. ``cairn wip save --ticket FUZZ --json``; the fingerprint must be unchanged;
3. the snapshot's staged tree (``Cairn-Index-Tree``) must be the tree of the real index
   (``git write-tree`` on a copy of it): the staged state is recoverable too;
4. ``cairn wip restore FUZZ --to DIR``: DIR must hold exactly the work tree's files and
   symlinks (content, exec bit, link text), less the ignored files and the untracked files over
   the cap, and each of those over the cap must be named ``too_large`` in the save's report.

A violation prints the tree's seed; ``--replay SEED`` builds that tree again (``--keep`` keeps
it to look at).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trees

from common import (
    Sizes,
    Tally,
    case_seeds,
    cli,
    fingerprint,
    git,
    log,
    parse_args,
    scratch,
    tree_state,
)

SIZES = Sizes(quick=15, full=300, unit="trees")
TICKET = "FUZZ"

KINDS = {
    "save_failed": "cairn wip save did not exit 0 or recorded nothing for a dirty tree",
    "user_state_changed": "HEAD, index bytes, branches, config, hooks or a work-tree file changed",
    "staged_state_differs": "the snapshot's staged tree is not the tree of the real index",
    "restore_failed": "cairn wip restore --to did not exit 0",
    "restore_differs": "the restored tree is not the work tree (less ignored and over-cap files)",
    "oversize_not_reported": "an untracked file over the cap is missing from the save's report",
    "wrongly_skipped": "the report names a path as skipped that is not over the cap",
}

FIGURES = [
    "trees",
    "trees with no commit",
    "edits",
    "paths restored",
    "symlinks restored",
    "executable files restored",
    "paths with odd names restored",
    "over-cap files reported",
    "ignored files left out",
    "staged trees checked",
    "faults injected",
    "faults missed",
]


@dataclass
class Case:
    number: int
    seed: int
    root: Path
    edits: list[str] = field(default_factory=list)

    @property
    def repo(self) -> Path:
        return self.root / f"tree-{self.number}"

    @property
    def restored(self) -> Path:
        return self.root / f"restored-{self.number}"

    def where(self) -> str:
        return f"tree {self.number} (seed {self.seed}: --replay {self.seed})"


def zlist(repo: Path, *args: str) -> list[str]:
    out = subprocess.run(["git", *args, "-z"], cwd=repo, capture_output=True, check=True).stdout
    return [os.fsdecode(p) for p in out.split(b"\0") if p]


def expected_tree(repo: Path) -> tuple[dict[str, tuple[str, object]], set[str], set[str]]:
    """The work tree as a snapshot must hold it; the over-cap untracked files; the ignored."""
    state = tree_state(repo)
    ignored = set(zlist(repo, "ls-files", "--others", "--ignored", "--exclude-standard"))
    untracked = set(zlist(repo, "ls-files", "--others", "--exclude-standard"))
    over = {
        p
        for p in untracked
        if not os.path.islink(repo / p)
        and (repo / p).is_file()
        and (repo / p).stat().st_size > trees.CAP
    }
    expected = {p: v for p, v in state.items() if p not in ignored and p not in over}
    return expected, over, ignored


def changed_beyond(repo: Path, over: set[str]) -> bool:
    """Whether anything differs from HEAD but the untracked files over the cap (and the
    ignored ones): when nothing does, a save rightly records nothing."""
    for entry in zlist(repo, "status", "--porcelain", "--untracked-files=all"):
        if entry[:3] != "?? " or entry[3:] not in over:
            return True
    return False


def index_tree(repo: Path, scratch_dir: Path) -> str | None:
    """The tree of the real index, written from a copy of it (the real one is never touched)."""
    index = repo / ".git" / "index"
    if not index.exists():
        return None
    copy = scratch_dir / "index-copy"
    shutil.copy2(index, copy)
    done = subprocess.run(
        ["git", "write-tree"],
        cwd=repo,
        env={**os.environ, "GIT_INDEX_FILE": str(copy)},
        capture_output=True,
        text=True,
        check=False,
    )
    copy.unlink()
    return done.stdout.strip() if done.returncode == 0 else None


def executable(file: object) -> bool:
    """``tree_state`` describes a file as (executable, content)."""
    return isinstance(file, tuple) and bool(file[0])


def odd(path: str) -> bool:
    return any(c in path for c in ' \t\n"\\*?') or not path.isascii() or path.startswith("-")


Damage = Callable[["Case", dict[str, Any]], None]


def check_case(case: Case, tally: Tally, damage: Damage | None = None) -> set[str]:
    """Build, save, restore and compare one tree; the violation kinds it produced."""
    tree = trees.build(case.repo, case.seed)
    if damage is not None:  # a self-test tree always has an over-cap file to report, and a
        # file to restore (a tree of only an over-cap file records nothing, restores nothing)
        tree.write("zz-over-the-cap.bin", tree.content(oversized=True))
        tree.write("zz-to-restore.txt", b"restored by the self-test\n")
    case.edits = tree.edits
    tally.count("trees")
    tally.count("edits", len(tree.edits))
    if "first commit" not in tree.edits:
        tally.count("trees with no commit")
    found: set[str] = set()

    def violation(kind: str, detail: str) -> None:
        found.add(kind)
        tally.violation(kind, case.where(), detail)

    expected, over, ignored = expected_tree(case.repo)
    dirty = changed_beyond(case.repo, over)
    before = fingerprint(case.repo)
    saved = cli("wip", "save", "--ticket", TICKET, "--json", cwd=case.repo)
    if saved.returncode != 0:
        violation("save_failed", f"exit {saved.returncode}: {saved.error_line()}")
        return found
    report = json.loads(saved.stdout)
    if damage is not None:
        damage(case, report)
    after = fingerprint(case.repo)
    changed = [k for k in before if before[k] != after.get(k)]
    if changed:
        violation("user_state_changed", f"{', '.join(changed)} changed by the save")
    if report.get("commit") is None:  # a clean tree with no snapshot yet: nothing to record
        if dirty:
            violation("save_failed", f"nothing recorded for a dirty tree: {report}")
        return found
    commit = report["commit"]
    staged = git(
        case.repo, "log", "-1", "--format=%(trailers:key=Cairn-Index-Tree,valueonly)", commit
    ).strip()
    real = index_tree(case.repo, case.root)
    if real is not None:
        tally.count("staged trees checked")
        if staged != real:
            violation("staged_state_differs", f"Cairn-Index-Tree {staged}, the index's {real}")
    reported = {s["path"]: s["reason"] for s in report.get("skipped", [])}
    for path in sorted(over):
        if reported.get(path) != "too_large":
            violation("oversize_not_reported", f"{path!r} ({(case.repo / path).stat().st_size} B)")
    for path, reason in reported.items():
        if path not in over:
            violation("wrongly_skipped", f"{path!r} skipped as {reason}")
    tally.count("over-cap files reported", len(over & set(reported)))
    tally.count("ignored files left out", len(ignored))
    restored = cli("wip", "restore", TICKET, "--to", str(case.restored), cwd=case.repo)
    if restored.returncode != 0:
        violation("restore_failed", f"exit {restored.returncode}: {restored.error_line()}")
        return found
    if damage is not None:
        damage(case, {"restored": True})
    got = tree_state(case.restored)
    if got != expected:
        differ = sorted(p for p in set(got) | set(expected) if got.get(p) != expected.get(p))
        violation("restore_differs", f"{len(differ)} paths differ, first {differ[:3]!r}")
    else:
        tally.count("paths restored", len(got))
        tally.count("symlinks restored", sum(1 for v in got.values() if v[0] == "link"))
        tally.count(
            "executable files restored",
            sum(1 for kind, what in got.values() if kind == "file" and executable(what)),
        )
        tally.count("paths with odd names restored", sum(1 for p in got if odd(p)))
    return found


# --- self-test ---------------------------------------------------------------------------------


def flip_a_byte(case: Case, stage: dict[str, Any]) -> None:
    if stage.get("restored"):
        files = [p for p in case.restored.rglob("*") if p.is_file() and not p.is_symlink()]
        target = max(files, key=lambda p: p.stat().st_size)
        data = bytearray(target.read_bytes() or b"\0")
        data[0] ^= 0xFF
        target.write_bytes(bytes(data))


def drop_a_file(case: Case, stage: dict[str, Any]) -> None:
    if stage.get("restored"):
        files = [p for p in case.restored.rglob("*") if p.is_file() or p.is_symlink()]
        files[0].unlink()


def move_a_branch(case: Case, stage: dict[str, Any]) -> None:
    if "commit" in stage:
        git(case.repo, "branch", "chaos-injected", check=False)
        git(case.repo, "checkout", "-q", "--orphan", "chaos-orphan", check=False)


def touch_the_index(case: Case, stage: dict[str, Any]) -> None:
    if "commit" in stage:
        (case.repo / "zz-staged-by-the-test").write_text("x\n")
        git(case.repo, "add", "--", "zz-staged-by-the-test")


def hide_an_oversized_file(case: Case, stage: dict[str, Any]) -> None:
    if "commit" in stage:
        stage["skipped"] = [s for s in stage.get("skipped", []) if s["reason"] != "too_large"]


FAULTS: dict[str, tuple[Damage, str]] = {
    "a restored file differs": (flip_a_byte, "restore_differs"),
    "a restored file is missing": (drop_a_file, "restore_differs"),
    "a branch moved": (move_a_branch, "user_state_changed"),
    "the index changed": (touch_the_index, "user_state_changed"),
    "an over-cap file left out of the report": (hide_an_oversized_file, "oversize_not_reported"),
}


# --- main ---------------------------------------------------------------------------------------


def add_replay(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--replay", type=int, metavar="SEED", help="rebuild and check one tree")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(__doc__ or "", SIZES, argv, extra=add_replay)
    if args.replay is not None:
        seeds = [args.replay]
    elif args.self_test:
        seeds = case_seeds(args.seed, len(FAULTS))
    else:
        seeds = case_seeds(args.seed, args.cases)
    args.cases = len(seeds)
    log(f"snapshot_fuzz: seed {args.seed}, {args.cases} trees")
    tally = Tally("snapshot_fuzz", args.seed, KINDS)
    faults = list(FAULTS.items())
    with scratch("snapshot-fuzz", args.keep) as root:
        for number, seed in enumerate(seeds, start=1):
            case = Case(number, seed, root)
            damage = faults[number - 1][1][0] if args.self_test else None
            found = check_case(case, tally, damage)
            if args.self_test:
                name, (_, kind) = faults[number - 1]
                tally.count("faults injected")
                if kind not in found:
                    tally.count("faults missed")
                    log(f"SELF-TEST: {name!r} was not caught")
            if args.replay is not None or found:
                log(f"{case.where()} edits: " + "; ".join(case.edits))
            if args.replay is None and not found and not args.keep:
                shutil.rmtree(case.repo, ignore_errors=True)
                shutil.rmtree(case.restored, ignore_errors=True)
            if number % 50 == 0:
                log(f"{number} trees, {sum(tally.violations.values())} violations")
        if args.replay is not None and args.keep:
            log(f"tree: {root / 'tree-1'}, restored: {root / 'restored-1'}")
    return tally.report(args, FIGURES)


if __name__ == "__main__":
    sys.exit(main(None))
