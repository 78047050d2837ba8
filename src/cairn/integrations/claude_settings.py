"""Install cairn's hooks into a Claude Code settings file, and take them out again.

For people who drive Claude Code by hand: the hooks give them cairn's safety net (catch-up at
session start, snapshots before compaction and at every stop, a marker heartbeat) without
``cairn run``. The file is merged, never clobbered: every other key and every other hook stays
as it was. cairn's entries are recognised by their command containing ``cairn hook claude``, so
installing twice changes nothing and uninstalling removes only them.

Each command names this interpreter by absolute path (``<python> -m cairn hook claude …``): Claude
runs hooks with its own ``PATH``, where ``cairn`` may not be found.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cairn.errors import BadInput
from cairn.util import durable

Scope = Literal["project", "local", "user"]
Action = Literal["added", "updated", "unchanged", "removed"]

MARK = "cairn hook claude"
MATCHER = "*"
READ_LIMIT = 4 * 1024 * 1024

# event → (arguments after ``cairn hook claude``, what it does)
HOOKS: dict[str, tuple[tuple[str, ...], str]] = {
    "SessionStart": (
        ("session-start",),
        "tells Claude where an interrupted run stopped",
    ),
    "PreCompact": (
        ("snapshot", "--reason", "pre-compact"),
        "snapshots uncommitted work before the context is compacted",
    ),
    "Stop": (
        ("snapshot", "--reason", "stop"),
        "snapshots uncommitted work each time Claude stops",
    ),
    "SessionEnd": (
        ("snapshot", "--reason", "session-end"),
        "snapshots uncommitted work when the session ends",
    ),
    "PostToolUse": (
        ("heartbeat",),
        "keeps the ticket's progress marker fresh",
    ),
}


@dataclass(frozen=True)
class Change:
    event: str
    command: str
    action: Action
    purpose: str = ""


@dataclass
class SettingsResult:
    path: Path
    changes: list[Change] = field(default_factory=list)
    written: bool = False
    created: bool = False
    # uninstall: the file as it was before install put back byte for byte ("restored"), or
    # removed with the directory cairn made for it ("removed"), or only cairn's entries out
    outcome: Literal["restored", "removed", "stripped"] | None = None

    @property
    def changed(self) -> bool:
        return any(c.action != "unchanged" for c in self.changes)


def hook_command(*args: str) -> str:
    """The shell command Claude runs: this interpreter, by absolute path."""
    return shlex.join([sys.executable, "-m", "cairn", "hook", "claude", *args])


def wanted() -> dict[str, str]:
    """Event → the command cairn installs for it."""
    return {event: hook_command(*args) for event, (args, _) in HOOKS.items()}


def is_cairn(hook: Any) -> bool:
    """Whether one hook item (``{"type": "command", "command": …}``) is cairn's."""
    return isinstance(hook, dict) and MARK in str(hook.get("command") or "")


def settings_path(scope: Scope, workspace: Path | str = ".") -> Path:
    """``.claude/settings.json`` at the work tree's top (``settings.local.json`` for ``local``),
    or ``~/.claude/settings.json`` for ``user``."""
    if scope == "user":
        return Path.home() / ".claude" / "settings.json"
    from cairn.git import Repo

    toplevel = Repo.discover(workspace).toplevel
    name = "settings.local.json" if scope == "local" else "settings.json"
    return toplevel / ".claude" / name


# --- pure merging ---------------------------------------------------------------------------


def merge(settings: dict[str, Any], commands: dict[str, str], where: str) -> list[Change]:
    """Add ``commands`` (event → command) to ``settings["hooks"]`` in place; what changed.

    An event that already holds exactly the wanted command, and no other cairn hook, is left
    alone. Otherwise its cairn hooks (an older interpreter path, a duplicate) are taken out and
    one fresh entry is appended after the user's own.
    """
    hooks = settings.get("hooks")
    if hooks is None:
        hooks = {}
    if not isinstance(hooks, dict):
        raise BadInput(f'{where}: "hooks" is not a JSON object; fix the file, then run again')
    changes: list[Change] = []
    for event, command in commands.items():
        purpose = HOOKS[event][1] if event in HOOKS else ""
        groups = hooks.get(event)
        if groups is None:
            groups = []
        if not isinstance(groups, list):
            raise BadInput(
                f'{where}: "hooks.{event}" is not a JSON array; fix the file, then run again'
            )
        ours = [h for g in groups if isinstance(g, dict) for h in _items(g) if is_cairn(h)]
        if len(ours) == 1 and ours[0].get("command") == command:
            changes.append(Change(event, command, "unchanged", purpose))
            continue
        if ours:
            groups = _without_cairn(groups)
        groups.append({"matcher": MATCHER, "hooks": [{"type": "command", "command": command}]})
        hooks[event] = groups
        changes.append(Change(event, command, "updated" if ours else "added", purpose))
    if any(c.action != "unchanged" for c in changes):
        settings["hooks"] = hooks
    return changes


def strip(settings: dict[str, Any], where: str) -> list[Change]:
    """Remove every cairn hook from ``settings`` in place, and the groups, event arrays and
    ``hooks`` object that became empty because of it; what was removed."""
    hooks = settings.get("hooks")
    if hooks is None:
        return []
    if not isinstance(hooks, dict):
        raise BadInput(f'{where}: "hooks" is not a JSON object; fix the file, then run again')
    changes: list[Change] = []
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        found = [h for g in groups if isinstance(g, dict) for h in _items(g) if is_cairn(h)]
        if not found:
            continue
        purpose = HOOKS[event][1] if event in HOOKS else ""
        changes += [Change(event, str(h.get("command")), "removed", purpose) for h in found]
        remaining = _without_cairn(groups)
        if remaining:
            hooks[event] = remaining
        else:
            del hooks[event]
    if changes and not hooks:
        del settings["hooks"]
    return changes


def _items(group: dict[str, Any]) -> list[Any]:
    items = group.get("hooks")
    return items if isinstance(items, list) else []


def _without_cairn(groups: list[Any]) -> list[Any]:
    """``groups`` minus cairn's hook items; a group emptied by that goes too."""
    kept: list[Any] = []
    for group in groups:
        if not isinstance(group, dict) or not any(is_cairn(h) for h in _items(group)):
            kept.append(group)
            continue
        rest = [h for h in _items(group) if not is_cairn(h)]
        if rest:
            kept.append({**group, "hooks": rest})
    return kept


# --- the file -------------------------------------------------------------------------------


def install(path: Path, keep: Path | None = None) -> SettingsResult:
    """Merge cairn's hooks into the settings file at ``path`` (created when missing), in the
    file's own indentation. With ``keep`` (the state root), the file as it was first is kept
    there so that uninstall can put it back byte for byte."""

    target, settings, existed = _load(path)
    result = SettingsResult(path=target)
    result.changes = merge(settings, wanted(), str(target))
    if result.changed:
        before = target.read_bytes() if existed else b""
        text = render(settings, before.decode("utf-8-sig") if existed else None)
        if keep is not None:
            _remember(keep, target, existed, before, text, result.changes)
        _save(target, text, existed)
        result.written, result.created = True, not existed
    return result


def _remember(
    keep: Path, target: Path, existed: bool, before: bytes, text: str, changes: list[Change]
) -> None:
    """Record the file as it was before cairn's first install, and the bytes written now. A
    file that already held cairn's hooks keeps its first record (re-install); without one (an
    older cairn installed them) nothing is recorded and uninstall strips cairn's entries."""
    from cairn.integrations import settings_backup as backup

    prior = backup.load(keep, target)
    ours_before = any(c.action != "added" for c in changes)
    if ours_before and prior is None:
        return
    if prior is None or not ours_before:
        prior = backup.Original(existed, before, not os.path.lexists(target.parent), "")
    prior.installed = backup.digest(text.encode("utf-8"))
    backup.save(keep, target, prior)


def state_root(workspace: Path | str) -> Path | None:
    """Where install keeps the original settings: the state root of the repository at
    ``workspace``; None outside a repository (uninstall then takes out cairn's entries only)."""
    from cairn.errors import CairnError
    from cairn.state.layout import discover

    try:
        return discover(workspace)[2].root
    except CairnError:
        return None


def uninstall(path: Path, keep: Path | None = None) -> SettingsResult:
    """Take cairn's hooks out of the settings file at ``path``. While the file holds exactly
    what install wrote, what was there before comes back byte for byte (no file, and no
    ``.claude/`` directory if cairn made it, when there was none). Once someone edited it, only
    cairn's entries come out, in the file's own indentation; a file cairn created that holds
    nothing else then goes too. A missing file is left missing."""
    from cairn.integrations import settings_backup as backup

    target, settings, existed = _load(path)
    result = SettingsResult(path=target)
    prior = backup.load(keep, target)
    if not existed:
        backup.forget(keep if prior else None, target)
        return result
    result.changes = strip(settings, str(target))
    if not result.changes:
        backup.forget(keep if prior else None, target)
        return result
    current = target.read_bytes()
    untouched = prior is not None and backup.digest(current) == prior.installed
    if prior is not None and untouched and prior.existed:
        _save(target, prior.data, True)
        result.outcome = "restored"
    elif prior is not None and not prior.existed and (untouched or not settings):
        durable.remove(target)
        if prior.dir_created:
            with contextlib.suppress(OSError):  # not empty: someone put more there
                target.parent.rmdir()
        result.outcome = "removed"
    else:
        _save(target, render(settings, current.decode("utf-8-sig")), True)
        result.outcome = "stripped"
    result.written = True
    backup.forget(keep if prior else None, target)
    return result


def _load(path: Path) -> tuple[Path, dict[str, Any], bool]:
    """The real path (a symlinked settings file is edited where it points), its settings, and
    whether it exists. Bad JSON or a non-object is bad input; nothing is written."""
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        info = target.stat()
    except FileNotFoundError:
        return target, {}, False
    except OSError as exc:
        raise BadInput(f"{target} cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise BadInput(f"{target} is not a regular file; move it away, then run again")
    if info.st_size > READ_LIMIT:
        raise BadInput(f"{target} is {info.st_size} bytes, too large for a settings file")
    try:
        text = target.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise BadInput(f"{target} cannot be read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise BadInput(
            f"{target} is not UTF-8 text (byte {exc.start}); fix it, then run again"
        ) from None
    if not text.strip():
        return target, {}, True
    try:
        settings = json.loads(text)
    except ValueError as exc:
        where = f" at line {exc.lineno}" if hasattr(exc, "lineno") else ""
        raise BadInput(
            f"{target} is not valid JSON{where}; fix it (nothing was changed), then run again"
        ) from None
    if not isinstance(settings, dict):
        raise BadInput(f"{target} is not a JSON object; fix it (nothing was changed)")
    return target, settings, True


def _save(target: Path, data: str | bytes, existed: bool) -> None:
    mode = stat.S_IMODE(target.stat().st_mode) if existed else None
    durable.ensure_dir(target.parent)
    durable.atomic_write(target, data)
    if mode is not None and mode != stat.S_IMODE(target.stat().st_mode):
        with contextlib.suppress(OSError):
            os.chmod(target, mode)


def render(settings: dict[str, Any], like: str | None = None) -> str:
    """Keys in their order, non-ASCII kept; indented as ``like`` (the file as it is: its
    indentation, tabs or spaces, and whether it ends with a newline), else by 2 with one
    trailing newline."""
    indent: int | str | None = 2
    newline = "\n"
    if like is not None and like.strip():
        newline = "\n" if like.endswith("\n") else ""
        lines = like.strip().splitlines()
        nested = next((line for line in lines[1:] if line[:1] in (" ", "\t")), None)
        if len(lines) == 1:
            indent = None
        elif nested is not None:
            indent = nested[: len(nested) - len(nested.lstrip(" \t"))]
    return json.dumps(settings, indent=indent, ensure_ascii=False) + newline
