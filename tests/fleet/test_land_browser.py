"""The ticket page's *Land* button in headless Chromium (the setup of
test_dashboard_browser.py), on a running supervisor's dashboard: it is disabled with the reason
while a ticket cannot land, lands an approved branch, and a branch that conflicts with the moved
base goes through its fix round (the fleet agent of tests/fleet/fleet_agent.py merges the base
and resolves the conflict) and lands once that passes."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from fleet.fleet_setup import agent_env, fleet_repo, supervisor, wait_line
from fleet.test_dashboard_browser import (  # noqa: F401 (fixtures)
    browser_page,
    chromium,
    chromium_browser,
)
from fleet.test_land import ancestor, move_main, state_of, tip
from fleet.test_review_browser import wait_text
from helpers import cairn

ONE, TWO = "LAND-1", "LAND-2"
FILE = f"work/{ONE}-task-1.txt"


def test_land_button_lands_an_approved_branch_and_a_conflict_after_its_fix_round(
    tmp_path: Path,
    browser_page: Any,  # noqa: F811
) -> None:
    page = browser_page
    repo = fleet_repo(tmp_path, {ONE: 1, TWO: 1})
    proc = supervisor(repo, agent_env(tmp_path), "--port", "0")
    try:
        base = wait_line(proc, "dashboard_started")["url"].rstrip("/")
        page.goto(f"{base}/tickets/{TWO}")
        wait_text(page, "#ticket-state", "completed")
        wait_text(page, "#land-what", f"(cairn/{TWO} into main)")
        page.wait_for_selector("#land-button:not([disabled])")  # completed, no open finding
        approved = cairn("review", TWO, "--approve", "--by", "ann", cwd=repo)
        assert approved.returncode == 0, approved.stderr
        wait_text(page, "#ticket-state", "approved")
        assert state_of(repo, TWO) == "approved"
        page.wait_for_selector("#land-button:not([disabled])")
        assert page.inner_text("#land-reason") == ""
        page.click("#land-button")
        wait_text(page, "#land-said", "landed on main (a fast-forward)")
        assert tip(repo, "main") == tip(repo, f"cairn/{TWO}")
        wait_text(page, "#land-reason", f"cairn/{TWO} is on main")
        assert page.is_disabled("#land-button")

        moved = move_main(repo, "main's own line\n")
        page.goto(f"{base}/tickets/{ONE}")
        wait_text(page, "#ticket-state", "completed")
        page.wait_for_selector("#land-button:not([disabled])")
        page.click("#land-button")
        wait_text(
            page,
            "#land-said",
            f"conflicts with main in {FILE}: fix round 1 asked; it lands once that passes",
        )
        wait_text(page, "#land-reason", "waits for its fix round", within=True)
        assert page.is_disabled("#land-button")
        wait_text(page, "#land-reason", f"cairn/{ONE} is on main", timeout=120)
        assert ancestor(repo, moved, "main") and ancestor(repo, f"cairn/{ONE}", "main")
        assert (repo / FILE).read_text() == f"{ONE} task 1\nmain's own line\n"
        page.screenshot(path=str(tmp_path / "land.png"), full_page=True)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=60)
