"""The heartbeat's touch of a marker, on the standard library alone.

Claude Code runs ``cairn hook claude heartbeat`` after every tool call: it sets the branch
ticket's marker's ``last_updated`` to now. The full heartbeat (``cairn.integrations.
claude_hooks.heartbeat``) finds the repository, loads the config and the layout, parses and
validates the marker and renders it again, which costs most of its time importing ``typing``,
``pathlib`` and cairn's records. ``touch`` does the same for the usual case without them, and
answers None (the full heartbeat decides) for anything else:

- the repository's paths come from one ``git rev-parse`` started with ``os.posix_spawn``;
- a ``cairn.toml``, or a ``pyproject.toml`` that mentions cairn, can move the state root: None;
- the state root and the ticket directory must be real directories inside the repository's
  git directory (what ``Layout`` requires), the branch readable from ``HEAD``;
- no marker: False, unless ``branches.json`` may map the branch onto another ticket (None);
- the marker is read under the ticket's ``.lock``, as every marker writer holds it, and is
  touched only when it is, byte for byte, the text cairn last rendered into it (every writer
  of a marker keeps its digest, with cairn's version, in ``<state root>/cache/heartbeat-
  <ticket>``: ``remember_marker``) and in the flat shape ``yaml_io`` writes: it is then a valid
  marker, and replacing its ``last_updated`` line gives exactly what rendering the touched
  marker gives. A marker a person edited, or one whose digest was lost, is left to the full
  heartbeat, which validates it, touches it and keeps its digest for the next call.

The result is the full heartbeat's: the same bytes in the marker, the same True or False.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time

from cairn import __version__
from cairn.state.names import BRANCHES, LOCK, MARKER, MARKER_READ_LIMIT
from cairn.util import atomic
from cairn.util.digests import sha1

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from collections.abc import Iterator

    from cairn.git.early import Spawned

LOCK_WAIT = 2.0  # seconds a hook waits for a ticket's lock: it never hangs the agent
CONFIG_FILES = ("cairn.toml", "pyproject.toml")
_FIELD = "last_updated: '"


def touch(workspace: str, discovery: Spawned | None = None) -> bool | None:
    """Set the branch ticket's marker's ``last_updated`` to now: True when it has one (touched),
    False when it has none, None when this path cannot tell and the full heartbeat decides.
    ``discovery``: the repository's discovery, started by the caller (who may hand it on to
    the full heartbeat), else started here."""
    from cairn import tickets
    from cairn.git.discovery import parse
    from cairn.git.status import spawn_discovery

    discovery = discovery or spawn_discovery(workspace)
    if discovery is None:
        return None
    answer = discovery.result(check=False)
    found = parse(answer.returncode, answer.stdout)
    if found is None or _configured(found.toplevel):
        return None
    root = os.path.join(found.common_dir, "cairn")
    if not os.path.lexists(root):
        return False  # no state at all: no marker
    known, branch = branch_of_head(found.git_dir)
    if not known or not _real_dir(root, os.path.join(os.path.realpath(found.common_dir), "cairn")):
        return None
    ticket = tickets.from_branch(branch)  # raises as the full heartbeat does
    ticket_dir = os.path.join(root, "tickets", ticket)
    marker = os.path.join(ticket_dir, MARKER)
    if not os.path.isfile(marker):
        if branch is not None and os.path.lexists(os.path.join(root, BRANCHES)):
            return None  # the ticket last run from this branch may have one
        return False
    if not _real_dir(ticket_dir, os.path.join(os.path.realpath(root), "tickets", ticket)):
        return None
    with lock(os.path.join(ticket_dir, LOCK)) as held:
        if not held:
            return False
        return _touch_held(root, ticket, marker)


def _touch_held(root: str, ticket: str, marker: str) -> bool | None:
    from datetime import datetime

    from cairn.util import clock, yaml_io

    text = _read(marker)
    if text is None or text_digest(text) != _remembered(root, ticket):
        return None
    start = text.find("\n" + _FIELD) + 1
    end = text.find("'\n", start + len(_FIELD)) if start else -1
    if end < 0:
        return None
    old = text[start + len(_FIELD) : end]
    now = clock.now()
    try:
        if datetime.fromisoformat(old) == now:
            return True  # the full heartbeat writes nothing within the same second either
    except ValueError:
        return None
    value = now.isoformat()
    touched = f"{text[:start]}{_FIELD}{value}{text[end:]}"
    data = yaml_io.load_flat(text)
    if (
        data is None
        or yaml_io.dump_flat(data) != text  # not the flat shape the renderer writes
        or yaml_io.dump_flat({**data, "last_updated": value}) != touched
    ):
        return None
    atomic.write(marker, touched)
    remember(root, ticket, touched)
    return True


def text_digest(text: str) -> str:
    return sha1(f"{__version__}\0{text}".encode("utf-8", "surrogateescape")).hexdigest()


def _memo(root: str, ticket: str) -> str:
    return os.path.join(root, "cache", f"heartbeat-{ticket}")


def _remembered(root: str, ticket: str) -> str | None:
    try:
        with open(_memo(root, ticket), "rb") as handle:
            return handle.read(100).decode("ascii").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def remember(root: str, ticket: str, text: str) -> None:
    """Keep the digest of the marker text a heartbeat wrote (under the ticket's lock), for the
    next heartbeat's touch. A cache: written without fsync, ignored when it cannot be."""
    cache = os.path.join(root, "cache")
    try:
        if not os.path.isdir(cache) or os.path.islink(cache):
            if os.path.lexists(cache):
                return
            os.mkdir(cache)
        atomic.write(_memo(root, ticket), text_digest(text) + "\n", fsync=False)
    except OSError:
        pass


def remember_marker(path: str, text: str) -> None:
    """``remember`` for the marker at ``path`` (``<state root>/tickets/<ticket>/<marker>``):
    every writer of a marker cairn rendered calls it, so that the next heartbeat's touch is
    quick."""
    ticket_dir = os.path.dirname(path)
    remember(os.path.dirname(os.path.dirname(ticket_dir)), os.path.basename(ticket_dir), text)


def _configured(toplevel: str) -> bool:
    """Whether a config file at ``toplevel`` may say something (``state_dir``) about where the
    state lives: ``cairn.toml`` at all, ``pyproject.toml`` when it mentions cairn."""
    if os.path.lexists(os.path.join(toplevel, CONFIG_FILES[0])):
        return True
    path = os.path.join(toplevel, CONFIG_FILES[1])
    if not os.path.lexists(path):
        return False
    try:
        with open(path, "rb") as handle:
            return b"cairn" in handle.read()
    except OSError:
        return True


def _real_dir(path: str, expected: str) -> bool:
    """Whether ``path`` is a directory reached without symlinks at ``expected`` (its real
    path): the state root and a ticket directory must be, or the layout refuses them."""
    return os.path.isdir(path) and os.path.realpath(path) == expected


def _read(path: str) -> str | None:
    """The marker's text, opened as every state file is (no symlink, a regular file) and within
    the marker reader's size limit; None for anything else, which the full heartbeat reports.
    Its digest, not this reading, says whether it is valid."""
    try:
        fd = atomic.open_regular(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.read(fd, MARKER_READ_LIMIT + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8") if len(data) <= MARKER_READ_LIMIT else None
    except UnicodeDecodeError:
        return None


def branch_of_head(git_dir: str) -> tuple[bool, str | None]:
    """(known, branch) from ``HEAD``: the checked-out branch, None when detached; not known when
    the file does not say (reftable keeps a placeholder there): git must be asked."""
    try:
        with open(os.path.join(git_dir, "HEAD"), encoding="utf-8") as handle:
            head = handle.read().strip()
    except (OSError, UnicodeDecodeError):
        head = ""
    if head.startswith("ref: refs/heads/") and head != "ref: refs/heads/.invalid":
        return True, head.removeprefix("ref: refs/heads/")
    if head and not head.startswith("ref:"):
        return True, None
    return False, None


@contextlib.contextmanager
def lock(path: str) -> Iterator[bool]:
    """The ticket's short ``.lock`` (the one every marker transition takes), waiting at most
    ``LOCK_WAIT`` seconds: a hook never hangs the agent. Yields whether it is held."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    yield False
                    return
                time.sleep(0.02)
        yield True
    finally:
        os.close(fd)
