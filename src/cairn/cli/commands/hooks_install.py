"""``cairn hooks install|uninstall claude``: cairn's safety net for Claude Code driven by hand."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn.cli.output import emit_json, say
from cairn.cli.parsing import Parser, json_flag, workspace
from cairn.errors import BadInput

if TYPE_CHECKING:
    from types import SimpleNamespace

    from cairn.integrations.claude_settings import Scope, SettingsResult

AGENTS = ("claude",)


def _options(parser: Parser) -> SimpleNamespace:
    parser.add_argument("agent", help="The agent whose settings to edit: claude.")
    parser.add_argument(
        "--project",
        action="store_true",
        help="<repo>/.claude/settings.json, shared with the repo (the default).",
    )
    parser.add_argument(
        "--local",
        action="store_true",
        help="<repo>/.claude/settings.local.json, this checkout only.",
    )
    parser.add_argument(
        "--user", action="store_true", help="~/.claude/settings.json, every project of this user."
    )
    json_flag(parser)
    workspace(parser)
    args = parser.parse()
    _check(args.agent)
    return args


def install(parser: Parser) -> None:
    """Add cairn's hooks to Claude Code's settings; every other key and hook is kept."""
    args = _options(parser)
    from cairn.integrations import claude_settings

    scope = _scope(args.project, args.local, args.user)
    result = claude_settings.install(
        claude_settings.settings_path(scope, args.workspace),
        claude_settings.state_root(args.workspace),
    )
    excluded = None
    if scope == "local":  # this checkout's file: git must never offer to commit it
        from cairn.integrations.local_exclude import exclude

        excluded = exclude(args.workspace, result.path)
    if args.json:
        emit_json({**_as_json(result, scope), "excluded": str(excluded) if excluded else None})
    else:
        _report(result, scope, installing=True)
        if excluded is not None:
            say(f"  {result.path.name} added to {excluded}: git will not offer it")


def uninstall(parser: Parser) -> None:
    """Remove cairn's hooks (and only them) from Claude Code's settings."""
    args = _options(parser)
    from cairn.integrations import claude_settings

    scope = _scope(args.project, args.local, args.user)
    result = claude_settings.uninstall(
        claude_settings.settings_path(scope, args.workspace),
        claude_settings.state_root(args.workspace),
    )
    included = None
    if scope == "local" and not result.path.exists():  # the file is gone: so is its entry
        from cairn.integrations.local_exclude import unexclude

        included = unexclude(args.workspace, result.path)
    if args.json:
        emit_json(_as_json(result, scope))
    else:
        _report(result, scope, installing=False)
        if included is not None:
            say(f"  {result.path.name} taken out of {included} again")


def _check(agent: str) -> None:
    if agent not in AGENTS:
        raise BadInput(f"unknown agent {agent!r}; cairn hooks supports: {', '.join(AGENTS)}")


def _scope(project: bool, local: bool, user: bool) -> Scope:
    chosen = [name for name, on in (("project", project), ("local", local), ("user", user)) if on]
    if len(chosen) > 1:
        flags = " and ".join(f"--{name}" for name in chosen)
        raise BadInput(f"{flags} cannot be combined; pick one settings file")
    return chosen[0] if chosen else "project"  # type: ignore[return-value]


def _as_json(result: SettingsResult, scope: Scope) -> dict[str, object]:
    return {
        "path": str(result.path),
        "scope": scope,
        "changed": result.changed,
        "written": result.written,
        "changes": [
            {"event": c.event, "command": c.command, "action": c.action, "purpose": c.purpose}
            for c in result.changes
        ],
    }


def _report(result: SettingsResult, scope: Scope, *, installing: bool) -> None:
    from cairn.integrations.claude_settings import MARK, wanted

    where = f"{result.path} ({scope})"
    if installing and not result.changed:
        say(f"cairn's Claude Code hooks are already installed in {where}; no change")
        return
    if not installing and not result.changes:
        say(f"no cairn hooks in {where}; no change")
        return
    verb = "installed in" if installing else "removed from"
    say(f"cairn's Claude Code hooks {verb} {where}")
    if result.outcome == "restored":
        say("  the file is back to what it was before install, byte for byte")
    elif result.outcome == "removed":
        say("  install created the file, so it is gone again (and .claude/ if empty)")
    elif result.outcome == "stripped":
        say("  only cairn's entries were taken out; the rest is kept as it is")
    sign = {"added": "+", "updated": "~", "unchanged": "=", "removed": "-"}
    rows = [(c, c.command.split(f" {MARK} ", 1)[-1]) for c in result.changes]
    width = max(len(c.event) for c, _ in rows)
    what_width = max(len(what) for _, what in rows)
    for change, what in rows:
        note = f" ({change.action})" if change.action in ("updated", "unchanged") else ""
        line = f"  {sign[change.action]} {change.event:<{width}}  {what:<{what_width}}"
        say(f"{line}  {change.purpose}{note}".rstrip())
    if installing:
        python = next(iter(wanted().values())).split(" -m cairn ", 1)[0]
        say(
            f"  the hooks run {python} -m cairn: this interpreter, by absolute path, so they "
            "work whatever PATH Claude has; run this again if that environment moves"
        )
        if scope == "project":
            say(
                "  that path is this machine's: before committing .claude/settings.json, "
                "prefer --local or --user if teammates use other paths"
            )
        say(f"  remove them with: cairn hooks uninstall claude --{scope}")
