"""The evaluate phase: acceptance criteria checked into eval-round-N.md, failures fixed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cairn import summary
from cairn.errors import BadInput
from cairn.run import evaluation
from cairn.run.plan import parse as parse_plan
from cairn.state import journal
from cairn.state.layout import artifacts
from cairn.terms import ENV_RUN_DIR
from helpers import cairn, git, make_repo

PLAN = """\
### Task 0: Add sub
Acceptance criteria:
- sub(5, 3) == 2

### Task 1: Add div
Acceptance criteria:
- div(6, 3) == 2
- div(1, 0) raises a clear error
"""

SCRIPT = """\
coder:
  - - cairn: [task, done, "0", --files, calc.py]
    - cairn: [task, done, "1", --files, calc.py]
  - - cairn: [finding, AC3, --status, FIXED, --action, "div raises ZeroDivisionError"]
evaluator:
  - - cairn: [ac, AC-1, --result, pass]
    - cairn: [ac, AC-2, --result, pass]
    - cairn: [ac, AC-3, --result, fail, --reason, "div(1, 0) returns inf"]
  - - cairn: [ac, AC-1, --result, pass]
    - cairn: [ac, AC-2, --result, pass]
    - cairn: [ac, AC-3, --result, pass]
"""


def setup(tmp_path: Path, script: str, phases: str) -> tuple[Path, Path]:
    (tmp_path / "script.yaml").write_text(script)
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "x = 1\n",
            "cairn.toml": (
                f'[agent]\nkind = "scripted"\nscript = "{tmp_path / "script.yaml"}"\n'
                f"max_turns = 3\n[loop]\nphases = {phases}\nmax_rounds = 2\n"
            ),
        },
    )
    plan = tmp_path / "T-1.md"
    plan.write_text(PLAN)
    return repo, plan


def test_failed_criterion_is_fixed_then_passes(tmp_path: Path) -> None:
    repo, plan = setup(tmp_path, SCRIPT, '["implement", "evaluate", "fix"]')
    result = cairn("run", str(plan), "--json", cwd=repo)
    assert result.returncode == 0, result.stdout + result.stderr
    outcome = json.loads(result.stdout.splitlines()[-1])
    run_dir = Path(outcome["run_dir"])
    evals = [a.path for a in artifacts(run_dir) if a.role == "evaluator"]
    assert [p.name.split("_", 2)[2] for p in evals] == ["eval-round-1.md", "eval-round-2.md"]
    first, second = (evaluation.load(p) for p in evals)
    assert first.status == "FAIL" and [c.id for c in first.failed()] == ["AC-3"]
    failed_line = (
        "- [ ] AC-3: div(1, 0) raises a clear error (task 1) — FAILED: div(1, 0) returns inf"
    )
    assert failed_line in evals[0].read_text()
    assert second.status == "PASS"
    fixes = summary.load(Path(outcome["summary_path"]))
    assert fixes is not None and fixes.mode == "review"
    assert [(f.id, f.status) for f in fixes.findings] == [("AC3", "FIXED")]
    events = [e for e in journal.read(run_dir)[0] if e["event"] == "phase"]
    assert [e.get("status") for e in events if e.get("phase") == "evaluate" and "status" in e] == [
        "FAIL",
        "PASS",
    ]
    lines = [json.loads(line) for line in result.stdout.splitlines()[:-1]]
    assert [e["status"] for e in lines if e["event"] == "evaluation"] == ["FAIL", "PASS"]
    assert git(repo, "status", "--porcelain") == ""


def test_criteria_still_failing_after_max_rounds_need_review(tmp_path: Path) -> None:
    script = SCRIPT.replace(
        "  - - cairn: [ac, AC-1, --result, pass]\n    - cairn: [ac, AC-2, --result, pass]\n"
        "    - cairn: [ac, AC-3, --result, pass]\n",
        "  - - say: forgot to check\n",
    )
    repo, plan = setup(tmp_path, script, '["implement", "evaluate", "fix"]')
    result = cairn("run", str(plan), cwd=repo)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "needs review" in result.stdout
    report = json.loads(cairn("catchup", "T-1", "--json", cwd=repo).stdout)
    assert report["state"] == "done"
    assert any("manual review" in w for w in report["warnings"])


def test_ac_outside_an_evaluation_is_bad_input(tmp_path: Path) -> None:
    script = "coder:\n  - - cairn: [task, done, '0']\n    - cairn: [task, done, '1']\n"
    repo, plan = setup(tmp_path, script, '["implement"]')
    assert cairn("run", str(plan), cwd=repo).returncode == 0
    run_dir = next((repo / ".git" / "cairn" / "tickets" / "T-1").glob("2*"))
    bad = cairn("ac", "AC-1", "--result", "pass", env={ENV_RUN_DIR: str(run_dir)}, cwd=repo)
    assert bad.returncode == 2 and "no evaluation in progress" in bad.stderr


def test_render_parse_round_trip_and_errors() -> None:
    plan = parse_plan(PLAN, "p.md", ".md")
    checked = evaluation.scaffold(plan, "T-1", 1)
    assert [c.id for c in checked.criteria] == ["AC-1", "AC-2", "AC-3"]
    checked = evaluation.record(checked, "AC-2", "fail", "returns\n 3")
    checked = evaluation.conclude(evaluation.record(checked, "AC-1", "pass", None))
    assert evaluation.parse(evaluation.render(checked), "e.md") == checked
    assert checked.status == "FAIL"
    with pytest.raises(BadInput, match="no acceptance criterion AC-9"):
        evaluation.record(checked, "AC-9", "pass", None)
    with pytest.raises(BadInput, match="pass or fail"):
        evaluation.record(checked, "AC-1", "maybe", None)
    with pytest.raises(BadInput, match=r"e\.md:1"):
        evaluation.parse("# Something else\n", "e.md")
