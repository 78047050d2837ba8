"""``cairn run`` / ``cairn resume`` end to end: the scripted agent, real git repositories in temp
dirs, the real CLI in subprocesses and real signals.

Every test builds a repository with a committed ``cairn.toml`` (``[agent] kind = "scripted"``),
a plan file and an agent script outside the repository, runs the CLI and then reads back what a
person or the next agent would read: exit code, change summary, marker, journal, ``cairn catchup
--json``, the snapshot's contents and the prompts the scripted agent recorded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cairn.run import review
from cairn.state.layout import artifacts, latest_artifact
from cairn.summary.render import status_line
from cairn.util import procs
from helpers import (
    assert_one_line_error,
    cairn,
    fingerprint,
    git,
    make_repo,
    snapshot_files,
    state_files,
    tree_state,
)
from run.run_setup import (
    TICKET,
    WIP_REF,
    Project,
    code,
    done,
    exit_code,
    outcome,
    toml_value,
    wait_for,
)

# --- building a project -------------------------------------------------------------------------


def start(n: int) -> dict[str, Any]:
    return {"cairn": ["task", "start", str(n)]}


def say(text: str) -> dict[str, Any]:
    return {"say": text}


def ignores_sigterm(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


def has_budget(prompt: str) -> bool:
    return "BUDGET:" in prompt


# --- 1. clean completion ------------------------------------------------------------------------


def test_clean_completion(project: Callable[..., Project]) -> None:
    p = project(
        {
            "coder": [
                [
                    {"write": {"path": "one.txt", "content": "one\n"}},
                    done(1, "one.txt"),
                    {"run": "git add one.txt && git commit -qm one"},
                ],
                [done(2)],
            ]
        }
    )
    result = p.run("--json")
    assert code(result) == 0, result.stderr
    got = outcome(result)
    assert got["status"] == "completed" and got["exit_code"] == 0
    assert got["next_command"] is None and got["rounds"] == 0

    final = p.summary()
    assert final.status.state == "completed"
    assert status_line(final) == "Completed — 2 of 2 tasks"
    assert [t.status for t in final.tasks] == ["completed", "completed"]
    assert final.files_changed == ["one.txt"]
    assert p.marker() is None and not p.marker_path.exists()
    run_summary = latest_artifact(p.run_dir, "orchestrator", "run-summary")
    assert run_summary is not None
    text = run_summary.path.read_text()
    assert "**Outcome:** completed" in text and "**Phases:** implement" in text
    events = p.events()
    assert events[-1]["event"] == "run_finished" and events[-1]["status"] == "completed"
    assert not any(e["event"] in ("cutoff", "run_interrupted") for e in events)
    assert [e["dispatch"]["role"] for e in p.named("dispatch_started")] == ["coder"]
    assert [r["role"] for r in p.prompts()] == ["coder", "coder"]  # no review phase
    first = p.prompts()[0]["prompt"]
    assert "Task 1: One [pending]" in first and "Task 2: Two [pending]" in first
    report = p.catchup()
    assert report["state"] == "done" and report["next_command"] is None
    assert report["done"] == ["1", "2"] and report["remaining"] == []
    assert git(p.repo, "log", "-1", "--format=%s").strip() == "one"
    assert git(p.repo, "status", "--porcelain").strip() == ""
    again = p.resume()
    assert_one_line_error(again)
    assert "nothing to resume" in again.stderr


def test_interrupted_and_review_exit_codes_reach_the_shell(
    project: Callable[..., Project],
) -> None:
    p = project({"coder": [[say("a")], [say("b")]]}, max_turns=1, budget_pressure_turns=0)
    result = p.run()
    assert (result.returncode, result.stderr) == (3, "")
    assert "interrupted: ticket T-1" in result.stdout and "next: cairn resume T-1" in result.stdout


# --- 2. turn cap right after creating an untracked file; resume ---------------------------------


@pytest.mark.slow
def test_turn_cap_saves_untracked_file_and_resume_finishes(
    project: Callable[..., Project],
) -> None:
    p = project(
        {
            "coder": [
                [{"append": {"path": "README.md", "content": "task one\n"}}, done(1, "README.md")],
                [start(2), {"write": {"path": "notes/new.txt", "content": "half\n"}}],
                [{"append": {"path": "notes/new.txt", "content": "done\n"}}, done(2)],
                [done(3)],
            ]
        },
        tasks=("One", "Two", "Three"),
        max_turns=2,
    )
    before = fingerprint(p.repo)
    first = p.run("--json")
    assert code(first) == 3, first.stderr
    got = outcome(first)
    assert got["status"] == "interrupted" and got["reason"] == "max_turns"
    assert got["next_command"] == f"cairn resume {TICKET}"

    # cairn moved neither HEAD, the index, branches nor config; the work tree is the agent's
    after = fingerprint(p.repo)
    for key in ("HEAD", "index", "branches", "config", "hooks"):
        assert after[key] == before[key], key
    expected_tree = {
        "README.md": ("file", (False, b"hello\ntask one\n")),
        "src/app.py": ("file", (False, b"print('app')\n")),
        "cairn.toml": ("file", (False, p.initial["cairn.toml"].encode())),
        "notes/new.txt": ("file", (False, b"half\n")),
    }
    assert tree_state(p.repo) == expected_tree
    assert git(p.repo, "status", "--porcelain", "--untracked-files=all").splitlines() == [
        " M README.md",
        "?? notes/new.txt",
    ]

    # the latest snapshot holds the new untracked file
    commit = p.wip()
    assert got["snapshot"] == commit
    saved = snapshot_files(p.repo, commit)
    assert saved["notes/new.txt"] == b"half\n"
    assert saved["README.md"] == b"hello\ntask one\n"

    interrupted = p.summary()
    assert status_line(interrupted) == (
        f"Interrupted — max_turns during task 2 of 3; work saved at {WIP_REF} ({commit[:12]})"
    )
    assert [t.status for t in interrupted.tasks] == ["completed", "in progress", "pending"]
    current = p.marker()
    assert current is not None and current.owner is None and current.dispatch is None
    assert current.snapshot is not None and current.snapshot.commit == commit
    assert [e["reason"] for e in p.named("run_interrupted")] == ["max_turns"]
    assert [e["reason"] for e in p.named("cutoff")] == ["max_turns"]
    report = p.catchup()
    assert report["state"] == "interrupted"
    assert report["next_command"] == f"cairn resume {TICKET}"
    assert report["task"] == 2 and report["done"] == ["1"] and report["remaining"] == ["2", "3"]
    assert report["snapshot"]["commit"] == commit
    p.assert_intact()

    second = p.resume()
    assert code(second) == 0, second.stderr
    final = p.summary()
    assert status_line(final) == "Completed — 3 of 3 tasks"
    assert p.marker() is None
    assert (p.repo / "notes" / "new.txt").read_text() == "half\ndone\n"
    end = fingerprint(p.repo)
    assert (end["HEAD"], end["index"], end["branches"]) == (
        before["HEAD"],
        before["index"],
        before["branches"],
    )

    # every script turn played once; the resumed coder never touched task 1
    coder = p.prompts("coder")
    assert [r["played_turn"] for r in coder] == [1, 2, 3, 4]
    assert [r["turn"] for r in coder] == [1, 2, 1, 2]
    events = p.events()
    resumed_at = next(i for i, e in enumerate(events) if e.get("resumed"))
    after_resume = [e for e in events[resumed_at:] if e["event"] == "task"]
    assert [(e["task"], e["status"]) for e in after_resume] == [
        (2, "completed"),
        (3, "completed"),
    ]
    assert not any(r["turn"] > 1 and "Task 1:" in r["prompt"] for r in coder[2:])
    assert events[-1] == {**events[-1], "event": "run_finished", "status": "completed"}


def test_resume_first_prompt_is_the_handoff(project: Callable[..., Project]) -> None:
    p = project({"coder": [[done(1)], [done(2)]]}, max_turns=1, budget_pressure_turns=0)
    assert code(p.run()) == 3
    assert code(p.resume()) == 0
    resumed = p.prompts("coder")[1]
    assert resumed["played_turn"] == 2 and resumed["turn"] == 1
    assert "Do not redo completed tasks" in resumed["prompt"]
    assert "Completed:\n- Task 1: One (completed)" in resumed["prompt"]
    assert "max_turns" in resumed["prompt"]


def test_handoff_lists_the_snapshots_uncommitted_files(project: Callable[..., Project]) -> None:
    """The handoff names files the agent changed but never reported, from the snapshot."""
    p = project(
        {
            "coder": [
                [
                    {"write": {"path": "src/greet.py", "content": "hi\n"}},
                    {"write": {"path": "src/extra.py", "content": "unreported\n"}},
                    {"append": {"path": "README.md", "content": "more\n"}},
                    done(1, "src/greet.py"),
                ],
                [done(2)],
            ]
        },
        max_turns=1,
        budget_pressure_turns=0,
    )
    assert code(p.run()) == 3
    assert code(p.resume()) == 0
    resumed = p.prompts("coder")[1]["prompt"]
    assert "Files touched so far: README.md, src/extra.py, src/greet.py\n" in resumed


# --- 3. continuation inside one run -------------------------------------------------------------


def test_continuation_within_the_run_completes(project: Callable[..., Project]) -> None:
    p = project(
        {"coder": [[done(1, "README.md")], [say("working on task 2")], [done(2)]]},
        max_turns=2,
        max_continuations=2,
    )
    result = p.run("--json")
    assert code(result) == 0, result.stderr
    got = outcome(result)
    assert got["status"] == "completed" and got["dispatches"] == 2 and got["turns"] == 3
    assert status_line(p.summary()) == "Completed — 2 of 2 tasks"
    assert p.marker() is None
    assert [e["reason"] for e in p.named("cutoff")] == ["max_turns"]
    assert p.named("run_interrupted") == []
    finished = p.named("dispatch_finished")
    assert [e["reason"] for e in finished] == ["max_turns", "completed"]
    # Each dispatch's events are kept as its transcript; nothing was denied, nothing failed.
    names = [e["transcript"] for e in finished]
    assert names == ["01_coder_transcript.jsonl", "02_coder_transcript.jsonl"]
    kept = [json.loads(x) for x in (p.run_dir / names[0]).read_text().splitlines()]
    assert [x["type"] for x in kept if x["type"] == "turn_completed"] == ["turn_completed"] * 2
    assert all(e["denials"] == [] and "error" not in e for e in finished)
    assert "usage" not in finished[0]  # the scripted agent reported none: unknown, not 0

    coder = p.prompts("coder")
    assert [(r["turn"], r["played_turn"]) for r in coder] == [(1, 1), (2, 2), (1, 3)]
    handoff = coder[2]["prompt"]
    assert "Do not redo completed tasks" in handoff
    assert "after the previous agent stopped: max_turns" in handoff
    assert "Completed:\n- Task 1: One (completed)" in handoff
    assert "Remaining:\n- Task 2: Two" in handoff
    assert "last message: working on task 2" in handoff
    assert "Files touched so far: README.md" in handoff
    assert "Do not redo" not in coder[0]["prompt"]


# --- 4. the agent kills itself ------------------------------------------------------------------


@pytest.mark.slow
def test_agent_crash_is_a_saved_cutoff_and_resume_finishes(
    project: Callable[..., Project],
) -> None:
    p = project(
        {
            "coder": [
                [done(1)],
                [{"write": {"path": "b.txt", "content": "bee\n"}}, {"kill": True}],
                [done(2, "b.txt")],
            ]
        }
    )
    first = p.run("--json")
    assert code(first) == 3, first.stderr
    assert outcome(first)["reason"] == "crash"
    assert [e["reason"] for e in p.named("dispatch_finished")] == ["crashed"]
    assert [e["reason"] for e in p.named("cutoff")] == ["crash"]
    assert [e["reason"] for e in p.named("run_interrupted")] == ["crash"]
    commit = p.wip()
    assert snapshot_files(p.repo, commit)["b.txt"] == b"bee\n"
    assert status_line(p.summary()) == (
        f"Interrupted — crash after task 1 of 2; work saved at {WIP_REF} ({commit[:12]}); "
        "scripted agent killed by SIGKILL"
    )
    assert p.catchup()["state"] == "interrupted"
    p.wait_agents_gone()
    p.assert_intact()

    second = p.resume()
    assert code(second) == 0, second.stderr
    assert status_line(p.summary()) == "Completed — 2 of 2 tasks"
    # the turn that killed the agent was not played again
    assert [r["played_turn"] for r in p.prompts("coder")] == [1, 2, 3]


# --- 5. the agent hangs -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hang", "max_seconds", "cutoff_ms"),
    [(True, 1, 3000), ({"ignore_term": True}, 2, 1500)],
    ids=["hang", "hang-ignoring-sigterm"],
)
def test_hang_is_cut_off_by_max_seconds(
    project: Callable[..., Project], hang: Any, max_seconds: int, cutoff_ms: int
) -> None:
    p = project(
        {"coder": [[{"write": {"path": "h.txt", "content": "h\n"}}, {"hang": hang}]]},
        tasks=("One",),
        max_seconds=max_seconds,
        cutoff_timeout_ms=cutoff_ms,
    )
    began = time.monotonic()
    result = p.run("--json")
    elapsed = time.monotonic() - began
    assert code(result) == 3, result.stderr
    assert outcome(result)["reason"] == "timeout"
    grace = cutoff_ms / 1000
    if isinstance(hang, dict):
        assert elapsed >= max_seconds + grace  # SIGTERM was ignored; SIGKILL after the grace
    assert elapsed < max_seconds + grace + 4
    assert [e["reason"] for e in p.named("dispatch_finished")] == ["timeout"]
    assert [e["reason"] for e in p.named("run_interrupted")] == ["timeout"]
    assert status_line(p.summary()).startswith("Interrupted — timeout after task 0 of 1")
    assert snapshot_files(p.repo, p.wip())["h.txt"] == b"h\n"
    p.wait_agents_gone(2)


# --- 6. SIGINT / SIGTERM to cairn ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("signum", "action", "cutoff_ms", "twice"),
    [
        (signal.SIGINT, {"sleep": 60}, 3000, False),
        (signal.SIGTERM, {"sleep": 60}, 3000, False),
        (signal.SIGINT, {"hang": {"ignore_term": True}}, 1500, False),
        (signal.SIGINT, {"hang": {"ignore_term": True}}, 20000, True),
    ],
    ids=["sigint", "sigterm", "sigint-agent-ignores-sigterm", "second-sigint-kills-at-once"],
)
def test_signal_to_cairn_interrupts_and_saves(
    project: Callable[..., Project],
    signum: int,
    action: dict[str, Any],
    cutoff_ms: int,
    twice: bool,
) -> None:
    p = project(
        {"coder": [[{"write": {"path": "b.txt", "content": "partial\n"}}, say("busy"), action]]},
        tasks=("One",),
        cutoff_timeout_ms=cutoff_ms,
    )
    proc = p.popen()
    wait_for(lambda: (p.repo / "b.txt").exists() and p.agent_pids(), 30, "the agent's turn")
    if "hang" in action:
        pid = p.agent_pids()[0]
        wait_for(lambda: ignores_sigterm(pid), 30, "the agent to ignore SIGTERM")
    time.sleep(0.3)  # the agent is in its sleep / hang now
    began = time.monotonic()
    proc.send_signal(signum)
    if twice:
        time.sleep(0.3)
        proc.send_signal(signum)
    _, err = proc.communicate(timeout=cutoff_ms / 1000 + 10)
    elapsed = time.monotonic() - began
    assert exit_code(proc.returncode, err) == 3, err.decode()
    if twice:
        assert elapsed < 4, elapsed  # the second signal did not wait for the 20 s grace
    else:
        assert elapsed < cutoff_ms / 1000 + 3, elapsed
    if "hang" in action and not twice:
        assert elapsed >= cutoff_ms / 1000 - 0.2, elapsed  # SIGTERM ignored: SIGKILL after grace
    assert b"Traceback" not in err
    p.wait_agents_gone(2)

    commit = p.wip()
    assert snapshot_files(p.repo, commit)["b.txt"] == b"partial\n"
    assert status_line(p.summary()) == (
        f"Interrupted — signal after task 0 of 1; work saved at {WIP_REF} ({commit[:12]})"
    )
    current = p.marker()
    assert current is not None and current.owner is None and current.dispatch is None
    assert [e["reason"] for e in p.named("dispatch_finished")] == ["interrupted"]
    assert [e["reason"] for e in p.named("run_interrupted")] == ["signal"]
    report = p.catchup()
    assert report["state"] == "interrupted"
    assert report["next_command"] == f"cairn resume {TICKET}"
    assert (p.repo / "b.txt").read_text() == "partial\n"
    p.assert_intact()


# --- 7. SIGKILL of cairn itself -----------------------------------------------------------------


@pytest.mark.slow
def test_sigkill_of_cairn_then_resume_takes_over(project: Callable[..., Project]) -> None:
    p = project(
        {
            "coder": [
                [{"write": {"path": "b.txt", "content": "partial\n"}}, {"sleep": 60}],
                [{"append": {"path": "b.txt", "content": "rest\n"}}, done(1, "b.txt")],
            ]
        },
        tasks=("One",),
    )
    proc = p.popen()
    wait_for(lambda: (p.repo / "b.txt").exists() and p.agent_pids(), 30, "the agent's turn")
    time.sleep(0.2)
    proc.kill()
    proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL

    # the agent lives in its own process group and outlived cairn: stop it like a person would
    orphans = p.agent_pids()
    assert len(orphans) == 1
    procs.kill_group(orphans[0])
    p.wait_agents_gone()

    report = p.catchup()
    assert report["state"] == "interrupted"
    assert report["owner_state"] == "dead"
    assert report["owner"]["pid"] == proc.pid
    assert report["next_command"] == f"cairn resume {TICKET}"
    p.assert_intact()

    result = p.resume()
    assert code(result) == 0, result.stderr
    assert status_line(p.summary()) == "Completed — 1 of 1 tasks"
    assert (p.repo / "b.txt").read_text() == "partial\nrest\n"
    takeover = p.named("takeover")
    assert len(takeover) == 1
    assert takeover[0]["previous_owner"]["pid"] == proc.pid
    assert p.marker() is None
    assert p.catchup()["state"] == "done"


# --- 8. review loop -----------------------------------------------------------------------------


@pytest.mark.slow
def test_review_finding_fixed_then_clean_review(project: Callable[..., Project]) -> None:
    p = project(
        {
            "coder": [
                [{"write": {"path": "calc.py", "content": "x = 1\n"}}, done(1, "calc.py")],
                [
                    {"write": {"path": "calc.py", "content": "x = 2\n"}},
                    {"cairn": ["finding", "F1", "--status", "FIXED", "--action", "x is 2 now"]},
                ],
            ],
            "reviewer": [
                [{"cairn": ["finding", "add", "F1", "x must be 2", "--location", "calc.py:1"]}],
                [say("No blocking findings.")],
            ],
        },
        tasks=("One",),
        phases=("implement", "review", "fix"),
    )
    result = p.run("--json")
    assert code(result) == 0, result.stderr
    got = outcome(result)
    assert got["status"] == "completed" and got["rounds"] == 2

    reviews = [
        review.load(a.path)
        for a in artifacts(p.run_dir)
        if a.role == "reviewer" and a.name == "review"
    ]
    assert [[f.id for f in r.findings] for r in reviews] == [["F1"], []]
    assert reviews[0].findings[0].location == "calc.py:1"

    assert status_line(p.first_summary()) == "Completed — 1 of 1 tasks"
    response = p.summary()  # the latest *_coder_change-summary.md
    assert response.mode == "review" and response.round == 1
    assert [(f.id, f.status, f.action) for f in response.findings] == [
        ("F1", "FIXED", "x is 2 now")
    ]
    assert p.marker() is None
    phases = [(e["phase"], e.get("round")) for e in p.named("phase")]
    assert phases[-4:] == [("review", 1), ("fix", 1), ("review", 2), ("done", None)]
    fix_prompt = p.prompts("coder")[1]["prompt"]
    assert "fixing review round 1" in fix_prompt and "- F1: x must be 2 (calc.py:1)" in fix_prompt
    assert [r["played_turn"] for r in p.prompts("reviewer")] == [1, 2]
    assert (p.repo / "calc.py").read_text() == "x = 2\n"


@pytest.mark.slow
def test_cutoff_in_a_fix_dispatch_resumes_the_fix(project: Callable[..., Project]) -> None:
    fixed = {"cairn": ["finding", "F1", "--status", "FIXED", "--action", "done now"]}
    p = project(
        {
            "coder": [[done(1)], [say("looking at F1")], [fixed]],
            "reviewer": [[{"cairn": ["finding", "add", "F1", "broken"]}], [say("fine")]],
        },
        tasks=("One",),
        phases=("implement", "review", "fix"),
        max_turns=1,
        budget_pressure_turns=0,
    )
    first = p.run("--json")
    assert code(first) == 3, first.stderr
    assert outcome(first)["reason"] == "max_turns"
    current = p.marker()
    assert current is not None and (current.phase, current.round) == ("fix", 1)
    assert status_line(p.summary()).startswith("Interrupted — max_turns")
    report = p.catchup()
    assert report["state"] == "interrupted" and report["mode"] == "review"
    assert report["remaining"] == ["F1"]

    second = p.resume("--json")
    assert code(second) == 0, second.stderr
    assert outcome(second)["status"] == "completed"
    # the fix went on in the same round-1 response; the round-1 review was not repeated
    responses = [p.summary(path) for path in p.summaries()]
    assert [(s.mode, s.round) for s in responses] == [("implementation", None), ("review", 1)]
    assert [(f.id, f.status) for f in responses[1].findings] == [("F1", "FIXED")]
    reviewer = p.prompts("reviewer")
    assert ["review round 1" in r["prompt"] for r in reviewer] == [True, False]
    assert "review round 2" in reviewer[1]["prompt"]
    resumed_fix = p.prompts("coder")[2]
    assert resumed_fix["played_turn"] == 3 and "fixing review round 1" in resumed_fix["prompt"]
    assert p.marker() is None


@pytest.mark.slow
def test_signal_during_review_then_resume_reviews_again(project: Callable[..., Project]) -> None:
    p = project(
        {"coder": [[done(1)]], "reviewer": [[{"sleep": 60}], [say("fine")]]},
        tasks=("One",),
        phases=("implement", "review", "fix"),
    )
    proc = p.popen()

    def reviewing() -> bool:
        return any((d / "scripted-agent" / "reviewer.cursor").exists() for d in p.run_dirs())

    wait_for(reviewing, 30, "the reviewer's turn")
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=15)
    assert exit_code(proc.returncode, err) == 3
    current = p.marker()
    assert current is not None and (current.phase, current.round) == ("review", 1)
    assert current.owner is None
    assert p.catchup()["state"] == "interrupted"
    p.wait_agents_gone(2)

    second = p.resume("--json")
    assert code(second) == 0, second.stderr
    assert outcome(second)["status"] == "completed"
    assert [r["played_turn"] for r in p.prompts("reviewer")] == [1, 2]
    assert [r["played_turn"] for r in p.prompts("coder")] == [1]  # nothing re-implemented
    assert status_line(p.first_summary()) == "Completed — 1 of 1 tasks"
    assert p.marker() is None


# --- 9. max_rounds exhausted --------------------------------------------------------------------


@pytest.mark.slow
def test_blocking_findings_every_round_need_manual_review(
    project: Callable[..., Project],
) -> None:
    fixed = {"cairn": ["finding", "F1", "--status", "FIXED", "--action", "tried"]}
    p = project(
        {
            "coder": [[done(1)], [fixed], [fixed]],
            "reviewer": [
                [{"cairn": ["finding", "add", "F1", "still wrong"]}],
                [{"cairn": ["finding", "add", "F1", "still wrong"]}],
            ],
        },
        tasks=("One",),
        phases=("implement", "review", "fix"),
        max_rounds=2,
    )
    result = p.run("--json")
    assert code(result) == 1, result.stderr
    got = outcome(result)
    assert got["status"] == "needs_review" and got["rounds"] == 2
    events = p.events()
    assert events[-1]["event"] == "run_finished"
    assert events[-1]["status"] == "needs_review"
    assert p.named("run_interrupted") == []
    # two reviews, one fix in between, no fix after the last round
    assert [r["role"] for r in p.prompts()] == ["coder", "reviewer", "coder", "reviewer"]
    assert p.marker() is None
    run_summary = latest_artifact(p.run_dir, "orchestrator", "run-summary")
    assert run_summary is not None
    assert "needs_review (blocking findings remain)" in run_summary.path.read_text()


# --- 10. the budget directive -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_turns", "pressure", "expected"),
    [(5, 2, {4, 5}), (2, 1, {2})],
    ids=["5-turns-2-pressure", "2-turns-1-pressure"],
)
def test_budget_directive_in_the_last_turns_only(
    project: Callable[..., Project], max_turns: int, pressure: int, expected: set[int]
) -> None:
    p = project(
        {"coder": [[say(f"turn {n}")] for n in range(1, max_turns + 2)]},
        tasks=("One",),
        max_turns=max_turns,
        budget_pressure_turns=pressure,
        max_idle_dispatches=0,  # turns that only talk: the no-progress stop is off
    )
    result = p.run()
    assert code(result) == 3, result.stderr
    coder = p.prompts("coder")
    assert [r["turn"] for r in coder] == list(range(1, max_turns + 1))
    assert {r["turn"] for r in coder if has_budget(r["prompt"])} == expected
    for r in coder:
        if r["turn"] in expected:
            left = max_turns - r["turn"] + 1
            assert f"BUDGET: {left} turn(s) left in this dispatch" in r["prompt"]
    turns = p.named("turn")
    assert {e["turn"] for e in turns if e["pressure"]} == expected
    assert [e["reason"] for e in p.named("run_interrupted")] == ["max_turns"]


# --- 11. one live run per ticket ----------------------------------------------------------------


def test_second_run_while_the_first_is_live_is_refused(project: Callable[..., Project]) -> None:
    p = project({"coder": [[{"sleep": 60}]]}, tasks=("One",))
    first = p.popen()

    def live() -> bool:
        current = p.marker() if p.marker_path.exists() else None
        return current is not None and current.owner is not None and bool(p.agent_pids())

    wait_for(live, 30, "the first run's marker")
    cursor = p.run_dir / "scripted-agent" / "coder.cursor"
    wait_for(cursor.exists, 30, "the agent's cursor")
    time.sleep(0.3)  # the agent sleeps now; nothing writes state until it is stopped
    before = state_files(p.state_root)
    for again in (p.run(), p.resume()):
        assert_one_line_error(again)
        assert f"pid {first.pid}" in again.stderr
    assert len(p.run_dirs()) == 1
    assert state_files(p.state_root) == before  # not even the marker was rewritten
    first.send_signal(signal.SIGTERM)
    _, err = first.communicate(timeout=15)
    assert exit_code(first.returncode, err) == 3


# --- 12. bad input: config and plan -------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"bogus": 1}, "agent.bogus: unknown key"),
        ({"max_turns": 3, "budget_pressure_turns": 3}, "budget_pressure_turns"),
        ({"max_seconds": 0}, "agent.max_seconds"),
        ({"kind": "nope"}, "unknown agent kind 'nope'"),
        ({"script": None}, "needs agent.script"),
        ({"script": "NOT_YAML"}, "is not valid YAML"),
        ({"script": "MISSING"}, "cannot be read"),
    ],
    ids=[
        "unknown-key",
        "pressure-not-below-cap",
        "max-seconds-0",
        "unknown-kind",
        "scripted-without-script",
        "script-not-yaml",
        "script-missing",
    ],
)
def test_bad_config_is_one_line_and_writes_nothing(
    tmp_path: Path, keys: dict[str, Any], message: str
) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(json.dumps({"coder": [[done(1)]]}))
    values: dict[str, Any] = {"kind": "scripted", "script": str(script), "max_turns": 3}
    values.update(keys)
    if values["script"] == "NOT_YAML":
        script.write_text("coder: [[{say: hi}\n")
        values["script"] = str(script)
    elif values["script"] == "MISSING":
        values["script"] = str(tmp_path / "missing.yaml")
    config = "[agent]\n" + "".join(
        f"{k} = {toml_value(v)}\n" for k, v in values.items() if v is not None
    )
    repo = make_repo(tmp_path / "repo", {"README.md": "hi\n", "cairn.toml": config})
    plan = tmp_path / f"{TICKET}.md"
    plan.write_text("### Task 1: One\n")
    result = cairn("run", str(plan), cwd=repo)
    assert_one_line_error(result)
    assert message in result.stderr
    assert state_files(repo / ".git" / "cairn") == []
    assert git(repo, "for-each-ref", "refs/cairn").strip() == ""


def test_script_without_a_needed_role_is_refused_before_anything_is_written(
    project: Callable[..., Project],
) -> None:
    p = project({"coder": [[done(1)]]}, tasks=("One",), phases=("implement", "review", "fix"))
    result = p.run()
    assert_one_line_error(result)
    assert "reviewer" in result.stderr and str(p.script) in result.stderr
    assert state_files(p.state_root) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# Plan\n\nNothing to do here.\n", ":1: no tasks found"),
        (
            "# Plan\n\n### Task 1: One\n\n### Task 1: Again\n",
            ":5: duplicate task number 1 (first used at line 3)",
        ),
        (None, "not found"),
    ],
    ids=["no-tasks", "duplicate-numbers", "not-found"],
)
def test_bad_plan_is_one_line_and_writes_nothing(
    tmp_path: Path, text: str | None, message: str
) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(json.dumps({"coder": [[done(1)]]}))
    config = f'[agent]\nkind = "scripted"\nscript = "{script}"\n'
    repo = make_repo(tmp_path / "repo", {"README.md": "hi\n", "cairn.toml": config})
    plan = tmp_path / f"{TICKET}.md"
    if text is not None:
        plan.write_text(text)
    result = cairn("run", str(plan), cwd=repo)
    assert_one_line_error(result)
    assert message in result.stderr
    if text is not None:
        assert str(plan) in result.stderr
    assert state_files(repo / ".git" / "cairn") == []


# --- 13. cairn config show ----------------------------------------------------------------------


def test_config_show_lists_values_and_sources(tmp_path: Path) -> None:
    config = '[agent]\nkind = "scripted"\nmax_turns = 7\n\n[roles.reviewer]\nmax_turns = 9\n'
    repo = make_repo(tmp_path / "repo", {"cairn.toml": config})
    source = str(repo / "cairn.toml")

    shown = cairn("config", "show", "--json", cwd=repo)
    assert code(shown) == 0, shown.stderr
    rows = {row["key"]: (row["value"], row["source"]) for row in json.loads(shown.stdout)}
    assert rows["agent.kind"] == ("scripted", source)
    assert rows["agent.max_turns"] == (7, source)
    assert rows["roles.reviewer.max_turns"] == (9, source)
    assert rows["agent.budget_pressure_turns"] == (2, "default")
    assert rows["agent.max_continuations"] == (2, "default")
    assert rows["agent.max_seconds"] == (None, "default")
    assert rows["roles.evaluator.max_turns"] == (45, "default")
    assert rows["loop.phases"] == (["implement", "review", "fix"], "default")
    assert rows["snapshot.ref_prefix"] == ("refs/cairn/wip", "default")

    text = cairn("config", "show", cwd=repo)
    assert code(text) == 0, text.stderr
    lines = {line.split()[0]: line for line in text.stdout.splitlines() if line.strip()}
    assert set(lines) == set(rows)
    assert lines["agent.max_turns"].split()[1] == "7"
    assert lines["agent.max_turns"].endswith(f"({source})")
    assert lines["agent.cutoff_timeout_ms"].split()[1] == "60000"
    assert lines["agent.cutoff_timeout_ms"].endswith("(default)")

    bare = make_repo(tmp_path / "bare", {"README.md": "hi\n"})
    defaults = json.loads(cairn("config", "show", "--json", cwd=bare).stdout)
    assert {row["source"] for row in defaults} == {"default"}


# --- resume never touches the work tree; the live view on a terminal ----------------------------


def test_resume_says_when_the_tree_differs_from_the_snapshot(
    project: Callable[..., Project],
) -> None:
    p = project(
        {
            "coder": [
                [start(1), {"write": {"path": "notes/new.txt", "content": "half\n"}}],
                [done(1), done(2)],
            ]
        },
        max_turns=1,
        budget_pressure_turns=0,
    )
    assert code(p.run()) == 3
    saved = p.wip()
    (p.repo / "notes" / "new.txt").unlink()
    resumed = p.resume()
    assert code(resumed) == 0, resumed.stderr
    assert f"differs from the last snapshot {saved[:12]}" in resumed.stdout
    assert f"cairn wip restore {saved[:12]} --dry-run" in resumed.stdout
    assert not (p.repo / "notes" / "new.txt").exists()


def test_live_view_on_a_terminal(project: Callable[..., Project]) -> None:
    import pty

    p = project({"coder": [[done(1)], [{"sleep": 0.6}, done(2)]]})
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn", "run", str(p.plan)],
        cwd=p.repo,
        stdin=follower,
        stdout=follower,
        stderr=subprocess.PIPE,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    screen = b"".join(chunks).decode("utf-8", "replace")
    assert "turn" in screen and "elapsed" in screen
    assert "completed: ticket T-1" in screen


def test_an_agent_that_breaks_the_summary_gets_a_one_line_error(
    project: Callable[..., Project],
) -> None:
    p = project(
        {
            "coder": [
                [{"run": 'echo "# garbage" > "$CAIRN_RUN_DIR/02_coder_change-summary.md"'}],
                [done(1), done(2)],
            ]
        }
    )
    result = p.run()
    assert result.returncode == 2, result.stdout + result.stderr
    assert_one_line_error(result)
    assert "02_coder_change-summary.md:1" in result.stderr
    assert (p.ticket_dir / ".in-progress.yaml").exists()


@pytest.mark.slow
def test_resume_stops_the_agent_a_killed_cairn_left_running(
    project: Callable[..., Project],
) -> None:
    p = project(
        {
            "coder": [
                [{"write": {"path": "b.txt", "content": "partial\n"}}, {"sleep": 60}],
                [{"append": {"path": "b.txt", "content": "rest\n"}}, done(1, "b.txt")],
            ]
        },
        tasks=("One",),
        cutoff_timeout_ms=2000,
    )
    proc = p.popen()
    wait_for(lambda: (p.repo / "b.txt").exists() and p.agent_pids(), 30, "the agent's turn")
    time.sleep(0.3)
    orphan = p.agent_pids()[0]
    current = p.marker()
    assert current is not None and current.dispatch is not None
    assert current.dispatch.pid == orphan and current.dispatch.pid_started_at is not None
    proc.kill()
    proc.communicate(timeout=10)
    assert p.agent_pids() == [orphan], "the agent outlives a SIGKILLed cairn"

    result = p.resume()
    assert code(result) == 0, result.stderr
    assert f"stopped agent pid {orphan}" in result.stdout
    assert p.agent_pids() == []
    assert p.named("takeover")[0]["stopped_agent"] == orphan
    assert (p.repo / "b.txt").read_text() == "partial\nrest\n"


def test_an_agents_own_todo_list_completes_matching_tasks(project: Callable[..., Project]) -> None:
    p = project(
        {
            "coder": [
                [
                    {"plan": [{"text": "Task 1: One", "completed": True}, "Refactor everything"]},
                    {"plan": [{"text": "two", "completed": True}, {"text": "x", "completed": 1}]},
                ]
            ]
        }
    )
    result = p.run()
    assert code(result) == 0, result.stdout + result.stderr
    tasks = p.summary().tasks
    assert [t.status for t in tasks] == ["completed", "completed"]
    assert all("to-do list" in (t.notes or "") for t in tasks)
    sources = [e.get("source") for e in p.named("task")]
    assert sources == ["todo_list", "todo_list"]
