"""The run loop driven in-process: ``launch.run`` / ``launch.resume`` and the Orchestrator with a
fake agent that plays a script in this process, and a sink that records every event.

The fake agent is a real ``Adapter`` (registered as kind ``fake`` in ``cairn.agents.ADAPTERS``):
each dispatch asks for its prompts through ``next_turn`` as every adapter does, plays the role's
next unplayed turn (a cursor per role, so a continuation never replays a turn), reports progress
through the same functions ``cairn task …`` calls, and ends with the result the script says.
Everything else is real: git repositories in temp dirs, snapshots, marker, summary, journal.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from cairn import summary
from cairn.agents import ADAPTERS
from cairn.agents.base import Adapter, Dispatch, DispatchRequest, Event, Result, next_turn
from cairn.run import evaluation, launch, progress, review
from cairn.run.orchestrator import RunOutcome
from cairn.state import journal, marker
from cairn.state.layout import Layout, artifacts, latest_artifact
from cairn.state.lease import acquire
from cairn.state.runstate import RunRef
from cairn.summary.render import status_line
from cairn.terms import CUTOFF_FOR, ENV_RUN_DIR, ENV_TICKET, STOP_REASONS, StopReason
from helpers import git, make_repo, snapshot_files

TICKET = "T-1"
WIP_REF = f"refs/cairn/wip/{TICKET}"
HANG_LIMIT = 20.0  # seconds a hanging fake agent waits for its interrupt before failing the test


# --- the fake agent -----------------------------------------------------------------------------


@dataclass
class Turn:
    """What a step of the fake agent can reach: its request, the turn number and the run."""

    request: DispatchRequest
    number: int
    dispatch: FakeDispatch

    @property
    def ref(self) -> RunRef:
        return progress.locate(self.request.workspace, None, self.request.env)


Step = Callable[[Turn], list[Event] | StopReason | None]


@dataclass
class Played:
    role: str
    turn: int  # the dispatch's turn number
    played_turn: int  # 1-based index into the role's script
    prompt: str
    env: dict[str, str]
    session_id: str | None  # the conversation the dispatch was asked to continue


@dataclass
class FakeAgent:
    """The script (role → turns → steps), a cursor per role, and everything the agent got."""

    script: dict[str, list[list[Step]]]
    cursor: dict[str, int] = field(default_factory=dict)
    played: list[Played] = field(default_factory=list)
    dispatches: list[FakeDispatch] = field(default_factory=list)

    def prompts(self, role: str) -> list[Played]:
        return [p for p in self.played if p.role == role]


class FakeDispatch(Dispatch):
    """A running dispatch (one agent invocation for a role, possibly several turns) played in
    this process. Like the scripted agent, it ends ``completed`` after the role's last turn."""

    def __init__(self, agent: FakeAgent, request: DispatchRequest) -> None:
        self.agent, self.request = agent, request
        self.session_id = f"fake-{request.role}-{len(agent.dispatches) + 1}"
        self.result: Result | None = None
        self.interrupts: list[tuple[StopReason, float]] = []
        self._interrupt: StopReason | None = None
        self._stopped = threading.Event()
        self._turns = 0

    def interrupt(self, reason: StopReason, grace: float) -> None:
        self.interrupts.append((reason, grace))
        if self.result is None and self._interrupt is None:
            self._interrupt = reason
        self._stopped.set()

    def hang(self) -> None:
        assert self._stopped.wait(HANG_LIMIT), "the fake agent was never interrupted"

    def events(self) -> Iterator[Event]:
        role, turns = self.request.role, self.agent.script[self.request.role]
        while self.result is None:
            prompt, end = next_turn(self.request, self._turns + 1, lambda: self._interrupt)
            if prompt is None:
                self._end(end or "completed")
                return
            self._turns += 1
            played = self.agent.cursor.get(role, 0)
            self.agent.cursor[role] = played + 1
            self.agent.played.append(
                Played(
                    role,
                    self._turns,
                    played + 1,
                    prompt,
                    dict(self.request.env),
                    self.request.session_id,
                )
            )
            yield Event("turn_started", self._turns)
            yield from self._play(turns[played] if played < len(turns) else [])
            if self.result is None and self._interrupt is None:
                yield Event("turn_completed", self._turns)
                if played + 1 >= len(turns):
                    self._end("completed")

    def _play(self, steps: list[Step]) -> Iterator[Event]:
        for step in steps:
            outcome = step(Turn(self.request, self._turns, self))
            if isinstance(outcome, str):
                self._end(outcome)
                return
            yield from outcome or []
            if self._interrupt is not None:
                self._end(self._interrupt)
                return

    def _end(self, reason: StopReason) -> None:
        self.result = Result(
            reason=self._interrupt or reason,
            num_turns=self._turns,
            session_id=self.session_id,
            detail=None if reason == "completed" else f"fake agent: {reason}",
        )


class FakeAdapter(Adapter):
    kind = "fake"
    agent: ClassVar[FakeAgent]

    def preflight(self, request: DispatchRequest) -> None:
        pass

    def start(self, request: DispatchRequest) -> FakeDispatch:
        dispatch = FakeDispatch(self.agent, request)
        self.agent.dispatches.append(dispatch)
        return dispatch


# Steps: what the agent does in a turn.


def write(path: str, text: str) -> Step:
    def step(turn: Turn) -> None:
        target = turn.request.workspace / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    return step


def report(call: Callable[[RunRef], object]) -> Step:
    """A progress report, made through what ``cairn task …`` / ``cairn finding …`` call."""

    def step(turn: Turn) -> None:
        call(turn.ref)

    return step


def start(n: int) -> Step:
    return report(lambda ref: progress.task_start(ref, n))


def done(n: int, *files: str) -> Step:
    return report(lambda ref: progress.task_done(ref, n, list(files) or None, "works"))


def finding_add(ident: str, title: str) -> Step:
    return report(lambda ref: progress.add_finding(ref, ident, title, None, None))


def fixed(ident: str) -> Step:
    return report(lambda ref: progress.finding(ref, ident, "FIXED", "fixed it"))


def verdict(ident: str, result: str, reason: str | None = None) -> Step:
    return report(lambda ref: progress.record_ac(ref, ident, result, reason))


def say(text: str) -> Step:
    return lambda turn: [Event("message", turn.number, {"text": text})]


def todo(*items: dict[str, Any]) -> Step:
    return lambda turn: [Event("plan_updated", turn.number, {"items": list(items)})]


def end(reason: StopReason) -> Step:
    """The dispatch ends now, mid-turn, with ``reason`` (a crash, an error, …)."""
    return lambda turn: reason


def hang(turn: Turn) -> None:
    """Work until interrupted (by the orchestrator's timer or its signal handler)."""
    turn.dispatch.hang()


def press_ctrl_c(turn: Turn) -> None:
    """What a SIGINT to cairn does: the handler cairn installed runs in this process."""
    handler = signal.getsignal(signal.SIGINT)
    assert callable(handler), "cairn installed no SIGINT handler"
    handler(signal.SIGINT, None)


def press_ctrl_c_twice(turn: Turn) -> None:
    press_ctrl_c(turn)
    press_ctrl_c(turn)


def corrupt_summary(turn: Turn) -> None:
    turn.ref.load_summary()[0].write_text("# garbage\n")


def fail(message: str) -> Step:
    def step(turn: Turn) -> None:
        raise RuntimeError(message)

    return step


# --- the event sink and the project -------------------------------------------------------------


@dataclass
class Recorder:
    """An event sink that keeps everything."""

    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    states: list[dict[str, Any]] = field(default_factory=list)

    def event(self, kind: str, **fields: Any) -> None:
        self.events.append((kind, fields))

    def update(self, **state: Any) -> None:
        self.states.append(state)

    def named(self, kind: str) -> list[dict[str, Any]]:
        return [fields for name, fields in self.events if name == kind]

    def kinds(self) -> list[str]:
        return [name for name, _ in self.events]


@dataclass
class Project:
    repo: Path
    plan: Path
    agent: FakeAgent
    sink: Recorder = field(default_factory=Recorder)

    def run(self, **options: Any) -> RunOutcome:
        return launch.run(self.repo, self.plan, sink=self.sink, **options)

    def resume(self, **options: Any) -> RunOutcome:
        return launch.resume(self.repo, TICKET, sink=self.sink, **options)

    @property
    def ticket_dir(self) -> Path:
        return self.repo / ".git" / "cairn" / "tickets" / TICKET

    @property
    def run_dir(self) -> Path:
        (found,) = [p for p in self.ticket_dir.iterdir() if p.is_dir()]
        return found

    def marker(self) -> marker.Marker | None:
        return marker.read(self.ticket_dir / ".in-progress.yaml")

    def journal(self, name: str | None = None) -> list[dict[str, Any]]:
        events, warnings = journal.read(self.run_dir)
        assert warnings == []
        return [e for e in events if name is None or e["event"] == name]

    def summaries(self) -> list[summary.Summary]:
        found = [a.path for a in artifacts(self.run_dir) if a.name == "change-summary"]
        loaded = [summary.load(path) for path in found]
        assert all(s is not None for s in loaded)
        return [s for s in loaded if s is not None]

    def summary(self) -> summary.Summary:
        return self.summaries()[-1]

    def run_summary(self) -> str:
        found = latest_artifact(self.run_dir, "orchestrator", "run-summary")
        assert found is not None
        return found.path.read_text()

    def wip(self) -> str:
        return git(self.repo, "rev-parse", WIP_REF).strip()


PlanTask = str | tuple[str, list[str]]  # a title, or a title and its acceptance criteria


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Project]:
    """``project(script, tasks=…, phases=…, **agent_keys)``: a repo whose cairn.toml picks the
    fake agent, a plan file beside it, and the fake agent registered for this test."""

    def build(
        script: dict[str, list[list[Step]]],
        *,
        tasks: tuple[PlanTask, ...] = ("One", "Two"),
        phases: tuple[str, ...] = ("implement",),
        max_rounds: int = 3,
        **agent: Any,
    ) -> Project:
        keys = {
            "kind": "fake",
            "max_turns": 5,
            "budget_pressure_turns": 1,
            "max_continuations": 0,
            "cutoff_timeout_ms": 2000,
            **agent,
        }
        config = "[agent]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items())
        config += f"\n[loop]\nphases = {json.dumps(list(phases))}\nmax_rounds = {max_rounds}\n"
        repo = make_repo(tmp_path / "repo", {"README.md": "hello\n", "cairn.toml": config})
        sections = []
        for n, task in enumerate(tasks, 1):
            title, criteria = (task, []) if isinstance(task, str) else task
            accept = "".join(f"- {c}\n" for c in criteria)
            sections.append(f"### Task {n}: {title}\n\nDo {title}.\n\n")
            sections[-1] += f"Acceptance criteria:\n{accept}\n" if accept else ""
        plan = tmp_path / f"{TICKET}.md"
        plan.write_text("# Plan: loop test\n\n" + "".join(sections))
        fake = FakeAgent(script)
        monkeypatch.setattr(FakeAdapter, "agent", fake, raising=False)
        monkeypatch.setitem(ADAPTERS, "fake", FakeAdapter)
        return Project(repo, plan, fake)

    return build


def pressured(played: list[Played]) -> list[bool]:
    return ["BUDGET:" in p.prompt for p in played]


# --- a plan completed ---------------------------------------------------------------------------


def test_a_plan_completed(project: Callable[..., Project]) -> None:
    p = project(
        {
            "coder": [
                [write("one.txt", "one\n"), done(1, "one.txt")],
                [write("two.txt", "two\n"), done(2, "two.txt")],
            ]
        }
    )
    outcome = p.run()

    assert (outcome.status, outcome.exit_code, outcome.reason) == ("completed", 0, None)
    assert (outcome.dispatches, outcome.turns, outcome.rounds) == (1, 2, 0)
    assert p.marker() is None and not (p.ticket_dir / ".in-progress.yaml").exists()
    final = p.summary()
    assert status_line(final) == "Completed — 2 of 2 tasks"
    assert final.files_changed == ["one.txt", "two.txt"]
    assert "**Outcome:** completed" in p.run_summary()
    last = p.journal()[-1]
    assert (last["event"], last["status"]) == ("run_finished", "completed")
    # each completed task was snapshotted at once, with its new untracked file in it
    snapshots = p.sink.named("snapshot")
    assert [s["reason"] for s in snapshots] == ["task 1 done", "task 2 done"]
    assert "two.txt" not in snapshot_files(p.repo, snapshots[0]["commit"])
    assert snapshot_files(p.repo, snapshots[1]["commit"])["two.txt"] == b"two\n"
    assert outcome.snapshot == p.wip()
    # what the sink saw, in order
    kinds = p.sink.kinds()
    # the branch (main) names another ticket than the plan's T-1: a note says which is used
    assert kinds[:4] == ["run_started", "note", "phase", "dispatch_started"]
    assert p.sink.named("note")[0]["branch"] == "main"
    assert kinds[-2:] == ["dispatch_finished", "run_finished"]
    assert [t["turn"] for t in p.sink.named("turn")] == [1, 2]
    assert p.sink.named("run_finished")[0]["status"] == "completed"
    assert {"phase": "implement", "round": None, "total": 2} in p.sink.states
    # the agent's environment and its first prompt
    first = p.agent.prompts("coder")[0]
    assert first.env[ENV_RUN_DIR] == str(p.run_dir) and first.env[ENV_TICKET] == TICKET
    assert "- Task 1: One [pending]" in first.prompt and "- Task 2: Two [pending]" in first.prompt
    assert pressured(p.agent.prompts("coder")) == [False, False]


# --- a turn cap, then resume --------------------------------------------------------------------


def test_max_turns_cutoff_saves_the_new_file_and_resume_never_redoes_a_task(
    project: Callable[..., Project],
) -> None:
    p = project(
        {
            "coder": [
                [write("README.md", "hello\none\n"), done(1, "README.md")],
                [start(2), write("notes/new.txt", "half\n")],
                [write("notes/new.txt", "half\ndone\n"), done(2, "notes/new.txt")],
                [done(3)],
            ]
        },
        tasks=("One", "Two", "Three"),
        max_turns=2,
    )
    first = p.run()

    assert (first.status, first.reason, first.exit_code) == ("interrupted", "max_turns", 3)
    assert first.next_command == f"cairn resume {TICKET}"
    commit = p.wip()
    assert first.snapshot == commit
    assert snapshot_files(p.repo, commit)["notes/new.txt"] == b"half\n"
    assert "?? notes/new.txt" in git(p.repo, "status", "--porcelain", "--untracked-files=all")
    stopped = p.summary()
    assert status_line(stopped) == (
        f"Interrupted — max_turns during task 2 of 3; work saved at {WIP_REF} ({commit[:12]})"
    )
    assert [t.status for t in stopped.tasks] == ["completed", "in progress", "pending"]
    current = p.marker()
    assert current is not None and current.owner is None and current.dispatch is None
    assert current.snapshot is not None and current.snapshot.commit == commit
    assert [e["reason"] for e in p.journal("cutoff")] == ["max_turns"]
    assert p.sink.named("cutoff") == [
        {"reason": "max_turns", "role": "coder", "snapshot": commit[:12]}
    ]
    assert "**Outcome:** interrupted (max_turns)" in p.run_summary()

    second = p.resume()

    assert (second.status, second.exit_code) == ("completed", 0)
    assert status_line(p.summary()) == "Completed — 3 of 3 tasks"
    assert p.marker() is None
    assert (p.repo / "notes" / "new.txt").read_text() == "half\ndone\n"
    coder = p.agent.prompts("coder")
    assert [(c.turn, c.played_turn) for c in coder] == [(1, 1), (2, 2), (1, 3), (2, 4)]
    handoff = coder[2].prompt
    assert "after the previous agent stopped: max_turns" in handoff
    assert "Completed:\n- Task 1: One (completed)" in handoff
    assert "In progress when it stopped:\n- Task 2: Two" in handoff
    assert "Remaining:\n- Task 3: Three" in handoff
    assert "Task 1" not in handoff.split("Remaining:")[1]
    assert f"saved at {WIP_REF} ({commit[:12]})" in handoff
    assert [e["task"] for e in p.journal("task") if e["status"] == "completed"] == [1, 2, 3]
    # the resumed coder continues the interrupted coder's conversation
    assert [c.session_id for c in coder] == [None, None, "fake-coder-1", "fake-coder-1"]
    assert p.sink.named("run_resumed")[0]["phase"] == "implement"


def test_resume_after_a_cutoff_in_review_does_not_dispatch_the_coder(
    project: Callable[..., Project],
) -> None:
    p = project(
        {"coder": [[done(1)]], "reviewer": [[end("error")], [say("fine")]]},
        tasks=("One",),
        phases=("implement", "review", "fix"),
    )
    first = p.run()
    assert (first.status, first.reason) == ("interrupted", "error")
    current = p.marker()
    assert current is not None and (current.phase, current.round) == ("review", 1)

    second = p.resume()
    assert (second.status, second.exit_code) == ("completed", 0)
    assert [c.played_turn for c in p.agent.prompts("coder")] == [1]
    assert [c.played_turn for c in p.agent.prompts("reviewer")] == [1, 2]


# --- budget pressure ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_turns", "pressure", "expected"),
    [
        (5, 2, [False, False, False, True, True]),
        (2, 1, [False, True]),
        (3, 2, [False, True, True]),
        (4, 0, [False, False, False, False]),
    ],
    ids=["5-turns-2-pressure", "2-turns-1-pressure", "3-turns-2-pressure", "pressure-off"],
)
def test_the_wrap_up_directive_goes_out_on_exactly_the_last_turns(
    project: Callable[..., Project], max_turns: int, pressure: int, expected: list[bool]
) -> None:
    turns = [[say(f"turn {n}")] for n in range(max_turns + 1)]
    p = project(
        {"coder": turns},
        tasks=("One",),
        max_turns=max_turns,
        budget_pressure_turns=pressure,
        max_idle_dispatches=0,  # turns that only talk: the no-progress stop is off
    )
    assert p.run().reason == "max_turns"

    coder = p.agent.prompts("coder")
    assert pressured(coder) == expected
    for played, under in zip(coder, expected, strict=True):
        left = max_turns - played.turn + 1
        assert (f"BUDGET: {left} turn(s) left in this dispatch." in played.prompt) == under
    assert [e["pressure"] for e in p.journal("turn")] == expected
    assert [e["pressure"] for e in p.sink.named("turn")] == expected


def test_every_dispatch_counts_its_own_budget_and_turn_1_never_gets_the_directive(
    project: Callable[..., Project],
) -> None:
    turns = [[say(f"turn {n}")] for n in range(5)]
    p = project(
        {"coder": turns},
        tasks=("One",),
        max_turns=2,
        budget_pressure_turns=1,
        max_continuations=1,
        max_idle_dispatches=0,  # turns that only talk: the no-progress stop is off
    )
    assert p.run().reason == "max_turns"
    coder = p.agent.prompts("coder")
    assert [(c.turn, c.played_turn) for c in coder] == [(1, 1), (2, 2), (1, 3), (2, 4)]
    assert pressured(coder) == [False, True, False, True]
    assert "after the previous agent stopped: max_turns" in coder[2].prompt


# --- review and fix; evaluate -------------------------------------------------------------------


def test_a_blocking_finding_is_fixed_then_the_review_is_clean(
    project: Callable[..., Project],
) -> None:
    p = project(
        {
            "coder": [[write("calc.py", "x = 1\n"), done(1, "calc.py")], [fixed("F1")]],
            "reviewer": [[finding_add("F1", "x must be 2"), finding_add("S1", "a test")], []],
        },
        tasks=("One",),
        phases=("implement", "review", "fix"),
    )
    outcome = p.run()

    assert (outcome.status, outcome.exit_code, outcome.rounds) == ("completed", 0, 2)
    reviews = [review.load(a.path) for a in artifacts(p.run_dir) if a.role == "reviewer"]
    assert [[f.id for f in r.findings] for r in reviews] == [["F1", "S1"], []]
    first, response = p.summaries()
    assert status_line(first) == "Completed — 1 of 1 tasks"
    assert (response.mode, response.round) == ("review", 1)
    assert [(f.id, f.status) for f in response.findings] == [("F1", "FIXED")]  # S1: not to fix
    assert [(e["phase"], e.get("round")) for e in p.journal("phase")][-4:] == [
        ("review", 1),
        ("fix", 1),
        ("review", 2),
        ("done", None),
    ]
    assert [(r["round"], r["blocking"]) for r in p.sink.named("review")] == [(1, 1), (2, 0)]
    fix_prompt = p.agent.prompts("coder")[1].prompt
    assert "fixing review round 1" in fix_prompt and "- F1: x must be 2" in fix_prompt
    assert "S1" not in fix_prompt
    review_prompt = p.agent.prompts("reviewer")[0].prompt
    assert "- Task 1: One [completed]" in review_prompt
    assert p.marker() is None


def test_blocking_findings_in_the_last_round_need_manual_review(
    project: Callable[..., Project],
) -> None:
    p = project(
        {"coder": [[done(1)], [fixed("F1")]], "reviewer": [[finding_add("F1", "wrong")]] * 2},
        tasks=("One",),
        phases=("implement", "review", "fix"),
        max_rounds=2,
    )
    outcome = p.run()
    assert (outcome.status, outcome.exit_code, outcome.rounds) == ("needs_review", 1, 2)
    assert outcome.reason == "blocking findings remain"
    assert p.marker() is None
    assert p.journal()[-1]["status"] == "needs_review"
    assert "needs_review (blocking findings remain)" in p.run_summary()


def test_the_evaluate_phase_turns_failed_criteria_into_findings_to_fix(
    project: Callable[..., Project],
) -> None:
    p = project(
        {
            "coder": [[done(1)], [done(2)], [fixed("AC2")]],
            "evaluator": [
                [verdict("AC-1", "pass"), verdict("AC-2", "fail", "returns inf")],
                [verdict("AC-1", "pass"), verdict("AC-2", "pass")],
            ],
        },
        tasks=(("Sub", ["sub(5, 3) == 2"]), ("Div", ["div(1, 0) raises"])),
        phases=("implement", "evaluate", "fix"),
    )
    outcome = p.run()

    assert (outcome.status, outcome.rounds) == ("completed", 2)
    evaluations = [evaluation.load(a.path) for a in artifacts(p.run_dir) if a.role == "evaluator"]
    assert [e.status for e in evaluations] == ["FAIL", "PASS"]
    assert [(c.id, c.result, c.reason) for c in evaluations[0].criteria] == [
        ("AC-1", "pass", None),
        ("AC-2", "fail", "returns inf"),
    ]
    seeded = review.load(latest_review(p, 1))
    assert [(f.id, f.title) for f in seeded.findings] == [
        ("AC2", "acceptance criterion not met: div(1, 0) raises")
    ]
    assert [(e["round"], e["status"], e["failed"]) for e in p.sink.named("evaluation")] == [
        (1, "FAIL", 1),
        (2, "PASS", 0),
    ]
    assert [e["failed"] for e in p.journal("phase") if "failed" in e] == [["AC-2"], []]
    evaluate_prompt = p.agent.prompts("evaluator")[0].prompt
    assert "- AC-2: div(1, 0) raises (task 2)" in evaluate_prompt
    assert "- AC2: acceptance criterion not met" in p.agent.prompts("coder")[2].prompt
    assert p.agent.prompts("reviewer") == []  # no review phase: nobody else was dispatched


def latest_review(p: Project, round_number: int) -> Path:
    found = [a.path for a in artifacts(p.run_dir) if a.role == "reviewer"]
    return found[round_number - 1]


# --- how a dispatch ends: results and cutoff reasons --------------------------------------------


@pytest.mark.parametrize("reason", STOP_REASONS)
def test_every_stop_reason_is_a_saved_cutoff_with_its_cutoff_reason(
    project: Callable[..., Project], reason: StopReason
) -> None:
    p = project({"coder": [[start(1), write("partial.txt", "p\n"), end(reason)]]}, tasks=("One",))
    outcome = p.run()

    cutoff = CUTOFF_FOR[reason]
    assert (outcome.status, outcome.reason, outcome.exit_code) == ("interrupted", cutoff, 3)
    assert [e["reason"] for e in p.journal("dispatch_finished")] == [reason]
    assert [e["reason"] for e in p.journal("cutoff")] == [cutoff]
    assert [e["reason"] for e in p.journal("run_interrupted")] == [cutoff]
    commit = p.wip()
    assert snapshot_files(p.repo, commit)["partial.txt"] == b"p\n"
    detail = f"; fake agent: {reason}" if cutoff in ("error", "crash") else ""
    assert status_line(p.summary()) == (
        f"Interrupted — {cutoff} during task 1 of 1; work saved at {WIP_REF} ({commit[:12]})"
        + detail
    )
    assert p.summary().status.detail == (detail[2:] or None)
    current = p.marker()
    assert current is not None and current.owner is None


def test_max_seconds_interrupts_a_hanging_agent_as_a_timeout(
    project: Callable[..., Project],
) -> None:
    p = project({"coder": [[write("h.txt", "h\n"), hang]]}, tasks=("One",), max_seconds=0.3)
    outcome = p.run()

    assert (outcome.status, outcome.reason) == ("interrupted", "timeout")
    (dispatch,) = p.agent.dispatches
    assert dispatch.interrupts == [("timeout", 2.0)]
    assert [e["reason"] for e in p.journal("dispatch_finished")] == ["timeout"]
    assert snapshot_files(p.repo, p.wip())["h.txt"] == b"h\n"


def test_continuations_then_the_run_stops_resumable(project: Callable[..., Project]) -> None:
    p = project(
        {"coder": [[done(1)], [say("crashing now"), end("crashed")], [end("error")], [done(2)]]},
        max_turns=3,
        max_continuations=1,
    )
    first = p.run()
    assert (first.status, first.reason, first.dispatches) == ("interrupted", "error", 2)
    assert [e["reason"] for e in p.journal("cutoff")] == ["crash", "error"]
    handoff = p.agent.prompts("coder")[2].prompt
    assert "after the previous agent stopped: crash" in handoff
    assert "last message: crashing now" in handoff

    second = p.resume()
    assert second.status == "completed"
    resumed = p.agent.prompts("coder")[3]
    assert "error (the run was resumed with cairn resume)" in resumed.prompt
    sessions = [c.session_id for c in p.agent.prompts("coder")]
    assert sessions == [None, None, "fake-coder-1", "fake-coder-2"]


# --- the agent's own to-do list -----------------------------------------------------------------


def test_a_checked_todo_item_naming_a_task_completes_it(project: Callable[..., Project]) -> None:
    p = project(
        {
            "coder": [
                [
                    todo({"text": "Task 1: One", "completed": True}, {"text": "Three"}),
                    todo({"text": "Refactor everything", "completed": True}),
                ],
                [todo({"text": "two", "completed": True})],
            ]
        },
        tasks=("One", "Two", "Three"),
    )
    outcome = p.run()

    assert outcome.reason == "incomplete"  # the agent stopped with task 3 open
    tasks = p.summary().tasks
    assert [t.status for t in tasks] == ["completed", "completed", "pending"]
    assert all("to-do list" in (t.notes or "") for t in tasks[:2])
    assert [(e["task"], e["source"]) for e in p.journal("task")] == [
        (1, "todo_list"),
        (2, "todo_list"),
    ]


# --- signals ------------------------------------------------------------------------------------


def test_ctrl_c_stops_the_agent_saves_and_restores_the_handler(
    project: Callable[..., Project],
) -> None:
    before = signal.getsignal(signal.SIGINT)
    p = project(
        {"coder": [[write("b.txt", "partial\n"), press_ctrl_c, hang]]},
        tasks=("One",),
        cutoff_timeout_ms=1500,
    )
    outcome = p.run()

    assert (outcome.status, outcome.reason, outcome.exit_code) == ("interrupted", "signal", 3)
    (dispatch,) = p.agent.dispatches
    assert dispatch.interrupts == [("interrupted", 1.5)]
    assert [e["reason"] for e in p.journal("dispatch_finished")] == ["interrupted"]
    assert [e["reason"] for e in p.journal("run_interrupted")] == ["signal"]
    commit = p.wip()
    assert snapshot_files(p.repo, commit)["b.txt"] == b"partial\n"
    assert status_line(p.summary()).startswith("Interrupted — signal after task 0 of 1")
    assert signal.getsignal(signal.SIGINT) is before


def test_a_second_ctrl_c_stops_the_agent_at_once(project: Callable[..., Project]) -> None:
    p = project({"coder": [[press_ctrl_c_twice]]}, tasks=("One",))
    assert p.run().reason == "signal"
    (dispatch,) = p.agent.dispatches
    assert dispatch.interrupts == [("interrupted", 2.0), ("interrupted", 0)]


def test_a_signal_between_dispatches_starts_no_other(project: Callable[..., Project]) -> None:
    p = project(
        {"coder": [[done(1), press_ctrl_c]], "reviewer": [[say("fine")]]},
        tasks=("One",),
        phases=("implement", "review", "fix"),
    )
    outcome = p.run()
    assert (outcome.status, outcome.reason) == ("interrupted", "signal")
    assert [d.request.role for d in p.agent.dispatches] == ["coder"]  # no reviewer started
    assert [e["dispatch"]["role"] for e in p.journal("dispatch_started")] == ["coder"]
    current = p.marker()
    assert current is not None and (current.phase, current.round) == ("review", 1)


# --- failures -----------------------------------------------------------------------------------


def test_an_unexpected_error_is_recorded_as_an_error_stop_and_raised(
    project: Callable[..., Project],
) -> None:
    p = project({"coder": [[start(1), fail("the adapter broke")]]}, tasks=("One",))
    with pytest.raises(RuntimeError, match="the adapter broke"):
        p.run()
    assert status_line(p.summary()).startswith("Interrupted — error during task 1 of 1")
    assert [e["reason"] for e in p.journal("run_interrupted")] == ["error"]
    current = p.marker()
    assert current is not None and current.owner is None
    assert p.sink.named("warning") == []


def test_a_failure_while_recording_a_failure_is_a_warning_and_the_first_error_wins(
    project: Callable[..., Project],
) -> None:
    p = project({"coder": [[corrupt_summary, fail("the adapter broke")]]}, tasks=("One",))
    with pytest.raises(RuntimeError, match="the adapter broke") as raised:
        p.run()

    (warning,) = p.sink.named("warning")
    assert "the adapter broke" in warning["message"]
    assert "02_coder_change-summary.md" in warning["message"]  # why it could not be recorded
    assert any("could not be recorded" in note for note in raised.value.__notes__)
    # the lease is not left held: the ticket can be taken again
    layout, _, _ = Layout.from_run_dir(p.run_dir)
    acquire(layout, TICKET, stale_after=86400).release()
