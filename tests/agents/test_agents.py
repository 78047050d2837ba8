"""The scripted and command adapters: real subprocesses, real signals, temp dirs."""

from __future__ import annotations

import json
import os
import shlex
import sys
import threading
import time
from collections.abc import Callable, Generator
from pathlib import Path

import pytest

from cairn import agents
from cairn.agents.base import Dispatch, DispatchRequest, Event, Result
from cairn.agents.scripted.adapter import load_script, parse_script
from cairn.errors import BadInput
from cairn.terms import ENV_RUN_DIR, ENV_TASK, ENV_TICKET, ENV_TURN, StopReason
from helpers import make_repo

THREE_TURNS = """\
coder:
  - - write: {path: notes/a.txt, content: "one\\n"}
    - say: first
  - - append: {path: notes/a.txt, content: "two\\n"}
    - run: "echo out; echo err >&2; exit 4"
    - say: second
  - - delete: notes/a.txt
    - write: {path: b.txt, content: "bee"}
    - say: done
reviewer:
  - - say: looks fine
"""


def prompts_by_turn(n: int) -> str:
    return f"prompt of turn {n}"


def scripted(
    tmp_path: Path,
    text: str,
    *,
    role: str = "coder",
    max_turns: int = 10,
    next_prompt: Callable[[int], str | None] = prompts_by_turn,
    workspace: Path | None = None,
) -> DispatchRequest:
    script = tmp_path / "script.yaml"
    script.write_text(text)
    if workspace is None:
        workspace = tmp_path / "ws"
        workspace.mkdir(exist_ok=True)
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    return DispatchRequest(
        role=role,
        workspace=workspace,
        run_dir=run_dir,
        max_turns=max_turns,
        next_prompt=next_prompt,
        script=script,
        env={ENV_RUN_DIR: str(run_dir)},
    )


def command(
    tmp_path: Path,
    cmd: str | list[str],
    *,
    max_turns: int = 10,
    next_prompt: Callable[[int], str | None] = prompts_by_turn,
    env: dict[str, str] | None = None,
) -> DispatchRequest:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return DispatchRequest(
        role="coder",
        workspace=workspace,
        run_dir=tmp_path / "run",
        max_turns=max_turns,
        next_prompt=next_prompt,
        command=cmd,
        env=env or {},
    )


def drain(session: Dispatch) -> tuple[list[Event], Result]:
    events = list(session.events())
    assert session.result is not None
    return events, session.result


def run(kind: str, request: DispatchRequest) -> tuple[list[Event], Result]:
    return drain(agents.get(kind).start(request))


def prompts_log(request: DispatchRequest) -> list[dict[str, object]]:
    path = request.run_dir / "scripted-agent" / "prompts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def cursor(request: DispatchRequest, role: str = "coder") -> int:
    path = request.run_dir / "scripted-agent" / f"{role}.cursor"
    loaded: int = json.loads(path.read_text())["played"]
    return loaded


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


# --- scripted -------------------------------------------------------------------------------


def test_three_turn_script_completes_with_events_and_files(tmp_path: Path) -> None:
    request = scripted(tmp_path, THREE_TURNS)
    events, result = run("scripted", request)

    assert result.reason == "completed"
    assert result.num_turns == 3
    assert result.final_message == "done"
    assert result.exit_code is None
    ws = request.workspace
    assert not (ws / "notes/a.txt").exists()
    assert (ws / "b.txt").read_text() == "bee"

    kinds = [(e.kind, e.turn) for e in events]
    assert kinds == [
        ("turn_started", 1),
        ("tool_use", 1),
        ("file_changed", 1),
        ("message", 1),
        ("turn_completed", 1),
        ("turn_started", 2),
        ("tool_use", 2),
        ("file_changed", 2),
        ("tool_use", 2),
        ("message", 2),
        ("turn_completed", 2),
        ("turn_started", 3),
        ("tool_use", 3),
        ("file_changed", 3),
        ("tool_use", 3),
        ("file_changed", 3),
        ("message", 3),
        ("turn_completed", 3),
    ]
    assert events[1].data == {"name": "write", "input": {"path": "notes/a.txt", "content": "one\n"}}
    assert events[2].data == {"path": "notes/a.txt"}
    assert events[3].data == {"text": "first"}
    assert [e.data["done"] for e in events if e.kind == "turn_completed"] == [False, False, True]
    ran = events[8].data
    assert ran["name"] == "run"
    assert ran["output"] == {"exit_code": 4, "stdout": "out\n", "stderr": "err\n"}
    assert cursor(request) == 3


def test_cairn_action_runs_the_cli_in_the_workspace(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    text = """\
coder:
  - - cairn: ["--version"]
    - cairn: ["no-such-command"]
    - write: {path: after.txt, content: x}
"""
    request = scripted(tmp_path, text, workspace=repo)
    events, result = run("scripted", request)
    assert result.reason == "completed"
    tools = [e.data for e in events if e.kind == "tool_use"]
    assert tools[0]["input"] == ["--version"]
    assert tools[0]["output"]["exit_code"] == 0
    assert "cairn" in tools[0]["output"]["stdout"]
    assert tools[1]["output"]["exit_code"] != 0  # a failing cairn command does not stop the turn
    assert (repo / "after.txt").read_text() == "x"


def test_max_turns_cut_then_a_continuation_plays_the_next_turn(tmp_path: Path) -> None:
    request = scripted(tmp_path, THREE_TURNS, max_turns=2)
    events, result = run("scripted", request)
    assert result.reason == "max_turns"
    assert result.num_turns == 2
    assert result.final_message == "second"
    assert [e.turn for e in events if e.kind == "turn_completed"] == [1, 2]
    assert cursor(request) == 2
    assert (request.workspace / "notes/a.txt").read_text() == "one\ntwo\n"

    request.next_prompt = lambda n: f"continue {n}"
    events, result = run("scripted", request)
    assert result.reason == "completed"
    assert result.num_turns == 1
    assert not (request.workspace / "notes/a.txt").exists()
    assert [(p["turn"], p["played_turn"], p["prompt"]) for p in prompts_log(request)] == [
        (1, 1, "prompt of turn 1"),
        (2, 2, "prompt of turn 2"),
        (1, 3, "continue 1"),
    ]


def test_work_finished_on_the_last_allowed_turn_is_completed(tmp_path: Path) -> None:
    asked: list[int] = []

    def next_prompt(n: int) -> str | None:
        asked.append(n)
        return None if n == 3 else f"p{n}"

    request = scripted(tmp_path, THREE_TURNS, max_turns=2, next_prompt=next_prompt)
    _, result = run("scripted", request)
    assert result.reason == "completed"  # next_prompt(3) is asked before the max_turns check
    assert result.num_turns == 2
    assert asked == [1, 2, 3]

    two = "coder:\n  - [{say: a}]\n  - [{say: b}]\n"
    request = scripted(_fresh(tmp_path, "two"), two, max_turns=2)
    _, result = run("scripted", request)
    assert (result.reason, result.num_turns, result.final_message) == ("completed", 2, "b")


def _fresh(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir()
    return path


def test_next_prompt_none_stops_early_as_completed(tmp_path: Path) -> None:
    request = scripted(tmp_path, THREE_TURNS, next_prompt=lambda n: "go" if n == 1 else None)
    events, result = run("scripted", request)
    assert result.reason == "completed"
    assert result.num_turns == 1
    assert result.final_message == "first"
    assert cursor(request) == 1

    request = scripted(_fresh(tmp_path, "none"), THREE_TURNS, next_prompt=lambda n: None)
    events, result = run("scripted", request)
    assert (result.reason, result.num_turns, events) == ("completed", 0, [])


def test_prompts_are_recorded_exactly(tmp_path: Path) -> None:
    texts = {1: "Implement task 1.\n\nLine two — ünïcode ✓", 2: 'quotes " and \\ backslash'}
    request = scripted(tmp_path, THREE_TURNS, max_turns=2, next_prompt=texts.get)
    run("scripted", request)
    request.role = "reviewer"
    request.next_prompt = lambda n: "review it" if n == 1 else None
    run("scripted", request)
    assert prompts_log(request) == [
        {"role": "coder", "turn": 1, "played_turn": 1, "prompt": texts[1]},
        {"role": "coder", "turn": 2, "played_turn": 2, "prompt": texts[2]},
        {"role": "reviewer", "turn": 1, "played_turn": 1, "prompt": "review it"},
    ]
    assert cursor(request, "reviewer") == 1


def test_exhausted_script_answers_done_without_acting(tmp_path: Path) -> None:
    request = scripted(tmp_path, "coder:\n  - [{say: only}]\n")
    run("scripted", request)
    events, result = run("scripted", request)
    assert result.reason == "completed"
    assert [(e.kind, e.data) for e in events] == [
        ("turn_started", {}),
        ("turn_completed", {"done": True}),
    ]
    assert prompts_log(request)[-1]["played_turn"] is None


def test_exit_code_is_an_error(tmp_path: Path) -> None:
    text = "coder:\n  - [{say: a}]\n  - [{write: {path: f, content: x}}, {exit: 3}, {say: never}]\n"
    request = scripted(tmp_path, text)
    events, result = run("scripted", request)
    assert result.reason == "error"
    assert result.exit_code == 3
    assert result.num_turns == 2
    assert result.final_message == "a"
    assert [e.kind for e in events if e.turn == 2] == [
        "turn_started",
        "tool_use",
        "file_changed",
        "tool_use",
    ]
    assert events[-1].data == {"name": "exit", "input": 3}
    # The crashed turn is not replayed: a continuation has nothing left to play.
    assert cursor(request) == 2


def test_exit_zero_mid_turn_is_an_error(tmp_path: Path) -> None:
    _, result = run("scripted", scripted(tmp_path, "coder:\n  - [{exit: 0}]\n"))
    assert (result.reason, result.exit_code) == ("error", 0)
    assert "turn 1" in (result.detail or "")


def test_kill_is_a_crash(tmp_path: Path) -> None:
    request = scripted(tmp_path, "coder:\n  - [{say: a}, {kill: true}]\n  - [{say: b}]\n")
    events, result = run("scripted", request)
    assert result.reason == "crashed"
    assert result.exit_code is None
    assert "SIGKILL" in (result.detail or "")
    assert not any(e.kind == "turn_completed" for e in events)

    request.next_prompt = lambda n: "again"
    _, result = run("scripted", request)
    assert (result.reason, result.final_message) == ("completed", "b")


def interrupt_on(
    session: Dispatch, kind: str, reason: StopReason, grace: float
) -> tuple[list[Event], float, float]:
    """Drain ``session``, interrupting it at the first event of ``kind``; returns the events,
    how long interrupt() took and how long the session took to end after it."""
    events: list[Event] = []
    call = ended = 0.0
    start = 0.0
    for event in session.events():
        events.append(event)
        if event.kind == kind and not start:
            start = time.monotonic()
            session.interrupt(reason, grace)
            call = time.monotonic() - start
    ended = time.monotonic() - start
    assert start, f"no {kind} event"
    return events, call, ended


def test_hang_interrupted_ends_with_the_interrupt_reason(tmp_path: Path) -> None:
    session = agents.get("scripted").start(scripted(tmp_path, "coder:\n  - [{hang: true}]\n"))
    _, call, ended = interrupt_on(session, "tool_use", "timeout", 0.2)
    assert call < 0.05
    assert ended < 1.0
    assert session.result is not None
    assert session.result.reason == "timeout"
    assert session.result.num_turns == 1
    assert session.result.detail is None


def test_hang_ignoring_sigterm_is_killed_after_grace(tmp_path: Path) -> None:
    text = "coder:\n  - [{hang: {ignore_term: true}}]\n"
    session = agents.get("scripted").start(scripted(tmp_path, text))
    _, call, ended = interrupt_on(session, "tool_use", "interrupted", 0.3)
    assert call < 0.05
    assert 0.25 <= ended < 1.5
    assert session.result is not None
    assert session.result.reason == "interrupted"


def test_interrupt_stops_what_the_agent_started(tmp_path: Path) -> None:
    marker = tmp_path / "survived"
    text = f'coder:\n  - [{{run: "sleep 1; touch {marker}"}}]\n'
    session = agents.get("scripted").start(scripted(tmp_path, text))
    timer = threading.Timer(0.5, session.interrupt, ("timeout", 0.2))
    timer.start()
    started = time.monotonic()
    drain(session)
    assert time.monotonic() - started < 1.0
    assert session.result is not None and session.result.reason == "timeout"
    time.sleep(1.0)
    assert not marker.exists()  # the `run` child was in the agent's group and died with it


def test_interrupt_before_events_and_after_result(tmp_path: Path) -> None:
    session = agents.get("scripted").start(scripted(tmp_path, THREE_TURNS))
    session.interrupt("interrupted", 0.2)
    events, result = drain(session)
    assert result.reason == "interrupted"
    assert result.num_turns == 0
    assert events == []

    session = agents.get("scripted").start(scripted(_fresh(tmp_path, "b"), "coder:\n  - []\n"))
    _, result = drain(session)
    session.interrupt("timeout", 0.1)  # too late: nothing changes
    assert session.result is result
    assert result.reason == "completed"


def test_abandoned_session_kills_the_agent(tmp_path: Path) -> None:
    session = agents.get("scripted").start(scripted(tmp_path, "coder:\n  - [{hang: true}]\n"))
    pid = session.child.pid  # type: ignore[attr-defined]
    events = session.events()
    assert isinstance(events, Generator)
    next(events)
    events.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("coder: [\n", "not valid YAML"),
        ("- a\n- b\n", "mapping of role"),
        ("reviewer:\n  - [{say: x}]\n", "no role 'coder'; it has reviewer"),
        ("coder: {say: x}\n", "role 'coder': must be a list of turns"),
        ("coder:\n  - [{say: a}]\n  - {say: b}\n", "turn 2: a turn must be a list"),
        (
            "coder:\n  - [{say: a}]\n  - [{say: b}, {fly: away}]\n",
            "turn 2 action 2: unknown action",
        ),
        ("coder:\n  - [{say: a, run: b}]\n", "turn 1 action 1: an action is a mapping with one"),
        ("coder:\n  - [{sleep: soon}]\n", "turn 1 action 1: sleep takes a number"),
        ("coder:\n  - [{exit: true}]\n", "turn 1 action 1: exit takes an exit code"),
        ("coder:\n  - [{write: {path: a}}]\n", "turn 1 action 1: write takes {path, content}"),
        ("coder:\n  - [{write: {path: ../a, content: x}}]\n", "must be relative"),
        ("coder:\n  - [{cairn: status}]\n", "cairn takes a list"),
        ("coder:\n  - [{hang: {ignore: true}}]\n", "hang takes true or"),
        ("reviewer:\n  - [{kill: 1}]\ncoder: []\n", "role 'reviewer' turn 1 action 1: kill takes"),
    ],
)
def test_bad_scripts_are_bad_input_naming_file_and_position(
    tmp_path: Path, text: str, where: str
) -> None:
    request = scripted(tmp_path, text)
    with pytest.raises(BadInput) as caught:
        agents.get("scripted").start(request)
    message = str(caught.value)
    assert str(request.script) in message
    assert where in message
    assert not (request.run_dir / "scripted-agent").exists()  # nothing was spawned


def test_script_missing_or_not_given(tmp_path: Path) -> None:
    request = scripted(tmp_path, "coder: []\n")
    request.script = tmp_path / "absent.yaml"
    with pytest.raises(BadInput, match=r"absent\.yaml cannot be read"):
        agents.get("scripted").start(request)
    request.script = None
    with pytest.raises(BadInput, match=r"agent kind scripted needs agent\.script"):
        agents.get("scripted").start(request)


def test_parse_script_accepts_every_action(tmp_path: Path) -> None:
    text = """\
coder:
  - - write: {path: a, content: x}
    - append: {path: a, content: y}
    - edit: {path: a, old: x, new: z}
    - delete: a
    - run: "true"
    - cairn: [status]
    - say: hi
    - plan: [one, two]
    - sleep: 0.5
    - exit: 0
    - kill: true
    - hang: true
    - hang: {ignore_term: true}
"""
    script = parse_script(text, tmp_path / "s.yaml")
    assert [name for name, _ in script["coder"][0]] == [
        "write",
        "append",
        "edit",
        "delete",
        "run",
        "cairn",
        "say",
        "plan",
        "sleep",
        "exit",
        "kill",
        "hang",
        "hang",
    ]
    path = tmp_path / "s.yaml"
    path.write_text(text)
    assert load_script(path) == script


def test_edit_action(tmp_path: Path) -> None:
    text = """\
coder:
  - - write: {path: a.py, content: "x = 1\\n"}
    - edit: {path: a.py, old: "x = 1", new: "x = 2"}
    - edit: {path: a.py, old: "nope", new: "y"}
"""
    request = scripted(tmp_path, text)
    events, result = run("scripted", request)
    assert result.reason == "completed"
    assert (request.workspace / "a.py").read_text() == "x = 2\n"
    tools = [e.data for e in events if e.kind == "tool_use"]
    assert tools[2]["output"] == {"error": "old text not found"}


def test_unknown_kind_lists_the_kinds() -> None:
    with pytest.raises(
        BadInput, match=r"unknown agent kind 'nope'; use one of .*command.*scripted"
    ):
        agents.get("nope")


# --- command --------------------------------------------------------------------------------


def test_command_prompt_as_argument(tmp_path: Path) -> None:
    code = "import sys; print('got ' + sys.argv[1]); print(); print('last ' + sys.argv[1])"
    request = command(tmp_path, [*py(code), "<{prompt}>"], next_prompt=lambda n: "hi there")
    request.next_prompt = lambda n: "hi there" if n == 1 else None
    events, result = run("command", request)
    assert result.reason == "completed"
    assert result.num_turns == 1
    assert result.final_message == "last <hi there>"
    assert [(e.kind, e.data) for e in events] == [
        ("turn_started", {}),
        ("message", {"text": "got <hi there>"}),
        ("message", {"text": "last <hi there>"}),
        ("turn_completed", {"exit_code": 0}),
    ]


def test_command_prompt_on_stdin_with_env(tmp_path: Path) -> None:
    code = (
        "import os, sys\n"
        "prompt = sys.stdin.read()\n"
        f"keys = {(ENV_RUN_DIR, ENV_TICKET, ENV_TASK, ENV_TURN)!r}\n"
        "print(' '.join(os.environ[k] for k in keys))\n"
        "print(repr(prompt))\n"
        "print(os.getcwd())\n"
    )
    env = {ENV_RUN_DIR: "/tmp/r", ENV_TICKET: "T-1", ENV_TASK: "2"}
    prompt = "line one\nline two ✓\n"
    request = command(
        tmp_path,
        shlex.join(py(code)),
        env=env,
        next_prompt=lambda n: prompt if n == 1 else None,
    )
    events, result = run("command", request)
    assert result.reason == "completed"
    texts = [e.data["text"] for e in events if e.kind == "message"]
    assert texts == ["/tmp/r T-1 2 1", repr(prompt), str(request.workspace)]
    assert result.final_message == str(request.workspace)


def test_command_multi_turn_until_next_prompt_is_none(tmp_path: Path) -> None:
    code = "import sys; open('log', 'a').write(sys.argv[1] + '\\n'); print('did', sys.argv[1])"
    request = command(
        tmp_path, [*py(code), "{prompt}"], next_prompt=lambda n: f"t{n}" if n <= 3 else None
    )
    events, result = run("command", request)
    assert result.reason == "completed"
    assert result.num_turns == 3
    assert result.final_message == "did t3"
    assert (request.workspace / "log").read_text() == "t1\nt2\nt3\n"
    assert [e.turn for e in events if e.kind == "turn_completed"] == [1, 2, 3]


def test_command_max_turns(tmp_path: Path) -> None:
    request = command(tmp_path, [*py("print('ok')")], max_turns=2)
    events, result = run("command", request)
    assert (result.reason, result.num_turns) == ("max_turns", 2)
    assert [e.turn for e in events if e.kind == "turn_started"] == [1, 2]


def test_command_exit_codes(tmp_path: Path) -> None:
    code = "import sys; print('partial'); sys.stderr.write('boom\\n'); sys.exit(3)"
    events, result = run("command", command(tmp_path, py(code)))
    assert (result.reason, result.exit_code, result.num_turns) == ("error", 3, 1)
    assert result.final_message == "partial"
    assert result.detail is not None and "exit status 3" in result.detail
    assert result.detail.endswith("boom")
    assert not any(e.kind == "turn_completed" for e in events)

    code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    _, result = run("command", command(tmp_path, py(code)))
    assert (result.reason, result.exit_code) == ("crashed", None)


def test_command_interrupt(tmp_path: Path) -> None:
    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('up', flush=True)\n"
        "time.sleep(30)\n"
    )
    session = agents.get("command").start(command(tmp_path, py(code)))
    _, call, ended = interrupt_on(session, "message", "timeout", 0.2)
    assert call < 0.05
    assert ended < 1.0
    assert session.result is not None
    assert (session.result.reason, session.result.num_turns) == ("timeout", 1)


def test_command_bad_input(tmp_path: Path) -> None:
    request = command(tmp_path, "x")
    request.command = None
    with pytest.raises(BadInput, match=r"agent kind command needs agent\.command"):
        agents.get("command").start(request)
    request.command = "no-such-program-cairn-test --flag"
    with pytest.raises(BadInput, match="'no-such-program-cairn-test' is not found"):
        agents.get("command").start(request)
    request.command = "unbalanced 'quote"
    with pytest.raises(BadInput, match="cannot be split"):
        agents.get("command").start(request)
    request.command = []
    with pytest.raises(BadInput, match="empty"):
        agents.get("command").start(request)
