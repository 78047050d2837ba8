"""cairn's own stat cache: the blobs of the work-tree files a snapshot hashes, kept per worktree so
that the next snapshot does not read and hash an unchanged file again.

git's index holds stat data for tracked files only. Untracked files, and tracked files that
differ from the index, were hashed again by every snapshot; for 1,000 untracked files that was
most of a no-op save. This cache is the index for those files: path → (size, mtime, ctime,
inode, mode) → blob id, plus the trees the last snapshot built from them.

It lives in ``<state root>/cache/hashes-<worktree>.json`` (one per worktree; the id is a hash of
the worktree's git directory). It is rewritten after a save that hashed something, through
``durable.atomic_write`` but without fsync: a cache lost in a crash only costs a rehash.

An entry is used only when all of these hold, otherwise the file is hashed as before:

- the file's ``lstat`` equals the entry's (size, mtime, ctime, inode and mode, nanoseconds);
- it is not racy: its mtime is more than ``RACY_WINDOW_NS`` before the cache's stamp, a
  filesystem time taken before the save read any file. A file changed after it was read gets a
  later mtime, so it cannot match; the window also covers filesystems with 1- or 2-second
  timestamps (git's rule, taken before the read instead of at the index write, plus the window);
- git would filter the file the same way: the ``.gitattributes`` of its directories, the
  repository's and the user's attributes and config files have the stat they had;
- its blob cannot be missing: the cache is anchored to snapshots whose trees hold every cached
  blob (the last snapshots saved or matched, up to ``MAX_ANCHORS``, while no new blob came in),
  and trusted as is while one of their refs still points at it, so ``git gc`` cannot have pruned
  the blobs; otherwise they are checked with one ``git cat-file --batch-check``.

A corrupt, unreadable or older cache file is ignored and replaced, without a word.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cairn.errors import BadInput
from cairn.git import Deadline, Git, Repo
from cairn.util import durable
from cairn.util.digests import sha1
from cairn.wip.proof import RACY_WINDOW_NS, attribute_files, config_files

FORMAT = 2
MAX_ANCHORS = 8
Signature = tuple[int, int, int, int, int]  # size, mtime_ns, ctime_ns, inode, mode
Edits = dict[bytes, tuple[str, str] | None]


def signature(st: os.stat_result) -> Signature:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)


def _stat_of(path: str) -> list[int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino]


def digest(base_tree: str | None, edits: Edits) -> str:
    """What a tree is built from: a base tree and path edits."""
    h = sha1()
    h.update(f"{base_tree}\n".encode())
    for path in sorted(edits):
        h.update(path + b"\0" + repr(edits[path]).encode() + b"\n")
    return h.hexdigest()


class HashCache:
    def __init__(self, repo: Repo, stamp: int) -> None:
        key = sha1(os.fsencode(repo.git_dir)).hexdigest()[:16]
        self.path = repo.state_root() / "cache" / f"hashes-{key}.json"
        self.top = os.fsencode(repo.toplevel)
        self.config_files = config_files(os.fspath(repo.git_dir), os.fspath(repo.common_dir))
        self.stamp = stamp  # of this save: entries hashed now are judged against it
        self.old: dict[bytes, tuple[Signature, str]] = {}
        self.new: dict[bytes, tuple[Signature, str]] = {}
        self.anchors: dict[str, str] = {}  # ref → snapshot commit whose tree holds every blob
        self.trees: dict[str, list[str]] = {}
        self.modes: list[bool] | None = None
        self.hashed = False  # a new blob came in: only this save's snapshot holds them all
        self.changed = False

    @classmethod
    def load(cls, repo: Repo, stamp: int) -> HashCache:
        cache = cls(repo, stamp)
        try:
            data = json.loads(cache.path.read_bytes())
            if data.get("format") != FORMAT:
                raise ValueError("another format")
            if data["fingerprint"] != cache._fingerprint(p for p, *_ in data["entries"]):
                raise ValueError("attributes or config changed")
            limit = int(data["stamp"]) - RACY_WINDOW_NS
            for path, size, mtime, ctime, ino, mode, oid in data["entries"]:
                if mtime < limit:  # a racy entry is dirty: hash the file again
                    cache.old[os.fsencode(path)] = ((size, mtime, ctime, ino, mode), str(oid))
            cache.anchors = {str(ref): str(commit) for ref, commit in data["anchors"].items()}
            cache.trees = {k: [str(d), str(t)] for k, (d, t) in data["trees"].items()}
            cache.modes = data["modes"]
        except Exception:  # missing, unreadable, corrupt, older: start afresh, say nothing
            return cls(repo, stamp)
        return cache

    def _fingerprint(self, paths: Iterable[str]) -> list[Any]:
        """Stat of every file that decides how git filters the cached paths."""
        found: list[Any] = [[f, _stat_of(f)] for f in self.config_files]
        for name in attribute_files(self.top, (os.fsencode(path) for path in paths)):
            found.append([os.fsdecode(name), _stat_of(os.fsdecode(name))])
        return found

    # --- use ---------------------------------------------------------------------------------

    def verify(self, git: Git, anchored: bool, deadline: Deadline | None) -> None:
        """Keep the entries only if their blobs are sure to be in the object store: an anchor
        ref still points at its snapshot (``anchored``, which the caller read), or
        ``cat-file --batch-check`` finds every blob."""
        if not self.old or anchored:
            return  # a reachable snapshot's tree holds every cached blob
        oids = sorted({oid for _, oid in self.old.values()})
        payload = "".join(f"{oid}\n" for oid in oids).encode()
        out = git.run(["cat-file", "--batch-check"], input=payload, deadline=deadline)
        if any(line.endswith(b" missing") for line in out.stdout.splitlines()):
            self.old.clear()  # pruned by gc: hash again
            self.trees.clear()

    def blob(self, path: bytes, st: os.stat_result) -> str | None:
        """The blob of ``path`` if the cache knows it for exactly this lstat."""
        found = self.old.get(path)
        if found is None or found[0] != signature(st):
            return None
        self.new[path] = found
        return found[1]

    def remember(self, path: bytes, st: os.stat_result, oid: str) -> None:
        self.new[path] = (signature(st), oid)
        self.hashed = True

    def tree(self, kind: str, key: str, existing: set[str]) -> str | None:
        """The tree built last time from the same inputs, if it is one of ``existing``."""
        found = self.trees.get(kind)
        if found is None or found[0] != key or found[1] not in existing:
            return None
        return found[1]

    def remember_tree(self, kind: str, key: str, tree: str) -> None:
        if self.trees.get(kind) != [key, tree]:
            self.trees[kind] = [key, tree]
            self.changed = True

    def remember_modes(self, modes: list[bool]) -> None:
        if self.modes != modes:
            self.modes = modes
            self.changed = True

    # --- save ----------------------------------------------------------------------------------

    def save(self, ref: str, commit: str) -> None:
        """Write what this snapshot hashed, anchored to ``commit`` (at ``ref``), the snapshot
        that holds it all; earlier anchors still hold it all when no new blob came in."""
        anchors = {} if self.hashed else {r: c for r, c in self.anchors.items() if r != ref}
        anchors[ref] = commit
        anchors = dict(list(anchors.items())[-MAX_ANCHORS:])
        unchanged = anchors == self.anchors and self.new.keys() == self.old.keys()
        if unchanged and not (self.changed or self.hashed):
            return
        names = {path: os.fsdecode(path) for path in self.new}
        entries = [[names[path], *sig, oid] for path, (sig, oid) in sorted(self.new.items())]
        data = {
            "format": FORMAT,
            "stamp": self.stamp,
            "anchors": anchors,
            "fingerprint": self._fingerprint(names.values()),
            "modes": self.modes,
            "trees": self.trees,
            "entries": entries,
        }
        try:
            durable.ensure_dir(self.path.parent)
            durable.atomic_write(self.path, json.dumps(data), fsync=False)
        except (OSError, BadInput):  # BadInput: a symlink or a file where its directory goes
            pass  # a cache that cannot be written is a cache that is not used


def stamp_now(scratch: Path) -> int:
    """The filesystem's time now, in nanoseconds (the clock file times come from)."""
    marker = scratch / "stamp"
    marker.write_bytes(b"")
    return marker.stat().st_mtime_ns
