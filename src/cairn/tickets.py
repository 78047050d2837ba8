"""Ticket ids: validated when given, safely mapped when derived from a branch name.

A ticket id becomes one ref component (``refs/cairn/wip/<ticket>``) and, later, one directory
name, so it is a slug: letters, digits, ``.``, ``_`` and ``-``, starting with a letter or digit.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from collections.abc import Sequence

    from cairn.errors import BadInput

DEFAULT_TICKET = "default"
MAX_LENGTH = 100

_VALID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9._-]+")


def problem(ticket: str) -> str | None:
    """Why ``ticket`` is not a valid id, or None when it is."""
    if (
        len(ticket) <= MAX_LENGTH
        and _VALID.fullmatch(ticket)
        and ".." not in ticket
        and not ticket.endswith((".", ".lock"))
    ):
        return None
    if not ticket:
        return "it is empty"
    if len(ticket) > MAX_LENGTH:
        return f"it is longer than {MAX_LENGTH} characters"
    if any(ord(c) < 32 or ord(c) == 127 for c in ticket):
        return "it contains control characters"
    if ticket.startswith("-"):
        return "it starts with '-'"
    if ".." in ticket:
        return "it contains '..'"
    if "@{" in ticket:
        return "it contains '@{'"
    if ticket.endswith(".lock"):
        return "it ends with '.lock'"
    if ticket.endswith("."):
        return "it ends with '.'"
    if not _VALID.fullmatch(ticket):
        return "only letters, digits, '.', '_' and '-' are allowed, starting with a letter or digit"
    return None


def map_name(name: str) -> str:
    """Map any string (a branch name) onto a valid ticket id; '' when nothing usable remains."""
    slug = _UNSAFE_RUN.sub("-", name)
    slug = re.sub(r"\.{2,}", ".", slug)
    slug = slug.strip("-.")
    while slug.endswith(".lock"):
        slug = slug[: -len(".lock")] + "-lock"
    slug = slug[:MAX_LENGTH].rstrip("-.")
    return slug if problem(slug) is None else ""


def validate(ticket: str) -> str:
    why = problem(ticket)
    if why is not None:
        suggestion = map_name(ticket)
        hint = f"; try --ticket {suggestion}" if suggestion else "; pass a slug such as PROJ-123"
        from cairn.errors import BadInput  # only then: a hook derives ids without loading it

        raise BadInput(f"invalid ticket id {ticket!r}: {why}{hint}")
    return ticket


def from_branch(branch: str | None) -> str:
    """The default ticket: the current branch, mapped; ``default`` when detached or unborn."""
    if not branch:
        return DEFAULT_TICKET
    mapped = map_name(branch)
    if not mapped:
        from cairn.errors import BadInput

        raise BadInput(f"cannot derive a ticket id from branch {branch!r}; pass --ticket <id>")
    return mapped


def unknown(
    ticket: str,
    known: Sequence[str],
    lister: str,
    what: str = "ticket",
    start: str = "start one with cairn run PLAN",
) -> BadInput:
    """The error for ``ticket`` when this repository has no trace of it, naming the tickets it
    has (the first 20; ``lister`` shows them all), or saying how to ``start`` one."""
    from cairn.errors import BadInput

    if not known:
        return BadInput(f"no {what} {ticket} here, nor any other yet; {start}")
    shown = ", ".join(known[:20])
    if len(known) > 20:
        shown += f" and {len(known) - 20} more ({lister} lists them)"
    return BadInput(f"no {what} {ticket} here; pass one of: {shown}")
