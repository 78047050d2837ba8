"""``cairn fleet service install|uninstall``: the fleet supervisor as a systemd unit (a
launchd agent on macOS) that starts it at login or boot and again when it dies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn.cli.output import emit_json, say
from cairn.cli.parsing import Parser, json_flag, workspace

if TYPE_CHECKING:
    from types import SimpleNamespace

    from cairn.fleet.service import Outcome

WHEN = {"user": "at login", "system": "at boot", "launchd": "at login"}


def _options(parser: Parser) -> SimpleNamespace:
    parser.add_argument(
        "--user",
        action="store_true",
        help="A user unit in ~/.config/systemd/user, started at login (default: a system "
        "unit in /etc/systemd/system, started at boot).",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="Say what it would do; write nothing."
    )
    json_flag(parser)
    workspace(parser)
    return parser.parse()


def install(parser: Parser) -> None:
    """Write a systemd unit that runs this repository's `cairn fleet start` at login (--user)
    or boot, and again if it dies; on macOS print the launchd agent to load instead."""
    args = _options(parser)
    from cairn.fleet import service

    outcome = service.install(
        service.for_repository(args.workspace, user=args.user), dry_run=args.dry_run
    )
    if args.json:
        emit_json(_as_json(outcome, args.dry_run, outcome.service.commands))
        return
    unit = outcome.service
    what = f"cairn fleet start in the repository, {WHEN[unit.scope]}, restarted if it dies"
    if unit.scope == "launchd":
        say(unit.content.rstrip("\n"))
        say(f"save the above as {unit.path} ({what}), then load it:")
    elif args.dry_run:
        say(unit.content.rstrip("\n"))
        verb = "would write" if outcome.changed else "already installed, unchanged:"
        say(f"{verb} {unit.path} ({what}); nothing written (--dry-run)")
    elif outcome.written:
        say(f"wrote {unit.path}: {what}")
    else:
        say(f"already installed: {unit.path}; no change")
    if unit.scope != "launchd":
        say("enable and start it, check it, and follow its output:")
    for command in unit.commands:
        say(f"  {command}")


def uninstall(parser: Parser) -> None:
    """Remove the unit `cairn fleet service install` wrote for this repository (no other file),
    and say how to stop it; on macOS print how to unload and remove the launchd agent."""
    args = _options(parser)
    from cairn.fleet import service

    unit = service.for_repository(args.workspace, user=args.user, installing=False)
    outcome = service.uninstall(unit, dry_run=args.dry_run)
    commands = service.uninstall_commands(outcome.service)
    if args.json:
        emit_json(_as_json(outcome, args.dry_run, commands))
        return
    unit = outcome.service
    link = f" and its link {outcome.wants_link}" if outcome.wants_link else ""
    if unit.scope == "launchd":
        say(f"unload and remove {unit.path}:")
    elif args.dry_run:
        say(f"would remove {unit.path}{link}; nothing removed (--dry-run)")
    else:
        say(f"removed {unit.path}{link}")
    if unit.scope != "launchd":
        say("stop it if it still runs, and make systemd forget it:")
    for command in commands:
        say(f"  {command}")


def _as_json(outcome: Outcome, dry_run: bool, commands: list[str]) -> dict[str, object]:
    unit = outcome.service
    return {
        "unit": unit.unit,
        "path": str(unit.path),
        "scope": unit.scope,
        "dry_run": dry_run,
        "changed": outcome.changed,
        "written": outcome.written,
        "wants_link": str(outcome.wants_link) if outcome.wants_link else None,
        "content": unit.content,
        "commands": commands,
    }
