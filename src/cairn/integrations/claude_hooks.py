"""Claude Code command hooks. A hook must never break the agent: every failure is silent.

``post-tool-use`` brings budget pressure into Claude's own loop. ``cairn run`` passes the turn
cap in ``CAIRN_MAX_TURNS``; the hook counts the session's model turns from the transcript and,
once the turns left reach ``agent.budget_pressure_turns``, answers with the wrap-up directive as
``additionalContext``, which Claude reads before its next turn.

``session-start``, ``snapshot`` and ``heartbeat`` are for people who drive Claude Code by hand
(``cairn hooks install claude`` puts them in a settings file). Under ``cairn run``
(``CAIRN_RUN_DIR`` set) they step aside: the orchestrator owns the marker and the snapshots, and
its coder must not be told that "a run is in the middle of" its own ticket.
"""

from __future__ import annotations

import contextlib
import json
import os
import time

from cairn.envnames import ENV_DISPATCH_ID, ENV_MAX_TURNS, ENV_PRESSURE_TURNS, ENV_RUN_DIR

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path
    from typing import Any

    from cairn.git import Repo

TRANSCRIPT_LIMIT = 64 * 1024 * 1024
# Claude Code appends to the transcript asynchronously: the hook can start before the message
# that made this tool call is written. It waits for it this long at most, then counts anyway.
TRANSCRIPT_WAIT = 2.0
LOCK_WAIT = 2.0  # seconds the heartbeat waits for a ticket's lock: it never hangs the agent


def count_turns(transcript: Path) -> int | None:
    """Model turns in a Claude Code transcript: distinct assistant message ids."""
    counted = _scan(transcript, None)
    return None if counted is None else counted[0]


def _scan(transcript: Path, tool_use_id: str | None) -> tuple[int, bool] | None:
    """(model turns, whether an assistant message names ``tool_use_id``); None when the
    transcript cannot be read."""
    try:
        if transcript.stat().st_size > TRANSCRIPT_LIMIT:
            return None
        text = transcript.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    seen: set[str] = set()
    named = f'"{tool_use_id}"' if tool_use_id else None
    found = False
    for line in text.splitlines():
        if '"assistant"' not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("type") != "assistant" or entry.get("isSidechain"):
            continue
        message = entry.get("message") or {}
        ident = message.get("id") or entry.get("uuid")
        if ident:
            seen.add(str(ident))
        found = found or (named is not None and named in line)
    return len(seen), found


def _turns_so_far(transcript: Path, tool_use_id: str | None) -> int | None:
    """The turns up to this tool call, once the transcript holds the message that made it
    (waiting at most ``TRANSCRIPT_WAIT``)."""
    deadline = time.monotonic() + TRANSCRIPT_WAIT
    while True:
        counted = _scan(transcript, tool_use_id)
        if counted is None:
            return None
        turns, found = counted
        if found or not tool_use_id or time.monotonic() > deadline:
            return turns
        time.sleep(0.01)


def post_tool_use(payload: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any] | None:
    """The hook's JSON answer, or None to stay silent."""
    try:
        max_turns = int(env[ENV_MAX_TURNS])
    except (KeyError, ValueError):
        return None
    from pathlib import Path

    workspace = Path(str(payload.get("cwd") or "."))
    try:
        pressure = int(env.get(ENV_PRESSURE_TURNS, "0"))
    except ValueError:
        return None
    if pressure <= 0:
        return None
    transcript = payload.get("transcript_path")
    if not transcript:
        return None
    tool_use_id = payload.get("tool_use_id")
    turns = _turns_so_far(Path(str(transcript)), str(tool_use_id) if tool_use_id else None)
    if turns is None:
        return None
    turns -= _dispatch_baseline(env, turns)
    left = max_turns - turns
    if left > pressure or left <= 0:
        # At 0 the turn cap ends the dispatch before the model is asked again: the directive
        # would only wait in the session and greet whoever resumes it ("0 turn(s) left").
        return None
    from cairn.run import prompts

    text = prompts.render(
        "pressure", _toplevel(workspace), remaining_turns=max(left, 0), time_note=""
    )
    return {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": text}}


def _dispatch_baseline(env: Mapping[str, str], turns: int) -> int:
    """The session's model turns from before this dispatch (a resumed session keeps them).

    The hook first fires after a tool call of the dispatch's first turn, so the turns before
    that moment, less that one, were someone else's; the number is kept per dispatch
    (``CAIRN_DISPATCH_ID``) in the run directory.
    """
    run_dir, dispatch = env.get(ENV_RUN_DIR), env.get(ENV_DISPATCH_ID)
    if not run_dir or not dispatch or not dispatch.replace("-", "").isalnum():
        return 0
    from pathlib import Path

    from cairn.util import durable

    path = Path(run_dir) / "claude-hook" / f"{dispatch}.json"
    data = durable.read_state_file(path, "hook baseline", 4096)
    if data is not None:
        baseline = json.loads(data).get("baseline", 0)
        return int(baseline) if isinstance(baseline, int) else 0
    baseline = max(turns - 1, 0)
    durable.ensure_dir(path.parent)
    durable.atomic_write(path, json.dumps({"baseline": baseline}), fsync=False)
    return baseline


def _toplevel(workspace: Path) -> Path | None:
    for candidate in (workspace, *workspace.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


# --- hooks for Claude Code driven by hand ---------------------------------------------------

ATTENTION = ("in_progress", "interrupted", "needs_input", "stale")


def workspace_of(payload: Mapping[str, Any], env: Mapping[str, str]) -> Path | None:
    """The directory a hook is about: the payload's ``cwd``, else Claude's project dir, else
    the hook's own working directory. None under ``cairn run``, where these hooks step aside."""
    from pathlib import Path

    where = _where(payload, env)
    return None if where is None else Path(where)


def _where(payload: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    if env.get(ENV_RUN_DIR):
        return None
    return str(payload.get("cwd") or env.get("CLAUDE_PROJECT_DIR") or os.getcwd())


def session_start(payload: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any] | None:
    """The catch-up paragraph as ``additionalContext`` when the branch's ticket has a run in
    flight, interrupted or stale; None (say nothing) otherwise."""
    workspace = workspace_of(payload, env)
    if workspace is None:
        return None
    from cairn.state.catchup import catchup
    from cairn.state.catchup_text import context_paragraph

    report = catchup(workspace)
    if report.state not in ATTENTION:
        return None
    paragraph = context_paragraph(report).rstrip()
    if not paragraph.endswith((".", "?", "!")):
        paragraph += "."
    text = f"{paragraph} {_ask(report.state, report.ticket)}"
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}


def _ask(state: str, ticket: str) -> str:
    if state == "in_progress":
        return (
            "Another process owns this run right now. Tell the user, and ask before changing "
            "files that run is working on."
        )
    text = (
        "Resume? Before starting anything new, tell the user where the work stopped and ask "
        "whether to pick it up: continue the remaining work in this session, or let cairn "
        f"drive it with `cairn resume {ticket}`."
    )
    if state == "stale":
        text += f" If that run was abandoned, `cairn catchup {ticket} --clear-stale` clears it."
    return text


def snapshot(payload: Mapping[str, Any], env: Mapping[str, str], reason: str | None) -> None:
    """Save uncommitted work under ``refs/cairn/wip/<branch ticket>``; nothing when the tree
    is clean or unchanged since the last snapshot."""
    where = _where(payload, env)
    if where is None:
        return
    from cairn.git.status import start_early

    early = start_early(where)  # git runs while the save is imported
    from cairn.wip.saving import save_or_proof

    save_or_proof(where, reason=f"claude {reason or _event_reason(payload)}", early=early)


def _event_reason(payload: Mapping[str, Any]) -> str:
    """``PreCompact`` → ``pre-compact``; ``hook`` when the payload does not say."""
    event = str(payload.get("hook_event_name") or "hook")
    return "".join(f"-{c.lower()}" if c.isupper() else c for c in event).lstrip("-")


def heartbeat(payload: Mapping[str, Any], env: Mapping[str, str]) -> bool:
    """Rewrite the branch ticket's marker with ``last_updated`` now; False when there is none.

    It runs after every tool use, so it does no more than it must: one ``git rev-parse`` (the
    layout's discovery; the config read only when a file holds one), the branch read from
    ``HEAD``, and under the ticket's lock the marker's ``last_updated`` moved
    (``cairn.state.marker.touch``: nothing else validated, nothing written when its second did
    not change).
    """
    where = _where(payload, env)
    if where is None:
        return False
    from cairn import tickets
    from cairn.state import marker
    from cairn.state.layout import locate

    repo, layout = locate(where, [])  # a broken config: the defaults, silently
    branch = _branch(repo)
    ticket = tickets.from_branch(branch)
    path = layout.marker_path(ticket)
    if not path.is_file() and branch is not None:
        from cairn.state import branches

        mapped = [t for t in branches.read(layout).get(branch, []) if t != ticket]
        for other in reversed(mapped):  # the ticket last run from this branch, with a marker
            if layout.marker_path(other).is_file():
                ticket, path = other, layout.marker_path(other)
                break
    if not path.is_file():
        return False
    with _lock(str(layout.lock_path(ticket))) as held:
        return held and marker.touch(path)


def _branch(repo: Repo) -> str | None:
    """The checked-out branch, read from ``HEAD``; git is asked only when that file does not
    say (reftable keeps a placeholder there): None when detached."""
    try:
        with open(os.path.join(repo.git_dir, "HEAD"), encoding="utf-8") as handle:
            head = handle.read().strip()
    except (OSError, UnicodeDecodeError):
        head = ""
    if head.startswith("ref: refs/heads/") and head != "ref: refs/heads/.invalid":
        return head.removeprefix("ref: refs/heads/")
    if head and not head.startswith("ref:"):
        return None
    return repo.current_branch()


@contextlib.contextmanager
def _lock(path: str) -> Iterator[bool]:
    """The ticket's short ``.lock`` (the one every marker transition takes), waiting at most
    ``LOCK_WAIT`` seconds: a hook never hangs the agent. Yields whether it is held."""
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    yield False
                    return
                time.sleep(0.02)
        yield True
    finally:
        os.close(fd)
