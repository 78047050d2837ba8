"""Acting from the dashboard (issue 25, items 1 and 2), in-process over a repository a real
``cairn fleet start --once`` ran: ``POST /api/v1/tickets/{id}/pause|resume|stop|retry`` with
its 202/404/409 answers and the journal's record of who asked, the buttons' reasons, the
transcript API, the journal as sentences, and the pull request link."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from cairn.fleet import fleetstate, pulls
from cairn.fleet.dashboard.app import make_app
from cairn.state import journal, journal_text
from cairn.state.journal_text import sentence
from cairn.state.layout import discover
from cairn.terms import JOURNAL_EVENTS
from fleet.dashboard_setup import LOCAL, put_record
from fleet.fleet_setup import agent_env, fleet_repo, record
from helpers import cairn


def assert_error(response: Any, status: int, code: str) -> dict[str, str]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == code and body["error"]["message"]
    error: dict[str, str] = body["error"]
    return error


@pytest.fixture
def ran(tmp_path: Path) -> Path:
    """A repository whose queue a real supervisor ran (DONE-1 completed, two tasks: a run with
    its journal and transcripts), and a queued ticket that never ran."""
    repo = fleet_repo(tmp_path, {"DONE-1": 2})
    result = cairn("fleet", "start", "--once", "--json", cwd=repo, env=agent_env(tmp_path))
    assert result.returncode == 0, (result.stdout, result.stderr)
    put_record(repo, "NEW-2", "queued")
    return repo


def asks(repo: Path, ticket: str) -> list[dict[str, Any]]:
    _, _, layout = discover(repo)
    run = layout.latest_run(ticket)
    assert run is not None
    events, _ = journal.read(layout.run_dir(ticket, run))
    return [e for e in events if e["event"] == "asked"]


def test_pause_and_resume_change_the_record_and_the_journal_says_who_asked(ran: Path) -> None:
    """No supervisor runs: the dashboard changes the records itself, as the command does.
    A POST with the page's Origin is the dashboard's, one without another program's."""
    client = TestClient(make_app(ran, token=None), base_url=LOCAL)
    put_record(ran, "DONE-1", "retrying", attempt=1, last_reason="stall")

    paused = client.post("/api/v1/tickets/DONE-1/pause", headers={"Origin": LOCAL})

    assert paused.status_code == 202, paused.text
    body = paused.json()
    assert (body["ticket"], body["action"], body["by"]) == ("DONE-1", "pause", "dashboard")
    assert (body["changed"], body["pending"], body["state"]) == (True, False, "paused")
    assert record(ran, "DONE-1")["state"] == "paused"
    again = client.post("/api/v1/tickets/DONE-1/pause")
    assert again.status_code == 202 and again.json()["changed"] is False  # paused already
    resumed = client.post("/api/v1/tickets/DONE-1/resume")
    assert resumed.status_code == 202 and resumed.json()["state"] == "retrying"
    assert resumed.json()["by"] == "api"
    assert record(ran, "DONE-1")["state"] == "retrying"
    by_cli = cairn("fleet", "pause", "DONE-1", cwd=ran)
    assert by_cli.returncode == 0, by_cli.stderr
    told = [(e["action"], e["by"]) for e in asks(ran, "DONE-1")]
    assert told == [("pause", "dashboard"), ("resume", "api"), ("pause", "cli")]
    page = client.get("/api/v1/tickets/DONE-1").json()
    sentences = [e["text"] for e in page["journal"] if e["event"] == "asked"]
    assert sentences == [
        "pause asked from the dashboard",
        "resume asked through the API",
        "pause asked from the command line",
    ]


def test_stop_and_retry_of_a_ticket_that_never_ran(ran: Path) -> None:
    client = TestClient(make_app(ran, token=None), base_url=LOCAL)
    stopped = client.post("/api/v1/tickets/NEW-2/stop")
    assert stopped.status_code == 202 and stopped.json()["state"] == "stopped"
    assert "stopped by a person" in (record(ran, "NEW-2")["detail"] or "")
    retried = client.post("/api/v1/tickets/NEW-2/retry")
    assert retried.status_code == 202 and retried.json()["state"] == "retrying"
    assert record(ran, "NEW-2")["attempt"] == 0


def test_what_does_not_apply_is_409_and_unknown_is_404_and_nothing_changes(ran: Path) -> None:
    client = TestClient(make_app(ran, token=None), base_url=LOCAL)
    before = (record(ran, "DONE-1"), record(ran, "NEW-2"))
    for action in ("pause", "resume", "stop", "retry"):
        error = assert_error(client.post(f"/api/v1/tickets/DONE-1/{action}"), 409, "not_applicable")
        assert "completed" in error["message"]
    assert_error(client.post("/api/v1/tickets/NOPE-9/pause"), 404, "unknown_ticket")
    assert_error(client.post("/api/v1/tickets/NEW-2/frobnicate"), 404, "not_found")
    assert_error(client.post("/api/v1/tickets/bad id/pause"), 400, "invalid_ticket")
    assert_error(
        client.post("/api/v1/tickets/NEW-2/pause", headers={"Origin": "http://evil.example"}),
        403,
        "forbidden_origin",
    )
    assert (record(ran, "DONE-1"), record(ran, "NEW-2")) == before
    assert asks(ran, "DONE-1") == []
    assert not (ran / ".git/cairn/fleet/requests").exists() or not any(
        (ran / ".git/cairn/fleet/requests").iterdir()
    )


def test_no_cross_origin_request_is_let_in(ran: Path) -> None:
    """No CORS: a preflight from another origin gets no Access-Control header, so a browser
    never sends the POST; a POST sent anyway is refused and changes nothing."""
    client = TestClient(make_app(ran, token=None), base_url=LOCAL)
    evil = {"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}
    preflight = client.options("/api/v1/tickets/NEW-2/pause", headers=evil)
    assert not [h for h in preflight.headers if h.lower().startswith("access-control-")]
    posted = client.post("/api/v1/tickets/NEW-2/stop", headers={"Origin": "http://evil.example"})
    assert_error(posted, 403, "forbidden_origin")
    assert not [h for h in posted.headers if h.lower().startswith("access-control-")]
    assert record(ran, "NEW-2")["state"] == "queued"


def test_with_a_token_a_post_needs_it(ran: Path) -> None:
    client = TestClient(make_app(ran, token="s3cret"), base_url="http://10.1.2.3")
    assert_error(client.post("/api/v1/tickets/NEW-2/pause"), 401, "unauthorized")
    assert record(ran, "NEW-2")["state"] == "queued"
    done = client.post("/api/v1/tickets/NEW-2/pause", headers={"Authorization": "Bearer s3cret"})
    assert done.status_code == 202 and record(ran, "NEW-2")["state"] == "paused"


def test_rows_and_the_ticket_page_say_which_buttons_act_and_why_not(ran: Path) -> None:
    client = TestClient(make_app(ran, token=None), base_url=LOCAL)
    rows = {r["ticket"]: r for r in client.get("/api/v1/state").json()["tickets"]}
    assert rows["DONE-1"]["actions"] == []
    assert rows["NEW-2"]["actions"] == ["pause", "stop"]
    page = client.get("/api/v1/tickets/NEW-2").json()
    assert page["actions"]["pause"] is None and page["actions"]["stop"] is None
    assert page["actions"]["resume"] == "ticket NEW-2 is queued, not paused: it runs"
    assert "nothing to retry" in page["actions"]["retry"]  # retry.refusal, as the command says
    done = client.get("/api/v1/tickets/DONE-1").json()["actions"]
    assert all("completed" in (why or "") for why in done.values()), done
    # `cairn fleet status --json` keeps its shape: the buttons are the dashboard's
    status = json.loads(cairn("fleet", "status", "--json", cwd=ran).stdout)
    assert all("actions" not in row for row in status)


def test_the_transcript_api_gives_the_cairn_logs_lines(ran: Path) -> None:
    client = TestClient(make_app(ran, token=None), base_url=LOCAL)
    logs = cairn("logs", "DONE-1", cwd=ran)
    assert logs.returncode == 0, logs.stderr
    printed = logs.stdout.splitlines()
    latest = client.get("/api/v1/tickets/DONE-1/transcript").json()
    assert latest["dispatches"] and latest["dispatch"] == latest["dispatches"][-1]["number"]
    assert latest["live"] is False and latest["more"] is False
    every: list[str] = []
    for dispatch in latest["dispatches"]:
        one = client.get(f"/api/v1/tickets/DONE-1/transcript?dispatch={dispatch['number']}")
        assert one.status_code == 200
        lines = one.json()["lines"]
        assert all(set(line) == {"kind", "text", "tool", "denied", "at"} for line in lines)
        every.append(f"== dispatch {dispatch['number']} · {dispatch['role']} ·")
        every += [line["text"] for line in lines]
    shown = [line for line in printed if not line.startswith("==")]
    assert [t for t in every if not t.startswith("==")] == shown
    kinds = {"turn", "tool", "message", "change", "error", "result", "session", "plan", "note"}
    assert latest["lines"] and {line["kind"] for line in latest["lines"]} <= kinds
    # the page follows a live transcript: the lines after those it has
    count = latest["next"]
    later = client.get(f"/api/v1/tickets/DONE-1/transcript?since={count}").json()
    assert later["lines"] == [] and later["next"] == count
    part = client.get("/api/v1/tickets/DONE-1/transcript?since=1").json()
    assert part["lines"] == latest["lines"][1:]
    assert_error(
        client.get("/api/v1/tickets/DONE-1/transcript?dispatch=99"), 404, "unknown_dispatch"
    )
    assert_error(client.get("/api/v1/tickets/DONE-1/transcript?dispatch=0"), 400, "bad_request")
    assert_error(client.get("/api/v1/tickets/DONE-1/transcript?since=x"), 400, "bad_request")
    assert_error(client.get("/api/v1/tickets/NOPE-9/transcript"), 404, "unknown_ticket")
    never = client.get("/api/v1/tickets/NEW-2/transcript").json()
    assert (never["dispatches"], never["lines"], never["dispatch"]) == ([], [], None)


def test_every_journal_event_of_a_real_run_reads_as_a_sentence(ran: Path) -> None:
    _, _, layout = discover(ran)
    run = layout.latest_run("DONE-1")
    assert run is not None
    events, _ = journal.read(layout.run_dir("DONE-1", run))
    seen = {e["event"] for e in events}
    assert {"run_started", "dispatch_started", "dispatch_finished", "task", "run_finished"} <= seen
    for event in events:
        said = sentence(event)
        assert said and "{" not in said and said != event["event"].replace("_", " "), event
    for name in JOURNAL_EVENTS:  # every event this release writes has words of its own
        assert name in journal_text._SAY, name
    assert sentence({"event": "from_the_future", "x": 1}) == "from the future"
    assert sentence({"event": "task", "task": 2, "status": "done"}) == "task 2 done"


def test_the_ticket_page_links_the_pull_request_when_there_is_one(ran: Path) -> None:
    client = TestClient(make_app(ran, token=None), base_url=LOCAL)
    assert client.get("/api/v1/tickets/DONE-1").json()["pull_request"] is None
    _, _, layout = discover(ran)
    pulls.record(layout, "DONE-1", {"html_url": "javascript:alert(1)", "number": 3})
    assert client.get("/api/v1/tickets/DONE-1").json()["pull_request"] is None
    pulls.record(layout, "DONE-1", {"html_url": "https://github.test/o/r/pull/7", "number": 7})
    pull = client.get("/api/v1/tickets/DONE-1").json()["pull_request"]
    assert pull == {"url": "https://github.test/o/r/pull/7", "number": 7}
    assert fleetstate.read(layout, "DONE-1") is not None
