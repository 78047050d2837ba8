"""The dashboard in a real browser: headless Debian Chromium driven by Playwright (never a
browser download), a real fleet (``cairn fleet start``, real worktrees, the command agent of
tests/fleet/fleet_agent.py) and the page served over HTTP on 127.0.0.1.

The server is ``cairn.fleet.dashboard.app.make_app``, served by tests/fleet/dashboard_server.py.

Chromium is required in CI (``CAIRN_REQUIRE_BROWSER=1`` in .ci/run, which installs it); without
it, and without that variable, the test is skipped saying so.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cairn.fleet import fleetstate, refusals
from cairn.fleet.fleetstate import FleetTicket
from cairn.state import layout
from cairn.terms import ENV_REQUIRE_BROWSER, ENV_UPDATE_SCREENSHOT
from helpers import make_repo

AGENT = Path(__file__).with_name("fleet_agent.py")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT_FOR_DOCS = Path(__file__).parents[2] / "docs" / "img" / "dashboard.png"


def chromium() -> str:
    """The system's Chromium; skips (or fails, when CAIRN_REQUIRE_BROWSER is set) without it."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    missing = None
    if found is None:
        missing = "no chromium on PATH (apt-get install chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            missing = "the playwright package is not installed (pip install -e '.[test]')"
    if missing is not None:
        if os.environ.get(ENV_REQUIRE_BROWSER):
            pytest.fail(f"{ENV_REQUIRE_BROWSER} is set but {missing}")
        pytest.skip(f"browser test: {missing}; .ci/run installs it")
    assert found is not None
    return found


@pytest.fixture(scope="module")
def chromium_browser() -> Iterator[Any]:
    """One Chromium for a module's tests (its start is the slow part); each test gets a page of
    its own in a fresh browser context (``browser_page``)."""
    executable = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def browser_page(chromium_browser: Any) -> Iterator[Any]:
    """A Chromium page in a context of its own (no cookies, storage or cache from another
    test); every Content-Security-Policy violation it logs is kept in ``page.csp_violations``,
    and a test that leaves one there fails (the dashboard runs its own files only: no inline
    script, style or handler)."""
    context = chromium_browser.new_context(viewport={"width": 1280, "height": 640})
    try:
        page: Any = context.new_page()
        page.set_default_timeout(30_000)
        page.csp_violations = []
        page.on("console", lambda message: _keep_csp(page, message.text))
        page.on("pageerror", lambda error: _keep_csp(page, str(error)))
        yield page
        assert page.csp_violations == [], "the page broke its Content-Security-Policy"
    finally:
        context.close()


def _keep_csp(page: Any, text: str) -> None:
    if "Content Security Policy" in text:
        page.csp_violations.append(text)


def fleet_repo(tmp_path: Path) -> Path:
    """Three tickets: PROJ-1 slow (two tasks, a pause each), PROJ-2 quick, PROJ-3 whose agent
    fails (retried after a long backoff, so it shows as retrying with its error)."""
    config = (
        "[agent]\n"
        'kind = "command"\n'
        f"command = {json.dumps([sys.executable, str(AGENT)])}\n"
        "max_turns = 3\nbudget_pressure_turns = 1\nmax_continuations = 0\n"
        "cutoff_timeout_ms = 3000\n\n"
        '[loop]\nphases = ["implement"]\n\n'
        '[fleet]\nconcurrency = 3\nretry_backoff = "5m"\nstall_timeout = "1m"\n'
        'poll_interval = "1s"\nmin_free_memory = "1MiB"\n'
    )
    repo = make_repo(tmp_path / "repo", {"README.md": "hello\n", "cairn.toml": config})
    for ticket, tasks in (("PROJ-1", 2), ("PROJ-2", 1), ("PROJ-3", 1)):
        body = "".join(f"### Task {n}: Step {n}\n\nDo step {n}.\n\n" for n in range(1, tasks + 1))
        plan = repo / "cairn-queue" / f"{ticket}.md"
        plan.parent.mkdir(exist_ok=True)
        plan.write_text(f"# Plan: {ticket}\n\n{body}")
    return repo


@contextlib.contextmanager
def supervisor(repo: Path, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    logs = tmp_path / "agent-log"
    logs.mkdir()
    env = {
        **os.environ,
        "FLEET_AGENT_DIR": str(logs),
        "FLEET_AGENT_SLOW": "PROJ-1",
        "FLEET_AGENT_PAUSE": "3",
        "FLEET_AGENT_FAIL": "PROJ-3",
    }
    out = (tmp_path / "supervisor.out").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn", "fleet", "start", "--json"],
        cwd=repo,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        out.close()


def row_state(page: Any, ticket: str) -> str:
    locator = page.locator(f'tr.row[data-ticket="{ticket}"] .state')
    return str(locator.inner_text()) if locator.count() else ""


def wait_state(page: Any, ticket: str, wanted: str, timeout: float = 90.0) -> list[str]:
    """Watch ``ticket``'s row until it says ``wanted``; the states it showed on the way."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        state = row_state(page, ticket)
        if state and (not seen or seen[-1] != state):
            seen.append(state)
        if state == wanted:
            return seen
        if time.monotonic() > deadline:
            raise AssertionError(f"{ticket} never showed {wanted}; it showed {seen}")
        page.wait_for_timeout(100)


def test_a_row_goes_running_to_completed_live_and_the_ticket_page_shows_summary_and_diff(
    tmp_path: Path, browser_page: Any
) -> None:
    from fleet import dashboard_server

    page = browser_page
    repo = fleet_repo(tmp_path)
    app, which = dashboard_server.app_for(repo)
    print(f"dashboard server: {which}")
    with dashboard_server.serving(app) as base, supervisor(repo, tmp_path):
        page.goto(f"{base}/")
        page.evaluate("window.__sameDocument = true")  # a reload would lose it
        wait_state(page, "PROJ-1", "running")
        assert page.inner_text("#agents").endswith("/3"), "agents running n/max"
        wait_state(page, "PROJ-2", "completed")
        page.screenshot(path=str(tmp_path / "fleet-running.png"), full_page=True)
        seen = wait_state(page, "PROJ-1", "completed")
        assert "running" in seen
        assert page.evaluate("window.__sameDocument") is True, "the page was reloaded"
        wait_state(page, "PROJ-3", "retrying")
        detail = page.locator('tr.more[data-state="retrying"] td').inner_text()
        assert detail, "a retrying row shows its last error"
        assert "next try in" in page.locator('tr.row[data-ticket="PROJ-3"] .c-attempt').inner_text()
        assert "retry in" not in detail, "one retry time per row: the live one"
        page.screenshot(path=str(tmp_path / "fleet.png"), full_page=True)

        page.click('tr.row[data-ticket="PROJ-1"] .c-ticket a')
        page.wait_for_url(f"{base}/tickets/PROJ-1")
        page.wait_for_selector("#summary h3")
        summary = page.inner_text("#summary")
        assert "Change summary" in summary and "Completed" in summary
        assert "---" not in summary.splitlines()[0], "front matter is not shown"
        page.wait_for_selector("#branch-diff .add")
        diff = page.inner_text("#branch-diff")
        assert "+PROJ-1 task 1" in diff and "+PROJ-1 task 2" in diff
        assert page.inner_text("#ticket-state") == "completed"
        page.wait_for_selector("#journal td.sentence")
        assert "run finished: completed" in page.inner_text("#journal")  # sentences first
        page.check("#raw-journal")
        page.wait_for_selector("#journal td.event")
        assert "run_finished" in page.inner_text("#journal")  # the raw events one click away
        page.wait_for_selector("#transcript .t")
        assert "task 2 done" in page.inner_text("#transcript")
        page.screenshot(path=str(tmp_path / "ticket.png"), full_page=True)

        page.goto(f"{base}/tickets/NOPE-1")
        page.wait_for_selector("#error:not([hidden])")
        assert "NOPE-1" in page.inner_text("#error")

    assert (tmp_path / "fleet.png").stat().st_size > 10_000
    if os.environ.get(ENV_UPDATE_SCREENSHOT):
        SCREENSHOT_FOR_DOCS.parent.mkdir(exist_ok=True)
        shutil.copyfile(tmp_path / "fleet-running.png", SCREENSHOT_FOR_DOCS)


def test_markdown_is_rendered_as_text_never_as_html(tmp_path: Path, browser_page: Any) -> None:
    """The summary renderer builds DOM nodes: markup in a summary shows as text."""
    from fleet import dashboard_server

    app, _ = dashboard_server.app_for(make_repo(tmp_path / "repo"))
    with dashboard_server.serving(app) as base:
        page = browser_page
        page.goto(f"{base}/")
        page.wait_for_selector("#live.ok")
        assert page.is_visible("#empty"), "an empty fleet says how to start one"
        html = page.evaluate(
            """() => {
              const probe = document.createElement('div');
              window.__cairnMarkdown(probe, [
                '---', 'format: 1', '---', '# Change summary <img src=x onerror=alert(1)>',
                '', '## Status', 'Completed — `2 of 2` **tasks**', '', '- [x] one', '- two',
                '1. first', '', '```', '<script>bad()</script>', '```'
              ].join('\\n'));
              return probe.innerHTML;
            }"""
        )
    assert "<img" not in html and "<script>" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<h3>Change summary" in html and "<h4>Status</h4>" in html
    assert "<code>2 of 2</code>" in html and "<strong>tasks</strong>" in html
    assert html.count("<li") == 3 and "<ol>" in html and "format: 1" not in html
    assert "&lt;script&gt;bad()&lt;/script&gt;" in html


def test_a_page_opened_with_a_token_passes_it_on(tmp_path: Path, browser_page: Any) -> None:
    """With a token, every request needs it: the assets, the API and the ticket links carry
    the page's ``?token=``, so the page works; without it the server says 401."""
    from fleet import dashboard_server

    repo = make_repo(tmp_path / "repo")
    now = datetime.now(UTC)
    _, _, where = layout.discover(repo)
    fleetstate.write(
        where,
        FleetTicket(ticket="TOK-1", plan="cairn-queue/TOK-1.md", state="queued", updated=now),
    )
    app, _ = dashboard_server.app_for(repo, token="s3cret")
    with dashboard_server.serving(app) as base:
        page = browser_page
        refused = page.goto(f"{base}/api/v1/state")
        assert refused is not None and refused.status == 401
        page.goto(f"{base}/?token=s3cret")
        page.wait_for_selector('tr.row[data-ticket="TOK-1"]')
        assert page.inner_text("#live").startswith("live")
        link = page.get_attribute('tr.row[data-ticket="TOK-1"] .c-ticket a', "href")
        assert link == "/tickets/TOK-1?token=s3cret"
        page.click('tr.row[data-ticket="TOK-1"] .c-ticket a')
        page.wait_for_selector("#ticket-state.s-queued")
        assert page.get_attribute("#back", "href") == "/?token=s3cret"


def test_the_pages_run_under_their_content_security_policy(
    tmp_path: Path, browser_page: Any
) -> None:
    """Both pages load their script and style from their own files and work under the policy
    the server sends; an inline script is refused, and the fixture sees the violation."""
    from fleet import dashboard_server

    repo = make_repo(tmp_path / "repo")
    _, _, where = layout.discover(repo)
    fleetstate.write(
        where,
        FleetTicket(
            ticket="CSP-1", plan="cairn-queue/CSP-1.md", state="queued", updated=datetime.now(UTC)
        ),
    )
    app, _ = dashboard_server.app_for(repo)
    with dashboard_server.serving(app) as base:
        page = browser_page
        response = page.goto(f"{base}/")
        assert response is not None
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
        assert response.headers["x-content-type-options"] == "nosniff"
        page.wait_for_selector('tr.row[data-ticket="CSP-1"]')
        assert page.evaluate("getComputedStyle(document.body).margin") == "0px", "style.css"
        page.goto(f"{base}/tickets/CSP-1")
        page.wait_for_selector("#ticket-state.s-queued")
        assert page.csp_violations == []
        with contextlib.suppress(Exception):
            page.add_script_tag(content="window.__inline = true")
        page.wait_for_timeout(200)
        assert page.evaluate("window.__inline === undefined"), "an inline script ran"
        assert page.csp_violations, "the refused inline script was not seen"
        page.csp_violations.clear()


def test_a_refused_entry_shows_as_a_row_without_a_page(tmp_path: Path, browser_page: Any) -> None:
    """The tracker's refusals are rows of their own: named by their plan (no ticket page to
    link to), the reason and the fix below, a ``refused`` chip; beside a ticket of the same
    id, both show."""
    from fleet import dashboard_server

    repo = make_repo(tmp_path / "repo")
    now = datetime.now(UTC)
    _, _, where = layout.discover(repo)
    fleetstate.write(
        where, FleetTicket(ticket="A-1", plan="cairn-queue/A-1.md", state="queued", updated=now)
    )
    refusals.write(
        where,
        [
            refusals.Refusal(
                plan="cairn-queue/fix the login.md",
                reason="plan fix the login.md: its name is not a ticket id; rename it",
                since=now,
            ),
            refusals.Refusal(
                plan="cairn-queue/dupe.md",
                ticket="A-1",
                reason="plan dupe.md names ticket 'A-1', as A-1.md does; rename one",
                since=now,
            ),
        ],
    )
    app, _ = dashboard_server.app_for(repo)
    with dashboard_server.serving(app) as base:
        page = browser_page
        page.goto(f"{base}/")
        page.wait_for_selector('tr.row[data-ticket="cairn-queue/fix the login.md"]')
        row = 'tr.row[data-ticket="cairn-queue/fix the login.md"]'
        assert page.inner_text(f"{row} .state") == "refused"
        assert page.locator(f"{row} .c-ticket a").count() == 0, "no page to link to"
        details = page.locator('tr.more[data-state="refused"] td').all_inner_texts()
        assert any("rename it" in text for text in details), details
        assert page.locator('tr.row[data-ticket="A-1"]').count() == 2  # the ticket and its dupe
        assert page.locator('tr.row[data-ticket="A-1"] .c-ticket a').count() == 1
        assert "refused 2" in page.inner_text("#counts")


def test_buttons_pause_and_resume_a_running_ticket_and_say_why_when_they_cannot(
    tmp_path: Path, browser_page: Any
) -> None:
    """The dashboard ``cairn fleet start --port`` serves, in Chromium: a running ticket's pause
    button cuts its run off with a snapshot; its page says who asked, in the journal's words,
    and shows the transcript; the resume button there lets it run to completion; the buttons
    that cannot act are disabled, each saying why."""
    from fleet.dashboard_setup import started_url

    page = browser_page
    repo = fleet_repo(tmp_path)
    logs = tmp_path / "agent-log"
    logs.mkdir()
    env = {
        **os.environ,
        "FLEET_AGENT_DIR": str(logs),
        "FLEET_AGENT_GATE": "PROJ-1",
        "FLEET_AGENT_FAIL": "PROJ-3",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn", "fleet", "start", "--json", "--port", "0"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        base = started_url(proc).rstrip("/")
        page.goto(f"{base}/")
        wait_state(page, "PROJ-1", "running")
        wait_state(page, "PROJ-2", "completed")
        done = page.locator('tr.row[data-ticket="PROJ-2"] button.act-resume')
        assert done.is_disabled() and "completed" in str(done.get_attribute("title"))
        pause = 'tr.row[data-ticket="PROJ-1"] button.act-pause'
        page.wait_for_selector(f"{pause}:not([disabled])")
        page.click(pause)
        seen = wait_state(page, "PROJ-1", "paused")
        assert seen[-1] == "paused"
        assert "PROJ-1: pause asked" in page.inner_text("#notice")

        page.click('tr.row[data-ticket="PROJ-1"] .c-ticket a')
        page.wait_for_url(f"{base}/tickets/PROJ-1")
        page.wait_for_selector("#ticket-state.s-paused")
        page.wait_for_selector("#journal td.e-asked")
        assert "pause asked from the dashboard" in page.inner_text("#journal")
        assert page.locator("#buttons button.act-pause").is_disabled()
        assert "paused already" in page.inner_text("#why-not")
        (logs / "PROJ-1.go").write_text("go\n")  # the agent may finish once resumed
        page.click("#buttons button.act-resume:not([disabled])")
        page.wait_for_selector("#ticket-state.s-completed", timeout=90_000)
        journal_text = page.inner_text("#journal")
        assert "resume asked from the dashboard" in journal_text
        page.wait_for_selector("#transcript .t")  # the dispatch's lines, as cairn logs shows them
        assert "task 2 done" in page.inner_text("#transcript")
    finally:
        with contextlib.suppress(Exception):
            subprocess.run(
                [sys.executable, "-m", "cairn", "fleet", "stop"],
                cwd=repo,
                env=env,
                capture_output=True,
                timeout=60,
            )
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=10)
    record = json.loads((repo / ".git/cairn/fleet/tickets/PROJ-1.json").read_text())
    assert record["state"] == "completed", record
