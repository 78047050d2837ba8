"""The ``linear`` tracker: the issues of ``[fleet.linear] team`` that carry ``label`` and sit in
a workflow state of type ``unstarted`` (Todo, …).

Issue ``IDE-210`` is ticket ``IDE-210`` (its branch ``cairn/IDE-210``); its description is the
plan (any format ``cairn run`` reads), copied to ``<state root>/fleet/linear/plans/IDE-210.md``
while the ticket has not started. Only ``unstarted`` issues are offered: an issue in the
backlog is one nobody has decided to do yet, and moving it to Todo is the person's go-ahead; an
issue already ``started`` is someone's work under way, unless cairn started it (its ticket has
a record here), and one ``completed`` or ``canceled`` is done: it is not offered again (move it
back and ``cairn fleet retry`` it to run it anew).

The tracker moves the issue through ``[fleet.linear.states]`` (started, review, input,
completed, failed), comments on it when an attempt starts, is interrupted and when the ticket
ends (the texts of ``trackers.texts``, as the github tracker's), and when a ticket completes or
needs review pushes ``cairn/<ticket>`` and attaches the pull request's link (one recorded in
``cairn.fleet.pulls``) or the branch's. Every one of these goes through the outbox with its
key: a comment whose outcome is unknown is looked for among the issue's comments by the key
hidden in it; a state is set, and an attachment is per url, so both are sent again as they are.

The team, the state names and the label are checked when the tracker opens: an unknown one is
bad input naming the known ones.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from cairn.config.records import Config
from cairn.errors import BadInput
from cairn.faults import crash_at
from cairn.fleet import fixround, fleetstate, pulls, slash
from cairn.fleet.facts import Facts, facts, push_branch
from cairn.fleet.linear_api import KEY_ENV, KEYS_PAGE, LinearAPI, LinearError, RateLimited
from cairn.fleet.outbox import Outbox, hidden
from cairn.fleet.trackers import linear_team, texts
from cairn.fleet.trackers.base import Candidate, Command, Rejected, Tracker
from cairn.fleet.trackers.dir import is_finished
from cairn.fleet.trackers.github_refused import Refusals, digest
from cairn.git import Repo
from cairn.remote.refs import PushFailed
from cairn.state.layout import Layout
from cairn.util import durable

OFFERED = "unstarted"  # the state type whose issues are offered
LISTED = ["unstarted", "started"]  # started: only a ticket cairn started (it has a record)
ENDED = {"needs_review": "review", "needs_input": "input", "failed": "failed"}
_IDENTIFIER = re.compile(r"([A-Za-z0-9]{1,16})-(\d{1,9})")


def order(ticket: str) -> tuple[str, int]:
    match = _IDENTIFIER.fullmatch(ticket)
    return (match.group(1), int(match.group(2))) if match else (ticket, 0)


class LinearTracker(Tracker):
    pushes_branch = True

    def __init__(
        self, repo: Repo, config: Config, layout: Layout, api: LinearAPI | None = None
    ) -> None:
        super().__init__()
        self.repo, self.config, self.layout = repo, config, layout
        self.settings = config.fleet.linear
        assert self.settings.team is not None  # config validation requires it with this tracker
        self.team = self.settings.team
        if api is None:
            key = os.environ.get(KEY_ENV, "")
            if not key.strip():
                raise BadInput(
                    f"tracker linear needs an API key to read and write team {self.team}'s "
                    f"issues; set {KEY_ENV} to a personal API key (create one at {KEYS_PAGE})"
                )
            api = LinearAPI(self.settings.api_url, key)
        self.api = api
        self.plans = layout.fleet_dir / "linear" / "plans"
        self.outbox = Outbox(layout, self.warnings)
        self.refusals = Refusals(layout, self.outbox, "linear", "description")
        self.issues: dict[str, dict[str, Any]] = {}
        self.ids: dict[str, str] = {}  # ticket → the issue's id, once listed
        self.states: dict[str, str] | None = None  # the team's workflow states: name → id
        self.blocked_until = 0.0  # a rate limit: no call before this (epoch seconds)
        self._key: str | None = None  # the transition being told
        self.seen = slash.Seen(layout, "linear")
        self._unlinked: set[str] = set()
        self._set_up(opening=True)

    # --- the team, its states and the label ----------------------------------------------------

    def _set_up(self, opening: bool = False) -> bool:
        """Read the team's workflow states and check the names the config gives (BadInput: an
        unknown team, state or label, or a key Linear refuses); False when Linear could not
        be read now (it is tried again at the next poll)."""
        if self.states is not None:
            return True
        if time.time() < self.blocked_until:
            return False
        try:
            states = linear_team.read(self.api, self.settings)
        except LinearError as exc:
            self._held(exc)
            if exc.refused_key and opening:  # later, a warning: the runs under way go on
                raise BadInput(
                    f"linear refused the API key ({exc}); set {KEY_ENV} to a valid personal "
                    f"API key (create one at {KEYS_PAGE})"
                ) from None
            self.trouble = f"reading team {self.team} failed ({exc})"
            self._warn(f"{self.trouble}; it is read again at the next poll")
            return False
        self.states = states
        return True

    # --- the interface -------------------------------------------------------------------------

    def candidates(self) -> list[Candidate]:
        self.flush()
        if time.time() >= self.blocked_until and self._set_up():
            try:
                self._list()
                self.trouble = None
            except LinearError as exc:
                self._held(exc)
                self.trouble = f"listing the issues failed ({exc})"
                self._warn(f"{self.trouble}; the last list holds till the next poll")
        return [
            Candidate(t, self.plans / f"{t}.md")
            for t in sorted(self.issues, key=order)
            if not self.finished(t)
        ]

    def commands(self) -> list[Command]:
        if time.time() < self.blocked_until:
            return []
        try:
            return slash.read(self.layout, self.seen, self._comments_of, f"{self.team}-")
        except LinearError as exc:
            self._held(exc)
            self._warn(f"reading the issues' comments for /cairn commands failed ({exc})")
            return []

    def _comments_of(self, ticket: str) -> list[slash.Said]:
        issue = self.ids.get(ticket) or ticket  # Linear takes an identifier for an id
        return [slash.from_linear(c) for c in self.api.comments(issue)]

    def reply(self, ticket: str, text: str, key: str) -> None:
        self._key = key
        self._comment(ticket, text)
        self._told()

    def finished(self, ticket: str) -> bool:
        record = fleetstate.read(self.layout, ticket)
        return record is not None and is_finished(record, self.config)

    def claim(self, ticket: str) -> bool:
        return ticket in self.issues and not self.finished(ticket)

    def _fix_round(self, ticket: str) -> bool:
        """Whether ``ticket`` waits for a fix round a person or a land asked for."""
        record = fleetstate.read(self.layout, ticket)
        return (
            record is not None
            and record.last_reason == fixround.REASON
            and not (self.finished(ticket))
        )

    def transition(self, ticket: str, state: str, detail: str | None = None) -> None:
        record = fleetstate.read(self.layout, ticket)
        self._key = texts.key(record, state)
        attempt = record.attempt if record is not None else 0
        most = self.config.fleet.max_attempts
        if state == "running":
            self._move(ticket, "started")
            self._comment(ticket, texts.started(ticket, attempt, most))
        elif state == "retrying" and record is not None and record.last_reason == fixround.REASON:
            self._comment(ticket, texts.fix_round(ticket, record.detail))
        elif state == "approved":
            self._comment(ticket, texts.approved(detail))
            self._move(ticket, "completed")
        elif state == "waiting":  # an agent's limit: the next attempt starts at its reset
            self._comment(ticket, texts.waiting(record, detail))
        elif state in ("retrying", "interrupted"):
            next_step = texts.next_attempt(record, state, most)
            self._comment(ticket, texts.interrupted(self._facts(ticket), detail, next_step))
        self._told()

    def finish(self, ticket: str, state: str) -> None:
        record = fleetstate.read(self.layout, ticket)
        self._key = texts.key(record, state)
        detail = record.detail if record is not None else None
        told = self._facts(ticket)
        where = None
        if state in ("completed", "needs_review"):
            title = self.issues.get(ticket, {}).get("title")  # not listed yet: asked at send
            self._put(ticket, "link", branch=told.branch, title=title)
            pushed = "pushed" if self.config.fleet.pushes else "ready"
            linked = self._link(ticket, told.branch)[0] is not None
            where = f"Branch `{told.branch}` {pushed}" + (
                "; its link is attached to this issue." if linked else "."
            )
        if state == "completed":
            self._comment(ticket, texts.completed(told, detail, where or ""))
            self._move(ticket, "completed")
        else:
            self._comment(ticket, texts.ended(ticket, state, told, detail, where))
            self._move(ticket, ENDED.get(state, "failed"))  # interrupted: its attempts spent
        self._told()

    # --- the outbox ----------------------------------------------------------------------------

    def _warn(self, message: str) -> None:
        self.warnings.append(f"linear: {message}")

    def _told(self) -> None:  # the transition's messages are in the outbox: now sent
        self._key = None
        crash_at("fleet.told")
        self.flush()

    def flush(self) -> None:
        """Send what the outbox holds (``Outbox.flush``): in order, a failing ticket's later
        messages held back, nothing while a rate limit lasts, an unknown outcome looked for."""
        self.outbox.flush(
            self._send,
            (LinearError, PushFailed),
            blocked=lambda: time.time() < self.blocked_until,
            held=self._held,
            warn=self._warn,
        )

    def _send(self, message: dict[str, Any], looked: bool) -> None:
        ticket, kind = message["ticket"], message["kind"]
        issue = self._issue_id(ticket, message)
        if issue is None:
            self._warn(f"{ticket} is no longer an issue in Linear; its {kind} is given up")
            return
        if kind == "comment":
            if looked and linear_team.posted(self.api.comments(issue), message):
                self._warn(f"a comment on {ticket} had been posted; adopted")
                return
            self.api.comment(issue, message["body"], linear_team.comment_id(message))
            crash_at("fleet.comment")
        elif kind == "state":
            if not self._set_up() or self.states is None:
                raise LinearError(f"team {self.team}'s workflow states are not read yet")
            state_id = self.states.get(message["state"])
            if state_id is None:
                name = message["state"]
                self._warn(f"{ticket} not moved: team {self.team} has no state {name!r} now")
                return
            self.api.move(issue, state_id)
            crash_at("fleet.state")
        elif kind == "link":
            if self.config.fleet.pushes:
                push_branch(self.repo, self.config, ticket)
                crash_at("fleet.push")
            url, what = self._link(ticket, message["branch"])
            if url is None:
                if ticket not in self._unlinked:
                    self._unlinked.add(ticket)
                    self._warn(
                        f"{ticket}'s branch has no web address to link (fleet.remote is not a "
                        "forge's); set [fleet.linear] branch_url"
                    )
                return
            title = message.get("title") or (self.api.issue(ticket) or {}).get("title")
            self.api.attach(issue, url, str(title or f"cairn/{ticket}"), what)
            crash_at("fleet.link")

    def _issue_id(self, ticket: str, message: dict[str, Any]) -> str | None:
        """The issue's id (Linear's UUID), as the message or the listing has it, else asked
        for by its identifier (a message a killed supervisor left; None: no such issue)."""
        known = message.get("issue") or self.ids.get(ticket)
        if isinstance(known, str):
            return known
        found = self.api.issue(ticket)
        if found is None or not isinstance(found.get("id"), str):
            return None
        self.ids[ticket] = found["id"]
        return str(found["id"])

    def _link(self, ticket: str, branch: str) -> tuple[str | None, str]:
        """The pull request's address when one is recorded, else the branch's."""
        pull = pulls.read(self.layout, ticket)
        if pull is not None:
            return pull["url"], f"pull request of {branch}"
        template = self.settings.branch_url or linear_team.branch_url(
            self.repo, self.config.fleet.remote
        )
        return (template.replace("{branch}", branch) if template else None), f"branch {branch}"

    def _put(self, ticket: str, kind: str, **fields: Any) -> None:
        """Keep a message of the transition being told (its key: the transition's and
        ``kind``); a comment carries its key hidden at its end."""
        if self._key is not None:
            fields["key"] = f"{self._key}:{kind}"
            if kind == "comment":
                fields["body"] = f"{fields['body']}\n{hidden(fields['key'])}"
        if ticket in self.ids:
            fields["issue"] = self.ids[ticket]
        self.outbox.put({"ticket": ticket, "kind": kind, **fields})

    def _comment(self, ticket: str, text: str) -> None:
        self._put(ticket, "comment", body=texts.signed(text))

    def _move(self, ticket: str, which: str) -> None:
        name = getattr(self.settings.states, which)
        if name is not None:
            self._put(ticket, "state", state=name)

    def _held(self, exc: Exception) -> None:
        if isinstance(exc, RateLimited) and exc.until is not None:
            self.blocked_until = max(self.blocked_until, exc.until)

    # --- issues and plans ----------------------------------------------------------------------

    def _list(self) -> None:
        found: dict[str, dict[str, Any]] = {}
        rejected: list[Rejected] = []
        label = self.settings.label
        for index, issue in enumerate(self.api.issues(self.team, label, LISTED), 1):
            ticket, why = self._ticket_of(issue)
            if ticket is None:
                where = f"entry {index} of team {self.team}'s issue listing"
                text = f"{where}: {why}; cairn skips it (check [fleet.linear] api_url)"
                rejected.append(Rejected(where, text, None, digest(repr(issue))))
                continue
            state = issue.get("state")
            kind = state.get("type") if isinstance(state, dict) else None
            record = fleetstate.read(self.layout, ticket)
            if ticket in found or (kind != OFFERED and record is None):
                continue  # a person's work under way, not cairn's
            self.ids[ticket] = str(issue["id"])
            body = issue.get("description")
            text = body.replace("\r\n", "\n").strip() if isinstance(body, str) else ""
            started = record is not None and record.state != "queued"  # its plan is kept
            problem = None if started else self.refusals.problem(ticket, body, text)
            if problem is not None:
                where = issue["url"] if isinstance(issue.get("url"), str) else f"Linear {ticket}"
                version = digest(body)
                rejected.append(Rejected(where, problem, ticket, version))
                self.refusals.tell(ticket, problem, version)
                continue
            self.refusals.forget(ticket)
            self._write_plan(record, self.plans / f"{ticket}.md", text + "\n")
            found[ticket] = issue
        for record in fleetstate.listing(self.layout, []):
            # an issue moved to a done state whose ticket a person or a land sent back for a fix
            # round (with no supervisor running, perhaps): the round runs
            ticket = record.ticket
            if ticket not in found and order(ticket)[0] == self.team and self._fix_round(ticket):
                issue = self.api.issue(ticket)
                if isinstance(issue, dict) and isinstance(issue.get("id"), str):
                    self.ids[ticket] = issue["id"]
                    found[ticket] = issue
        self.issues, self.rejected = found, rejected

    def _ticket_of(self, issue: Any) -> tuple[str | None, str]:
        if not isinstance(issue, dict):
            return None, f"it is a JSON {type(issue).__name__}, not an issue"
        identifier, issue_id = issue.get("identifier"), issue.get("id")
        if not isinstance(identifier, str) or not isinstance(issue_id, str) or not issue_id:
            return None, "it has no identifier or id"
        match = _IDENTIFIER.fullmatch(identifier)
        if match is None or match.group(1).upper() != self.team.upper():
            return None, f"its identifier {identifier[:40]!r} is not one of team {self.team}'s"
        return identifier, ""

    def _write_plan(self, record: fleetstate.FleetTicket | None, path: Path, text: str) -> None:
        """The issue's description as the ticket's plan, until the ticket starts."""
        if path.exists() and record is not None and record.state != "queued":
            return
        if path.exists() and path.read_text(encoding="utf-8", errors="replace") == text:
            return
        durable.ensure_dir(path.parent)
        durable.atomic_write(path, text)

    def _facts(self, ticket: str) -> Facts:
        return facts(self.repo, self.config, self.layout, ticket)
