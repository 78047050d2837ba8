"""What needs a person, apart from news (``cairn.fleet.needs``): ``cairn fleet status
--attention`` lists the tickets that need you oldest first with what to do, and the journal
records when each need was raised and met (time to unblock). A real fleet of the test agent:
one ticket asks (needs input), one fails for good (interrupted, attempts spent), one completes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cairn.state import journal
from cairn.state.layout import discover
from fleet.fleet_setup import agent_env, fleet_repo
from helpers import cairn, git


def test_the_attention_queue_lists_what_needs_you_and_measures_the_time_to_unblock(
    tmp_path: Path,
) -> None:
    repo = fleet_repo(tmp_path, {"ASK-1": 1, "DONE-1": 1, "FAIL-1": 1}, max_attempts=2)
    toml = repo / "cairn.toml"
    toml.write_text(toml.read_text().replace("max_continuations = 0", "max_continuations = 3"))
    git(repo, "commit", "-qam", "continuations")
    env = agent_env(tmp_path, ask="ASK-1", fail="FAIL-1")
    ran = subprocess.run(
        [sys.executable, "-m", "cairn", "fleet", "start", "--once", "--json"],
        cwd=repo,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert ran.returncode in (1, 3), (ran.stdout, ran.stderr)

    shown = cairn("fleet", "status", "--attention", "--json", cwd=repo)
    assert shown.returncode == 0, shown.stderr
    found = json.loads(shown.stdout)
    queue = found["needs_you"]
    assert sorted(n["ticket"] for n in queue) == ["ASK-1", "FAIL-1"]  # not the completed one
    assert [n["since"] for n in queue] == sorted(n["since"] for n in queue)  # oldest first
    by = {n["ticket"]: n for n in queue}
    assert by["ASK-1"]["state"] == "needs_input"
    assert by["ASK-1"]["to_do"].startswith('answer in cairn: cairn answer ASK-1 "')
    assert by["FAIL-1"]["state"] == "interrupted"
    assert by["FAIL-1"]["to_do"] == "see why: cairn catchup FAIL-1, then cairn fleet retry FAIL-1"
    assert all(isinstance(n["waited_s"], int) and n["waited_s"] >= 0 for n in queue)
    assert found["unblocked"] is None  # no need met yet

    # the journal says when each need was raised
    _, _, layout = discover(repo)

    def events(ticket: str) -> list[dict[str, object]]:
        run = layout.latest_run(ticket)
        assert run is not None
        return journal.read(layout.run_dir(ticket, run))[0]

    [raised] = [e for e in events("ASK-1") if e["event"] == "need_raised"]
    assert raised["state"] == "needs_input" and str(raised["key"]).endswith(":needs_input")
    assert not [e for e in events("DONE-1") if e["event"] == "need_raised"]

    # a person retries the failed one: the need is met, its wait measured; it is news now
    retried = cairn("fleet", "retry", "FAIL-1", cwd=repo)
    assert retried.returncode == 0, (retried.stdout, retried.stderr)
    [met] = [e for e in events("FAIL-1") if e["event"] == "need_met"]
    assert (met["state"], met["action"], met["by"]) == ("interrupted", "retry", "cli")
    assert isinstance(met["waited_s"], int)
    text = cairn("fleet", "status", "--attention", cwd=repo).stdout
    assert text.startswith("needs you (oldest first):\n  ASK-1  needs input, waiting ")
    assert "FAIL-1" not in text
    assert 'to do: answer in cairn: cairn answer ASK-1 "' in text
    assert "time to unblock: median " in text and "over 1 need met" in text
