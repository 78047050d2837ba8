"""Reading commit objects in one ``git cat-file --batch`` process."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cairn.git import Deadline, Git


@dataclass(frozen=True)
class CommitObject:
    oid: str
    tree: str
    parents: tuple[str, ...]
    committer_time: int
    message: str


def read_commits(
    git: Git, names: Sequence[str], deadline: Deadline | None = None
) -> list[CommitObject | None]:
    """The commits that ``names`` resolve to, None for a missing name or a non-commit."""
    if not names:
        return []
    payload = "".join(f"{name}\n" for name in names).encode()
    out = git.run(["cat-file", "--batch"], input=payload, deadline=deadline).stdout
    found: list[CommitObject | None] = []
    pos = 0
    for _ in names:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if len(header) != 3:
            found.append(None)
            continue
        oid, kind, size = header[0].decode(), header[1], int(header[2])
        body = out[pos : pos + size]
        pos += size + 1
        found.append(parse_commit(oid, body) if kind == b"commit" else None)
    return found


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
