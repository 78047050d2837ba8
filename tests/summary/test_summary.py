"""The change summary: exact rendering, parse(render(x)) == x, tolerant parsing, strict errors."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import get_args

import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from cairn import summary as S
from cairn.errors import BadInput
from cairn.summary import Finding, Gate, Status, Summary, SummaryError, Task, parse, render
from cairn.summary.model import ProseKey
from cairn.summary.render import status_line
from cairn.terms import SummaryState

NOW = datetime(2026, 11, 30, 10, 15, tzinfo=UTC)
LATER = NOW + timedelta(minutes=5)

EXAMPLE = """\
---
{
  "format": 1,
  "ticket": "PROJ-12",
  "run": "20261130-101500Z",
  "mode": "implementation",
  "round": null,
  "updated": "2026-11-30T10:15:00+00:00"
}
---
# Change summary — ticket PROJ-12

## Status
In progress — task 1 of 3

## Per-task summary

### Task 0: Add the parser — completed
- **Files:** `src/parse.py`, `tests/test_parse.py`
- **Outcome:** Parser handles headings.
- **Notes:** (none)

### Task 1: Wire the *CLI* — in progress
- **Files:** (pending)
- **Outcome:** (pending)
- **Notes:** (pending)

### Task 2: Docs — pending
- **Files:** (pending)
- **Outcome:** (pending)
- **Notes:** (pending)

## Files changed
(pending)

## Quality gates
(pending)

## Deferred items
(pending)
"""

REVIEW = """\
---
{
  "format": 1,
  "ticket": "PROJ-12",
  "run": null,
  "mode": "review",
  "round": 2,
  "updated": "2026-11-30T10:15:00+00:00"
}
---
# Change summary — ticket PROJ-12, review round 2

## Status
In progress — finding 2 of 2

## Findings addressed

### F1: Null check missing in `load()` — FIXED
- **Action:** Added a guard and a test.

### T3-L: Slow loop — pending
- **Action:** (pending)

## Quality gates
(pending)
"""


def task_of(s: Summary, number: int) -> Task:
    found = s.task(number)
    assert found is not None, f"no task {number}"
    return found


def example() -> Summary:
    s = S.scaffold_tasks(
        "PROJ-12",
        "20261130-101500Z",
        [(0, "Add the parser"), (1, "Wire the *CLI*"), (2, "Docs")],
        NOW,
    )
    s = S.complete_task(
        s, 0, NOW, files=["src/parse.py", "tests/test_parse.py"], outcome="Parser handles headings."
    )
    return S.start_task(s, 1, NOW)


def review() -> Summary:
    s = S.scaffold_findings(
        "PROJ-12", None, 2, [("F1", "Null check missing in `load()`"), ("T3-L", "Slow loop")], NOW
    )
    return S.address_finding(s, "F1", "FIXED", NOW, action="Added a guard and a test.")


def error_line(text: str) -> int:
    with pytest.raises(SummaryError) as caught:
        parse(text, source="s.md")
    message = str(caught.value)
    match = re.match(r"s\.md:(\d+): ", message)
    assert match, message
    assert "\n" not in message
    assert int(match.group(1)) == caught.value.line
    return caught.value.line


def line_no(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.split("\n"), 1) if line == needle)


# --- exact rendering -------------------------------------------------------------------------


def test_renders_the_documented_example_byte_for_byte() -> None:
    assert render(example()) == EXAMPLE
    assert parse(EXAMPLE) == example()


def test_renders_a_review_summary() -> None:
    assert render(review()) == REVIEW
    assert parse(REVIEW) == review()


def test_free_text_that_looks_like_a_marker_is_escaped() -> None:
    s = S.complete_task(example(), 2, NOW, files=[], outcome="(pending)", notes="\\n is a newline")
    text = render(s)
    assert "- **Outcome:** \\(pending)" in text
    assert "- **Notes:** \\\\n is a newline" in text
    assert "- **Files:** (none)" in text
    assert parse(text).task(2) == s.task(2)


def test_code_spans_grow_their_fence_and_pad_around_backticks_and_spaces() -> None:
    files = ["a`b", "`x", " lead", "trail ", " ", "a, b", "``"]
    s = S.complete_task(example(), 2, NOW, files=files)
    line = next(x for x in render(s).split("\n") if x.startswith("- **Files:** ``"))
    assert line == "- **Files:** ``a`b``, `` `x ``, `  lead `, ` trail  `, ` `, `a, b`, ``` `` ```"
    assert task_of(parse(render(s)), 2).files == files


def test_interrupted_status_lines() -> None:
    s = S.mark_interrupted(example(), "max_turns", NOW, "refs/cairn/wip/PROJ-12", "ABCDEF1")
    assert (
        "Interrupted — max_turns during task 1 of 3; work saved at refs/cairn/wip/PROJ-12 "
        "(abcdef1)" in render(s)
    )
    done = S.finalise(S.skip_task(S.complete_task(example(), 1, NOW), 2, NOW, "not needed"), NOW)
    stopped = S.mark_interrupted(done, "signal", NOW)
    assert stopped.status.item is None
    assert "Interrupted — signal after task 3 of 3; no snapshot" in render(stopped)
    for summary in (s, stopped):
        assert parse(render(summary)) == summary


def test_a_cutoff_names_only_a_task_in_progress() -> None:
    """A task that never started is not "during": nothing in progress says "after task K of M",
    K the tasks resolved (completed, skipped or deferred)."""
    fresh = S.scaffold_tasks("PROJ-12", "20261130-101500Z", [(1, "a"), (2, "b"), (3, "c")], NOW)
    stopped = S.mark_interrupted(fresh, "max_turns", NOW)
    assert stopped.status.item is None
    assert status_line(stopped) == "Interrupted — max_turns after task 0 of 3; no snapshot"
    one_done = S.mark_interrupted(S.complete_task(fresh, 1, NOW), "incomplete", NOW)
    assert status_line(one_done) == "Interrupted — incomplete after task 1 of 3; no snapshot"
    for summary in (stopped, one_done):
        assert parse(render(summary)) == summary
    answered = S.mark_interrupted(review(), "timeout", NOW)
    assert status_line(answered) == "Interrupted — timeout after finding 1 of 2; no snapshot"
    assert parse(render(answered)) == answered


@pytest.mark.parametrize(
    "line",
    [
        "Interrupted — max_turns after 1 of 3 tasks; no snapshot",
        "Interrupted — max_turns after task 1 of 3; no snapshot",
        "Interrupted — max_turns during task 1 of 3; no snapshot",
    ],
)
def test_old_and_new_interrupted_lines_parse(line: str) -> None:
    text = EXAMPLE.replace("In progress — task 1 of 3", line)
    assert parse(text).status.state == "interrupted"


# --- round trip ------------------------------------------------------------------------------

ALPHABET = st.characters(exclude_categories=["Cs"], exclude_characters="\0")
FRAGMENTS = st.sampled_from(
    [
        "*",
        "_",
        "#",
        "[",
        "]",
        "(",
        ")",
        "\\",
        "`",
        "``",
        "|",
        "<",
        ">",
        "—",
        " — ",
        ", ",
        " ",
        "(pending)",
        "(none)",
        "\n",
        "\r\n",
        "\t",
        "- ",
        "### ",
        "**",
        "\u2028",
    ]
)
texts = st.lists(st.one_of(FRAGMENTS, st.text(ALPHABET, max_size=6)), max_size=5).map("".join)
titles = texts.map(lambda t: t if S.model.one_line(t) else "t" + t)
opt_texts = st.one_of(st.none(), texts, st.sampled_from(["(pending)", "(none)", "\\(x", "\\"]))
file_names = st.one_of(
    st.sampled_from(["src/a.py", "a, b.py", "`tick`", "sp ace ", " lead", " ", "``x``", "a`", "é"]),
    st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\0\n\r"), min_size=1),
)
file_lists = st.one_of(st.none(), st.lists(file_names, max_size=4))
PROSE_LINES = [
    "",
    "## Notes",
    "#### deeper",
    "- a bullet",
    "(pending)",
    "(none)",
    "---",
    "> quote",
    "Some *prose* — with `code`",
    "| a | b |",
    "  indented",
    "Task 3 note",
]
prose = st.lists(st.one_of(st.sampled_from(PROSE_LINES), texts.map(lambda t: "p " + t)), max_size=4)
# a prose block that follows a list must not open with a bullet (it would join the list)
after_list = prose.map(lambda lines: lines if not lines or not lines[0].startswith("- ") else [])
gate_names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 _./+-]{0,8}", fullmatch=True).map(str.rstrip)
gates = st.builds(
    Gate,
    name=gate_names,
    command=st.one_of(st.none(), texts, st.sampled_from(["pytest -q", "a`b", "f(x): pass"])),
    result=st.sampled_from(["pass", "fail"]),
)
times = st.datetimes(
    min_value=datetime(2000, 1, 1),
    max_value=datetime(2100, 1, 1),
    timezones=st.sampled_from(
        [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]
    ),
)
tickets = st.sampled_from(["PROJ-12", "default", "a.b_c-1", "9"])
runs = st.one_of(st.none(), st.sampled_from(["20261130-101500Z", "null", "1", "~", "a:b"]))
refs = st.sampled_from(["refs/cairn/wip/PROJ-12", "(paren)", "refs/x;y"])
commits = st.from_regex(r"[0-9a-f]{7,40}", fullmatch=True)


@st.composite
def statuses(draw: st.DrawFn, items: Sequence[int | str]) -> Status:
    state: SummaryState = draw(st.sampled_from(get_args(SummaryState)))
    item: int | str | None = None
    if state in ("in_progress", "interrupted") and items and draw(st.booleans()):
        item = draw(st.sampled_from(items))
    if state != "interrupted":
        return Status(state=state, item=item)
    ref = draw(st.one_of(st.none(), refs))
    commit = draw(commits) if ref and draw(st.booleans()) else None
    reason = draw(st.sampled_from(["max_turns", "timeout", "signal", "crash", "error"]))
    return Status(state=state, item=item, reason=reason, ref=ref, commit=commit)


@st.composite
def implementation_summaries(draw: st.DrawFn) -> Summary:
    numbers = draw(st.lists(st.integers(0, 40), unique=True, max_size=5))
    tasks = [
        Task(
            number=n,
            title=draw(titles),
            status=draw(
                st.sampled_from(["pending", "in progress", "completed", "skipped", "deferred"])
            ),
            files=draw(file_lists),
            outcome=draw(opt_texts),
            notes=draw(opt_texts),
            prose=draw(prose),
        )
        for n in numbers
    ]
    section_prose: dict[ProseKey, list[str]] = {
        "preamble": draw(prose),
        "status": draw(prose),
        "tasks": draw(prose),
        "files": draw(after_list),
        "gates": draw(after_list),
        "deferred": draw(after_list),
    }
    try:
        return Summary(
            ticket=draw(tickets),
            run=draw(runs),
            mode="implementation",
            updated=draw(times),
            status=draw(statuses(numbers)),
            tasks=tasks,
            files_changed=draw(st.one_of(st.none(), st.lists(file_names, max_size=3))),
            gates=draw(st.one_of(st.none(), st.lists(gates, max_size=3))),
            deferred=draw(st.one_of(st.none(), st.lists(titles, max_size=3))),
            prose=section_prose,
        )
    except ValueError:
        reject()


@st.composite
def review_summaries(draw: st.DrawFn) -> Summary:
    ids = draw(
        st.lists(
            st.from_regex(r"[A-Za-z]{1,2}[0-9]{1,2}(-[A-Za-z]{1,2})?", fullmatch=True),
            unique=True,
            max_size=5,
        )
    )
    findings = [
        Finding(
            id=i,
            title=draw(titles),
            status=draw(st.sampled_from(["pending", "FIXED", "NOT_FIXED", "ALREADY_RESOLVED"])),
            action=draw(opt_texts),
            prose=draw(prose),
        )
        for i in ids
    ]
    try:
        return Summary(
            ticket=draw(tickets),
            run=draw(runs),
            mode="review",
            round=draw(st.integers(0, 30)),
            updated=draw(times),
            status=draw(statuses(ids)),
            findings=findings,
            gates=draw(st.one_of(st.none(), st.lists(gates, max_size=3))),
            prose={
                "preamble": draw(prose),
                "status": draw(prose),
                "findings": draw(prose),
                "gates": draw(after_list),
            },
        )
    except ValueError:
        reject()


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(implementation_summaries())
def test_implementation_round_trip(s: Summary) -> None:
    text = render(s)
    assert parse(text) == s
    assert render(parse(text)) == text


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(review_summaries())
def test_review_round_trip(s: Summary) -> None:
    text = render(s)
    assert parse(text) == s
    assert render(parse(text)) == text


def test_a_cost_that_is_not_finite_is_unknown() -> None:
    assert [S.model.Usage(cost_usd=c).cost_usd for c in (2, 0.5, None)] == [2.0, 0.5, None]
    for bad in (float("nan"), float("inf"), -float("inf")):
        assert S.model.Usage(cost_usd=bad).cost_usd is None  # never written as NaN


def test_normalises_values_so_every_model_round_trips() -> None:
    task = Task(
        number=1, title="  two\n  lines ", outcome=" \n ", notes="a\r\nb", prose=["", "x  "]
    )
    assert (task.title, task.outcome, task.notes, task.prose) == ("two lines", None, "a b", ["x"])
    for bad in ("", " \n "):
        with pytest.raises(ValueError):
            Task(number=1, title=bad)
    for path in ("a\nb", "a\rb", "a\0b", ""):
        with pytest.raises(ValueError):
            Task(number=1, title="t", files=[path])
    with pytest.raises(ValueError, match="unique"):
        Summary(
            ticket="T",
            mode="implementation",
            updated=NOW,
            status=Status(state="not_started"),
            tasks=[Task(number=1, title="a"), Task(number=1, title="b")],
        )
    with pytest.raises(ValueError, match="would read as"):
        Summary(
            ticket="T",
            mode="implementation",
            updated=NOW,
            status=Status(state="not_started"),
            tasks=[Task(number=1, title="a", prose=["### Task 2: x — pending"])],
        )
    naive = datetime(2026, 1, 1)
    with pytest.raises(ValueError, match="offset"):
        Summary(ticket="T", mode="implementation", updated=naive, status=Status(state="completed"))


# --- tolerance -------------------------------------------------------------------------------


def test_agent_prose_and_unknown_headings_survive_render_of_parse() -> None:
    edited = EXAMPLE.replace(
        "- **Notes:** (none)\n",
        "- **Notes:** (none)\n\nThe agent added this paragraph.\n\nAnd a second one.\n",
    ).replace(
        "## Files changed\n",
        "## Notes\nA reviewer's aside.\n\n## Files changed\n",
    )
    s = parse(edited)
    assert task_of(s, 0).prose == ["The agent added this paragraph.", "", "And a second one."]
    assert task_of(s, 2).prose == ["## Notes", "A reviewer's aside."]
    assert render(s) == edited
    moved = S.complete_task(s, 1, LATER, files=["src/cli.py"])
    assert "The agent added this paragraph." in render(moved)
    assert "A reviewer's aside." in render(moved)


def test_tolerates_crlf_trailing_whitespace_and_missing_fields() -> None:
    crlf = EXAMPLE.replace("\n", "  \r\n")
    assert parse(crlf) == example()
    no_notes = EXAMPLE.replace("- **Notes:** (pending)\n", "", 1)
    assert task_of(parse(no_notes), 1).notes is None


def test_list_sections_keep_items_across_blank_lines_and_prose_after_them() -> None:
    text = EXAMPLE.replace(
        "## Files changed\n(pending)\n",
        "## Files changed\n- `a.py`\n\n- `b, c.py`\nwritten by hand\n",
    ).replace(
        "## Quality gates\n(pending)\n",
        "## Quality gates\n- ruff (`ruff check src`): pass\n- pytest: fail\n",
    )
    parsed = parse(text)
    assert parsed.files_changed == ["a.py", "b, c.py"]
    assert parsed.prose["files"] == ["written by hand"]
    assert parsed.gates == [
        Gate(name="ruff", command="ruff check src", result="pass"),
        Gate(name="pytest", result="fail"),
    ]
    assert parse(render(parsed)) == parsed


# --- errors name the line --------------------------------------------------------------------


def test_unknown_task_status_names_its_line() -> None:
    text = EXAMPLE.replace("### Task 2: Docs — pending", "### Task 2: Docs — done")
    assert error_line(text) == line_no(text, "### Task 2: Docs — done")


def test_bad_heading_in_task_section_names_its_line() -> None:
    text = EXAMPLE.replace("### Task 2: Docs — pending", "### Docs — pending")
    assert error_line(text) == line_no(text, "### Docs — pending")


def test_missing_section_names_where_it_was_expected() -> None:
    text = EXAMPLE.replace("## Quality gates\n(pending)\n\n", "")
    assert error_line(text) == line_no(text, "## Deferred items")
    text = EXAMPLE.replace("\n## Deferred items\n(pending)\n", "")
    assert error_line(text) == len(text.split("\n")) - 1


def test_duplicated_section_names_its_line() -> None:
    text = EXAMPLE + "\n## Quality gates\n(none)\n"
    assert error_line(text) == len(text.split("\n")) - 2


def test_duplicated_task_heading_names_its_line() -> None:
    text = EXAMPLE.replace("### Task 2: Docs — pending", "### Task 0: Docs — pending")
    assert error_line(text) == line_no(text, "### Task 0: Docs — pending")


def test_duplicated_field_names_its_line() -> None:
    text = EXAMPLE.replace(
        "- **Outcome:** Parser handles headings.\n",
        "- **Outcome:** Parser handles headings.\n- **Outcome:** again\n",
    )
    assert error_line(text) == line_no(text, "- **Outcome:** again")


@pytest.mark.parametrize(
    "status",
    [
        "In progress — task 7 of 3",
        "In progress — task 1 of 4",
        "Not started — 0 of 3 tasks",
        "Completed — 3 of 3 tasks",
        "Interrupted — timeout after 0 of 3 tasks; no snapshot",
        "Interrupted — timeout after task 0 of 3; no snapshot",
        "Interrupted — timeout after finding 1 of 3; no snapshot",
        "In progress — finding 1 of 3",
        "Interrupted — Time Out during task 1 of 3; no snapshot",
        "Half done",
    ],
)
def test_status_line_that_disagrees_with_the_tasks_names_its_line(status: str) -> None:
    text = EXAMPLE.replace("In progress — task 1 of 3", status)
    assert error_line(text) == line_no(text, status)


# The front matter a person writes: YAML in block style (cairn writes JSON, YAML's subset).
HAND_FRONT = """\
---
format: 1
ticket: PROJ-12
run: 20261130-101500Z
mode: implementation
round: null
updated: '2026-11-30T10:15:00+00:00'
---
"""
HAND_WRITTEN = HAND_FRONT + EXAMPLE.split("---\n", 2)[2]


def test_hand_written_yaml_front_matter_reads_as_what_cairn_writes() -> None:
    assert parse(HAND_WRITTEN) == example()
    assert render(parse(HAND_WRITTEN)) == EXAMPLE


def test_bad_front_matter_names_its_line() -> None:
    assert error_line(EXAMPLE.removeprefix("---\n")) == 1
    assert error_line(EXAMPLE.replace('"mode": "implementation"', '"mode": "sideways"')) == 6
    assert error_line(EXAMPLE.replace('"round": null', '"round": 3')) == 7
    assert error_line(EXAMPLE.replace('"ticket": "PROJ-12",', '"ticket": "PROJ-12" x')) == 4
    hand = HAND_WRITTEN
    assert error_line(hand.replace("mode: implementation", "mode: a: b")) == 5
    assert error_line(hand.replace("mode: implementation", "mode: sideways")) == 5
    assert error_line(hand.replace("ticket: PROJ-12", "ticket: PROJ 12")) == 3
    assert error_line(hand.replace("round: null", "round: 3")) == 6
    assert error_line(hand.replace("updated: '2026-11-30T10:15:00+00:00'", "updated: x")) == 7
    assert error_line(hand.replace("round: null\n", "round: null\nextra: 1\n")) == 7
    text = hand.replace("---\n# Change", "# Change")
    assert error_line(text) == len(text.split("\n")) - 1
    assert error_line(hand.replace("ticket PROJ-12", "ticket PROJ-13")) == 9


def test_format_2_is_from_a_newer_cairn() -> None:
    with pytest.raises(SummaryError, match=r"s\.md:2: written by a newer cairn"):
        parse(HAND_WRITTEN.replace("format: 1", "format: 2"), source="s.md")
    with pytest.raises(SummaryError, match=r"s\.md:3: written by a newer cairn"):
        parse(EXAMPLE.replace('"format": 1', '"format": 2'), source="s.md")


def test_bad_code_span_names_its_line() -> None:
    text = EXAMPLE.replace("`src/parse.py`, `tests/test_parse.py`", "`src/parse.py` and more")
    assert error_line(text) == line_no(text, "- **Files:** `src/parse.py` and more")


# --- operations ------------------------------------------------------------------------------


def test_task_transitions_and_current_item() -> None:
    s = S.scaffold_tasks("T-1", None, [(3, "a"), (4, "b"), (5, "c")], NOW)
    assert (s.status.state, s.resolved(), s.total()) == ("not_started", 0, 3)
    s = S.complete_task(s, 4, LATER, notes="done early")
    assert s.status == Status(state="in_progress", item=3)
    assert task_of(s, 4).files == [] and s.updated == LATER
    s = S.start_task(s, 5, NOW)
    s = S.skip_task(s, 3, NOW, "not needed")
    assert s.status.item == 5 and task_of(s, 3).files == []
    s = S.start_task(s, 3, NOW)  # skipped → in progress is allowed
    s = S.defer_task(s, 3, NOW, "later")
    s = S.complete_task(s, 5, NOW, files=["x.py"])
    assert s.status.item == 5 and s.resolved() == 3
    with pytest.raises(BadInput, match="task 4 is completed; it cannot go back to in progress"):
        S.start_task(s, 4, NOW)
    with pytest.raises(BadInput, match="task 4 is completed; it cannot go back to skipped"):
        S.skip_task(s, 4, NOW, None)
    s = S.complete_task(s, 4, NOW, files=["y.py"], outcome="redone")
    assert task_of(s, 4).outcome == "redone"
    s = S.complete_task(s, 4, NOW, outcome="redone twice")  # what is not given is kept
    assert (task_of(s, 4).files, task_of(s, 4).notes) == (["y.py"], "done early")
    with pytest.raises(BadInput, match=r"no task 9 in the plan \(tasks 3–5\)"):
        S.start_task(s, 9, NOW)


def test_finalise_requires_every_task_resolved() -> None:
    s = example()
    with pytest.raises(BadInput, match=r"task 1 \(Wire the \*CLI\*\) is in progress"):
        S.finalise(s, NOW)
    s = S.complete_task(s, 1, NOW, files=["b.py", "src/parse.py"])
    with pytest.raises(BadInput, match="task 2"):
        S.finalise(s, NOW)
    s = S.defer_task(s, 2, NOW, "next sprint")
    s = S.add_deferred(s, "Docs for the CLI", NOW)
    s = S.set_gate(s, "pytest", "fail", NOW, command="pytest -q")
    s = S.set_gate(s, "pytest", "pass", NOW, command="pytest -q")
    done = S.finalise(s, LATER)
    assert done.status == Status(state="completed")
    assert done.files_changed == ["b.py", "src/parse.py", "tests/test_parse.py"]
    assert done.gates == [Gate(name="pytest", command="pytest -q", result="pass")]
    assert done.deferred == ["Docs for the CLI"]
    assert "Completed — 3 of 3 tasks" in render(done)
    assert parse(render(done)) == done


def test_review_operations() -> None:
    s = review()
    assert s.status == Status(state="in_progress", item="T3-L")
    with pytest.raises(BadInput, match="finding T3-L"):
        S.finalise(s, NOW)
    with pytest.raises(BadInput, match="F1, T3-L"):
        S.address_finding(s, "X9", "FIXED", NOW)
    with pytest.raises(BadInput, match="not one of"):
        S.address_finding(s, "F1", "pending", NOW)
    s = S.address_finding(s, "T3-L", "NOT_FIXED", NOW)
    assert "- **Action:** (none)" in render(s)
    done = S.finalise(s, NOW)
    assert "Completed — 2 of 2 findings" in render(done)
    assert done.gates == [] and done.files_changed is None


def test_mode_mismatch_and_bad_arguments_are_bad_input() -> None:
    with pytest.raises(BadInput, match="review mode"):
        S.start_task(review(), 1, NOW)
    with pytest.raises(BadInput, match="review mode"):
        S.add_deferred(review(), "x", NOW)
    with pytest.raises(BadInput, match="implementation mode"):
        S.address_finding(example(), "F1", "FIXED", NOW)
    with pytest.raises(BadInput, match="no tasks"):
        S.scaffold_tasks("T", None, [], NOW)
    with pytest.raises(BadInput, match="reason"):
        S.mark_interrupted(example(), "Bad Reason", NOW)
    with pytest.raises(BadInput, match="gate name"):
        S.set_gate(example(), "bad:name", "pass", NOW)


def test_mark_interrupted_points_at_the_task_in_progress() -> None:
    s = S.mark_interrupted(example(), "crash", NOW, ref="refs/cairn/wip/PROJ-12")
    assert s.status == Status(
        state="interrupted", item=1, reason="crash", ref="refs/cairn/wip/PROJ-12"
    )
    assert "during task 1 of 3; work saved at refs/cairn/wip/PROJ-12\n" in render(s)
    assert parse(render(s)) == s


# --- store -----------------------------------------------------------------------------------


def test_store_load_and_save(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    assert S.load(path) is None
    S.save(path, example())
    assert path.read_text(encoding="utf-8") == EXAMPLE
    assert S.load(path) == example()
    path.write_text(EXAMPLE.replace("— pending", "— nope"), encoding="utf-8")
    with pytest.raises(SummaryError, match=rf"^{re.escape(str(path))}:\d+: unknown task status"):
        S.load(path)
