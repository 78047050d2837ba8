"""cairn's permission preset (``agent.permissions = "preset"``, the default): what an agent may do
unattended, passed through the agent's own permission machinery; the user's settings files are
never edited. With ``"user"`` cairn passes nothing permission-related.

Claude Code: ``--permission-mode acceptEdits`` (file edits inside the work tree) and, in cairn's
``--settings`` JSON, allow rules for ``git status|diff|add|commit|log|show``, ``cairn`` (and its
MCP tools) and every ``agent.allow`` command. Anything else that needs approval is denied: in
``-p`` mode nobody answers a permission prompt. Codex: the ``workspace-write`` sandbox (no
network, writes only in the work tree and cairn's writable roots) and the ``never`` approval
policy, so nothing waits for a person.

When ``agent.command`` already sets a permission mode or a sandbox, the user's choice stands and
cairn adds only its allow rules (rules only ever allow more).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

GIT_COMMANDS = ("status", "diff", "add", "commit", "log", "show")
CLAUDE_MODE = "acceptEdits"
CLAUDE_MODE_FLAGS = (
    "--permission-mode",
    "--dangerously-skip-permissions",
    "--allow-dangerously-skip-permissions",
)
CODEX_SANDBOX_FLAGS = (
    "-s",
    "--sandbox",
    "--full-auto",
    "--dangerously-bypass-approvals-and-sandbox",
)
CODEX_BYPASS = "--dangerously-bypass-approvals-and-sandbox"


def claude_rules(allow: Sequence[str]) -> list[str]:
    """The preset's allow rules, in Claude Code's permission-rule syntax."""
    rules = [f"Bash(git {command}:*)" for command in GIT_COMMANDS]
    rules += ["Bash(cairn:*)", "mcp__cairn"]
    return rules + [f"Bash({command.strip()}:*)" for command in allow]


def _names(argv: Sequence[str], flags: Sequence[str]) -> bool:
    return any(a in flags or a.split("=", 1)[0] in flags for a in argv)


def claude_settings(permissions: str, allow: Sequence[str]) -> dict[str, Any]:
    """What the preset adds to cairn's ``--settings`` JSON (nothing for ``user``)."""
    if permissions != "preset":
        return {}
    return {"permissions": {"allow": claude_rules(allow)}}


def claude_flags(permissions: str, argv: Sequence[str]) -> list[str]:
    """The preset's permission mode, unless the user's command names one of its own."""
    if permissions != "preset" or _names(argv, CLAUDE_MODE_FLAGS):
        return []
    return ["--permission-mode", CLAUDE_MODE]


def codex_options(permissions: str, options: Sequence[str]) -> list[str]:
    """The preset's sandbox and approval policy, each unless the user's options set it."""
    if permissions != "preset" or CODEX_BYPASS in options:
        return []
    configs = [options[i + 1] for i, a in enumerate(options[:-1]) if a in ("-c", "--config")]
    added = []
    if not _names(options, CODEX_SANDBOX_FLAGS) and not any(
        c.startswith("sandbox_mode") for c in configs
    ):
        added += ["-s", "workspace-write"]
    if not any(c.startswith("approval_policy") for c in configs):
        added += ["-c", 'approval_policy="never"']
    return added


def codex_sandboxed(options: Sequence[str]) -> bool:
    """Whether Codex's commands run without network (any sandbox but full access)."""
    text = " ".join(options)
    return not (
        CODEX_BYPASS in options or "danger-full-access" in text or "network_access=true" in text
    )
