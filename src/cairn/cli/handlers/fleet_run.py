"""``cairn fleet start`` and ``cairn fleet stop``: the supervisor in the foreground, and the
request that stops it from another shell."""

from __future__ import annotations

import json as jsonlib
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from cairn.cli.output import say, say_warning

if TYPE_CHECKING:
    from cairn.fleet.supervisor import Supervisor

STOP_WAIT = 600.0  # seconds `fleet stop` waits for the supervisor to save and exit

_LINES = {
    "fleet_started": "fleet supervisor pid {pid}: up to {concurrency} tickets at once",
    "ticket_queued": "{ticket}: queued ({plan})",
    "ticket_adopted": "{ticket}: still running (pid {pid}) from the supervisor before; watching it",
    "ticket_recovered": "{ticket}: its supervisor died mid-attempt; it is resumed first",
    "ticket_command": "{ticket}: /cairn {verb} on its issue — {said}",
    "ticket_told": "{ticket}: {state}, told now (its supervisor died before it told it)",
    "ticket_started": "{ticket}: attempt {attempt} ({command}) in {worktree}",
    "ticket_stalled": "{ticket}: no progress for {idle}s; stopping it as a stall",
    "ticket_retrying": "{ticket}: attempt {attempt} interrupted ({detail})",
    "ticket_waiting": "{ticket}: waiting until {next_attempt_at} ({detail})",
    "ticket_finished": "{ticket}: {state}{detail_text}",
    "waiting": "{message}",
    "ticket_pause": "{ticket}: {state} (asked by cairn fleet pause)",
    "ticket_stop": "{ticket}: {state} (asked by cairn fleet stop)",
    "ticket_resume": "{ticket}: {state} (asked by cairn fleet resume)",
    "ticket_unchanged": "{ticket}: unchanged ({state}){detail_text}",
    "ticket_restarted": "{ticket}: stopped before; started again ({state})",
    "fleet_stopping": "stopping: {count} running tickets are saving a snapshot{message_text}",
    "fleet_killing": "third stop: killing {count} running tickets",
    "fleet_finished": "fleet: {totals} (exit {exit_code})",
}


def _emitter(json: bool) -> Any:
    def emit(kind: str, **fields: Any) -> None:
        if kind == "ticket_refused":  # a warning where people look, on both outputs
            say_warning(f"refused: {fields['reason']}")
            if not json:
                return
        if kind == "ticket_warning":  # the same: what was set right or skipped
            who = f"{fields['ticket']}: " if fields.get("ticket") else ""
            say_warning(f"{who}{fields['message']}")
            if not json:
                return
        if json:
            sys.stdout.write(jsonlib.dumps({"event": kind, **fields}, default=str) + "\n")
            sys.stdout.flush()
            return
        shown = dict(fields)
        shown["detail_text"] = f" — {fields['detail']}" if fields.get("detail") else ""
        shown["message_text"] = f" ({fields['message']})" if fields.get("message") else ""
        shown["count"] = len(fields.get("running") or [])
        if kind == "fleet_budget":
            from cairn.fleet.budget import line

            say(line(fields))
            sys.stdout.flush()
            return
        if kind == "fleet_finished":
            counts: dict[str, int] = {}
            for state in fields["tickets"].values():
                counts[state] = counts.get(state, 0) + 1
            if fields.get("refused"):
                counts["refused"] = fields["refused"]
            totals = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
            if not totals and fields.get("tracker_error"):
                totals = "nothing listed, the tracker could not be read"
            shown["totals"] = totals or "empty"
        say(_LINES[kind].format(**shown))
        sys.stdout.flush()

    return emit


def start(once: bool, concurrency: int | None, json: bool, workspace: Path) -> int:
    return supervisor_for(once, concurrency, json, workspace).run()


def supervisor_for(once: bool, concurrency: int | None, json: bool, workspace: Path) -> Supervisor:
    """The supervisor of ``cairn fleet start``, once the configuration its runs read is known
    to be committed (their worktrees are made from a commit)."""
    from cairn.fleet import committed
    from cairn.fleet.supervisor import Supervisor

    supervisor = Supervisor(workspace, once=once, concurrency=concurrency, emit=_emitter(json))
    committed.check(supervisor.repo, supervisor.config)
    return supervisor


def stop(wait: bool, json: bool, workspace: Path) -> None:
    from cairn.errors import BadInput
    from cairn.fleet import lease
    from cairn.state.layout import discover

    _, _, layout = discover(workspace)
    holder = lease.holder(layout)
    if holder is None:
        raise BadInput(
            "no fleet supervisor runs for this repository; nothing to stop "
            "(cairn fleet status shows the tickets)"
        )
    lease.request_stop(layout)
    stopped = False
    if wait:
        deadline = time.monotonic() + STOP_WAIT
        while time.monotonic() < deadline and lease.holder(layout) is not None:
            time.sleep(0.1)
        stopped = lease.holder(layout) is None
    if json:
        sys.stdout.write(
            jsonlib.dumps({"supervisor": msgspec.to_builtins(holder), "stopped": stopped}) + "\n"
        )
    elif stopped:
        say(f"fleet supervisor {holder.describe()} stopped")
    else:
        say(f"asked fleet supervisor {holder.describe()} to stop")
