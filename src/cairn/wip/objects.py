"""Reading objects in one ``git cat-file --batch`` process."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from cairn.git import Deadline, Git
from cairn.git.sessions import Session


class CommitObject(NamedTuple):
    oid: str
    tree: str
    parents: tuple[str, ...]
    committer_time: int
    message: str


def read_objects(
    git: Git, names: Sequence[str], deadline: Deadline | None = None
) -> list[tuple[str, str, bytes] | None]:
    """(oid, type, content) for each name; None where the name does not resolve."""
    if not names:
        return []
    payload = "".join(f"{name}\n" for name in names).encode()
    out = git.run(["cat-file", "--batch"], input=payload, deadline=deadline).stdout
    found: list[tuple[str, str, bytes] | None] = []
    pos = 0
    for _ in names:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if len(header) != 3:
            found.append(None)
            continue
        size = int(header[2])
        found.append((header[0].decode(), header[1].decode(), out[pos : pos + size]))
        pos += size + 1
    return found


class ObjectReader:
    """Objects read one at a time from a single ``cat-file --batch`` session, started on first
    use. Use as a context manager."""

    def __init__(self, git: Git, deadline: Deadline | None = None) -> None:
        self._git = git
        self._deadline = deadline
        self._session: Session | None = None

    def __enter__(self) -> ObjectReader:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._session is not None:
            self._session.__exit__(*exc)

    def get(self, name: str) -> tuple[str, str, bytes] | None:
        """(oid, type, content) of ``name``; None when it does not resolve."""
        if self._session is None:
            self._session = self._git.session(["cat-file", "--batch"], self._deadline)
        self._session.send(name.encode() + b"\n")
        header = self._session.readline().split()
        if len(header) != 3:
            return None
        content = self._session.read(int(header[2]) + 1)[:-1]
        return header[0].decode(), header[1].decode(), content

    def commit(self, name: str) -> CommitObject | None:
        found = self.get(name)
        return parse_commit(found[0], found[2]) if found and found[1] == "commit" else None

    def tree(self, oid: str, oid_bytes: int) -> dict[bytes, tuple[str, str]]:
        found = self.get(oid)
        return parse_tree(found[2], oid_bytes) if found and found[1] == "tree" else {}


def read_commits(
    git: Git, names: Sequence[str], deadline: Deadline | None = None
) -> list[CommitObject | None]:
    """The commits that ``names`` resolve to, None for a missing name or a non-commit."""
    return [
        parse_commit(obj[0], obj[2]) if obj and obj[1] == "commit" else None
        for obj in read_objects(git, names, deadline)
    ]


def parse_commit(oid: str, raw: bytes) -> CommitObject:
    head, _, message = raw.partition(b"\n\n")
    tree = ""
    parents: list[str] = []
    when = 0
    for line in head.split(b"\n"):
        key, _, value = line.partition(b" ")
        if key == b"tree":
            tree = value.decode()
        elif key == b"parent":
            parents.append(value.decode())
        elif key == b"committer":
            try:
                when = int(value.rsplit(b" ", 2)[-2])
            except (IndexError, ValueError):
                when = 0
    return CommitObject(oid, tree, tuple(parents), when, message.decode("utf-8", "replace"))


def parse_tree(raw: bytes, oid_bytes: int) -> dict[bytes, tuple[str, str]]:
    """name → (mode, oid) of a raw tree object (``mode SP name NUL binary-oid`` entries)."""
    entries: dict[bytes, tuple[str, str]] = {}
    pos = 0
    while pos < len(raw):
        space = raw.index(b" ", pos)
        nul = raw.index(b"\0", space)
        mode = raw[pos:space].decode().rjust(6, "0")
        entries[raw[space + 1 : nul]] = (mode, raw[nul + 1 : nul + 1 + oid_bytes].hex())
        pos = nul + 1 + oid_bytes
    return entries
