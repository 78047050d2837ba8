"""The dashboard's faces (issue 22, item 16): a ticket page reads at most the shown part of a
diff, every response carries the security headers and the pages hold no inline script, and a
retrying row shows one retry time. The browser side (the pages under their policy, the row as
shown) is tests/fleet/test_dashboard_browser.py."""

from __future__ import annotations

import re
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

from starlette.testclient import TestClient

from cairn.fleet.dashboard.app import STATIC, make_app
from cairn.fleet.dashboard.views import DIFF_CAP
from cairn.util import clock
from fleet import big_diff
from fleet.dashboard_setup import LOCAL, put_record
from helpers import cairn

MiB = 1024 * 1024
# What 50 ticket pages at once may add to the server's peak memory. Reading both 8 MB diffs
# whole took it from 55 MB to 482 MB; streamed and cut, it adds about 30 MB.
PEAK_GROWTH = 150 * MiB


def test_a_ticket_page_reads_at_most_the_shown_part_of_a_big_diff(tmp_path: Path) -> None:
    repo = big_diff.build(tmp_path)
    measured = big_diff.measure(repo, requests=50)
    for page in measured["answers"]:
        for name in ("branch_diff", "snapshot_diff"):
            diff = page[name]
            body, _, note = diff.rstrip("\n").rpartition("\n")
            assert len(body.encode()) <= DIFF_CAP, name
            assert note.startswith(f"… diff cut at {DIFF_CAP // 1024} KB; `git diff "), note
        assert "+committed x" in page["branch_diff"]
        assert "+uncommitted x" in page["snapshot_diff"]
    growth = measured["after"]["VmHWM"] - measured["before"]["VmRSS"]
    assert growth < PEAK_GROWTH, measured


def test_a_small_diff_is_shown_whole(tmp_path: Path) -> None:
    repo = big_diff.build(tmp_path, size=4096)
    page = TestClient(make_app(repo, token=None), base_url=LOCAL).get(
        f"/api/v1/tickets/{big_diff.TICKET}"
    )
    assert page.status_code == 200
    assert page.json()["branch_diff"].endswith("x\n") and "cut at" not in page.text


def test_every_response_carries_the_security_headers(repo: Path) -> None:
    put_record(repo, "SEC-1", "queued")
    open_app = TestClient(make_app(repo, token=None), base_url=LOCAL)
    guarded = TestClient(make_app(repo, token="s3cret"), base_url=LOCAL)
    answers = [
        open_app.get("/"),
        open_app.get("/tickets/SEC-1"),
        open_app.get("/static/app.js"),
        open_app.get("/static/style.css"),
        open_app.get("/api/v1/state"),
        open_app.get("/api/v1/tickets/SEC-1"),
        open_app.get("/api/v1/nope"),
        open_app.post("/api/v1/refresh"),
        guarded.get("/"),  # 401 from the guard
        guarded.get("/?token=s3cret"),
    ]
    assert [a.status_code for a in answers] == [200, 200, 200, 200, 200, 200, 404, 409, 401, 200]
    for answer in answers:
        policy = answer.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert "'unsafe-inline'" not in policy and "'unsafe-eval'" not in policy
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["referrer-policy"] == "no-referrer"


class _Inline(HTMLParser):
    """Everything in a page that a policy without 'unsafe-inline' refuses."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = dict(attrs)
        if tag == "script":
            self._in_script = True
            if not names.get("src"):
                self.found.append("a <script> without src")
        if tag == "style":
            self.found.append("a <style> element")
        for name, value in attrs:
            if name.startswith("on") or name == "style":
                self.found.append(f"{tag} {name}={value!r}")
            if value and value.strip().lower().startswith("javascript:"):
                self.found.append(f"{tag} {name}={value!r}")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = self._in_script and tag != "script"

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.found.append(f"inline script {data.strip()[:40]!r}")


def test_the_pages_hold_no_inline_script_style_or_handler() -> None:
    for page in ("index.html", "ticket.html"):
        parser = _Inline()
        parser.feed((STATIC / page).read_text())
        assert parser.found == [], page
    script = (STATIC / "app.js").read_text()
    for refused in (
        r"\beval\(",
        r"new Function\(",
        r"\.innerHTML\s*=",
        r"setAttribute\(\s*\"(on|style)",
    ):
        assert not re.search(refused, script), refused


def test_a_retrying_row_shows_one_retry_time(repo: Path) -> None:
    """The record's detail keeps the wait it was written with (``retry in 20s``, for the
    tracker and notifications); where the time is shown live, that one is left out."""
    put_record(
        repo,
        "RETRY-1",
        "retrying",
        attempt=1,
        next_attempt_at=clock.now() + timedelta(seconds=40),
        last_reason="stall",
        detail="no progress for 5s; retry in 20s",
    )
    state = TestClient(make_app(repo, token=None), base_url=LOCAL).get("/api/v1/state").json()
    (row,) = state["tickets"]
    assert row["last_error"] == "no progress for 5s"
    assert row["next_attempt_at"] is not None
    status = cairn("fleet", "status", cwd=repo)
    assert status.returncode == 0, status.stderr
    (note,) = [line for line in status.stdout.splitlines() if line.startswith("  RETRY-1:")]
    assert "next attempt in " in note and "retry in" not in note
