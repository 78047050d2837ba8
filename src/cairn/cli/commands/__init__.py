"""The command table: each command's words, and the ``"module:function"`` that declares its
options on a ``cairn.cli.parsing.Parser`` and runs it. A command's module is imported
only when that command runs, or when a ``--help`` lists it.

``early``: a ``"module:function"`` called with the work tree as typed (``-C``, else ``""``)
before the command's module is imported; what it returns is passed to the command as
``early``, and abandoned (``.abandon()``) when the command line turns out bad. ``quick``: a
command agents and hooks run per tool call or per task, which lives for milliseconds: no cycle
collector, and no interpreter teardown at its exit.
"""

from __future__ import annotations


class Command:
    """One command of the table (a plain class: cheaper to build than a dataclass)."""

    __slots__ = ("early", "quick", "target")

    def __init__(self, target: str, early: str | None = None, quick: bool = False) -> None:
        self.target, self.early, self.quick = target, early, quick


C = "cairn.cli.commands."

# In the order ``--help`` lists them: runs, snapshots, what agents call as they work, set-up.
COMMANDS: dict[tuple[str, ...], Command] = {
    ("run",): Command(C + "run:run"),
    ("resume",): Command(C + "run:resume"),
    ("answer",): Command(C + "run:answer"),
    ("catchup",): Command(C + "catchup:catchup", quick=True),
    ("status",): Command(C + "status:status", quick=True),
    ("logs",): Command(C + "logs:logs", quick=True),
    ("demo",): Command(C + "demo:demo"),
    ("fleet", "start"): Command(C + "fleet:start"),
    ("fleet", "stop"): Command(C + "fleet:stop"),
    ("fleet", "pause"): Command(C + "fleet:pause"),
    ("fleet", "resume"): Command(C + "fleet:resume"),
    ("fleet", "retry"): Command(C + "fleet:retry"),
    ("fleet", "status"): Command(C + "fleet:status", quick=True),
    ("fleet", "prune"): Command(C + "fleet:prune"),
    ("fleet", "dashboard"): Command(C + "fleet:dashboard"),
    ("fleet", "land"): Command(C + "land:land"),
    ("fleet", "service", "install"): Command(C + "service:install"),
    ("fleet", "service", "uninstall"): Command(C + "service:uninstall"),
    ("review",): Command(C + "review:review"),
    ("worker",): Command(C + "worker:worker"),
    # git status, most of a save's time on a big repository, runs while cairn is imported
    ("wip", "save"): Command(C + "wip:save", early="cairn.git.status:start_early", quick=True),
    ("wip", "list"): Command(C + "wip:list_"),
    ("wip", "show"): Command(C + "wip:show"),
    ("wip", "diff"): Command(C + "wip:diff"),
    ("wip", "restore"): Command(C + "wip:restore"),
    ("wip", "prune"): Command(C + "wip:prune"),
    ("wip", "push"): Command(C + "wip:push"),
    ("task", "start"): Command(C + "progress:task_start", quick=True),
    ("task", "done"): Command(C + "progress:task_done", quick=True),
    ("task", "skip"): Command(C + "progress:task_skip", quick=True),
    ("task", "defer"): Command(C + "progress:task_defer", quick=True),
    ("finding",): Command(C + "progress:finding", quick=True),
    ("gate",): Command(C + "progress:gate", quick=True),
    ("ac",): Command(C + "progress:ac", quick=True),
    ("defer",): Command(C + "progress:defer", quick=True),
    ("mcp",): Command(C + "mcp:mcp"),
    ("config", "show"): Command(C + "config:show"),
    ("hooks", "install"): Command(C + "hooks_install:install"),
    ("hooks", "uninstall"): Command(C + "hooks_install:uninstall"),
    ("hook", "claude", "post-tool-use"): Command(C + "hook:post_tool_use", quick=True),
    ("hook", "claude", "session-start"): Command(C + "hook:session_start", quick=True),
    ("hook", "claude", "snapshot"): Command(C + "hook:snapshot", quick=True),
    ("hook", "claude", "heartbeat"): Command(C + "hook:heartbeat", quick=True),
}

# The groups of commands and their help; ``cairn --help`` does not list a hidden one.
GROUPS: dict[tuple[str, ...], str] = {
    (): "Interruption-proof runs for AI coding agents.",
    ("fleet",): "Run the tickets of a queue, each in its own worktree, with retries.",
    ("fleet", "service"): "The fleet supervisor as a service: started at login or boot.",
    ("wip",): "Snapshots of uncommitted work under refs/cairn/wip/<ticket>.",
    ("task",): "Report progress on a plan task.",
    ("config",): "The effective configuration.",
    ("hooks",): "Install cairn's hooks into an agent's own settings (Claude Code).",
    ("hook",): "Hooks that agents call (Claude Code).",
    ("hook", "claude"): "Claude Code command hooks.",
}
HIDDEN = {("hook",)}
LONGEST = max(len(words) for words in COMMANDS)
