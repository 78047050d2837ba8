"""What the dashboard's API answers, as JSON-ready dicts: the fleet's state and one ticket's
page. Read from the files (and, inside ``cairn fleet start``, the supervisor's clock for the
next poll); nothing here writes."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from cairn.errors import BadInput, CairnError, Refused
from cairn.fleet import lease, needs, outbox, pulls, refusals
from cairn.fleet.dashboard.source import Source, View
from cairn.fleet.fleetstatus import FleetRows, held_now
from cairn.git import Git
from cairn.state import journal_text
from cairn.state.layout import SUMMARY_ARTIFACT, SUMMARY_ROLE, discover, latest_artifact
from cairn.terms import CONTROL_ACTIONS, FLEET_STATES, Asker, FleetAction
from cairn.util import clock, durable
from cairn.wip.history import chain
from cairn.wip.naming import wip_ref

if TYPE_CHECKING:
    from cairn.fleet.supervisor import Supervisor

DIFF_CAP = 200 * 1024  # bytes of each diff a ticket page gets
SUMMARY_CAP = 1024 * 1024
JOURNAL_TAIL = 50
TRANSCRIPT_CAP = 32 * 1024 * 1024  # bytes of a transcript the page reads
TRANSCRIPT_LINES = 1000  # lines of it one answer carries (the page asks for the rest)
SNAPSHOTS = 20  # the newest snapshots listed on a ticket page


class Dashboard:
    """One repository's fleet, as the dashboard reads it; ``supervisor`` when it runs inside
    ``cairn fleet start`` (then ``refresh`` can wake it); ``source`` when the rows come from
    elsewhere than the fleet files (the temporal engine)."""

    def __init__(
        self,
        repo_path: Path,
        supervisor: Supervisor | None = None,
        source: Source | None = None,
    ) -> None:
        if supervisor is not None:
            self.repo, self.config, self.layout = (
                supervisor.repo,
                supervisor.config,
                supervisor.layout,
            )
        else:
            self.repo, self.config, self.layout = discover(repo_path)
        self.supervisor = supervisor
        if source is None:
            from cairn.fleet.control import why_not

            self.rows: FleetRows | Source = FleetRows(self.repo, self.config, self.layout, why_not)
        else:
            self.rows = source
        self.source = source

    def warm(self) -> None:
        """Read every ticket's files once in the background, so the first page load finds
        the rows cached (a failure here is the first request's to report). Then what the
        server holds so far is left out of the garbage collector's full passes
        (``gc.freeze``): a pass over the cached rows of 1,000 tickets took a request's 99th
        percentile from 38 to 52 ms."""

        def read() -> None:
            with contextlib.suppress(Exception):
                self.rows.rows()
            import gc

            gc.freeze()

        threading.Thread(target=read, name="cairn-dashboard-warm", daemon=True).start()

    # --- GET /api/v1/state ---------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        rows, warnings = self.rows.rows()
        outbox.annotate(self.layout, rows)
        counts = dict.fromkeys((*FLEET_STATES, refusals.REFUSED), 0)
        tokens, cost, costed = 0, 0.0, False
        for row in rows:
            counts[row["state"]] = counts.get(row["state"], 0) + 1
            usage = row.get("usage")
            if usage:
                tokens += usage.get("total_tokens") or 0
                if usage.get("cost_usd") is not None:
                    cost, costed = cost + usage["cost_usd"], True
        sup = self.supervisor
        concurrency = sup.concurrency if sup is not None else self.config.fleet.concurrency
        return {
            "generated_at": clock.now().isoformat(),
            "supervisor": self._supervisor(),
            "agents": {"running": counts["running"], "max": concurrency},
            "usage": {"total_tokens": tokens, "cost_usd": round(cost, 6) if costed else None},
            "next_poll_at": self._next_poll(),
            "counts": counts,
            "held": [] if self.source is not None else held_now(self.layout, clock.now()),
            "needs_you": needs.queue(rows, clock.now()),  # what a person must act on, oldest first
            "tickets": rows,
            "warnings": warnings,
        }

    def _supervisor(self) -> dict[str, Any]:
        if self.source is not None:
            return self.source.supervisor()
        if self.supervisor is not None:
            return {"running": True, "pid": os.getpid()}
        try:
            holder = lease.holder(self.layout)
        except (OSError, CairnError):
            holder = None
        pid = holder.pid if holder is not None and holder.pid else None
        return {"running": holder is not None, "pid": pid}

    def _next_poll(self) -> str | None:
        sup = self.supervisor
        due: float | None = getattr(sup, "next_poll", None)
        if sup is None or due is None or (sup.once and due):
            return None  # no supervisor here, or a --once one that polled its only time
        wait = max(0.0, due - time.monotonic())
        return (clock.now() + timedelta(seconds=wait)).isoformat()

    # --- POST /api/v1/refresh ------------------------------------------------------------------

    def refresh(self) -> bool | None:
        """Ask the supervisor to poll the tracker now: None without one, else whether a poll
        was already due (the request joins it). A source reads again instead."""
        if self.source is not None:
            return self.source.refresh()
        sup = self.supervisor
        if sup is None:
            return None
        coalesced = sup.next_poll <= time.monotonic()
        sup.next_poll = 0.0
        sup.wake.set()
        return coalesced

    # --- POST /api/v1/tickets/{id}/pause|resume|stop|retry ---------------------------------------

    def control(self, ticket: str, action: FleetAction, by: Asker) -> dict[str, Any]:
        """Ask ``action`` of ``ticket`` as ``cairn fleet <action> TICKET`` does, without waiting
        for it to be carried out: the supervisor is woken to act at once; with none (a dashboard
        of the files only) the records are changed here, and a running orphan's run is sent
        SIGTERM. Raises ``Refused`` (404 unknown, 409 not applicable), nothing changed."""
        if self.source is not None:
            return self.source.control(ticket, action, by)
        from cairn.fleet import steer

        checked = steer.check(self.layout, self.config, action, [ticket])
        requests = steer.file(self.layout, checked, action, by)
        return self._asked(ticket, action, by, requests, checked.warnings)

    def answer(self, ticket: str, text: str, who: str | None, by: Asker) -> dict[str, Any]:
        """``POST …/answer``: a person's answer to ``ticket`` waiting for input, and its run
        resumed with it (``steer.answer``), as ``control``'s retry."""
        if self.source is not None:
            raise Refused(409, "unsupported_engine", "answers run on the embedded engine only")
        from cairn.fleet import steer

        requests = steer.answer(self.layout, self.config, ticket, text, who or by, by)
        return self._asked(ticket, "retry", by, requests, [])

    def _asked(
        self, ticket: str, action: FleetAction, by: Asker, requests: Any, warnings: list[str]
    ) -> dict[str, Any]:
        from cairn.fleet import fleetcontrol, fleetstate

        warnings += self.carry_out()
        record = fleetstate.read(self.layout, ticket)
        request = requests.get(ticket)
        return {
            "ticket": ticket,
            "action": action,
            "by": by,
            "changed": request is not None,
            "pending": request is not None and fleetcontrol.still_pending(request),
            "state": fleetstate.live_state(record)[0] if record is not None else None,
            "warnings": warnings,
        }

    # --- GET /api/v1/tickets/{id} --------------------------------------------------------------

    def ticket(self, ticket: str) -> dict[str, Any] | None:
        row = self.rows.row(ticket)
        if row is None:
            return None
        outbox.annotate(self.layout, [row])
        view = self.source.view(ticket, row) if self.source is not None else self._local(row)
        actions = self._actions(ticket, row)
        pull = None if self.source is not None else pulls.read(self.layout, ticket)
        if view is None:
            return {"ticket": row, "actions": actions, "pull_request": pull, "summary": "",
                    "base": "", "branch_diff": "", "snapshot_diff": "", "journal": [],
                    "snapshots": []}  # fmt: skip
        git, run_dir = view.git, view.run_dir
        snapshots = self._snapshots(git, ticket, view.snapshot)
        latest = snapshots[0] if snapshots else None
        branch_diff = snapshot_diff = ""
        if view.branch and _exists(git, view.branch):
            branch_diff = _diff(git, f"{view.base}...{view.branch}")
        if latest is not None:
            snapshot_diff = _diff(git, latest["base"] or "", latest["commit"])
        return {
            "ticket": row,
            "actions": actions,
            "pull_request": pull,
            "summary": _summary(run_dir) if run_dir else "",
            "base": view.base_name,
            "branch_diff": branch_diff,
            "snapshot_diff": snapshot_diff,
            "journal": journal_text.tail(run_dir, row.get("asked"), JOURNAL_TAIL),
            "snapshots": snapshots,
        }

    def carry_out(self) -> list[str]:
        """Have the requests just left carried out: the supervisor serving the page is woken to
        act at its next tick; with none, they are carried out here (``control.act_alone``).
        The warnings met."""
        if self.supervisor is not None:
            self.supervisor.wake.set()
            return []
        from cairn.fleet import control

        return control.act_alone(self.layout, self.config, self.repo)

    # --- GET /api/v1/tickets/{id}/transcript -----------------------------------------------------

    def transcript(self, ticket: str, dispatch: int | None, since: int) -> dict[str, Any] | None:
        """The ``cairn logs`` lines of one dispatch of the ticket's run (the latest when
        ``dispatch`` is None) from line ``since`` on, at most ``TRANSCRIPT_LINES`` of them;
        None for an unknown ticket. Raises ``Refused`` (404) for a dispatch the run has not."""
        from cairn.agents.replay import LineReader
        from cairn.state import transcripts

        row = self.rows.row(ticket)
        if row is None:
            return None
        view = self.source.view(ticket, row) if self.source is not None else self._local(row)
        run_dir = view.run_dir if view is not None else None
        found = transcripts.listing(run_dir) if run_dir is not None else []
        answer: dict[str, Any] = {
            "ticket": ticket,
            "run": row.get("run"),
            "dispatches": [{"number": t.number, "role": t.role} for t in found],
            "dispatch": None,
            "role": None,
            "lines": [],
            "next": 0,
            "more": False,
            "live": row.get("state") in ("running", "pausing", "stopping"),
        }
        chosen = [t for t in found if dispatch is None or t.number == dispatch]
        if dispatch is not None and not chosen:
            have = ", ".join(str(t.number) for t in found) or "none"
            raise Refused(
                404,
                "unknown_dispatch",
                f"ticket {ticket}'s run has no transcript of dispatch {dispatch} (it has: {have})",
            )
        if not chosen:
            return answer
        picked = chosen[-1]
        reader = LineReader()
        lines: list[dict[str, Any]] = []
        try:
            with open(picked.path, "rb") as handle:
                data = handle.read(TRANSCRIPT_CAP)
        except OSError:
            data = b""
        complete = data[: data.rfind(b"\n") + 1]  # a line being written is read next time
        for raw in complete.decode("utf-8", "replace").splitlines():
            lines += [line._asdict() for line in reader.feed(raw)]
        shown = lines[max(0, since) :][:TRANSCRIPT_LINES]
        start = min(max(0, since), len(lines))
        answer.update(
            dispatch=picked.number,
            role=picked.role,
            lines=shown,
            next=start + len(shown),
            more=start + len(shown) < len(lines),
        )
        return answer

    def _actions(self, ticket: str, row: dict[str, Any]) -> dict[str, str | None]:
        """Each action on the ticket page: None when its button acts, else why it does not."""
        if self.source is not None:
            return self.source.actions(ticket, row)
        from cairn.fleet import fleetstate
        from cairn.fleet.control import why_not

        record = fleetstate.read(self.layout, ticket)
        if record is None:
            return {}
        state = row["state"]
        if record.state != state:
            record = msgspec.structs.replace(record, state=state)
        return {a: why_not(a, record, self.config) for a in CONTROL_ACTIONS}

    def _local(self, row: dict[str, Any]) -> View:
        """This repository's refs and its fleet's run directory."""
        ticket, branch = row["ticket"], row.get("branch")
        run_dir = self.layout.run_dir(ticket, row["run"]) if row.get("run") else None
        return View(
            self.repo.git,
            "HEAD",
            self.repo.current_branch() or "HEAD",
            f"refs/heads/{branch}" if branch else None,
            wip_ref(self.config, ticket),
            run_dir,
        )

    def _snapshots(self, git: Git, ticket: str, ref: str | None) -> list[dict[str, Any]]:
        if ref is None or not _exists(git, ref):
            return []
        try:
            found = chain(git, ref, SNAPSHOTS)
        except CairnError:
            return []
        now = clock.now()
        listed = []
        for back, snap in enumerate(found):
            age = int((now - datetime.fromisoformat(snap.time)).total_seconds())
            base = snap.base
            listed.append(
                {
                    "ref": f"{ref}~{back}" if back else ref,
                    "commit": snap.commit,
                    "base": base,
                    "time": snap.time,
                    "age_seconds": max(0, age),
                    "reason": snap.reason,
                    "files_changed": snap.files_changed,
                    "inspect": [
                        f"git show --stat {snap.commit}",
                        f"git diff {base} {snap.commit}" if base else f"git show {snap.commit}",
                        f"cairn wip diff {ticket}~{back}" if back else f"cairn wip diff {ticket}",
                    ],
                }
            )
        return listed


def _exists(git: Git, ref: str) -> bool:
    args = ["rev-parse", "-q", "--verify", "--end-of-options", ref]
    return git.run(args, check=False).ok


def _diff(git: Git, *spec: str) -> str:
    """The patch, at most ``DIFF_CAP`` bytes of it: streamed from git and cut, never read
    whole (a page for a diff of gigabytes costs what one of 200 KB costs)."""
    shown = [s for s in spec if s]
    args = ["diff", "--no-ext-diff", "--no-color", "--patch", *shown, "--"]
    result, cut = git.start(args).head(DIFF_CAP)
    if not cut:
        return result.stdout.decode("utf-8", "replace") if result.ok else ""
    text = result.stdout.decode("utf-8", "ignore")  # a character cut in two is dropped
    whole = f"git diff {' '.join(shown)}"
    return f"{text}\n… diff cut at {DIFF_CAP // 1024} KB; `{whole}` shows all of it\n"


def _summary(run_dir: Path) -> str:
    found = latest_artifact(run_dir, SUMMARY_ROLE, SUMMARY_ARTIFACT)
    if found is None:
        return ""
    try:
        data = durable.read_state_file(found.path, "change summary", SUMMARY_CAP)
    except (OSError, BadInput):
        return ""
    return data.decode("utf-8", "replace") if data is not None else ""
