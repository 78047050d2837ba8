"""The fleet page's "Needs you" and its answer box in headless Chromium (the setup of
test_dashboard_browser.py): a real fleet run leaves ASK-1 waiting for input (its agent asked and
made no progress) and DONE-2 completed; FAIL-3 failed after. The section lists ASK-1 then FAIL-3
with what to do, never DONE-2; an answer typed in ASK-1's box is POSTed, journaled and its ticket
retried, and the row leaves the section at the next poll. The ticket page has the box too."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from cairn.state import journal
from cairn.state.layout import discover
from fleet.dashboard_setup import put_record
from fleet.fleet_setup import agent_env, fleet_repo, record
from fleet.test_dashboard_browser import (  # noqa: F401 (fixtures)
    browser_page,
    chromium,
    chromium_browser,
)
from helpers import cairn, git

ANSWER = "call https://api.example.test/v2"
NEEDS = "#needs li.need"


def asked_and_failed(tmp_path: Path) -> Path:
    """ASK-1 needs input (the test agent asks until answered, continuations on), DONE-2
    completed, by a real ``cairn fleet start --once``; then FAIL-3 failed, by hand."""
    repo = fleet_repo(tmp_path, {"ASK-1": 2, "DONE-2": 1})
    toml = repo / "cairn.toml"
    toml.write_text(toml.read_text().replace("max_continuations = 0", "max_continuations = 3"))
    git(repo, "commit", "-qam", "continuations")
    ran = cairn(
        "fleet", "start", "--once", "--json", cwd=repo, env=agent_env(tmp_path, ask="ASK-1")
    )
    assert ran.returncode == 1, (ran.stdout, ran.stderr)  # a ticket needs input
    assert record(repo, "ASK-1")["state"] == "needs_input"
    assert record(repo, "DONE-2")["state"] == "completed"
    time.sleep(1.1)  # FAIL-3 came to need you later than ASK-1 (the records keep seconds)
    put_record(repo, "FAIL-3", "failed", attempt=3, detail="hook before_run failed")
    return repo


def wait_until(page: Any, check: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"the page never showed {what}")
        page.wait_for_timeout(100)


def listed(page: Any) -> list[str]:
    return [
        str(t) for t in page.eval_on_selector_all(NEEDS, "els => els.map(e => e.dataset.ticket)")
    ]


def answered(repo: Path, ticket: str) -> list[dict[str, Any]]:
    _, _, layout = discover(repo)
    run = layout.latest_run(ticket)
    assert run is not None
    events, _ = journal.read(layout.run_dir(ticket, run))
    return [e for e in events if e["event"] == "answered"]


def test_needs_you_lists_the_tickets_oldest_first_and_an_answer_resumes_one(
    tmp_path: Path,
    browser_page: Any,  # noqa: F811
) -> None:
    from fleet import dashboard_server

    page = browser_page
    repo = asked_and_failed(tmp_path)
    question = record(repo, "ASK-1")["detail"]
    app, _ = dashboard_server.app_for(repo)
    with dashboard_server.serving(app) as base:
        page.goto(f"{base}/")
        wait_until(page, lambda: listed(page) == ["ASK-1", "FAIL-3"], "ASK-1 then FAIL-3")
        assert page.inner_text("#needs-count") == "2 need you"
        assert "2 need you" in page.title()
        ask = page.locator(f'{NEEDS}[data-ticket="ASK-1"]')
        fail = page.locator(f'{NEEDS}[data-ticket="FAIL-3"]')
        assert ask.locator(".state").inner_text() == "waits for your answer"
        assert ask.locator(".need-detail").inner_text() == question
        assert 'cairn answer ASK-1 "…"' in ask.locator(".need-todo").inner_text()
        assert ask.locator("a.need-ticket").get_attribute("href") == "/tickets/ASK-1"
        assert fail.locator(".state").inner_text() == "failed"
        assert fail.locator(".need-detail").inner_text() == "hook before_run failed"
        assert "cairn fleet retry FAIL-3" in fail.locator(".need-todo").inner_text()
        assert fail.locator("textarea").count() == 0  # only a question is answered
        first = ask.locator(".need-waited").inner_text()
        assert first.startswith("waited "), first
        wait_until(page, lambda: ask.locator(".need-waited").inner_text() != first, "a live wait")
        page.screenshot(path=str(tmp_path / "needs-you.png"), full_page=True)

        # the ticket page's box: the server's refusal (an answer over the limit) is shown
        ticket_page = page.context.new_page()
        ticket_page.goto(f"{base}/tickets/ASK-1")
        box = ticket_page.locator("#answer")
        box.locator("textarea").wait_for()
        box.locator("textarea").fill("y" * 20_000)
        box.locator("button.answer-send").click()
        wait_until(
            ticket_page,
            lambda: "byte limit" in box.locator(".answer-said").inner_text(),
            "the refusal",
        )
        assert answered(repo, "ASK-1") == [] and record(repo, "ASK-1")["state"] == "needs_input"

        # the fleet page's box: answered, journaled, retried, and the row leaves
        ask.locator("textarea").fill(ANSWER)
        ask.locator("button.answer-send").click()
        wait_until(
            page,
            lambda: page.inner_text("#notice") == "ASK-1: answered; resuming",
            "the answer's result",
        )
        [event] = answered(repo, "ASK-1")
        assert event["text"] == ANSWER and event["by"] == "dashboard"
        assert record(repo, "ASK-1")["state"] == "retrying"
        wait_until(page, lambda: listed(page) == ["FAIL-3"], "ASK-1 leaving the list")
        assert page.inner_text("#needs-count") == "1 needs you"
        assert page.locator("#needs textarea").count() == 0
        assert page.locator('tr.row[data-ticket="DONE-2"]').count() == 1  # the table is kept

        # the ticket page follows: no box once the ticket does not wait for input
        wait_until(ticket_page, lambda: box.is_hidden(), "the ticket page's box gone")
        ticket_page.close()
