"""A run's report in Actions as markdown: the step summary's section (the facts, then the change
summary, cut to fit GitHub's 1 MiB per step) and the body of the one comment, whose hidden key
(``<!-- cairn:actions:<ticket> -->``) lets a re-run of the job find it and edit it."""

from __future__ import annotations

import re

from cairn.ci.facts import RERUN, Facts
from cairn.fleet.outbox import hidden
from cairn.util import frontmatter
from cairn.util.text import human_bytes

STEP_SUMMARY_LIMIT = 1024 * 1024  # bytes of one step's summary GitHub takes (actions/runner)
_HEADING = re.compile(r"(#{1,6}) ")
_FENCE = re.compile(r"\s{0,3}(```|~~~)")


def key(ticket: str) -> str:
    """The hidden key of ``ticket``'s comment: the same for every job and attempt."""
    return hidden(f"cairn:actions:{ticket}")


def status_line(facts: Facts) -> str:
    line = f"**cairn: {_plain(facts.headline)}**"
    return line + (f" — {RERUN}." if facts.resumable else "")


def _facts_lines(facts: Facts) -> list[str]:
    branch = f"`{facts.branch}`"
    if facts.branch_url:
        branch = f"[{branch}]({facts.branch_url})"
    lines = [
        f"- **Tasks done:** {facts.tasks}",
        f"- **Cost:** {facts.cost}",
        f"- **Branch:** {branch}",
        f"- **Pushed to:** {_plain(facts.pushed)}",
    ]
    if facts.job is not None:
        job = f"[{facts.job}]({facts.job_url})" if facts.job_url else facts.job
        lines.append(f"- **Job:** {job}")
    return lines


def comment_body(facts: Facts) -> str:
    """The comment on the issue or pull request: the status line, tasks done, cost, the
    branch, the job's run, and what to do when the run stopped before its end."""
    lines = [status_line(facts), "", *_facts_lines(facts), ""]
    if facts.resumable:
        lines += [
            f"{RERUN[0].upper()}{RERUN[1:]}: it resumes from the branch, snapshot and run state "
            "pushed to the remote, and redoes no completed task.",
            "",
        ]
    return "\n".join(lines) + key(facts.ticket)


def step_summary(facts: Facts, change: str | None, whole: int, source: str, room: int) -> str:
    """The step summary's section, at most ``room`` bytes of UTF-8: the facts, then the change
    summary ``change`` (the file ``source``, ``whole`` bytes, of which ``change`` may be only the
    start; None: there is none), its front matter left out and its headings two levels down, cut
    at a line when it does not fit, with a line saying so. ``""`` when not even the facts fit."""
    head = [
        f"## cairn · ticket `{facts.ticket}`",
        "",
        status_line(facts),
        "",
        *_facts_lines(facts),
        f"- **Activity:** {facts.activity}",
    ]
    if facts.snapshot:
        head.append(f"- **Last snapshot:** `{facts.snapshot}`")
    text = "\n".join(head) + "\n\n"
    if len(text.encode()) > room:
        return ""
    if change is None:
        return text + "*(no change summary)*\n\n"
    body = demoted(without_front_matter(change)).rstrip("\n") + "\n"
    note = (
        "*(The change summary is cut here to keep the step summary under GitHub's 1 MiB limit; "
        f"the whole file, {human_bytes(whole)}, is `{source}` on the runner, and in the run "
        "state pushed with the ticket.)*\n\n"
    )
    complete = len(change.encode()) >= whole
    kept, cut = fit(body, max(0, room - len(text.encode()) - len(note.encode()) - 8))
    if complete and not cut:
        return text + body + "\n"
    return text + kept + "\n" + note


def without_front_matter(text: str) -> str:
    lines = text.split("\n")
    end = frontmatter.closing_line(lines)
    return text if end is None else "\n".join(lines[end + 1 :]).lstrip("\n")


def demoted(text: str) -> str:
    """``text`` with every heading outside a code block two levels down (``#`` to ``###``,
    none past ``######``): the change summary sits under the section's own ``##``."""
    out = []
    fenced = False
    for line in text.split("\n"):
        heading = _HEADING.match(line)
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and heading:
            line = "#" * min(6, len(heading.group(1)) + 2) + line[len(heading.group(1)) :]
        out.append(line)
    return "\n".join(out)


def fit(text: str, room: int) -> tuple[str, bool]:
    """``text`` whole when it fits in ``room`` bytes of UTF-8, else cut after its last whole
    line that fits (a code block left open closed); and whether it was cut."""
    data = text.encode()
    if len(data) <= room:
        return text, False
    kept = data[:room].decode(errors="ignore")
    kept = kept[: kept.rfind("\n") + 1]
    if sum(1 for line in kept.split("\n") if _FENCE.match(line)) % 2:
        kept += "```\n"
    return kept, True


def _plain(text: str) -> str:
    """Free text (an agent's error) as markdown that starts no HTML: no comment, no tag."""
    return text.replace("<", "&lt;").replace(">", "&gt;")
