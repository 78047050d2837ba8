"""``cairn run PLAN`` and ``cairn resume [TICKET]``: orchestrated, interruption-proof runs."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from cairn.agents import ADAPTERS
from cairn.cli.output import say
from cairn.cli.parsing import (
    Parser,
    amount,
    as_path,
    integer,
    json_flag,
    remote_name,
    workspace,
)

if TYPE_CHECKING:
    from cairn.run.events import EventSink
    from cairn.run.orchestrator import RunOutcome
    from cairn.run.orchestrator.outcome import Remote


def _run_options(parser: Parser) -> None:
    """The options ``run`` and ``resume`` share: the agent, its turn cap, who may run, what
    the display shows, ``--json`` and ``-C``."""

    parser.add_argument(
        "--agent",
        metavar=f"<{'|'.join(ADAPTERS)}|NAME>",
        help="Agent kind, or a named agent ([agents.NAME]) (default: agent.kind in cairn.toml); "
        "its fallback chain follows it.",
    )
    parser.add_argument(
        "--max-turns", type=integer(minimum=1), metavar="N", help="Turn cap of every dispatch."
    )
    parser.add_argument(
        "--max-cost-usd",
        type=amount,
        metavar="X",
        help="This session's cost cap in USD (agent.max_cost_usd; 0: none).",
    )
    parser.add_argument(
        "--remote",
        type=remote_name,
        metavar="NAME",
        help="Push the ticket's branch, snapshot and run state to this git remote at every "
        "task, checkpoint and cutoff, so any clone resumes it (default: [run] remote).",
    )
    parser.add_argument(
        "--no-remote",
        dest="remote",
        action="store_const",
        const="",
        help="Push nowhere, whatever [run] remote says.",
    )
    parser.add_argument(
        "--takeover", action="store_true", help="Take over a stale lease held by another host."
    )
    parser.add_argument(
        "--allow-shared",
        action="store_true",
        help="Run even while another ticket runs in this work tree (each snapshots the other's "
        "files).",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="Leave out the agent's tool calls and messages; show only cairn's own lines.",
    )
    json_flag(parser)
    workspace(parser)


def run(parser: Parser) -> int:
    """Run a plan: implement, review, fix; any stop is saved and resumable (exit 3)."""
    parser.add_argument("plan", type=as_path, help="Plan file: markdown, checklist, YAML or JSON.")
    parser.add_argument("-t", "--ticket", help="Ticket id (default: from the plan).")
    _run_options(parser)
    args = parser.parse()
    from cairn.run import launch

    return _drive(
        args.json,
        args.quiet,
        lambda sink: launch.run(
            args.workspace,
            args.plan,
            ticket=args.ticket,
            agent=args.agent,
            max_turns=args.max_turns,
            takeover=args.takeover,
            allow_shared=args.allow_shared,
            sink=sink,
            remote=args.remote,
            max_cost_usd=args.max_cost_usd,
        ),
    )


def resume(parser: Parser) -> int:
    """Continue an interrupted run in its run directory; never touches the work tree (a fleet
    ticket's run goes on in its worktree, wherever this is typed)."""
    parser.add_argument("ticket", nargs="?", help="Ticket id (default: the branch name).")
    _run_options(parser)
    args = parser.parse()
    from cairn.fleet import byhand

    return _drive(
        args.json,
        args.quiet,
        lambda sink: byhand.resume(
            args.workspace,
            args.ticket,
            agent=args.agent,
            max_turns=args.max_turns,
            takeover=args.takeover,
            allow_shared=args.allow_shared,
            sink=sink,
            remote=args.remote,
            max_cost_usd=args.max_cost_usd,
        ),
    )


def answer(parser: Parser) -> int:
    """Answer what a ticket's agent stopped for (its run ended needs input), then resume the
    run with the answer in the agent's prompt (a fleet ticket's in its worktree)."""
    parser.add_argument("ticket", help="Ticket id.")
    parser.add_argument("text", help="The answer, as the agent will read it.")
    parser.add_argument("--by", help="Who answers (default: git config user.name).")
    _run_options(parser)
    args = parser.parse()
    from cairn import tickets
    from cairn.fleet import byhand
    from cairn.run import answers, launch, portable
    from cairn.state.layout import Layout, discover

    repo, config, layout = discover(args.workspace)
    ticket = tickets.validate(args.ticket)
    by = args.by or answers.who(repo)
    remote = portable.chosen(config, args.remote)
    if remote is not None:  # the run the remote holds comes here first: the answer goes in it

        def waits(pushed: Layout) -> None:
            answers.check(pushed, ticket, args.text)

        vet = launch.remote_vet(repo, config, ticket, args.takeover, also=waits)
        portable.opened(repo, config, layout, ticket, remote, new=False, vet=vet)
        repo, config, layout = discover(args.workspace)
    answers.record(layout, ticket, args.text, by)
    return _drive(
        args.json,
        args.quiet,
        lambda sink: byhand.resume(
            args.workspace,
            ticket,
            agent=args.agent,
            max_turns=args.max_turns,
            takeover=args.takeover,
            allow_shared=args.allow_shared,
            sink=sink,
            remote=args.remote,
            max_cost_usd=args.max_cost_usd,
        ),
    )


def _drive(json: bool, quiet: bool, start: Callable[[EventSink], RunOutcome]) -> int:
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
    _report_to_actions(outcome)
    return outcome.exit_code


def _report_to_actions(outcome: RunOutcome) -> None:
    """Inside GitHub Actions: the step summary and the issue's one comment (docs/ci.md)."""
    import os

    from cairn.ci import in_actions

    if in_actions(os.environ):
        from cairn.ci.actions import report
        from cairn.cli.output import say_warning

        for warning in report(outcome, os.environ):
            say_warning(warning)


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
        lines.append(f"Give it what it needs (fix the blocker), {then}")
        lines.append(f'or answer it: cairn answer {outcome.ticket} "what it needs" (resumes it)')
    return lines


def _pushed(remote: Remote) -> str:
    """Where a --remote run's pushes left it, or why its last one did not get there."""
    if remote.fenced is not None:
        return f"not pushed: {remote.fenced}"
    if not remote.pushed:
        return f"NOT pushed to {remote.name}: {remote.error}; it is saved here"
    shas = [f"{remote.branch} {remote.commit[:12]}" if remote.commit else remote.branch]
    shas += [f"snapshot {remote.snapshot[:12]}"] if remote.snapshot else []
    shas += [f"run state {remote.state[:12]}"] if remote.state else []
    return f"pushed to {remote.name}: {', '.join(shas)}"


def _finish(outcome: RunOutcome, json: bool) -> None:
    if json:
        sys.stdout.write(msgspec.json.encode(outcome).decode() + "\n")
    else:
        say(f"{outcome.status.replace('_', ' ')}: ticket {outcome.ticket}, run {outcome.run}")
        if outcome.status == "interrupted":
            why = f"{outcome.reason}: {outcome.error}" if outcome.error else outcome.reason
            say(f"  Interrupted — {why}")
        if outcome.status == "needs_input":
            for line in needs_input_lines(outcome):
                say(f"  {line}")
        say(f"  change summary: {outcome.summary_path}")
        if outcome.snapshot:
            say(f"  last snapshot: {outcome.snapshot[:12]}")
        if outcome.remote is not None:
            say(f"  {_pushed(outcome.remote)}")
        if outcome.next_command:
            say(f"  next: {outcome.next_command}")
