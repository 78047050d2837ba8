"""The ticket page's review in headless Chromium (the setup of test_dashboard_browser.py): a
comment on a line of the branch diff becomes finding R1 of a fix round, the fleet's agent
(tests/fleet/fleet_agent.py) fixes that line, and the page shows R1 FIXED and its comment
outdated; then Approve makes the ticket approved."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from fleet.fleet_setup import agent_env, fleet_repo, supervisor, wait_line
from fleet.test_dashboard_browser import (  # noqa: F401 (fixtures)
    browser_page,
    chromium,
    chromium_browser,
)

TICKET = "REV-1"
FILE = f"work/{TICKET}-task-1.txt"


def wait_text(
    page: Any, selector: str, wanted: str, timeout: float = 90.0, within: bool = False
) -> None:
    """Poll ``selector``'s text until it is ``wanted`` (or holds it, ``within``): the page's CSP
    forbids the string functions of ``wait_for_function``."""
    deadline = time.monotonic() + timeout
    while True:
        shown = page.inner_text(selector)
        if shown == wanted or (within and wanted in shown):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{selector} says {shown!r}, never {wanted!r}")
        page.wait_for_timeout(100)


def test_a_comment_on_a_line_becomes_a_finding_the_agent_fixes(
    tmp_path: Path,
    browser_page: Any,  # noqa: F811
) -> None:
    page = browser_page
    repo = fleet_repo(tmp_path, {TICKET: 1})
    proc = supervisor(repo, agent_env(tmp_path), "--port", "0")
    try:
        base = wait_line(proc, "dashboard_started")["url"].rstrip("/")
        page.goto(f"{base}/tickets/{TICKET}")
        wait_text(page, "#ticket-state", "completed")
        line = f'#branch-diff .commentable[data-path="{FILE}"][data-line="1"]'
        page.wait_for_selector(line)
        assert page.inner_text("#review-rounds") == "No review yet."
        page.click(line)
        assert page.inner_text("#review-where") == f"Comment on {FILE}:1"
        page.fill("#review-body", "say which task this is")
        page.click("#review-add")
        assert FILE in page.inner_text("#review-draft")
        page.click("#review-request")
        wait_text(page, "#review-said", "fix round 1 asked")
        page.wait_for_selector('#review-rounds li[data-comment="R1"] .chip.r-pending')
        fixed = '#review-rounds li[data-comment="R1"] .chip.r-fixed'
        page.wait_for_selector(fixed, timeout=90_000)
        comment = page.inner_text('#review-rounds li[data-comment="R1"]')
        assert "FIXED" in comment and "outdated" in comment, comment
        assert f"agent: changed {FILE}:1" in comment
        assert "say which task this is" in comment
        wait_text(page, "#ticket-state", "completed")
        wait_text(page, "#branch-diff", f"+{TICKET} task 1 # fixed R1", within=True)
        page.screenshot(path=str(tmp_path / "review.png"), full_page=True)

        page.click("#review-approve")
        wait_text(page, "#ticket-state", "approved")
        assert "Approved by dashboard" in page.inner_text("#review-rounds")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=60)
