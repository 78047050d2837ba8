"""Writing trees from a base tree plus path edits, touching only the changed directories.

``update-index`` + ``write-tree`` on a copy of the index read and rewrite the whole index, twice;
on a 100k-file repository that alone costs about half a ``git status``. Here new blobs come from
one ``hash-object`` process, the base directories on the changed paths from one ``cat-file``
process and the new trees from one ``mktree`` process, so the cost follows the change, not the
repository.
"""

from __future__ import annotations

import os
import stat
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from cairn.git import Deadline, Git
from cairn.git.sessions import Session
from cairn.wip.objects import ObjectReader

if TYPE_CHECKING:
    from cairn.wip.hashcache import HashCache

TREE_MODE = "040000"
EMPTY_TREE = {
    "sha1": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    "sha256": "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321",
}

Entry = tuple[str, str]  # (mode, oid)
Edit = Entry | None  # None removes the path


def quote(path: bytes) -> bytes:
    """C-style quoting, as git's line-oriented ``--stdin`` readers unquote it."""
    if not path or (path[:1] != b'"' and not any(b < 0x20 or b == 0x7F for b in path)):
        return path
    out = bytearray(b'"')
    for byte in path:
        if byte in (0x22, 0x5C):
            out += b"\\" + bytes([byte])
        elif byte < 0x20 or byte == 0x7F:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    return bytes(out + b'"')


class Known(NamedTuple):
    """What git already said of a path: its mode in the index, and the mode ``git status``
    derived from the work tree (which honours ``core.fileMode`` and ``core.symlinks``)."""

    index_mode: str | None
    status_mode: str | None


class WorktreeModes(NamedTuple):
    """How git turns an lstat into a file mode (``core.fileMode``, ``core.symlinks``)."""

    trust_exec_bit: bool = True
    symlinks: bool = True

    @classmethod
    def read(cls, git: Git, deadline: Deadline | None) -> WorktreeModes:
        out = git.run(
            ["config", "-z", "--type=bool", "--get-regexp", r"^core\.(filemode|symlinks)$"],
            check=False,
            deadline=deadline,
        ).stdout.decode()
        values = dict(item.split("\n", 1) for item in out.split("\0") if "\n" in item)
        return cls(
            trust_exec_bit=values.get("core.filemode", "true") == "true",
            symlinks=values.get("core.symlinks", "true") == "true",
        )

    def mode(self, st: os.stat_result, index_mode: str | None) -> str | None:
        """The mode git would record for this lstat; None when git would not store the path."""
        if stat.S_ISLNK(st.st_mode):
            return "120000"
        if not stat.S_ISREG(st.st_mode):
            return None
        if not self.symlinks and index_mode == "120000":
            return "120000"
        if not self.trust_exec_bit:
            return index_mode if index_mode in ("100644", "100755") else "100644"
        return "100755" if st.st_mode & 0o100 else "100644"


def _same_kind(st: os.stat_result, mode: str | None) -> bool:
    if mode in ("100644", "100755"):
        return stat.S_ISREG(st.st_mode)
    return mode == "120000" and stat.S_ISLNK(st.st_mode)


def hash_worktree(
    git: Git,
    top: Path,
    scratch: Path,
    paths: dict[bytes, Known],
    deadline: Deadline | None,
    cache: HashCache | None = None,
    stats: dict[bytes, os.stat_result] | None = None,
) -> dict[bytes, Edit]:
    """Blobs for work-tree paths, written to the store.

    Regular files go through git's clean filters by path, like ``git add``; symlinks store their
    link text. A path that is missing, a directory, or a special file is an edit that removes it.
    The mode is the one ``git status`` reported when the file is still of that kind; otherwise
    it follows the repository's ``core.fileMode``/``core.symlinks`` (read only when needed).
    A regular file the ``cache`` knows for exactly its lstat is not read again. ``stats`` are
    lstats already taken (before the cache's stamp, before any read), to take none twice.
    """
    edits: dict[bytes, Edit] = {}
    files: list[tuple[bytes, str, os.stat_result]] = []
    links: list[tuple[bytes, str]] = []
    modes: WorktreeModes | None = None
    if cache is not None and cache.modes is not None:
        modes = WorktreeModes(*cache.modes)
    root = os.fsencode(top) + b"/"
    for path, known in paths.items():
        st = stats.get(path) if stats else None
        try:
            st = st or os.lstat(root + path)
        except (FileNotFoundError, NotADirectoryError):
            edits[path] = None
            continue
        if _same_kind(st, known.status_mode):
            mode: str | None = known.status_mode
        else:
            if modes is None:
                modes = WorktreeModes.read(git, deadline)
                if cache is not None:
                    cache.remember_modes([modes.trust_exec_bit, modes.symlinks])
            mode = modes.mode(st, known.index_mode)
        if mode is None:
            edits[path] = None
        elif stat.S_ISLNK(st.st_mode):
            links.append((path, mode))
        elif cache is not None and (oid := cache.blob(path, st)) is not None:
            edits[path] = (mode, oid)
        else:
            files.append((path, mode, st))
    blobs = _hash_paths(git, [quote(p) for p, _, _ in files], [], deadline)
    for (path, mode, st), oid in zip(files, blobs, strict=True):
        edits[path] = (mode, oid)
        if cache is not None:
            cache.remember(path, st, oid)
    if links:
        link_files = []
        for i, (path, _) in enumerate(links):
            text = os.readlink(top / os.fsdecode(path))
            link_file = scratch / f"link-{i}"
            link_file.write_bytes(os.fsencode(text))
            link_files.append(quote(os.fsencode(str(link_file))))
        oids = _hash_paths(git, link_files, ["--no-filters"], deadline)
        for (path, mode), oid in zip(links, oids, strict=True):
            edits[path] = (mode, oid)
    return edits


def _hash_paths(
    git: Git, quoted: list[bytes], flags: list[str], deadline: Deadline | None
) -> list[str]:
    if not quoted:
        return []
    payload = b"".join(p + b"\n" for p in quoted)
    out = git.run(["hash-object", "-w", *flags, "--stdin-paths"], input=payload, deadline=deadline)
    oids = out.text.split()
    if len(oids) != len(quoted):
        raise ValueError("hash-object returned an unexpected number of ids")
    return oids


class TreeWriter:
    """Writes trees as a base tree plus path edits: the base directories on the changed paths
    come from ``objects`` (one ``cat-file`` session), the new ones go to one ``mktree --batch``
    session, started on first use. Use as a context manager."""

    def __init__(
        self, git: Git, objects: ObjectReader, object_format: str, deadline: Deadline | None
    ) -> None:
        self._git = git
        self._objects = objects
        self._deadline = deadline
        self._empty = EMPTY_TREE[object_format]
        self._oid_bytes = len(self._empty) // 2
        self._writer: Session | None = None

    def __enter__(self) -> TreeWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._writer is not None:
            self._writer.__exit__(*exc)

    def build(self, base_tree: str | None, edits: dict[bytes, Edit]) -> str:
        """The tree ``base_tree`` becomes with ``edits`` (path → entry, None removes) applied."""
        if not edits:
            return base_tree or self._empty
        changes: dict[bytes, dict[bytes, Edit]] = defaultdict(dict)
        for path, edit in edits.items():
            directory, _, name = path.rpartition(b"/")
            changes[directory][name] = edit
            while directory:
                directory = directory.rpartition(b"/")[0]
                changes.setdefault(directory, {})
        top_down = sorted(changes, key=_depth)

        entries: dict[bytes, dict[bytes, Entry]] = {}
        for directory in top_down:
            oid = base_tree if not directory else _subtree(entries, directory)
            entries[directory] = self._objects.tree(oid, self._oid_bytes) if oid else {}
            for name, edit in changes[directory].items():
                if edit is None:
                    entries[directory].pop(name, None)
                else:
                    entries[directory][name] = edit

        for directory in reversed(top_down):
            if not directory:
                return self._write_tree(entries[b""]) if entries[b""] else self._empty
            parent, _, name = directory.rpartition(b"/")
            if entries[directory]:
                entries[parent][name] = (TREE_MODE, self._write_tree(entries[directory]))
            elif entries[parent].get(name, ("",))[0] == TREE_MODE:
                del entries[parent][name]  # git stores no empty directories
        raise AssertionError("the root directory is always on a changed path")

    def _write_tree(self, tree: dict[bytes, Entry]) -> str:
        if self._writer is None:
            self._writer = self._git.session(["mktree", "--batch", "--missing"], self._deadline)
        lines = [
            f"{mode} {_kind(mode)} {oid}\t".encode() + quote(name) + b"\n"
            for name, (mode, oid) in tree.items()
        ]
        self._writer.send(b"".join(lines) + b"\n")
        return self._writer.readline().decode()


def _depth(directory: bytes) -> int:
    return directory.count(b"/") + 1 if directory else 0


def _subtree(entries: dict[bytes, dict[bytes, Entry]], directory: bytes) -> str | None:
    parent, _, name = directory.rpartition(b"/")
    mode, oid = entries[parent].get(name, ("", ""))
    return oid if mode == TREE_MODE else None


def _kind(mode: str) -> str:
    if mode == TREE_MODE:
        return "tree"
    return "commit" if mode == "160000" else "blob"
