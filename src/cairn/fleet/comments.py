"""A person's review of a fleet ticket's branch: comments on lines of its diff, and a verdict
(``POST /api/v1/tickets/{id}/review``, ``cairn review TICKET``).

``request_changes`` turns each comment into a review finding (``R1``, ``R2``, …, located
``path:line``) and asks for a fix round of the ticket's run (``cairn.fleet.fixround``); the
agent answers each in the round's change summary. ``approve`` makes the ticket ``approved``.
Both are checked whole before anything is written: the body's shape (``check``), the ticket's
state, and every comment's line, which must be a line of the branch's diff as the ticket page
shows it (``git diff HEAD...refs/heads/cairn/<ticket>``, new side: an added or a context line).

Each comment keeps the commit of the branch it was written on; ``rounds`` shows it ``outdated``
when that line has changed on the branch since (and where the line is now when lines above it
moved), with the agent's answer from the round's change summary.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

from cairn import summary
from cairn.errors import CairnError, Refused
from cairn.fleet import fixround, fleetcontrol, fleetstate
from cairn.fleet.fleetstate import FleetTicket
from cairn.git import Git
from cairn.state import journal, runstate
from cairn.state.layout import SUMMARY_ARTIFACT, SUMMARY_ROLE, Layout, artifacts
from cairn.state.runstate import RunRef
from cairn.terms import REVIEW_VERDICTS, FleetAction, ReviewVerdict

MAX_COMMENTS = 100
MAX_BODY = 10_000  # characters of one comment
MAX_BY = 100
TITLE_CAP = 80  # characters of a finding's title (the comment's first line)
WHY = "review"  # a fix round asked by a person's review
BASE = "HEAD"  # the page's diff: the main work tree's branch ... the ticket's
_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
FIELDS = ("path", "line", "body")


class Comment(NamedTuple):
    path: str
    line: int
    body: str


class Submission(NamedTuple):
    verdict: ReviewVerdict
    comments: list[Comment]
    by: str


def _bad(field: str, why: str) -> Refused:
    return Refused(400, "invalid_review", f"{field}: {why}")


def check(data: Any, default_by: str) -> Submission:
    """The review ``data`` asks for (the API's JSON body, or what the CLI built), checked for
    its shape only; ``Refused`` (400) naming the first wrong field."""
    if not isinstance(data, dict):
        raise _bad("(body)", 'must be a JSON object: {"verdict": …, "comments": […]}')
    unknown = sorted(set(data) - {"verdict", "comments", "by"})
    if unknown:
        raise _bad(unknown[0], "unknown field; the fields are verdict, comments and by")
    verdict = data.get("verdict")
    chosen = next((v for v in REVIEW_VERDICTS if v == verdict), None)
    if chosen is None:
        raise _bad("verdict", f"must be 'request_changes' or 'approve', not {verdict!r}")
    raw = data.get("comments", [])
    if not isinstance(raw, list):
        raise _bad("comments", "must be a list of {path, line, body}")
    if len(raw) > MAX_COMMENTS:
        raise _bad("comments", f"{len(raw)} comments; at most {MAX_COMMENTS} in one review")
    comments = [_comment(n, item) for n, item in enumerate(raw)]
    if chosen == "request_changes" and not comments:
        raise _bad("comments", "request_changes needs at least one comment saying what to change")
    by = data.get("by", default_by)
    if not isinstance(by, str) or not by.strip() or len(by) > MAX_BY or "\n" in by:
        raise _bad("by", f"must be a name on one line, at most {MAX_BY} characters")
    return Submission(chosen, comments, " ".join(by.split()))


def _comment(n: int, item: Any) -> Comment:
    where = f"comments[{n}]"
    if not isinstance(item, dict):
        raise _bad(where, "must be an object {path, line, body}")
    for key in sorted(item):
        if key not in FIELDS:
            raise _bad(f"{where}.{key}", "unknown field; a comment has path, line and body")
    path, line, body = item.get("path"), item.get("line"), item.get("body")
    if not isinstance(path, str) or not path or path.startswith("/") or "\n" in path:
        raise _bad(f"{where}.path", "must be a file's path in the repository, as the diff names it")
    if isinstance(line, bool) or not isinstance(line, int) or line < 1:
        raise _bad(f"{where}.line", f"must be a line number (1 or more), not {line!r}")
    if not isinstance(body, str) or not body.strip():
        raise _bad(f"{where}.body", "must be the comment's text, not empty")
    if len(body) > MAX_BODY:
        raise _bad(f"{where}.body", f"{len(body)} characters; at most {MAX_BODY}")
    return Comment(path, line, body.strip())


# --- the branch's diff ---------------------------------------------------------------------------


def branch_ref(record: FleetTicket) -> str:
    return f"refs/heads/{record.branch or f'cairn/{record.ticket}'}"


def diff_lines(git: Git, spec: str, paths: list[str]) -> dict[str, set[int]]:
    """The new-side line numbers (added and context lines) that ``git diff spec -- paths``
    shows, by path: the lines a comment may be on."""
    args = ["diff", "--no-ext-diff", "--no-color", "--patch", spec, "--", *paths]
    shown: dict[str, set[int]] = {}
    current: set[int] | None = None
    number = 0
    for text in git.out(args).splitlines():
        if text.startswith("+++ "):
            name = text[4:]
            current = shown.setdefault(name[2:], set()) if name.startswith("b/") else None
        elif text.startswith("@@"):
            hunk = _HUNK.match(text)
            number = int(hunk.group(3)) if hunk else 0
        elif current is not None and number and text[:1] in (" ", "+"):
            current.add(number)
            number += 1
    return shown


def moved(git: Git, since: str, tip: str, path: str, line: int) -> tuple[bool, int | None]:
    """Whether line ``line`` of ``path`` at ``since`` changed by ``tip`` (outdated), and where
    it is at ``tip`` (None when changed or gone)."""
    if since == tip:
        return False, line
    args = ["diff", "--no-ext-diff", "--no-color", "-U0", since, tip, "--", path]
    shift = 0
    for text in git.out(args).splitlines():
        if text.startswith(("deleted file", "+++ /dev/null")):
            return True, None
        hunk = _HUNK.match(text)
        if hunk is None:
            continue
        start, old = int(hunk.group(1)), int(hunk.group(2) or "1")
        new = int(hunk.group(4) or "1")
        if old and start <= line < start + old:
            return True, None
        if (start < line) if old == 0 else (start + old <= line):
            shift += new - old
    return False, line + shift


def _tip(git: Git, ref: str) -> str | None:
    found = git.run(["rev-parse", "-q", "--verify", "--end-of-options", ref], check=False)
    return found.text.strip() or None if found.ok else None


# --- submitting ----------------------------------------------------------------------------------


def submit(git: Git, layout: Layout, ticket: str, asked: Submission) -> dict[str, Any]:
    """Carry out a checked review of ``ticket``: everything is checked first (``Refused``:
    404 unknown ticket, 409 a ticket that cannot be reviewed now, 400 a comment off the diff),
    then the fix round or the approval is asked for. What was done, as the API answers it."""
    record = fleetstate.read(layout, ticket)
    if record is None:
        known = [r.ticket for r in fleetstate.listing(layout, [])]
        raise Refused(404, "unknown_ticket", str(fleetstate.unknown([ticket], known)))
    verdict_state = "retrying" if asked.verdict == "request_changes" else "approved"
    action: FleetAction = "fix" if asked.verdict == "request_changes" else "approve"
    state, why = fixround.decide(action, record)
    if why is not None:
        raise Refused(409, "not_reviewable", why)
    ref = branch_ref(record)
    tip = _tip(git, ref)
    if tip is None:
        raise Refused(
            409, "not_reviewable", f"ticket {ticket} has no branch {ref} to review; nothing to do"
        )
    _check_lines(git, ticket, ref, asked.comments)
    comments = [
        {"id": f"R{n}", "path": c.path, "line": c.line, "body": c.body}
        for n, c in enumerate(asked.comments, start=1)
    ]
    answer: dict[str, Any] = {
        "ticket": ticket,
        "verdict": asked.verdict,
        "by": asked.by,
        "commit": tip,
        "comments": comments,
        "round": None,
        "state": verdict_state if state is not None else record.state,
    }
    if asked.verdict == "request_changes":
        findings = [
            fixround.Finding(
                id=f"R{n}",
                title=_title(c.body),
                location=f"{c.path}:{c.line}",
                details=" ".join(c.body.split()),
            )
            for n, c in enumerate(asked.comments, start=1)
        ]
        done = fixround.ask(
            layout,
            record,
            findings,
            asked.by,
            WHY,
            verdict=asked.verdict,
            commit=tip,
            comments=comments,
        )
        answer["round"] = done.round
        return answer
    run_id = layout.latest_run(ticket)
    if run_id is not None:
        runstate.record(
            RunRef(layout, ticket, run_id),
            "approved",
            by=asked.by,
            commit=tip,
            verdict=asked.verdict,
            comments=comments,
        )
    if state is not None:
        fleetcontrol.ask(layout, ticket, "approve", detail=f"approved by {asked.by} at {tip[:10]}")
    return answer


def _title(body: str) -> str:
    first = " ".join(body.splitlines()[0].split()) if body.strip() else "review comment"
    return first if len(first) <= TITLE_CAP else first[: TITLE_CAP - 1] + "…"


def _check_lines(git: Git, ticket: str, ref: str, comments: list[Comment]) -> None:
    if not comments:
        return
    spec = f"{BASE}...{ref}"
    shown = diff_lines(git, spec, sorted({c.path for c in comments}))
    for n, comment in enumerate(comments):
        lines = shown.get(comment.path)
        if lines is None:
            raise Refused(
                400,
                "not_in_diff",
                f"comments[{n}].path: {comment.path} is not a file of ticket {ticket}'s diff "
                f"(git diff {spec}); comment on a file the diff shows",
            )
        if comment.line not in lines:
            raise Refused(
                400,
                "not_in_diff",
                f"comments[{n}].line: {comment.path}:{comment.line} is not a line of ticket "
                f"{ticket}'s diff (git diff {spec}); comment on a line the diff shows",
            )


# --- reading the rounds back ---------------------------------------------------------------------


def rounds(git: Git, layout: Layout, record: FleetTicket) -> dict[str, Any]:
    """Every review of the ticket's latest run, oldest first, each comment with the agent's
    answer (``status``: pending until the fix round's summary says FIXED, NOT_FIXED or
    ALREADY_RESOLVED; its ``action``), and whether it is ``outdated``."""
    ticket = record.ticket
    tip = _tip(git, branch_ref(record))
    run_id = layout.latest_run(ticket)
    shown: list[dict[str, Any]] = []
    if run_id is not None:
        run_dir = layout.run_dir(ticket, run_id)
        events, _ = journal.read(run_dir)
        answers = _answers(run_dir)
        for event in events:
            name = event.get("event")
            if (name == "fix_round" and event.get("why") == WHY) or name == "approved":
                shown.append(_round(git, event, answers, tip))
    return {"ticket": ticket, "state": record.state, "commit": tip, "reviews": shown}


def _round(
    git: Git,
    event: dict[str, Any],
    answers: dict[int, dict[str, summary.Finding]],
    tip: str | None,
) -> dict[str, Any]:
    number = event.get("round") if isinstance(event.get("round"), int) else None
    given = answers.get(number, {}) if number is not None else {}
    since = event.get("commit")
    comments = []
    for raw in event.get("comments") or []:
        if not isinstance(raw, dict):
            continue
        found = given.get(str(raw.get("id")))
        outdated, now = False, raw.get("line")
        if isinstance(since, str) and tip is not None:
            try:
                outdated, now = moved(git, since, tip, str(raw.get("path")), int(raw["line"]))
            except (CairnError, KeyError, TypeError, ValueError):
                outdated, now = True, None  # its commit is gone: it cannot be placed
        comments.append(
            {
                **raw,
                "status": found.status if found else "pending",
                "action": found.action if found else None,
                "outdated": outdated,
                "line_now": now,
            }
        )
    return {
        "verdict": event.get("verdict"),
        "round": number,
        "by": event.get("by"),
        "at": event.get("t"),
        "commit": since,
        "comments": comments,
    }


def _answers(run_dir: Path) -> dict[int, dict[str, summary.Finding]]:
    """Each review round's answers, from its change summary."""
    found: dict[int, dict[str, summary.Finding]] = {}
    for artifact in artifacts(run_dir):
        if artifact.role != SUMMARY_ROLE or artifact.name != SUMMARY_ARTIFACT:
            continue
        try:
            loaded = summary.load(artifact.path)
        except (OSError, CairnError):
            continue
        if loaded is not None and loaded.mode == "review" and loaded.round is not None:
            found[loaded.round] = {f.id: f for f in loaded.findings}
    return found
