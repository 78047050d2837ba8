"""``cairn worker`` and ``cairn fleet start`` with ``engine = "temporal"``: the fleet beyond one
machine (docs/scale-out.md). They return their exit code or raise; the process that loaded
temporalio leaves without tearing the interpreter down (``cairn.cli.main.leave``)."""

from __future__ import annotations

import asyncio
import json as jsonlib
import os
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from cairn.cli.output import say, say_warning
from cairn.errors import BadInput, ExitCode
from cairn.scale.remote import base_of, fleet_key, url_of

if TYPE_CHECKING:
    from cairn.git import Repo

T = TypeVar("T")


def _need_temporalio() -> None:
    try:
        import temporalio  # noqa: F401
    except ImportError:
        raise BadInput(
            "engine temporal needs the temporal extra; pip install 'cairn-runs[temporal]'"
        ) from None


def _emit(json: bool, kind: str, text: str, **fields: Any) -> None:
    if json:
        sys.stdout.write(jsonlib.dumps({"event": kind, **fields}, default=str) + "\n")
    else:
        say(text.format(**fields))
    sys.stdout.flush()


def _unreachable(address: str, exc: BaseException) -> BadInput:
    why = (str(exc).splitlines() or [repr(exc)])[0][:200]
    return BadInput(
        f"cannot reach Temporal at {address} ({why}); start a server there or fix "
        "[temporal] address in cairn.toml"
    )


def worker(
    engine: str | None, concurrency: int | None, root: Path | None, json: bool, workspace: Path
) -> ExitCode:
    from cairn.config import load
    from cairn.git import Repo

    repo = Repo.discover(workspace)
    config = load(repo.toplevel)
    from cairn.cli.handlers.engines import name_of

    if name_of(engine, config.fleet.engine) != "temporal":
        raise BadInput(
            'cairn worker runs the temporal engine only; set [fleet] engine = "temporal" in '
            "cairn.toml or pass --engine temporal"
        )
    where = (root or repo.toplevel.parent / f"{repo.toplevel.name}.cairn-worker").absolute()
    where.mkdir(parents=True, exist_ok=True)
    from cairn.scale import roots

    owned = roots.claim(where)  # held for the worker's life: one live worker per root
    swept = roots.sweep(where)  # what a dead predecessor left: runs, agents, worktrees, refs
    _need_temporalio()
    from cairn.scale import worker as scale_worker

    slots = concurrency or config.fleet.concurrency
    temporal = config.temporal

    def ready() -> None:
        _emit(
            json,
            "worker_started",
            "worker pid {pid}: task queue {task_queue} at {address}, {concurrency} at once, "
            "in {root}",
            pid=os.getpid(),
            swept=swept,  # tickets a dead predecessor left in the root
            task_queue=temporal.task_queue,
            address=temporal.address,
            concurrency=slots,
            root=str(where),
        )

    run_async(scale_worker.serve(temporal, where, slots, ready), json, temporal.address)
    _emit(json, "worker_stopped", "worker stopped", pid=os.getpid())
    owned.close()
    return ExitCode.OK


def fleet_start(once: bool, json: bool, workspace: Path) -> int:
    from cairn.config import load
    from cairn.fleet.trackers import open_tracker
    from cairn.git import Repo
    from cairn.state.layout import Layout

    repo = Repo.discover(workspace)
    config = load(repo.toplevel)
    _need_temporalio()
    remote = url_of(repo, config.fleet.remote)
    layout = Layout.for_repo(repo, config)
    tracker = open_tracker(repo, config, layout)
    base = base_of(repo, remote, config.fleet.base)
    key = fleet_key(repo, config.fleet.id, config.fleet.remote, config.fleet.base)
    from cairn.fleet.refusals import EVENT, Reporter
    from cairn.scale.starter import drive

    def emit(kind: str, text: str, **fields: Any) -> None:
        if kind in (EVENT, "ticket_warning"):  # a warning where people look, on both outputs
            say_warning(text.format(**fields))
            if not json:
                return
        _emit(json, kind, text, **fields)

    address = config.temporal.address
    reporter = Reporter(layout)
    return run_async(drive(config, tracker, remote, base, key, once, emit, reporter), json, address)


def run_async(main: Coroutine[Any, Any, T], json: bool, address: str) -> T:
    """``main``'s result; a failure to reach Temporal is bad input naming ``address``."""
    try:
        return asyncio.run(main)
    except BadInput:
        raise
    except (OSError, RuntimeError) as exc:
        raise _unreachable(address, exc) from None


def fleet_control(
    action: str, tickets: list[str], wait: float, json: bool, workspace: Path
) -> ExitCode:
    """``cairn fleet stop|pause|resume TICKET…`` on the temporal engine (``stop`` without
    tickets: every running ticket of this repository)."""
    from cairn.config import load
    from cairn.git import Repo

    repo = Repo.discover(workspace)
    config = load(repo.toplevel)
    _need_temporalio()
    remote = url_of(repo, config.fleet.remote)
    key = fleet_key(repo, config.fleet.id, config.fleet.remote, config.fleet.base)
    from cairn.scale import control
    from cairn.scale.connection import connect

    async def main() -> list[control.Done]:
        client = await connect(config.temporal)
        names = tickets or (await control.running(client, key) if action == "stop" else [])
        return await control.act(client, key, action, names, wait)

    done = run_async(main(), json, config.temporal.address)
    for one in done:
        snapshot = _remote_sha(repo, remote, f"refs/cairn/wip/{one.ticket}") if one.changed else ""
        _emit(
            json,
            f"ticket_{action}" if one.changed else "ticket_unchanged",
            _said(action, one.changed, one.state),
            ticket=one.ticket,
            state=one.state,
            workflow_id=one.workflow_id,
            snapshot=snapshot or None,
        )
    if not done:
        _emit(json, "nothing_running", "no ticket of this repository is running")
    return ExitCode.OK


def _said(action: str, changed: bool, state: str) -> str:
    if not changed and action == "resume" and state != "paused":
        hint = "; start a stopped ticket again with cairn fleet start" if state == "stopped" else ""
        return "{ticket}: not paused ({state})" + hint
    if not changed:
        return "{ticket}: unchanged ({state})"
    if action == "resume":
        return "{ticket}: resumed ({state})"
    return (
        "{ticket}: "
        + ("stopped" if action == "stop" else "paused")
        + (" ({state}), snapshot {snapshot} on the shared remote")
    )


def _remote_sha(repo: Repo, remote: str, ref: str) -> str:
    listed = repo.git.run(["ls-remote", "--", remote, ref], check=False)
    return listed.text.split("\t")[0][:12] if listed.ok else ""


def fleet_retry(tickets: list[str], fresh_config: bool, json: bool, workspace: Path) -> ExitCode:
    """``cairn fleet retry TICKET…`` on the temporal engine (``cairn.scale.retrying``)."""
    from cairn import tickets as ticket_ids
    from cairn.config import load
    from cairn.git import Repo

    repo = Repo.discover(workspace)
    config = load(repo.toplevel)
    _need_temporalio()
    asked = list(dict.fromkeys(ticket_ids.validate(name) for name in tickets))
    from cairn.scale import retrying
    from cairn.scale.connection import connect
    from cairn.scale.messages import workflow_id

    async def main() -> retrying.Retried:
        client = await connect(config.temporal)
        return await retrying.retry(client, repo, config, asked, fresh_config, "cli")

    done = run_async(main(), json, config.temporal.address)
    for ticket in asked:
        _emit(
            json,
            "ticket_retried",
            "{ticket}: retried ({was}): workflow {workflow_id} runs again, resuming from what "
            "{remote} holds; config: {config}",
            ticket=ticket,
            was=done.was[ticket],
            workflow_id=workflow_id(done.key, ticket),
            run_id=done.runs[ticket],
            remote=config.fleet.remote,
            config=done.said[ticket],
            fresh_config=fresh_config,
        )
    return ExitCode.OK
