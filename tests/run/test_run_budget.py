"""A run's budgets: the default cost cap (``agent.max_cost_usd`` 10 USD a session; 0: none),
stated on the run's first line and in its start event; ``--max-turns`` kept for ``resume``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cairn.config.records import Config
from cairn.run import launch
from cairn.state import journal
from helpers import cairn, scripted_project
from run.run_setup import Recorder, run_dir

TICKET = "T-1"


def expensive(cost: float) -> dict[str, Any]:
    return {"usage": {"input_tokens": 1000, "output_tokens": 10, "cost_usd": cost}}


def test_the_default_cost_cap_is_ten_dollars_and_zero_is_none() -> None:
    assert Config().agent.max_cost_usd == 10.0


def test_the_default_cap_cuts_a_run_off_past_ten_dollars(tmp_path: Path) -> None:
    write = {"append": {"path": "a.txt", "content": "a\n"}}
    script = {"coder": [[expensive(6.0), write]] * 4}
    repo, plan = scripted_project(tmp_path, script)  # no max_cost_usd in cairn.toml
    outcome = launch.run(repo, plan, sink=Recorder())
    assert outcome.status == "interrupted" and outcome.reason == "budget"
    assert outcome.error == "cost $12.00, over agent.max_cost_usd $10.00"
    assert outcome.turns == 2


def test_zero_means_no_cap(tmp_path: Path) -> None:
    write = {"append": {"path": "a.txt", "content": "a\n"}}
    script = {"coder": [[expensive(6.0), write]] * 3 + [[{"cairn": ["task", "done", "1"]}]]}
    repo, plan = scripted_project(tmp_path, script, max_cost_usd=0, tasks=("One",))
    outcome = launch.run(repo, plan, sink=Recorder())
    assert outcome.status == "completed", outcome
    assert outcome.usage["cost_usd"] == 18.0


def test_the_first_line_states_both_budgets(tmp_path: Path) -> None:
    script = {"coder": [[{"cairn": ["task", "done", "1"]}, {"cairn": ["task", "done", "2"]}]]}
    repo, plan = scripted_project(tmp_path, script)
    result = cairn("run", str(plan), cwd=repo)
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("run ") and first.endswith("; budget: 5 turns · $10.00"), first

    (tmp_path / "free").mkdir()
    repo2, plan2 = scripted_project(tmp_path / "free", script, max_cost_usd=0)
    result = cairn("run", str(plan2), "--json", "--max-turns", "7", cwd=repo2)
    assert result.returncode == 0, result.stderr
    started = json.loads(result.stdout.splitlines()[0])
    assert started["event"] == "run_started"
    assert started["max_turns"] == 7 and started["max_cost_usd"] is None
    assert started["budget"] == "budget: 7 turns · no cost cap"


def test_max_turns_of_run_carries_to_resume_unless_resume_overrides_it(tmp_path: Path) -> None:
    def write(n: int) -> dict[str, Any]:
        return {"append": {"path": "a.txt", "content": f"{n}\n"}}

    script = {"coder": [[write(n)] for n in range(1, 9)]}
    repo, plan = scripted_project(tmp_path, script, max_turns=10, max_idle_dispatches=0)
    first = cairn("run", str(plan), "--max-turns", "2", "--json", cwd=repo)
    assert first.returncode == 3, first.stdout
    again = cairn("resume", TICKET, "--json", cwd=repo)
    assert again.returncode == 3, again.stdout
    resumed = json.loads(again.stdout.splitlines()[0])
    assert resumed["event"] == "run_resumed" and resumed["max_turns"] == 2
    overridden = cairn("resume", TICKET, "--max-turns", "3", "--json", cwd=repo)
    assert overridden.returncode == 3, overridden.stdout
    events, _ = journal.read(run_dir(repo))
    caps = [e["dispatch"]["max_turns"] for e in events if e["event"] == "dispatch_started"]
    assert caps == [2, 2, 3]
