"""The ``github`` tracker: the open issues of ``[fleet.github] repo`` that carry ``label``.

Issue #N is ticket ``GH-N``; its body is the plan (any format ``cairn run`` reads), copied to
``<state root>/fleet/github/plans/GH-N.md`` while the ticket has not started. The tracker
comments on the issue when an attempt starts, is interrupted (the summary's status line and the
snapshot ref) and when the ticket ends; it moves the labels ``cairn:running``, ``cairn:done``
and ``cairn:needs-review``; on completion it pushes ``cairn/GH-N`` to ``fleet.remote`` and opens
a pull request whose body is the change summary and ``Closes #N`` (a draft when the run needs
review). Every one of these goes through the outbox: written to disk first, sent, and sent again
at the next poll when GitHub or the push failed — never lost. An issue labelled ``cairn:done``
or ``cairn:needs-review`` is not offered again (take the label off to run it anew).
"""

from __future__ import annotations

import os
import time
from typing import Any

from cairn.config.records import Config
from cairn.errors import BadInput
from cairn.fleet import fixround, fleetstate, slash
from cairn.fleet.facts import Facts, facts
from cairn.fleet.fixround import REASON as FIX_ROUND
from cairn.fleet.github_api import GitHubAPI, GitHubError, RateLimited
from cairn.fleet.outbox import Outbox
from cairn.fleet.retry import RETRIED
from cairn.fleet.trackers import texts
from cairn.fleet.trackers.base import Candidate, Command, Rejected, Tracker
from cairn.fleet.trackers.dir import is_finished
from cairn.fleet.trackers.github_outbox import TICKET_ID, Sending, issue_number
from cairn.fleet.trackers.github_refused import Refusals, digest, nameless, number_of, url_of
from cairn.git import Repo
from cairn.state.layout import Layout
from cairn.util import durable

PREFIX = "GH-"
RUNNING, DONE, REVIEW = "cairn:running", "cairn:done", "cairn:needs-review"
ENDED_LABELS = frozenset({DONE, REVIEW})
REFUSING = frozenset({401, 403, 404})  # the first listing's answers that mean the set-up is wrong


class GitHubTracker(Sending, Tracker):
    pushes_branch = True

    def __init__(
        self, repo: Repo, config: Config, layout: Layout, api: GitHubAPI | None = None
    ) -> None:
        super().__init__()
        self.repo, self.config, self.layout = repo, config, layout
        settings = config.fleet.github
        assert settings.repo is not None  # config validation requires it with this tracker
        if api is None:
            token = os.environ.get("GITHUB_TOKEN") or os.environ.get("GH_TOKEN")
            if not token:
                raise BadInput(
                    f"tracker github needs a token to read and write {settings.repo}'s issues "
                    "and pull requests; set GITHUB_TOKEN or GH_TOKEN"
                )
            api = GitHubAPI(settings.api_url, settings.repo, token)
        self.api = api
        self.plans = layout.fleet_dir / "github" / "plans"
        self.outbox = Outbox(layout, self.warnings)
        self.issues: dict[str, dict[str, Any]] = {}
        self.blocked_until = 0.0  # a rate limit: no call before this (epoch seconds)
        self._base: str | None = None
        self._listed = False  # whether the issues were listed (or tried) once
        self.refusals = Refusals(layout, self.outbox)
        self._key: str | None = None  # the transition being told
        self.seen = slash.Seen(layout, "github")

    # --- the interface -------------------------------------------------------------------------

    def candidates(self) -> list[Candidate]:
        self.flush()
        first, self._listed = not self._listed, True
        if time.time() >= self.blocked_until:
            try:
                self._list()
                self.trouble = None
            except GitHubError as exc:
                self._held(exc)
                if first and exc.status in REFUSING and not isinstance(exc, RateLimited):
                    raise BadInput(self._refusal_of_listing(exc)) from None
                self.trouble = f"listing the issues failed ({exc})"
                self._warn(f"{self.trouble}; the last list holds till the next poll")
        return [
            Candidate(t, self.plans / f"{t}.md")
            for t in sorted(self.issues, key=issue_number)
            if not self.finished(t)
        ]

    def commands(self) -> list[Command]:
        if time.time() < self.blocked_until:
            return []
        try:
            return slash.read(self.layout, self.seen, self._comments_of, PREFIX)
        except GitHubError as exc:
            self._held(exc)
            self._warn(f"reading the issues' comments for /cairn commands failed ({exc})")
            return []

    def _comments_of(self, ticket: str) -> list[slash.Said]:
        return [slash.from_github(c) for c in self.api.comments(issue_number(ticket))]

    def reply(self, ticket: str, text: str, key: str) -> None:
        self._key = key
        self._comment(ticket, text)
        self._told()

    def finished(self, ticket: str) -> bool:
        record = fleetstate.read(self.layout, ticket)
        return record is not None and is_finished(record, self.config)

    def claim(self, ticket: str) -> bool:
        if ticket in self.issues:
            return not self.finished(ticket)
        return self._fix_round(ticket)

    def _fix_round(self, ticket: str) -> bool:
        """Whether ``ticket``, whose issue is no longer listed (labelled ``cairn:done`` or
        ``cairn:needs-review``), waits for a fix round a person or a land asked for
        (``cairn.fleet.fixround``), or for the run a person retried (``cairn fleet retry``, a
        ``/cairn`` answer): it runs."""
        record = fleetstate.read(self.layout, ticket)
        asked = record is not None and record.last_reason in (FIX_ROUND, RETRIED)
        if record is None or not asked or self.finished(ticket):
            return False
        return TICKET_ID.fullmatch(ticket) is not None

    def transition(self, ticket: str, state: str, detail: str | None = None) -> None:
        record = fleetstate.read(self.layout, ticket)
        self._key = texts.key(record, state)
        attempt = record.attempt if record is not None else 0
        most = self.config.fleet.max_attempts
        if state == "running":
            self._labels(ticket, add=[RUNNING], remove=sorted(ENDED_LABELS))
            self._comment(ticket, texts.started(ticket, attempt, most))
        elif state == "retrying" and record is not None and record.last_reason == fixround.REASON:
            self._comment(ticket, texts.fix_round(ticket, record.detail))
        elif state == "approved":
            body = texts.approved(detail)
            self._put(ticket, "approve", branch=f"cairn/{ticket}", body=body)
            self._labels(ticket, add=[DONE], remove=[REVIEW, RUNNING])
        elif state == "waiting":  # an agent's limit: the next attempt starts at its reset
            self._comment(ticket, texts.waiting(record, detail))
        elif state in ("retrying", "interrupted"):
            told = self._facts(ticket)
            next_step = texts.next_attempt(record, state, most)
            if next_step is None:
                self._labels(ticket, add=[], remove=[RUNNING])
            self._comment(ticket, texts.interrupted(told, detail, next_step))
        self._told()

    def finish(self, ticket: str, state: str) -> None:
        record = fleetstate.read(self.layout, ticket)
        self._key = texts.key(record, state)
        detail = record.detail if record is not None else None
        told = self._facts(ticket)
        number = issue_number(ticket)
        if state in ("completed", "needs_review"):
            issue = self.issues.get(ticket, {})
            body = (told.summary or texts.headline("Completed", told, detail)).rstrip()
            self._put(
                ticket,
                "pull_request",
                title=issue.get("title"),  # not listed yet: asked at send
                branch=told.branch,
                body=f"{body}\n\nCloses #{number}\n",
                draft=state == "needs_review",
            )
        if state == "completed":
            where = f"Branch `{told.branch}` pushed; pull request opened."
            self._comment(ticket, texts.completed(told, detail, where))
            self._labels(ticket, add=[DONE], remove=[RUNNING])
        else:
            where = None
            if state == "needs_review":
                where = f"Branch `{told.branch}` pushed; draft pull request opened."
            self._comment(ticket, texts.ended(ticket, state, told, detail, where))
            self._labels(ticket, add=[REVIEW], remove=[RUNNING])
        self._told()

    # --- issues and plans ----------------------------------------------------------------------

    def _list(self) -> None:
        found: dict[str, dict[str, Any]] = {}
        rejected: list[Rejected] = []
        for index, issue in enumerate(self.api.open_issues(self.config.fleet.github.label), 1):
            number, why = number_of(issue)
            if number is None:
                rejected.append(nameless(issue, index, why))
                continue
            ticket = f"{PREFIX}{number}"
            labels = issue.get("labels")
            names = {lab.get("name") for lab in labels or [] if isinstance(lab, dict)}
            # an ended issue is listed again while its ticket waits for a fix round (a review's
            # or a land's asked with no supervisor running): the next supervisor runs it
            if ticket in found or (names & ENDED_LABELS and not self._fix_round(ticket)):
                continue
            body = issue.get("body")
            text = body.replace("\r\n", "\n").strip() if isinstance(body, str) else ""
            record = fleetstate.read(self.layout, ticket)
            started = record is not None and record.state != "queued"  # its plan is kept
            problem = None if started else self.refusals.problem(number, body, text)
            if problem is not None:
                where = url_of(issue) or f"{self.config.fleet.github.repo} issue #{number}"
                version = digest(body)
                rejected.append(Rejected(where, problem, ticket, version))
                self.refusals.tell(ticket, problem, version)
                continue
            self.refusals.forget(ticket)
            self._write_plan(record, self.plans / f"{ticket}.md", text + "\n")
            found[ticket] = issue
        self.issues, self.rejected = found, rejected

    def _refusal_of_listing(self, exc: GitHubError) -> str:
        settings = self.config.fleet.github
        fix = {
            401: "set GITHUB_TOKEN or GH_TOKEN to a valid token",
            403: f"give the token read and write access to {settings.repo}'s issues and "
            "pull requests",
            404: f"fix [fleet.github] repo and api_url ({settings.api_url}), or give the token "
            f"access to {settings.repo}",
        }[exc.status or 0]
        return f"github refused the listing of {settings.repo}'s issues ({exc}); {fix}"

    def _write_plan(self, record: fleetstate.FleetTicket | None, path: Any, text: str) -> None:
        """The issue's body as the ticket's plan, until the ticket starts: an edit of the
        body after that does not change the plan of a run under way."""
        if path.exists() and record is not None and record.state != "queued":
            return
        if path.exists() and path.read_text(encoding="utf-8", errors="replace") == text:
            return
        durable.ensure_dir(path.parent)
        durable.atomic_write(path, text)

    def _facts(self, ticket: str) -> Facts:
        return facts(self.repo, self.config, self.layout, ticket)
