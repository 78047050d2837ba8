"""The dashboard's rows on the temporal engine (``cairn.fleet.dashboard.source.Source``): the
listing of ``status``, read again at most every ``FRESH`` seconds (or at the next request after
``POST /api/v1/refresh``), on an event loop of its own, since the dashboard answers from
request threads. A ticket page's diffs, snapshots, summary and journal come from the shared
remote's refs, fetched into a scratch repository beside the state root."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from temporalio.client import Client

from cairn.config.records import Config
from cairn.errors import NotApplicable
from cairn.fleet.dashboard.source import View
from cairn.git import Git, Repo, base_runner
from cairn.remote import statecommit
from cairn.remote.refs import TicketRefs
from cairn.scale.connection import connect
from cairn.scale.status import Listing, listing, refused_rows
from cairn.state.layout import Layout
from cairn.terms import CONTROL_ACTIONS, Asker, FleetAction
from cairn.util import durable

FRESH = 1.0  # seconds a listing is served before Temporal is asked again
FETCH_EVERY = 2.0  # seconds between fetches of one ticket's refs (the page polls every 2 s)
WAIT = 60.0  # seconds a request waits for Temporal


class TemporalRows:
    def __init__(
        self,
        config: Config,
        remote: str,
        base: str,
        scratch: Path,
        objects: Path | None = None,
        local: Layout | None = None,
        key: str = "",
        repo: Repo | None = None,
    ) -> None:
        """Connects at once: an unreachable Temporal raises here (OSError or RuntimeError).
        ``objects``: the user's object store, borrowed by the scratch repository (only what it
        lacks is fetched); ``local``: the user's state root, where the starter keeps the
        entries it refused (their rows follow the workflows'); ``repo``: the user's
        repository, whose queue a retry from the dashboard reads the ticket's plan from."""
        self.config, self.remote, self.base, self.scratch = config, remote, base, scratch
        self.repo = repo
        self.objects, self.local = objects, local
        self.key = key or remote  # the fleet key the workflow ids start with
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="cairn-temporal", daemon=True).start()
        self.client: Client = self._wait(connect(config.temporal))
        self.lock = threading.Lock()
        self.read_at = -FRESH
        self.last = Listing()
        self.error: str | None = None
        self.fetch_lock = threading.Lock()
        self.fetched: dict[str, float] = {}

    def _wait(self, work: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(work, self.loop)
        return future.result(WAIT)

    def _fresh(self) -> Listing:
        with self.lock:
            if time.monotonic() - self.read_at >= FRESH:
                try:
                    self.last = self._wait(listing(self.client, self.key))
                    self.error = None
                except Exception as exc:  # the last rows stay, with why they are old
                    first = (str(exc).splitlines() or [repr(exc)])[0][:200]
                    self.error = f"cannot read Temporal at {self.config.temporal.address}: {first}"
                self.read_at = time.monotonic()
            return self.last

    def rows(self) -> tuple[list[dict[str, Any]], list[str]]:
        found = self._fresh()
        warnings = list(found.warnings)
        if self.error is not None:
            warnings.insert(0, f"{self.error}; the rows are from the last read that worked")
        refused = refused_rows(self.local, warnings) if self.local is not None else []
        return [self._with_actions(row) for row in found.rows] + refused, warnings

    @staticmethod
    def _with_actions(row: dict[str, Any]) -> dict[str, Any]:
        from cairn.scale.control import row_actions

        why = row_actions(row)
        return row | {"actions": [a for a in CONTROL_ACTIONS if why[a] is None]}

    def actions(self, ticket: str, row: dict[str, Any]) -> dict[str, str | None]:
        from cairn.scale.control import row_actions

        return row_actions(row)

    def row(self, ticket: str) -> dict[str, Any] | None:
        found = next((r for r in self._fresh().rows if r["ticket"] == ticket), None)
        return None if found is None else self._with_actions(found)

    def refresh(self) -> bool:
        with self.lock:
            due = time.monotonic() - self.read_at >= FRESH
            self.read_at = -FRESH
        return due

    def supervisor(self) -> dict[str, Any]:
        return {
            "running": self.error is None,
            "pid": os.getpid(),
            "engine": "temporal",
            "address": self.config.temporal.address,
        }

    def control(self, ticket: str, action: FleetAction, by: Asker) -> dict[str, Any]:
        """Ask ``action`` of ``ticket``'s workflow (a retry starts a new run of it), noting who
        asked in it; the next request reads the rows again."""
        from cairn.scale import control, retrying

        if action == "retry":
            if self.repo is None:
                raise NotApplicable("this dashboard has no repository to read the queue from")
            work = retrying.retry(self.client, self.repo, self.config, [ticket], False, by)
            done: retrying.Retried = self._wait(work)
            changed, state = True, "queued"
            detail: dict[str, Any] = {"was": done.was[ticket], "config": done.said[ticket]}
        else:
            changed, state = self._wait(control.ask(self.client, self.key, ticket, action, by))
            detail = {}
        self.refresh()
        return {
            "ticket": ticket,
            "action": action,
            "by": by,
            "changed": changed,
            "pending": False,
            "state": state,
            "warnings": [],
            **detail,
        }

    def view(self, ticket: str, row: dict[str, Any]) -> View | None:
        """The ticket's refs of the shared remote, fetched into the scratch repository (at
        most every ``FETCH_EVERY`` seconds), and its run directory from the state ref."""
        refs = TicketRefs.of(ticket, self.config.snapshot.ref_prefix)
        base = f"refs/remotes/shared/{self.base}"
        with self.fetch_lock:
            git = self._scratch()
            if time.monotonic() - self.fetched.get(ticket, -FETCH_EVERY) >= FETCH_EVERY:
                self._fetch(git, refs, base)
                self.fetched[ticket] = time.monotonic()
            state = git.run(["rev-parse", "-q", "--verify", refs.state], check=False).text
            run_dir = None
            if state:
                layout = Layout(self.scratch)
                stamp = layout.ticket_dir(ticket) / ".state-commit"
                if not stamp.is_file() or stamp.read_text() != state:
                    statecommit.checkout(git, state, layout.ticket_dir(ticket))
                    durable.atomic_write(stamp, state, fsync=False)
                run = row.get("run") or layout.latest_run(ticket)  # a finished run has no marker
                run_dir = layout.ticket_dir(ticket) / run if run else None
        return View(git, base, self.base, refs.branch, refs.wip, run_dir)

    def _scratch(self) -> Git:
        repo = self.scratch / "refs.git"
        if not (repo / "HEAD").is_file():
            repo.mkdir(parents=True, exist_ok=True)
            base_runner(repo).run(["init", "-q", "--bare", str(repo)])
            if self.objects is not None:
                alternates = repo / "objects" / "info" / "alternates"
                durable.atomic_write(alternates, f"{self.objects}\n", fsync=False)
        return base_runner(repo)

    def _fetch(self, git: Git, refs: TicketRefs, base: str) -> None:
        wanted = {f"refs/heads/{self.base}": base} | {r: r for r in refs.all()}
        listed = git.run(["ls-remote", "--", self.remote, *wanted], check=False).text
        there = {line.split("\t")[1] for line in listed.splitlines() if "\t" in line}
        specs = [f"+{ref}:{local}" for ref, local in wanted.items() if ref in there]
        if specs:
            git.run(["fetch", "-q", "--no-tags", "--", self.remote, *specs], check=False)
        for ref, local in wanted.items():
            if ref not in there:  # gone from the remote: gone from the page
                git.run(["update-ref", "-d", local], check=False)
