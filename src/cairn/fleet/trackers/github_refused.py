"""The issues the ``github`` and ``linear`` trackers refuse: an entry of the listing that is no
issue (no number, a bad one), a body (a description) that is not a plan (empty, not text, over
the plan size limit, not in a format ``cairn run`` reads), and the one comment each issue gets.

The comment goes through the outbox like every other report, once per body: which body of
which issue was told is kept in ``<state root>/fleet/<tracker>/refused.json``, so neither this
supervisor's next poll nor the next supervisor says it again; an edited body that is still
refused is told again. The comment's key (``cairn:<ticket>:refused:<body's digest>``) is
hidden in it, as in every comment cairn posts.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from cairn.errors import BadInput
from cairn.fleet.outbox import Outbox, hidden
from cairn.fleet.refusals import Rejected
from cairn.fleet.trackers import texts
from cairn.state.layout import Layout
from cairn.util import durable

READ_LIMIT = 1024 * 1024
WHAT = "github refusal record"


class Refusals:
    def __init__(
        self, layout: Layout, outbox: Outbox, tracker: str = "github", field: str = "body"
    ) -> None:
        self.path = layout.fleet_dir / tracker / "refused.json"
        self.outbox = outbox
        self.field = field  # where the issue's plan is: its body, its description
        self._told: dict[str, str] | None = None  # ticket → the version of the body told
        self._checked: dict[tuple[str, str], str | None] = {}  # (issue, body) → problem

    def problem(self, issue: int | str, body: Any, text: str) -> str | None:
        """Why the issue's body is not a plan (None: it is one); parsed once per body.
        ``issue``: its number (GitHub) or its identifier (Linear)."""
        key = (str(issue), text if isinstance(body, str) else repr(body))
        if key not in self._checked:
            if len(self._checked) > 1000:  # bodies of issues edited over a long run
                self._checked.clear()
            what = f"issue #{issue}" if isinstance(issue, int) else f"issue {issue}"
            self._checked[key] = _problem(what, body, text, self.field)
        return self._checked[key]

    def tell(self, ticket: str, problem: str, version: str) -> None:
        """Comment on the issue, unless this body was told already."""
        told = self._load()
        if told.get(ticket) == version:
            return
        key = f"cairn:{ticket}:refused:{version}:comment"  # once per body (outbox.put)
        body = f"{texts.signed(texts.refused(problem, self.field))}\n{hidden(key)}"
        self.outbox.put({"ticket": ticket, "kind": "comment", "body": body, "key": key})
        told[ticket] = version
        self._save(told)

    def forget(self, ticket: str) -> None:
        """The issue is a ticket now: a later refusal is told again."""
        told = self._load()
        if ticket in told:
            del told[ticket]
            self._save(told)

    def _load(self) -> dict[str, str]:
        if self._told is None:
            self._told = {}
            try:
                data = durable.read_state_file(self.path, WHAT, READ_LIMIT)
                found = json.loads(data) if data is not None else {}
                if not isinstance(found, dict):
                    raise ValueError("not a JSON object")
                self._told = {k: v for k, v in found.items() if isinstance(v, str)}
            except (OSError, ValueError, BadInput) as exc:
                self.outbox.warnings.append(
                    f"{WHAT} {self.path} cannot be read ({exc}); it is written again"
                )
        return self._told

    def _save(self, told: dict[str, str]) -> None:
        durable.ensure_dir(self.path.parent)
        durable.atomic_write(self.path, json.dumps(told, indent=2, sort_keys=True) + "\n")


def _problem(what: str, body: Any, text: str, field: str) -> str | None:
    from cairn.run import plan as plans

    fix = "write its tasks there (## Task 1: …, or a - [ ] checklist)"
    if body is not None and not isinstance(body, str):
        return f"{what}'s {field} is not text; {fix}"
    if not text:
        return f"{what} has no plan in its {field}; {fix}"
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > plans.PLAN_READ_LIMIT:
        return (
            f"{what}'s {field} is {size} bytes, over the {plans.PLAN_READ_LIMIT} byte "
            "limit of a plan; split it into smaller issues"
        )
    try:
        plans.parse(text, what, ".md")
    except BadInput as exc:
        return str(exc)
    return None


def number_of(issue: Any) -> tuple[int | None, str]:
    """The issue's number, or None and what is wrong with it."""
    if not isinstance(issue, dict):
        return None, f"it is a JSON {type(issue).__name__}, not an issue"
    number = issue.get("number")
    if number is None:
        return None, "it has no number"
    if type(number) is not int or number <= 0:
        return None, f"its number {number!r} is not a positive whole number"
    return number, ""


def nameless(issue: Any, index: int, why: str) -> Rejected:
    """An entry of the listing that has no number: refused alone, never commented on."""
    where = url_of(issue) or f"entry {index} of the issue listing"
    return Rejected(
        where,
        f"{where}: {why}; cairn skips it (check that [fleet.github] api_url is GitHub's API)",
        None,
        digest(json.dumps(issue, sort_keys=True, default=str)),
    )


def url_of(issue: Any) -> str | None:
    url = issue.get("html_url") if isinstance(issue, dict) else None
    return url if isinstance(url, str) and url and len(url) < 300 and url.isprintable() else None


def digest(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
