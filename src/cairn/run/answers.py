"""A person's answer to the agent that stopped for input (``cairn answer TICKET "text"``).

A run ends ``needs_input`` (reason ``no_progress``) when its agent made no progress: it was
denied what it needed, or asked something. ``record`` puts the answer in the run's journal
(``answered``: the text, who answered, and how long the need waited since the run stopped);
every later handoff prompt of the run carries the answers (``given``), so the agent reads them
where it picks up, and so does one started after a later cutoff.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from cairn.errors import BadInput
from cairn.git import Repo
from cairn.state import journal
from cairn.state.layout import Layout

MAX_ANSWER_BYTES = 16 * 1024  # an answer is a few lines for the agent, not a document


def record(layout: Layout, ticket: str, text: str, by: str) -> dict[str, Any]:
    """Journal ``text`` as the answer to ``ticket``'s latest run, which must be waiting for
    input; the event written. Bad input (nothing written) when it is not, or the text is empty
    or too long (``check``)."""
    from cairn.state import runstate
    from cairn.util import clock

    run_id, answer, stopped = check(layout, ticket, text)
    waited = (clock.now() - stopped).total_seconds()
    ref = runstate.RunRef(layout, ticket, run_id)
    return runstate.record(ref, "answered", text=answer, by=by, waited_s=round(max(0.0, waited)))


def check(layout: Layout, ticket: str, text: str) -> tuple[str, str, datetime]:
    """The run ``text`` answers, the answer as it is written, and when the run stopped for it;
    BadInput when the ticket's latest run in ``layout`` does not wait for one, or the text is
    empty or too long. Reads only."""
    answer = text.strip()
    if not answer:
        raise BadInput(f'the answer to {ticket} is empty; cairn answer {ticket} "what it needs"')
    size = len(answer.encode("utf-8", "surrogatepass"))
    if size > MAX_ANSWER_BYTES:
        raise BadInput(
            f"the answer to {ticket} is {size} bytes, over the {MAX_ANSWER_BYTES} byte limit; "
            "put the long part in a file in the repository and name it in the answer"
        )
    run_id = layout.latest_run(ticket)
    if run_id is None:
        raise BadInput(f"ticket {ticket} has no run to answer; cairn run PLAN --ticket {ticket}")
    events, _ = journal.read(layout.run_dir(ticket, run_id))
    stopped = waiting_since(events)
    if stopped is None:
        raise BadInput(
            f"ticket {ticket} does not wait for an answer (its run {run_id} did not stop for "
            f"input); cairn catchup {ticket} says where it is"
        )
    return run_id, answer, stopped


def waiting_since(events: list[dict[str, Any]]) -> datetime | None:
    """When the run stopped for input, if that is the last thing its journal says (answers, a
    person's asks and the needs the fleet journals since do not change it); else None."""
    for event in reversed(events):
        if event.get("event") in ("answered", "asked", "need_raised", "need_met"):
            continue  # a person's asks and the fleet's bookkeeping since the stop
        if event.get("event") == "run_interrupted" and event.get("reason") == "no_progress":
            return _when(event)
        return None
    return None


def who(repo: Repo) -> str:
    """Who answers, when ``--by`` does not say: git's ``user.name``, else ``$USER``."""
    found = repo.git.run(["config", "user.name"], check=False)
    name = found.text.strip() if found.ok else ""
    return name or os.environ.get("USER") or "a person"


def given(run_dir: Path) -> list[dict[str, Any]]:
    """Every answer a person gave the run, oldest first: a handoff carries them all, so an agent
    started after a later cutoff knows them too."""
    events, _ = journal.read(run_dir)
    return [event for event in events if event.get("event") == "answered"]


def prompt_block(answers: list[dict[str, Any]]) -> str:
    """The lines a handoff prompt gets for ``answers``."""
    lines = ["A person answered what an agent of this run stopped for (it made no progress):"]
    for answer in answers:
        lines.append(f"From {answer.get('by') or 'a person'}:")
        lines += [f"> {line}" for line in str(answer.get("text", "")).splitlines()]
    lines.append("Use the answer and go on with the remaining tasks.")
    return "\n".join(lines)


def _when(event: dict[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(event.get("t")))
    except ValueError:
        return None
