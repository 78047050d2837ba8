"""The no-progress stop: a coder that changes nothing is not prompted again and again.

Progress is what a person could see: the work tree changed (a file written, edited or deleted,
a commit: ``git status`` and HEAD), or the agent reported on its work (``cairn task …``,
``cairn finding …``: the change summary was rewritten). Inside one dispatch the agent is
re-prompted with the continuation prompt only while its stops make progress: after
``agent.max_idle_dispatches`` stops in a row that changed nothing, or one whose last message says
it cannot go on, the dispatch ends. A dispatch that ends (completed or at its turn cap) having
changed nothing is idle; ``agent.max_idle_dispatches`` idle dispatches in a row end the run as
``needs_input`` (reason ``no_progress``), with the blocker: what the agent was denied and its last
words. A dispatch that made progress resets the count. Reviewer and evaluator dispatches are
single turns and never counted; ``max_idle_dispatches = 0`` turns the stop off.
"""

from __future__ import annotations

import hashlib
import os
import re

from cairn.errors import CairnError
from cairn.git.status import entries
from cairn.run.orchestrator.context import RunContext
from cairn.run.orchestrator.prompting import PromptFor

# The agent's own words that it is stuck: it cannot go on without something it lacks.
STUCK = re.compile(
    r"\b(can ?not|can't|unable to|not able to|won't be able to)\b[^.!?\n]{0,60}?"
    r"\b(continue|proceed|go on|complete|finish|run|do)\b"
    r"|\b(blocked|requires? (your )?(approval|permission))\b",
    re.IGNORECASE,
)


def stuck(message: str | None) -> bool:
    """Whether the agent's message says it cannot go on."""
    return bool(message and STUCK.search(message))


def mark(ctx: RunContext) -> str:
    """A fingerprint of what progress shows: HEAD, every changed or untracked path with its
    size and time, and what the agent reported in the current change summary."""
    digest = hashlib.sha256()
    found = ctx.repo.git.run(
        ["status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all"], check=False
    )
    digest.update(found.stdout)
    top = ctx.repo.toplevel
    for kind, _, path in entries(found.stdout):
        if kind != b"#" and path:
            digest.update(_stat(os.path.join(os.fsencode(top), path)))
    digest.update(_reports(ctx))
    return digest.hexdigest()


def _reports(ctx: RunContext) -> bytes:
    """What the agent reported in the current change summary (``cairn task|finding|gate|defer``:
    its tasks, findings, gates, deferred items and notes), not what cairn writes there itself
    at a snapshot, a cutoff or a dispatch's start (the status, usage, Files changed)."""
    try:
        current = ctx.summary()
    except (CairnError, OSError):  # no summary yet, or one cairn cannot read: its bytes stand in
        summary = ctx.ref.summary_path()
        return _stat(os.fsencode(summary)) if summary is not None else b"-"
    said = (current.tasks, current.findings, current.gates, current.deferred, current.prose)
    return repr(said).encode()


def _stat(path: bytes) -> bytes:
    try:
        st = os.lstat(path)
    except OSError:
        return b"-"
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}".encode()


class IdleGuard:
    """One coder dispatch's prompts, ended early when its stops make no progress; and whether
    the dispatch as a whole made any."""

    def __init__(self, ctx: RunContext, prompt_for: PromptFor) -> None:
        self.ctx, self.prompt_for = ctx, prompt_for
        self.limit = ctx.config.agent.max_idle_dispatches
        self.start = self.last = mark(ctx) if self.limit else ""
        self.idle_stops = 0
        self.said: str | None = None  # the agent's last message in this dispatch
        self.gave_up = False  # the dispatch ended here: its stops changed nothing

    def __call__(self, turn: int) -> str | None:
        if self.limit and turn > 1 and not self.gave_up:
            now = mark(self.ctx)
            if now != self.last:
                self.last, self.idle_stops = now, 0
            else:
                self.idle_stops += 1
                if self.idle_stops >= self.limit or stuck(self.said):
                    self.gave_up = True
        if self.gave_up:
            return None
        return self.prompt_for(turn)

    def progressed(self) -> bool:
        """Whether anything changed since the dispatch started (True when the stop is off)."""
        return not self.limit or mark(self.ctx) != self.start
