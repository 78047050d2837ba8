"""``cairn fleet prune``: remove a ticket's worktree only when nothing in it exists nowhere else.

For each worktree: refuse while a run works in it, while it is locked, or mid-rebase/merge;
snapshot it (``refs/cairn/wip/<ticket>``, taken even when nothing changed, so the worktree's
HEAD is held by the snapshot ref); then prove, independently of the snapshot code, that every
uncommitted file is in the snapshot (same content) and that every commit of the worktree's HEAD
and branch is on another branch, a remote-tracking ref or the snapshot ref. Only then run the
``before_remove`` hook (failing: the worktree is kept), snapshot and prove again (the hook may
have written files), and ``git worktree remove`` it. The branch is kept. Ignored files are not
work (git's own rule for a clean worktree) and go with it. The main work tree and the object
store are never touched.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple

from msgspec import Struct, field
from msgspec.structs import replace

from cairn import tickets
from cairn.config.records import Config
from cairn.errors import BadInput
from cairn.faults import crash_at
from cairn.fleet import fleetstate, gitworktree, hooks, workspaces
from cairn.fleet.gitworktree import Worktree, branch_of, same_path
from cairn.fleet.trackers.dir import is_finished
from cairn.git import Deadline, Repo
from cairn.state.layout import Layout
from cairn.util.durations import parse_duration
from cairn.util.text import counted, human_bytes

if TYPE_CHECKING:
    from cairn.wip.models import Skipped
    from cairn.wip.recording import Prepared

PruneAction = Literal["removed", "would_remove", "refused", "kept", "absent"]
SHOWN = 20  # paths and commits listed in a refusal
_IN_PROGRESS = {
    "rebase-merge": "a rebase",
    "rebase-apply": "a rebase or `git am`",
    "MERGE_HEAD": "a merge",
    "CHERRY_PICK_HEAD": "a cherry-pick",
    "REVERT_HEAD": "a revert",
    "BISECT_LOG": "a bisect",
}


class PruneReport(Struct, frozen=True, kw_only=True):
    ticket: str
    action: PruneAction
    worktree: str | None = None
    branch: str
    snapshot: str | None = None  # the snapshot that holds the worktree (taken now)
    head: str | None = None  # the worktree's HEAD, which the snapshot holds too
    saved_files: int | None = None  # its uncommitted files, all in the snapshot
    uncommitted: list[str] = field(default_factory=list)  # files no snapshot holds
    unsaved_commits: list[str] = field(default_factory=list)  # commits on no other ref
    freed_bytes: int = 0
    reason: str | None = None  # why refused or kept


class _Refused(Exception):
    def __init__(
        self,
        reason: str,
        files: list[str] | None = None,
        commits: list[str] | None = None,
        snapshot: str | None = None,
    ):
        super().__init__(reason)
        self.reason, self.files, self.commits = reason, files or [], commits or []
        self.snapshot = snapshot


def prune(
    repo: Repo, config: Config, ticket: str, *, dry_run: bool, layout: Layout | None = None
) -> PruneReport:
    """Remove ``ticket``'s worktree when that loses nothing; otherwise say why not."""
    tickets.validate(ticket)
    with workspaces.worktrees_locked(repo):
        entry = workspaces.find(repo, config, ticket)
        base = PruneReport(ticket=ticket, action="absent", branch=branch_of(ticket))
        if entry is None:
            if not dry_run:
                gitworktree.prune_records(repo)  # only records whose directory is gone
                if layout is not None:  # a prune killed after the removal left it named
                    _forget_worktree(layout, ticket)
            return base
        report = replace(base, worktree=str(entry.path))
        try:
            held = _check(repo, config, ticket, entry, layout, dry_run)
        except _Refused as refused:
            return replace(
                report,
                action="refused",
                reason=refused.reason,
                uncommitted=refused.files,
                unsaved_commits=refused.commits,
                snapshot=refused.snapshot,
            )
        report = replace(report, **held._asdict())
        if dry_run:
            return replace(report, action="would_remove")
        hook = hooks.run_hook("before_remove", entry.path, config, ticket=ticket)
        if not hook.ok:
            why = hook.describe("before_remove", hooks.timeout_text(config))
            return replace(report, action="kept", reason=f"{why}; kept")
        try:
            held = _check(repo, config, ticket, entry, layout, dry_run)
        except _Refused as refused:
            return replace(
                report,
                action="refused",
                reason=f"after before_remove: {refused.reason}",
                uncommitted=refused.files,
                unsaved_commits=refused.commits,
                snapshot=refused.snapshot,
            )
        before = _disk_use(entry.path) + _disk_use(_git_dir(entry.path))
        main = gitworktree.main_toplevel(repo)
        gitworktree.remove(repo._replace(git=repo.git.replace(cwd=main)), entry.path)
        crash_at("fleet.worktree_removed")
        after = _disk_use(entry.path)
        if layout is not None:
            _forget_worktree(layout, ticket)
        update = {**held._asdict(), "action": "removed", "freed_bytes": before - after}
        return replace(report, **update)


def known(repo: Repo, config: Config, layout: Layout, ticket: str) -> str:
    """``ticket`` when the fleet knows it (a record, or a worktree), else bad input naming
    the tickets it has."""
    if fleetstate.read(layout, ticket) is None and workspaces.find(repo, config, ticket) is None:
        names = [n for n in layout.list_fleet_tickets() if tickets.problem(n) is None]
        start = "cairn fleet start runs the plans in the queue"
        raise tickets.unknown(ticket, sorted(names), "cairn fleet status", "fleet ticket", start)
    return ticket


def finished_tickets(layout: Layout, config: Config, warnings: list[str]) -> list[str]:
    """The tickets whose fleet record says they are done for good; ``warnings``: the records
    that cannot be read."""
    return [r.ticket for r in fleetstate.listing(layout, warnings) if is_finished(r, config)]


class _Held(NamedTuple):
    """What the snapshot taken before a removal holds (``PruneReport``'s fields)."""

    snapshot: str | None  # None in a dry run: not taken
    head: str | None
    saved_files: int


def _check(
    repo: Repo,
    config: Config,
    ticket: str,
    entry: Worktree,
    layout: Layout | None,
    dry_run: bool,
) -> _Held:
    """Refuse (``_Refused``) unless removing ``entry`` loses nothing; what the snapshot holds."""
    path = entry.path
    for other in (repo.common_dir, gitworktree.main_toplevel(repo)):
        if (
            same_path(other, path)
            or Path(os.path.realpath(path)) in Path(os.path.realpath(other)).parents
        ):
            raise _Refused(f"{other} is inside {path}; cairn never removes it")
    if entry.locked is not None:
        raise _Refused(f"the worktree is locked ({entry.locked or 'no reason given'})")
    if layout is not None:
        _refuse_live(layout, config, ticket, path)
    here = Repo.discover(path)
    for name, what in _IN_PROGRESS.items():
        if (here.git_dir / name).exists():
            raise _Refused(f"{what} is in progress in {path}; finish or abort it first")
    prepared, commit = _snapshot(here, config, ticket, dry_run)
    head = prepared.head
    files = _not_in(here, prepared.tree)
    commits = _unsaved_commits(here, config, ticket, head, commit)
    if files or commits:
        reason = _refusal(files, commits, prepared.skipped, config)
        raise _Refused(reason, files, commits, commit)
    return _Held(commit, head, prepared.files_changed)


# Why a snapshot left an untracked path out, and the key that would let it in.
_LEFT_OUT = {
    "too_large": ("over the size cap of {cap} set by snapshot.max_new_file_bytes", "file_bytes"),
    "over_budget": ("over the budget set by snapshot.max_new_files and max_new_bytes", "budget"),
    "nested_repo": ("a repository of its own, which no snapshot holds", None),
    "special_file": ("not a regular file, which no snapshot holds", None),
}


def _refusal(files: list[str], commits: list[str], skipped: list[Skipped], config: Config) -> str:
    """Why a worktree stays, in one line: what would be lost, why the snapshot could not hold
    it, and what to do (``problem; fix``)."""
    problems, why, raise_keys = [], [], []
    if files:
        problems.append(f"{counted(len(files), 'uncommitted file')} in no snapshot")
        cap = human_bytes(config.snapshot.max_new_file_bytes)
        for item in skipped:
            held_back = [f for f in files if f == item.path or f.startswith(item.path + "/")]
            if held_back:
                text, key = _LEFT_OUT[item.reason]
                why.append(f"{item.path} is {text.format(cap=cap)}")
                raise_keys += [key] if key and key not in raise_keys else []
    if commits:
        problems.append(f"{counted(len(commits), 'commit')} on no other branch or remote")
    line = " and ".join(problems) + (f" ({', '.join(why[:3])})" if why else "")
    fixes = []
    if files:
        fixes.append("commit the files or move them out of the worktree")
        if "file_bytes" in raise_keys:
            fixes[-1] += " (or raise snapshot.max_new_file_bytes)"
        elif "budget" in raise_keys:
            fixes[-1] += " (or raise snapshot.max_new_files or max_new_bytes)"
    if commits:
        fixes.append("push the commits or put a branch on them")
    return f"{line}; {', '.join(fixes)}, then prune again"


def _refuse_live(layout: Layout, config: Config, ticket: str, path: Path) -> None:
    from cairn.state.sharing import live_runs_here
    from cairn.util.procs import pid_alive

    record = fleetstate.read(layout, ticket)
    if record is not None and record.state == "running" and record.pid and pid_alive(record.pid):
        raise _Refused(f"ticket {ticket} is running (pid {record.pid}); stop it first")
    live = live_runs_here(layout, path, "", parse_duration(config.marker.stale_after))
    if live:
        raise _Refused(f"ticket {live[0].ticket} is running in it ({live[0].detail})")


def _snapshot(
    here: Repo, config: Config, ticket: str, dry_run: bool
) -> tuple[Prepared, str | None]:
    """The worktree's snapshot trees (written either way) and the snapshot commit: recorded
    (even of a clean tree, so it holds HEAD) unless ``dry_run``."""
    from cairn.errors import SaveTimeout
    from cairn.wip.preparing import prepare
    from cairn.wip.recording import record
    from cairn.wip.scratch import scratch_dir

    deadline = Deadline(config.agent.cutoff_timeout_ms / 1000)
    try:
        with scratch_dir(here.state_root(), "save") as scratch:
            prepared = prepare(here, config, scratch, ticket, deadline)
            if dry_run:
                return prepared, None
            saved = record(prepared, "before prune", None, deadline, force=True)
    except SaveTimeout as exc:
        raise _Refused(f"the snapshot did not finish ({exc})") from None
    return prepared, saved.commit


def _not_in(here: Repo, tree: str) -> list[str]:
    """Uncommitted paths whose content the snapshot tree does not hold: tracked files that
    differ from it (dirty submodules included) and untracked files missing from it or holding
    other bytes."""
    git = here.git
    out = git.run(
        [
            "diff",
            "--name-only",
            "-z",
            "--no-renames",
            "--diff-filter=d",
            "--ignore-submodules=none",
            tree,
            "--",
        ]
    ).stdout
    missing = {os.fsdecode(p) for p in out.split(b"\0") if p}
    out = git.run(["ls-files", "-z", "--others", "--exclude-standard"]).stdout
    untracked = [os.fsdecode(p) for p in out.split(b"\0") if p]
    if untracked:
        held = _tree_blobs(here, tree, untracked)
        present = [p for p in untracked if p in held]
        missing.update(p for p in untracked if p not in held)
        if present:
            payload = "".join(f"{p}\n" for p in present).encode()
            hashed = git.out(["hash-object", "--stdin-paths"], input=payload).split()
            missing.update(p for p, oid in zip(present, hashed, strict=True) if held[p] != oid)
    return sorted(missing)


def _tree_blobs(here: Repo, tree: str, paths: list[str]) -> dict[str, str]:
    """path → blob id in ``tree``, for those of ``paths`` the tree holds as a file."""
    asked = [p for p in paths if "\n" not in p]  # a name with a newline cannot be asked for
    payload = "".join(f"{tree}:{p}\n" for p in asked).encode("utf-8", "surrogateescape")
    out = here.git.out(["cat-file", "--batch-check=%(objectname) %(objecttype)"], input=payload)
    found: dict[str, str] = {}
    for name, line in zip(asked, out.splitlines(), strict=True):
        oid, _, kind = line.partition(" ")
        if kind == "blob":
            found[name] = oid
    return found


def _unsaved_commits(
    here: Repo, config: Config, ticket: str, head: str | None, snapshot: str | None
) -> list[str]:
    """Commits of the worktree's HEAD and of ``cairn/<ticket>`` that no other branch, no
    remote-tracking ref and not the snapshot (or, in a dry run, the snapshot that would hold
    HEAD) reaches."""
    from cairn.wip.naming import wip_ref

    branch = f"refs/heads/{branch_of(ticket)}"
    tips = [t for t in (head, gitworktree.branch_tip(here, branch_of(ticket))) if t]
    if not tips:
        return []
    refs = here.git.out(["for-each-ref", "--format=%(refname)", "refs/heads", "refs/remotes"])
    others = [r for r in refs.splitlines() if r and r != branch]
    anchors = [*others, wip_ref(config, ticket) if snapshot is None else snapshot]
    if snapshot is None and head:
        anchors.append(head)  # a dry run: the snapshot prune takes would hold HEAD
    existing = [a for a in anchors if _resolves(here, a)]
    lines = [*tips, *(f"^{a}" for a in existing)]
    out = here.git.out(["rev-list", "--stdin"], input="".join(f"{x}\n" for x in lines).encode())
    return out.split()


def _resolves(here: Repo, name: str) -> bool:
    args = ["rev-parse", "-q", "--verify", "--end-of-options", f"{name}^{{commit}}"]
    return here.git.run(args, check=False).ok


def _git_dir(path: Path) -> Path | None:
    try:
        return Repo.discover(path).git_dir
    except BadInput:
        return None


def _disk_use(path: Path | None) -> int:
    """Bytes allocated under ``path`` (links not followed, each inode counted once)."""
    if path is None or not os.path.lexists(path):
        return 0
    seen: set[tuple[int, int]] = set()
    total = 0
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def _forget_worktree(layout: Layout, ticket: str) -> None:
    record = fleetstate.read(layout, ticket)
    if record is not None and record.worktree is not None and not Path(record.worktree).exists():
        fleetstate.write(layout, replace(record, worktree=None, updated=datetime.now(UTC)))
