"""Landing fleet tickets (docs/fleet.md, "Landing a ticket"): ``cairn fleet land TICKET…`` and
``POST /api/v1/tickets/{id}/land`` merge approved or completed branches into the fleet's base
in the order asked, never losing a commit nor rewriting the base; a branch that conflicts gets a
fix round (finding L1, which the command agent of tests/fleet/fleet_agent.py answers by merging
the base and resolving the conflicts) and lands once it passes. Real fleets and real git; the
API in-process (Starlette's TestClient) and through a running supervisor; the CLI as a
subprocess."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from cairn.fleet.dashboard.app import make_app
from fleet.dashboard_setup import LOCAL
from fleet.fleet_setup import agent_env, fleet_repo, record, supervisor, wait_for, wait_line
from helpers import assert_one_line_error, cairn, git, make_repo

ONE, TWO = "LAND-1", "LAND-2"
FILE = f"work/{ONE}-task-1.txt"  # the agent's file on cairn/LAND-1: "LAND-1 task 1"


def state_files(repo: Path) -> dict[str, str]:
    """Every file under the state root (locks aside) and every ref, as digests: to show that
    nothing was written."""
    root = repo / ".git" / "cairn"
    found = {"refs": git(repo, "for-each-ref", "--format=%(refname) %(objectname)")}
    for path in sorted(root.rglob("*")):
        if path.is_file() and "lock" not in path.name and path.name != "lease":
            found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


@pytest.fixture
def done(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A fleet whose tickets LAND-1 and LAND-2 (one task each) completed under ``cairn fleet
    start --once``; main is checked out, clean, in the repository's work tree."""
    repo = fleet_repo(tmp_path, {ONE: 1, TWO: 1})
    env = agent_env(tmp_path)
    result = cairn("fleet", "start", "--once", "--json", cwd=repo, env=env)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert record(repo, ONE)["state"] == record(repo, TWO)["state"] == "completed"
    return repo, env


def state_of(repo: Path, ticket: str) -> str | None:
    path = repo / ".git" / "cairn" / "fleet" / "tickets" / f"{ticket}.json"
    return str(json.loads(path.read_text())["state"]) if path.exists() else None


def tip(repo: Path, ref: str) -> str:
    return git(repo, "rev-parse", ref).strip()


def ancestor(repo: Path, older: str, newer: str) -> bool:
    args = ["git", "-C", str(repo), "merge-base", "--is-ancestor", older, newer]
    return subprocess.run(args, capture_output=True, check=False).returncode == 0


def landed_events(repo: Path, ticket: str) -> list[dict[str, Any]]:
    runs = sorted((repo / ".git" / "cairn" / "tickets" / ticket).glob("2*"))
    lines = (runs[-1] / "run-log.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("event") == "landed"]


def move_main(repo: Path, text: str) -> str:
    """A person's commit on main (checked out in ``repo``) that conflicts with LAND-1's file."""
    (repo / "work").mkdir(exist_ok=True)
    (repo / FILE).write_text(text)
    git(repo, "add", FILE)
    git(repo, "commit", "-qm", "main moves on")
    return tip(repo, "main")


def test_cli_lands_in_order_each_on_the_one_before(done: tuple[Path, dict[str, str]]) -> None:
    repo, _ = done
    before = tip(repo, "main")
    one, two = tip(repo, f"cairn/{ONE}"), tip(repo, f"cairn/{TWO}")
    result = cairn("fleet", "land", ONE, TWO, "--json", cwd=repo)
    assert result.returncode == 0, (result.stdout, result.stderr)
    first, second = map(json.loads, result.stdout.splitlines())
    assert first["event"] == "ticket_land" and first["landed"] is True
    assert (first["ticket"], first["how"], first["previous"]) == (ONE, "fast_forward", before)
    assert first["merge"] == one and first["commit"] == one
    assert (second["ticket"], second["how"], second["previous"]) == (TWO, "merge", one)
    after = tip(repo, "main")
    assert second["merge"] == after
    # a merge commit of both tips: no commit of either side lost, main only moved forward
    assert git(repo, "rev-list", "--parents", "-n1", after).split()[1:] == [one, two]
    assert ancestor(repo, before, after)
    # main was checked out here: its work tree has both tickets' files, and is clean
    assert (repo / FILE).read_text() == f"{ONE} task 1\n"
    assert (repo / f"work/{TWO}-task-1.txt").read_text() == f"{TWO} task 1\n"
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
    (event,) = landed_events(repo, TWO)
    said = (event["by"], event["how"], event["merge"], event["commit"])
    assert said == ("cli", "merge", after, two)
    # landing again changes nothing
    again = cairn("fleet", "land", ONE, cwd=repo)
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"{ONE}: landed on main (already there)\n"
    assert tip(repo, "main") == after


def test_cli_lands_with_plumbing_when_the_base_is_not_checked_out(
    done: tuple[Path, dict[str, str]],
) -> None:
    repo, _ = done
    git(repo, "checkout", "-q", "--detach")
    before = tip(repo, "main")
    result = cairn("fleet", "land", TWO, cwd=repo)
    assert_one_line_error(result)
    assert "the main work tree's HEAD is detached; set [fleet] base" in result.stderr
    config = repo / "cairn.toml"
    config.write_text(config.read_text().replace("[fleet]\n", '[fleet]\nbase = "main"\n'))
    result = cairn("fleet", "land", TWO, ONE, cwd=repo)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert result.stdout.startswith(f"{TWO}: landed on main (a fast-forward)\n{ONE}: landed on")
    after = tip(repo, "main")
    assert git(repo, "rev-list", "--parents", "-n1", after).split()[1:] == [
        tip(repo, f"cairn/{TWO}"),
        tip(repo, f"cairn/{ONE}"),
    ]
    assert ancestor(repo, before, after)
    assert tip(repo, "HEAD") == before  # the detached work tree was not touched
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == " M cairn.toml\n"


def test_cli_bad_input_is_one_line_exit_2_and_changes_nothing(
    done: tuple[Path, dict[str, str]],
) -> None:
    repo, _ = done
    before = state_files(repo)
    result = cairn("fleet", "land", ONE, "NOPE-9", cwd=repo)  # the good one is not landed either
    assert_one_line_error(result)
    assert f"no fleet ticket NOPE-9; the fleet's tickets are {ONE}, {TWO}" in result.stderr
    assert state_files(repo) == before
    path = repo / ".git" / "cairn" / "fleet" / "tickets" / f"{TWO}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "state": "needs_review"}))
    before = state_files(repo)
    result = cairn("fleet", "land", ONE, TWO, cwd=repo)
    assert_one_line_error(result)
    assert f"ticket {TWO} is needs review; only an approved or completed ticket lands" in (
        result.stderr
    )
    assert f"cairn review {TWO} --approve" in result.stderr
    assert state_files(repo) == before
    (repo / "README.md").write_text("a change of a person's\n")
    result = cairn("fleet", "land", ONE, cwd=repo)
    assert_one_line_error(result)
    assert "main is checked out in" in result.stderr and "(README.md)" in result.stderr
    assert "commit or stash them there" in result.stderr
    assert state_files(repo) == before
    assert_one_line_error(cairn("fleet", "land", "bad..id", cwd=repo))
    assert state_files(repo) == before


def test_cli_a_conflict_is_a_fix_round_and_lands_once_it_passes(
    done: tuple[Path, dict[str, str]],
) -> None:
    repo, env = done
    base = move_main(repo, "main's own line\n")
    branch = tip(repo, f"cairn/{ONE}")
    result = cairn("fleet", "land", ONE, TWO, "--json", cwd=repo)
    assert result.returncode == 1, (result.stdout, result.stderr)
    first, second = map(json.loads, result.stdout.splitlines())
    assert first["landed"] is False and first["conflicts"] == [FILE] and first["round"] == 1
    assert second["landed"] is True and second["previous"] == base  # the next one still lands
    landed_two = tip(repo, "main")
    assert tip(repo, f"cairn/{ONE}") == branch  # nothing forced
    rec = record(repo, ONE)
    assert rec["state"] == "retrying" and rec["last_reason"] == "fix_round", rec
    wish = repo / ".git" / "cairn" / "fleet" / "landing" / f"{ONE}.json"
    assert json.loads(wish.read_text())["by"] == "cli"
    runs = sorted((repo / ".git" / "cairn" / "tickets" / ONE).glob("2*"))
    events = [json.loads(line) for line in (runs[-1] / "run-log.jsonl").read_text().splitlines()]
    (asked,) = [e for e in events if e["event"] == "fix_round"]
    assert (asked["why"], asked["by"], asked["conflicts"]) == ("land", "cli", [FILE])
    assert asked["findings"][0]["id"] == "L1"
    assert "onto main" in asked["findings"][0]["title"]
    assert FILE in asked["findings"][0]["details"]

    ran = cairn("fleet", "start", "--once", "--json", cwd=repo, env=env)
    assert ran.returncode == 0, (ran.stdout, ran.stderr)
    said = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    (land,) = [e for e in said if e["event"] == "ticket_land"]
    assert land["landed"] is True and land["how"] == "fast_forward"
    after = tip(repo, "main")
    assert after == tip(repo, f"cairn/{ONE}") == land["merge"]
    for kept in (base, branch, landed_two):
        assert ancestor(repo, kept, after), kept
    assert (repo / FILE).read_text() == f"{ONE} task 1\nmain's own line\n"
    assert not wish.exists()
    assert record(repo, ONE)["state"] == "completed"
    assert [e["by"] for e in landed_events(repo, ONE)] == ["fleet"]


def assert_error(response: Any, status: int, code: str, words: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == code
    assert words in body["error"]["message"], body


def test_api_lands_and_refuses_bad_input_changing_nothing(
    done: tuple[Path, dict[str, str]],
) -> None:
    repo, _ = done
    client = TestClient(make_app(repo, token=None), base_url=LOCAL)
    path = repo / ".git" / "cairn" / "fleet" / "tickets" / f"{TWO}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "state": "failed"}))
    before = state_files(repo)
    cases = [
        ("NOPE-9", 404, "unknown_ticket", "no fleet ticket NOPE-9"),
        ("bad..id", 400, "invalid_ticket", "is not a ticket id"),
        (TWO, 409, "not_landable", f"ticket {TWO} is failed"),
    ]
    for ticket, status, code, words in cases:
        assert_error(client.post(f"/api/v1/tickets/{ticket}/land"), status, code, words)
    assert_error(client.get("/api/v1/tickets/NOPE-9/land"), 404, "unknown_ticket", "NOPE-9")
    shown = client.get(f"/api/v1/tickets/{TWO}/land").json()
    assert (shown["landable"], shown["landed"], shown["waiting"]) == (False, False, False)
    assert shown["reason"].startswith(f"ticket {TWO} is failed; only an approved or completed")
    assert client.get(f"/api/v1/tickets/{ONE}/land").json() == {
        "ticket": ONE,
        "base": "main",
        "branch": f"cairn/{ONE}",
        "landable": True,
        "reason": None,
        "landed": False,
        "waiting": False,
    }
    assert state_files(repo) == before
    one = tip(repo, f"cairn/{ONE}")
    answer = client.post(f"/api/v1/tickets/{ONE}/land", headers={"Origin": LOCAL})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body == {
        "ticket": ONE,
        "base": "main",
        "branch": f"cairn/{ONE}",
        "commit": one,
        "previous": body["previous"],
        "how": "fast_forward",
        "landed": True,
        "merge": one,
    }
    assert tip(repo, "main") == one
    assert landed_events(repo, ONE)[0]["by"] == "dashboard"
    again = client.post(f"/api/v1/tickets/{ONE}/land").json()
    assert (again["landed"], again["how"]) == (True, "already")
    assert landed_events(repo, ONE)[1]["by"] == "api"
    shown = client.get(f"/api/v1/tickets/{ONE}/land").json()
    assert (shown["landable"], shown["landed"]) == (True, True)


def post(url: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=b"", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_api_through_a_running_supervisor_lands_a_conflict_after_its_fix_round(
    tmp_path: Path,
) -> None:
    repo = fleet_repo(tmp_path, {ONE: 1, TWO: 1})
    proc = supervisor(repo, agent_env(tmp_path), "--port", "0")
    try:
        url = wait_line(proc, "dashboard_started")["url"].rstrip("/")
        wait_for(lambda: state_of(repo, ONE) == state_of(repo, TWO) == "completed")
        status, body = post(f"{url}/api/v1/tickets/NOPE-9/land")
        assert (status, body["error"]["code"]) == (404, "unknown_ticket")
        base = move_main(repo, "main's own line\n")
        status, body = post(f"{url}/api/v1/tickets/{ONE}/land")
        assert status == 200, body
        assert body["landed"] is False and body["conflicts"] == [FILE]
        status, body = post(f"{url}/api/v1/tickets/{ONE}/land")  # its fix round is under way
        assert (status, body["error"]["code"]) == (409, "not_landable")
        wait_for(lambda: ancestor(repo, f"cairn/{ONE}", "main"), timeout=90, what="the land")
        assert ancestor(repo, base, "main")
        assert (repo / FILE).read_text() == f"{ONE} task 1\nmain's own line\n"
        assert [e["by"] for e in landed_events(repo, ONE)] == ["fleet"]
        status, body = post(f"{url}/api/v1/tickets/{TWO}/land")
        assert status == 200 and body["landed"] is True and body["how"] == "merge", body
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=60)


def test_cli_with_no_fleet_yet_writes_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "hello\n"})
    for args in (["NOPE-1"], ["NOPE-1", "--json"]):
        result = cairn("fleet", "land", *args, cwd=repo)
        assert result.returncode == 2, (result.stdout, result.stderr)
        assert "no fleet ticket NOPE-1: the fleet has none yet" in result.stdout + result.stderr
        assert "Traceback" not in result.stderr
    assert not (repo / ".git" / "cairn").exists()
