"""``cairn fleet start`` and ``cairn fleet stop``: the supervisor in the foreground, and the
request that stops it from another shell."""

from __future__ import annotations

import json as jsonlib
import sys
import time
from pathlib import Path
from typing import Any

from cairn.cli.output import console, err_console

STOP_WAIT = 600.0  # seconds `fleet stop` waits for the supervisor to save and exit

_LINES = {
    "fleet_started": "fleet supervisor pid {pid}: up to {concurrency} tickets at once",
    "ticket_queued": "{ticket}: queued ({plan})",
    "ticket_adopted": "{ticket}: still running (pid {pid}) from the supervisor before; watching it",
    "ticket_recovered": "{ticket}: its supervisor died mid-attempt; it is resumed first",
    "ticket_warning": "cairn: warning: {who}{message}",  # on stderr, as every warning
    "ticket_started": "{ticket}: attempt {attempt} ({command}) in {worktree}",
    "ticket_stalled": "{ticket}: no progress for {idle}s; stopping it as a stall",
    "ticket_retrying": "{ticket}: attempt {attempt} interrupted ({detail})",
    "ticket_finished": "{ticket}: {state}{detail_text}",
    "waiting": "{message}",
    "fleet_stopping": "stopping: {count} running tickets are saving a snapshot{message_text}",
    "fleet_killing": "third stop: killing {count} running tickets",
    "fleet_finished": "fleet: {totals} (exit {exit_code})",
}


def _emitter(json: bool) -> Any:
    def emit(kind: str, **fields: Any) -> None:
        if json:
            sys.stdout.write(jsonlib.dumps({"event": kind, **fields}, default=str) + "\n")
            sys.stdout.flush()
            return
        shown = dict(fields)
        shown["detail_text"] = f" — {fields['detail']}" if fields.get("detail") else ""
        shown["message_text"] = f" ({fields['message']})" if fields.get("message") else ""
        shown["count"] = len(fields.get("running") or [])
        shown["who"] = f"{fields['ticket']}: " if fields.get("ticket") else ""
        if kind == "fleet_finished":
            counts: dict[str, int] = {}
            for state in fields["tickets"].values():
                counts[state] = counts.get(state, 0) + 1
            shown["totals"] = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "empty"
        (err_console if kind == "ticket_warning" else console).print(_LINES[kind].format(**shown))
        sys.stdout.flush()

    return emit


def start(once: bool, concurrency: int | None, json: bool, workspace: Path) -> int:
    from cairn.fleet.supervisor import Supervisor

    supervisor = Supervisor(workspace, once=once, concurrency=concurrency, emit=_emitter(json))
    return supervisor.run()


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
            jsonlib.dumps({"supervisor": holder.model_dump(mode="json"), "stopped": stopped}) + "\n"
        )
    elif stopped:
        console.print(f"fleet supervisor {holder.describe()} stopped")
    else:
        console.print(f"asked fleet supervisor {holder.describe()} to stop")
