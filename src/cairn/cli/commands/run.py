"""``cairn run PLAN`` and ``cairn resume [TICKET]``: orchestrated, interruption-proof runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from cairn.agents import ADAPTERS
from cairn.cli.commands.options import Json, Workspace
from cairn.cli.output import console, guarded

if TYPE_CHECKING:
    from cairn.run.events import EventSink
    from cairn.run.orchestrator import RunOutcome

Agent = Annotated[
    str | None,
    typer.Option(
        "--agent",
        metavar=f"<{'|'.join(ADAPTERS)}>",
        help="Agent kind (default: agent.kind in cairn.toml).",
    ),
]
MaxTurns = Annotated[
    int | None, typer.Option("--max-turns", min=1, help="Turn cap of every dispatch.")
]
Takeover = Annotated[
    bool, typer.Option("--takeover", help="Take over a stale lease held by another host.")
]
AllowShared = Annotated[
    bool,
    typer.Option(
        "--allow-shared",
        help="Run even while another ticket runs in this work tree (each snapshots the other's "
        "files).",
    ),
]
Quiet = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="Leave out the agent's tool calls and messages; show only cairn's own lines.",
    ),
]


@guarded
def run(
    plan: Annotated[Path, typer.Argument(help="Plan file: markdown, checklist, YAML or JSON.")],
    ticket: Annotated[
        str | None, typer.Option("--ticket", "-t", help="Ticket id (default: from the plan).")
    ] = None,
    agent: Agent = None,
    max_turns: MaxTurns = None,
    takeover: Takeover = False,
    allow_shared: AllowShared = False,
    quiet: Quiet = False,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Run a plan: implement, review, fix; any stop is saved and resumable (exit 3)."""
    from cairn.run import launch

    _drive(
        json,
        quiet,
        lambda sink: launch.run(
            workspace,
            plan,
            ticket=ticket,
            agent=agent,
            max_turns=max_turns,
            takeover=takeover,
            allow_shared=allow_shared,
            sink=sink,
        ),
    )


@guarded
def resume(
    ticket: Annotated[
        str | None, typer.Argument(help="Ticket id (default: the branch name).")
    ] = None,
    agent: Agent = None,
    max_turns: MaxTurns = None,
    takeover: Takeover = False,
    allow_shared: AllowShared = False,
    quiet: Quiet = False,
    json: Json = False,
    workspace: Workspace = Path("."),
) -> None:
    """Continue an interrupted run in its run directory; never touches the work tree (a fleet
    ticket's run goes on in its worktree, wherever this is typed)."""
    from cairn.fleet import byhand

    _drive(
        json,
        quiet,
        lambda sink: byhand.resume(
            workspace,
            ticket,
            agent=agent,
            max_turns=max_turns,
            takeover=takeover,
            allow_shared=allow_shared,
            sink=sink,
        ),
    )


def _drive(json: bool, quiet: bool, start: Callable[[EventSink], RunOutcome]) -> None:
    from cairn.cli.display import Display, pick_mode
    from cairn.run.orchestrator.signals import ignore_stall_signal

    ignore_stall_signal()
    display = Display(pick_mode(json), quiet=quiet)
    display.open()
    try:
        outcome = start(display)
    finally:
        display.close()
    _finish(outcome, json)


def needs_input_lines(outcome: RunOutcome) -> list[str]:
    """What a person reads when the agent made no progress: why, and what to do. Claude Code's
    refused commands (``Bash``) are let through by ``agent.allow``; Codex's (``exec``) by its
    sandbox (``accounting.denial_hint``)."""
    from cairn.state import accounting

    denials = (outcome.blocker or {}).get("denials") or []
    lines = [f"The agent stopped making progress: {outcome.error or 'no progress'}"]
    then = f"then: cairn resume {outcome.ticket}"
    programs: list[str] = []
    for denial in denials:
        words = str(denial.get("target") or "").split()
        if words and denial.get("tool") == "Bash" and words[0] not in programs:
            programs.append(words[0])
    if programs:
        allowed = ", ".join(f'"{p}"' for p in programs)
        lines.append(
            f"To let it run them: add them to agent.allow in cairn.toml (allow = [{allowed}]),"
        )
        lines.append(f"or do what it needs yourself; {then}")
    elif any(d.get("tool") == "exec" for d in denials):
        lines.append(f"{accounting.denial_hint('codex')}; {then}")
    else:
        lines.append(f"Give it what it needs (answer it in the plan, fix the blocker), {then}")
    return lines


def _finish(outcome: RunOutcome, json: bool) -> None:
    if json:
        typer.echo(msgspec.json.encode(outcome).decode())
    else:
        console.print(
            f"{outcome.status.replace('_', ' ')}: ticket {outcome.ticket}, run {outcome.run}"
        )
        if outcome.status == "interrupted":
            why = f"{outcome.reason}: {outcome.error}" if outcome.error else outcome.reason
            console.print(f"  Interrupted — {why}")
        if outcome.status == "needs_input":
            for line in needs_input_lines(outcome):
                console.print(f"  {line}", markup=False, highlight=False)
        console.print(f"  change summary: {outcome.summary_path}")
        if outcome.snapshot:
            console.print(f"  last snapshot: {outcome.snapshot[:12]}")
        if outcome.next_command:
            console.print(f"  next: {outcome.next_command}")
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)
