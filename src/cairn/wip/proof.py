"""The proof of a no-op: what a save found, kept so that the next save of the same work tree can
answer "nothing changed since the last snapshot" from its ``git status`` alone, without loading
the stat cache, reading objects or building trees (``cairn.wip.saving``, the only reader and
writer).

A snapshot is a function of HEAD, the index entries and work-tree files ``git status`` lists,
the untracked files it lists, the config (cairn's and git's) and the attributes that decide how
git filters a file. The proof holds one digest of all of it, the **key**: the status output
itself, the ``lstat`` of every path it lists, of the ``.gitattributes`` of their directories, of
git's config and attributes files and of ``cairn.toml`` / ``pyproject.toml``, with cairn's
version, the work tree's paths and the save's ``--ticket`` and ``--run``. It says which ref the
save left at which snapshot (or that there was none to leave). A later save whose key is the
same, and whose ref still holds that snapshot, would build the same trees and record nothing.

A proof is written only when it cannot lie (see docs/snapshots.md):

- every file it stats is older than the save's stamp (a filesystem time taken before the save
  read any file) by more than ``RACY_WINDOW_NS``, by mtime and ctime: a file changed while it
  was read, or within the timestamp granularity of a change, keeps the next save on the full
  path (git's racy rule, as in the stat cache);
- the status lists no submodule change, no conflict and no nested repository, and the save
  skipped nothing and warned of nothing (their report is more than one line);
- the save used the config of the work tree, not one passed in.

It is used only while the ref reads as it did (a loose ref, else ``packed-refs``; a reftable
repository is never proven) and no ``<ref>.lock`` is left beside it. A proof that is missing,
unreadable, from another version or for another state is ignored without a word. The key is
computed once a save, from the status it read, before it reads any file.
"""

from __future__ import annotations

import os

from cairn import __version__
from cairn.defaults import CONFIG_FILES
from cairn.git.status import entries
from cairn.util.digests import sha1

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from cairn.git.discovery import Found

    Key = tuple[str, int]  # (digest, newest mtime or ctime of the files it stats)

FORMAT = "cairn no-op proofs 2"
# git's racy rule, with a window for 1- and 2-second filesystems: every cache of cairn keyed on
# stat data (this proof, the stat cache, cairn status's rows) takes it from here
RACY_WINDOW_NS = 2_000_000_000
MAX_PROOFS = 64  # per work tree: one per --ticket and --run given, the latest kept


class Proof:
    """What a save given ``--ticket`` ``asked`` and ``--run`` ``run`` left: ``ref`` at ``commit``
    (None: no snapshot, the tree was clean), and the rest of its result."""

    __slots__ = (
        "asked",
        "base",
        "branch",
        "commit",
        "files_changed",
        "key",
        "ref",
        "run",
        "ticket",
    )

    def __init__(
        self,
        *,
        key: str,
        asked: str | None,
        run: str | None,
        ref: str,
        commit: str | None,
        ticket: str,
        files_changed: int,
        base: str | None,
        branch: str | None,
    ) -> None:
        self.key, self.asked, self.run = key, asked, run
        self.ref, self.commit, self.ticket = ref, commit, ticket
        self.files_changed, self.base, self.branch = files_changed, base, branch

    def line(self) -> str:
        """One tab-separated line (no field can hold a tab: refs, branch names and ticket ids
        have no control characters)."""
        fields = [self.key, self.asked, self.run, self.ref, self.commit, self.ticket]
        fields += [str(self.files_changed), self.base, self.branch]
        return "\t".join(field or "" for field in fields)

    @classmethod
    def parse(cls, line: str) -> Proof | None:
        fields = line.split("\t")
        if len(fields) != 9:
            return None
        key, asked, run, ref, commit, ticket, files, base, branch = fields
        if not (files.isdigit() and key and ref and ticket):
            return None
        return cls(
            key=key,
            asked=asked or None,
            run=run or None,
            ref=ref,
            commit=commit or None,
            ticket=ticket,
            files_changed=int(files),
            base=base or None,
            branch=branch or None,
        )


def location(found: Found) -> str:
    """The work tree's proofs: one file per worktree, in the state root's cache."""
    name = sha1(os.fsencode(found.git_dir)).hexdigest()[:16]
    return os.path.join(found.common_dir, "cairn", "cache", f"noop-{name}")


def _lines(found: Found) -> list[str]:
    """The work tree's proofs as lines, oldest first; none when the file is missing or not
    ours."""
    try:
        with open(location(found), "rb") as handle:
            lines = os.fsdecode(handle.read(1 << 20)).split("\n")
    except (OSError, ValueError):
        return []
    if lines[:2] != [FORMAT, __version__] or lines[-1]:
        return []
    return lines[2:-1]


def _given(ticket: str | None, run: str | None) -> str:
    """The start of the lines of proofs for this ``--ticket`` and ``--run``, after the key."""
    return f"\t{ticket or ''}\t{run or ''}\t"


def read(found: Found, ticket: str | None, run: str | None) -> Proof | None:
    """The proof of the last save given this ``--ticket`` and ``--run``."""
    given = _given(ticket, run)
    for line in reversed(_lines(found)):
        if line[line.find("\t") :].startswith(given):
            return Proof.parse(line)
    return None


def key(found: Found, status: bytes, ticket: str | None, run: str | None) -> Key | None:
    """The digest of everything a save's answer depends on, and the newest mtime or ctime of
    the files it stats (for the racy rule); None when the status lists what a proof does not
    cover."""
    digest = sha1()
    for part in (FORMAT, __version__, found.toplevel, found.git_dir, found.common_dir):
        digest.update(os.fsencode(part) + b"\0")
    digest.update(f"{ticket}\0{run}\0".encode("utf-8", "surrogateescape"))
    digest.update(status + b"\0")
    top = os.fsencode(found.toplevel) + b"/"
    paths: list[bytes] = []
    for kind, record, path in entries(status):
        if kind == b"#":
            continue
        untracked_file = kind == b"?" and not path.endswith(b"/")
        if not (untracked_file or (kind == b"1" and record.split(b" ", 3)[2].startswith(b"N"))):
            return None  # a submodule, a conflict, a nested repository, a rename
        paths.append(path)
    newest = 0
    files = [top + p for p in paths]
    files += attribute_files(top, paths)
    files += [os.fsencode(f) for f in config_files(found.git_dir, found.common_dir)]
    files += [top + os.fsencode(name) for name in CONFIG_FILES]
    lines = []  # one line a file: its path, and its signature or "-" when it cannot be stated
    for file in files:
        try:
            st = os.lstat(file)
        except OSError:
            lines.append(file + b"\0-\n")
            continue
        mtime, ctime = st.st_mtime_ns, st.st_ctime_ns
        newest = max(newest, mtime, ctime)
        signature = (file, st.st_size, mtime, ctime, st.st_ino, st.st_mode)
        lines.append(b"%s\0(%d, %d, %d, %d, %d)\n" % signature)
    digest.update(b"".join(lines))
    return digest.hexdigest(), newest


def config_present(toplevel: str) -> bool:
    """Whether a file at the top of the work tree may hold cairn's config (``CONFIG_FILES``,
    as ``cairn.config`` reads them); without one the config is the defaults, and a save asks
    the proof without loading it."""
    return any(os.path.lexists(os.path.join(toplevel, name)) for name in CONFIG_FILES)


def attribute_files(top: bytes, paths: Iterable[bytes]) -> list[bytes]:
    """The ``.gitattributes`` that can apply to ``paths``: one in each of their directories."""
    directories = {b""}
    for parent in {os.path.dirname(path) for path in paths}:
        while parent not in directories:
            directories.add(parent)
            parent = os.path.dirname(parent)
    return [os.path.join(top, d, b".gitattributes") for d in sorted(directories)]


def config_files(git_dir: str, common_dir: str) -> list[str]:
    """git's config and attributes files that decide how git reads a work-tree file."""
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    return [
        os.path.join(common_dir, "config"),
        os.path.join(git_dir, "config.worktree"),
        os.path.join(common_dir, "info", "attributes"),
        os.path.join(home, ".gitconfig"),
        os.path.join(xdg, "git", "config"),
        os.path.join(xdg, "git", "attributes"),
        "/etc/gitconfig",
    ]


def holds(found: Found, now: Key | None, ticket: str | None, run: str | None) -> Proof | None:
    """The proof for this ``--ticket`` and ``--run`` when it proves a save now (whose ``key``
    is ``now``) would record nothing: the same key, and its ref still where the save left
    it."""
    proof = read(found, ticket, run) if now is not None else None
    if proof is None or now is None or now[0] != proof.key:
        return None
    ref_path = os.path.join(found.common_dir, proof.ref)
    if os.path.lexists(ref_path + ".lock"):
        return None  # the full save clears what a killed git left, and says so
    at = ref_value(found.common_dir, proof.ref)
    if at is False or at != proof.commit:
        return None
    return proof


def unchanged_line(ref: str, commit: str | None) -> str:
    """What ``cairn wip save`` says when it recorded nothing."""
    if commit:
        return f"nothing changed since the last snapshot {commit:.12} of {ref}"
    return "nothing to save: the work tree is clean and there is no earlier snapshot"


def write(found: Found, now: Key | None, stamp: int, proof: Proof) -> None:
    """Keep ``proof`` with the key ``now`` (the save's, computed before it read any file) in
    place of the last one for the same ``--ticket`` and ``--run``, when no file it stats is
    racy against ``stamp``; otherwise, and when the status lists what a proof does not cover
    (``now`` is None), drop that last one. The file is a cache: written atomically, without
    fsync; at most ``MAX_PROOFS`` are kept."""
    from pathlib import Path

    from cairn.errors import BadInput
    from cairn.util import durable

    given = _given(proof.asked, proof.run)
    kept = [line for line in _lines(found) if not line[line.find("\t") :].startswith(given)]
    if now is not None and now[1] < stamp - RACY_WINDOW_NS:
        proof.key = now[0]
        kept.append(proof.line())
    path = Path(location(found))
    lines = [FORMAT, __version__, *kept[-MAX_PROOFS:]]
    try:
        durable.ensure_dir(path.parent)
        durable.atomic_write(path, os.fsencode("\n".join(lines) + "\n"), fsync=False)
    except (OSError, BadInput):  # BadInput: a symlink or a file where its directory goes
        pass  # a proof that cannot be written is simply not used


def ref_value(common_dir: str, ref: str) -> str | bool | None:
    """The object ``ref`` names, read from its loose file or ``packed-refs``; None when it does
    not exist, False when that cannot be told this way (a reftable repository, a symbolic or
    unreadable ref)."""
    if os.path.isdir(os.path.join(common_dir, "reftable")):
        return False
    try:
        with open(os.path.join(common_dir, ref), "rb") as handle:
            value = handle.read(200).strip().decode("ascii")
        return value if value and all(c in "0123456789abcdef" for c in value) else False
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError):
        return False
    wanted = b" " + os.fsencode(ref)
    try:
        with open(os.path.join(common_dir, "packed-refs"), "rb") as handle:
            for line in handle:
                line = line.rstrip(b"\n")
                if line.endswith(wanted) and line[:1] not in (b"#", b"^"):
                    return line[: -len(wanted)].decode("ascii", "replace")
    except FileNotFoundError:
        return None
    except OSError:
        return False
    return None
