"""A refused or failed child run keeps its reason: the child's ``--json`` error object (cairn's
own line) is what the ticket's record, ``cairn fleet status``, the dashboard's API, the
``ticket_finished`` event and the webhook carry, never only ``cairn refused the run``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cairn.fleet.dashboard.app import make_app
from fleet.fake_github import Receiver, receive
from fleet.fleet_setup import agent_env, finish, fleet_repo, record, supervisor, wait_for
from helpers import cairn, git


def _too_many_tasks(repo: Path, ticket: str) -> None:
    """A plan whose change summary would start over the plan's share of the summary's limit."""
    body = "".join(f"- [ ] Step {n}: {'x' * 200}\n" for n in range(6000))
    (repo / "cairn-queue" / f"{ticket}.md").write_text(f"# Plan: {ticket}\n\n{body}")


def _set_agent_kind(repo: Path, kind: str | None) -> None:
    toml = repo / "cairn.toml"
    lines = toml.read_text().splitlines()
    lines = [line for line in lines if not line.startswith("kind = ")]
    if kind is not None:
        lines.insert(lines.index("[agent]") + 1, f'kind = "{kind}"')
    toml.write_text("\n".join(lines) + "\n")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from receive(Receiver())


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("plan over the size limit", "tasks: their change summary would start at"),
        ("unknown agent kind", "unknown agent kind 'nosuch'; use one of"),
        ("no agent kind", "no agent kind: set agent.kind in cairn.toml"),
    ],
)
def test_a_refused_run_keeps_cairns_own_line(
    tmp_path: Path, receiver: Receiver, case: str, expected: str
) -> None:
    repo = fleet_repo(tmp_path, {"R-1": 1}, notify=[receiver.url])
    if case == "plan over the size limit":
        _too_many_tasks(repo, "R-1")
    else:
        _set_agent_kind(repo, "nosuch" if case == "unknown agent kind" else None)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the case")
    code, lines = finish(supervisor(repo, agent_env(tmp_path), "--once"), timeout=120)
    assert code == 1, lines

    saved = record(repo, "R-1")
    assert saved["state"] == "failed" and saved["last_exit"] == 2, saved
    assert expected in saved["detail"], saved["detail"]
    assert "cairn refused the run" not in saved["detail"]
    [ended] = [e for e in lines if e["event"] == "ticket_finished"]
    assert ended["detail"] == saved["detail"]
    wait_for(lambda: receiver.posts, timeout=30, what="the webhook")
    [post] = receiver.posts
    assert (post["state"], post["detail"]) == ("failed", saved["detail"])

    status = cairn("fleet", "status", "--json", cwd=repo)
    [row] = json.loads(status.stdout)
    assert row["detail"] == saved["detail"]
    assert f"R-1: {saved['detail']}" in cairn("fleet", "status", cwd=repo).stdout
    client = TestClient(make_app(repo, token=None), base_url="http://127.0.0.1")
    [api_row] = client.get("/api/v1/state").json()["tickets"]
    assert api_row["detail"] == saved["detail"]


def test_an_agent_error_keeps_its_line_in_the_retry_and_the_final_detail(tmp_path: Path) -> None:
    repo = fleet_repo(tmp_path, {"E-1": 1}, max_attempts=2)
    code, lines = finish(supervisor(repo, agent_env(tmp_path, fail="E-1"), "--once"), timeout=120)
    assert code == 3, lines
    [retrying] = [e for e in lines if e["event"] == "ticket_retrying"]
    assert "the agent fails" in retrying["detail"] and "retry in" in retrying["detail"]
    final = record(repo, "E-1")
    assert final["state"] == "interrupted"
    assert "the agent fails" in final["detail"] and "2 of 2 attempts used" in final["detail"]
