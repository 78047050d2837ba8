"""What a run does inside GitHub Actions once it has ended: its report, in the step summary
(``$GITHUB_STEP_SUMMARY``) and in one comment on the issue or pull request that started the
workflow, found by its hidden key and edited by every later job or attempt of the ticket.

Nothing here changes how the run ended: every failure (a file that cannot be written, GitHub
slow, down or refusing, no token) is a warning, and the comment's calls take about 2 s at most
in all, for a cancelled job's run reports between the runner's SIGINT and its SIGTERM 7.5 s
later. Every call is tried once: a re-run of the job edits the comment anyway.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path

from cairn.ci.facts import Facts, gather
from cairn.ci.markdown import STEP_SUMMARY_LIMIT, comment_body, key, step_summary
from cairn.run.orchestrator.outcome import RunOutcome
from cairn.terms import ENV_ACTIONS_ISSUE
from cairn.util.text import human_bytes

BUDGET = 2.0  # seconds every call of the comment may take together
CALL_TIMEOUT = 0.75  # seconds of one call's connect, send or read
MARGIN = 4 * 1024  # bytes of the step summary's limit left for what runs after cairn
DEFAULT_API = "https://api.github.com"
NO_COMMENT = "no comment on the issue or pull request"


def report(outcome: RunOutcome, environ: Mapping[str, str]) -> list[str]:
    """Write ``outcome`` to the step summary and to the one comment of its ticket; return the
    warnings, one line each (what was not done, why, and what would do it). Never raises."""
    try:
        facts = gather(outcome, environ)
    except Exception as exc:  # a report never changes how the run ended
        return [f"no report to GitHub Actions: {_one_line(exc)}"]
    warnings = []
    parts = (
        (write_outputs, "step's outputs"),
        (write_step_summary, "step summary"),
        (post_comment, "comment"),
    )
    for part, what in parts:
        try:
            warning = part(outcome, facts, environ)
        except Exception as exc:
            warning = f"the {what} could not be written: {_one_line(exc)}"
        if warning is not None:
            warnings.append(warning)
    return warnings


def write_outputs(outcome: RunOutcome, facts: Facts, environ: Mapping[str, str]) -> str | None:
    """The step's outputs ``status`` (how the run ended) and ``branch`` (the ticket's), in
    ``$GITHUB_OUTPUT`` when the runner names one: the composite action's outputs."""
    name = environ.get("GITHUB_OUTPUT")
    if not name:
        return None
    try:
        with Path(name).open("a", encoding="utf-8") as file:
            file.write(f"status={outcome.status}\nbranch={facts.branch}\n")
    except OSError as exc:
        return f"the step's outputs {name} could not be written: {exc.strerror or exc}"
    return None


def write_step_summary(outcome: RunOutcome, facts: Facts, environ: Mapping[str, str]) -> str | None:
    """Append the run's section to ``$GITHUB_STEP_SUMMARY``, keeping the file under GitHub's
    1 MiB; a warning when it cannot."""
    name = environ.get("GITHUB_STEP_SUMMARY")
    if not name:
        return "GITHUB_STEP_SUMMARY is not set: no step summary written"
    path = Path(name)
    try:
        used = path.stat().st_size
    except FileNotFoundError:
        used = 0
    except OSError as exc:
        return f"the step summary {name} cannot be read: {exc.strerror or exc}"
    change, whole, source = _change_summary(outcome)
    section = step_summary(facts, change, whole, source, STEP_SUMMARY_LIMIT - MARGIN - used)
    if not section:
        return (
            f"the step summary is full ({human_bytes(used)} of GitHub's 1 MiB a step): the "
            "run's section was not added"
        )
    try:
        with path.open("a", encoding="utf-8") as file:
            file.write(section)
    except OSError as exc:
        return f"the step summary {name} could not be written: {exc.strerror or exc}"
    return None


def _change_summary(outcome: RunOutcome) -> tuple[str | None, int, str]:
    """The run's change summary as text (its first MiB), its size in bytes and its path; None
    when there is none to read."""
    if not outcome.summary_path:
        return None, 0, ""
    path = Path(outcome.summary_path)
    try:
        with path.open("rb") as file:
            data = file.read(STEP_SUMMARY_LIMIT)
            whole = max(len(data), path.stat().st_size)
    except OSError:
        return None, 0, str(path)
    return data.decode(errors="replace"), whole, str(path)


def post_comment(outcome: RunOutcome, facts: Facts, environ: Mapping[str, str]) -> str | None:
    """Post the ticket's comment on the issue or pull request, or edit the one an earlier job
    or attempt posted (the comment holding the ticket's hidden key); a warning when it cannot."""
    token = environ.get("GITHUB_TOKEN")
    repo = environ.get("GITHUB_REPOSITORY")
    if not token:
        return f"{NO_COMMENT}: GITHUB_TOKEN is not set; give the step GITHUB_TOKEN to have one"
    if not repo:
        return f"{NO_COMMENT}: GITHUB_REPOSITORY is not set; set it to owner/name to have one"
    number, why = issue_number(environ)
    if number is None:
        return f"{NO_COMMENT}: {why}"
    from cairn.fleet.github_api import GitHubAPI, GitHubError

    until = time.monotonic() + BUDGET
    api_url = environ.get("GITHUB_API_URL") or DEFAULT_API
    api = GitHubAPI(api_url, repo, token, attempts=1, max_wait=0, timeout=CALL_TIMEOUT)
    body, mark, done = comment_body(facts), key(facts.ticket), "posted"
    try:
        found = [
            c
            for c in api.comments(number, until=until)
            if mark in str(c.get("body") or "") and type(c.get("id")) is int
        ]
        if found:
            done = "updated"
            if time.monotonic() > until:
                raise GitHubError(f"out of time before the edit of comment {found[0]['id']}")
            api.edit_comment(found[0]["id"], body)
        else:
            api.comment(number, body)
    except GitHubError as exc:
        return f"the comment on #{number} was not {done}: {exc}; the step summary has the outcome"
    finally:
        api.close()
    return None


def issue_number(environ: Mapping[str, str]) -> tuple[int | None, str]:
    """The issue or pull request to comment on: ``CAIRN_ACTIONS_ISSUE`` when set, else the
    event payload's ``issue.number``, else its ``pull_request.number``; else None and why."""
    given = (environ.get(ENV_ACTIONS_ISSUE) or "").strip().lstrip("#")
    if given:
        if given.isdigit() and int(given) > 0:
            return int(given), ""
        return None, (
            f"{ENV_ACTIONS_ISSUE} is {given!r}, not an issue or pull request number; set it to "
            "one, e.g. 42"
        )
    fix = f"set {ENV_ACTIONS_ISSUE} to the number of the issue or pull request to comment on"
    name = environ.get("GITHUB_EVENT_PATH")
    if not name:
        return None, f"GITHUB_EVENT_PATH is not set; {fix}"
    try:
        event = json.loads(Path(name).read_bytes())
    except (OSError, ValueError) as exc:
        return None, f"the event payload {name} cannot be read ({exc}); {fix}"
    for kind in ("issue", "pull_request"):
        entry = event.get(kind) if isinstance(event, dict) else None
        number = entry.get("number") if isinstance(entry, dict) else None
        if type(number) is int and number > 0:
            return number, ""
    event_name = environ.get("GITHUB_EVENT_NAME") or "the event"
    return None, f"{event_name} names no issue or pull request; {fix}"


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())
