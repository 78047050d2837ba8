"""Plan files: markdown task headings, checklists, YAML and JSON, and one-line errors."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import msgspec
import pytest

from cairn.errors import BadInput
from cairn.run import plan
from cairn.run.plan import Plan, PlanTask


def md(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def bad(text: str, suffix: str = ".md", source: str = "plan.md") -> str:
    """The one-line error message for parsing ``text``."""
    with pytest.raises(BadInput) as info:
        plan.parse(text, source, suffix)
    message = str(info.value)
    assert "\n" not in message
    assert info.value.exit_code == 2
    return message


# --------------------------------------------------------------------------- markdown headings

HEADINGS_PLAN = md(
    """
    # Streaming parser

    Context for the whole plan; not part of any task.

    ## Task 1: Add the tokenizer
    Write `tokenize()` in `src/parse/tokens.py`.

    It must stream.

    **Acceptance criteria:**
    - [ ] tokens carry line numbers
    - [x] empty input yields no tokens
    * handles CRLF
      and lone CR

    ## Task 2 — Add the parser
    Build on the tokenizer.

    ```python
    ### Task 9: this is code, not a task
    - [ ] nor is this a checklist item
    Acceptance criteria:
    - nor a criterion
    ```

    Acceptance criteria:
    1. parses nested lists
    2) reports the failing line

    ### Notes for task 2
    Lower-level headings stay in the body.

    ## Task 3 - Wire it into the CLI
    #### Acceptance Criteria
    - `cairn parse` exits 0

    ## Appendix
    Not part of task 3.
    """
)


def test_markdown_headings_plan() -> None:
    parsed = plan.parse(HEADINGS_PLAN, "docs/plan.md", ".md")
    assert parsed.format == "markdown-headings"
    assert parsed.title == "Streaming parser"
    assert parsed.ticket is None
    assert parsed.source == "docs/plan.md"
    assert [t.number for t in parsed.tasks] == [1, 2, 3]
    assert [t.title for t in parsed.tasks] == [
        "Add the tokenizer",
        "Add the parser",
        "Wire it into the CLI",
    ]
    first, second, third = parsed.tasks
    assert first.details.startswith("Write `tokenize()` in `src/parse/tokens.py`.\n\nIt must")
    assert first.details.endswith("and lone CR")
    assert first.acceptance == [
        "tokens carry line numbers",
        "empty input yields no tokens",
        "handles CRLF and lone CR",
    ]
    assert "### Task 9: this is code, not a task" in second.details
    assert "### Notes for task 2\nLower-level headings stay in the body." in second.details
    assert second.acceptance == ["parses nested lists", "reports the failing line"]
    assert third.details == "#### Acceptance Criteria\n- `cairn parse` exits 0"
    assert third.acceptance == ["`cairn parse` exits 0"]
    assert all(not t.done for t in parsed.tasks)


def test_level_three_headings_start_at_zero_and_stop_at_same_level_heading() -> None:
    text = md(
        """
        ## Phase 1: Setup
        ### Task 0: Create the package
        Add `pyproject.toml`.
        ### Task 1. Add the CLI entry point
        Use typer.
        ### Acceptance criteria
        - `cairn --help` works
        ## Phase 2: Polish
        Phase prose is not part of task 1.
        ### task 2: lower-case "task" is accepted ###
        """
    )
    parsed = plan.parse(text, "plan.md", ".md")
    assert [(t.number, t.title) for t in parsed.tasks] == [
        (0, "Create the package"),
        (1, "Add the CLI entry point"),
        (2, 'lower-case "task" is accepted'),
    ]
    assert parsed.tasks[0].details == "Add `pyproject.toml`."
    # An acceptance heading at the task's own level stays in the task; "## Phase 2" ends it.
    assert parsed.tasks[1].acceptance == ["`cairn --help` works"]
    assert "Phase" not in parsed.tasks[1].details
    assert parsed.title is None


def test_numbers_as_written_with_gaps() -> None:
    parsed = plan.parse("## Task 2: b\n## Task 5: c\n## Task 10: d\n", "p.md", ".md")
    assert [t.number for t in parsed.tasks] == [2, 5, 10]


def test_heading_mode_ignores_checklists_and_task_like_prose_headings() -> None:
    text = md(
        """
        ## Task overview: what this plan covers
        - [ ] not a task: the file has task headings
        ## Task 1: Only task
        - [ ] a step inside the body
        """
    )
    parsed = plan.parse(text, "p.md", ".md")
    assert parsed.format == "markdown-headings"
    assert [t.title for t in parsed.tasks] == ["Only task"]
    assert parsed.tasks[0].details == "- [ ] a step inside the body"


def test_tilde_fences_and_longer_fences() -> None:
    text = md(
        """
        ## Task 1: Document fences
        ~~~~
        ```
        ## Task 2: still inside the tilde fence
        ```
        ~~~~
        ## Task 2: Real
        """
    )
    parsed = plan.parse(text, "p.md", ".md")
    assert [t.title for t in parsed.tasks] == ["Document fences", "Real"]


def test_unclosed_fence_hides_the_rest() -> None:
    text = "## Task 1: a\n```\n## Task 2: in an unclosed fence\n"
    parsed = plan.parse(text, "p.md", ".md")
    assert [t.number for t in parsed.tasks] == [1]


def test_crlf_and_bom() -> None:
    text = "\ufeff# Title\r\n## Task 1: a\r\nbody\r\n## Task 2: b\r\n"
    parsed = plan.parse(text, "p.md", ".md")
    assert parsed.title == "Title"
    assert parsed.tasks[0].details == "body"


# --------------------------------------------------------------------------- checklist

CHECKLIST_PLAN = md(
    """
    # Implementation Plan

    - [x] 1. Set up the project structure
      - Create `src/cairn/plan.py`
      - _Requirements: 1.1_
    - [ ] 2. Parse markdown headings

      ```python
      def parse(text): ...
      - [ ] not an item: inside the fence
      ```
      Keep it small.
    * [X] T003 [P] Parse checklists
    - [ ] 4. Parse YAML
        - [ ] 4.1 nested items are details, not tasks

    ## Phase 2
    Prose ends the previous item.
    - [ ] 5. Checkpoint
    """
)


def test_checklist_plan() -> None:
    parsed = plan.parse(CHECKLIST_PLAN, "tasks.md", ".md")
    assert parsed.format == "checklist"
    assert parsed.title == "Implementation Plan"
    assert [(t.number, t.title, t.done) for t in parsed.tasks] == [
        (0, "1. Set up the project structure", True),
        (1, "2. Parse markdown headings", False),
        (2, "T003 [P] Parse checklists", True),
        (3, "4. Parse YAML", False),
        (4, "5. Checkpoint", False),
    ]
    tasks = parsed.tasks
    assert tasks[0].details == "- Create `src/cairn/plan.py`\n- _Requirements: 1.1_"
    assert tasks[1].details == (
        "```python\ndef parse(text): ...\n- [ ] not an item: inside the fence\n```\nKeep it small."
    )
    assert tasks[2].details == ""
    assert tasks[3].details == "- [ ] 4.1 nested items are details, not tasks"
    assert tasks[4].details == ""
    assert all(t.acceptance == [] for t in tasks)


def test_checklist_ignores_items_in_top_level_fences() -> None:
    text = "- [ ] real\n```\n- [ ] fenced\n```\n- [ ] also real\n"
    parsed = plan.parse(text, "p.md", ".md")
    assert [t.title for t in parsed.tasks] == ["real", "also real"]
    assert parsed.tasks[0].details == ""


# --------------------------------------------------------------------------- front matter, ticket


def test_front_matter_ticket_and_title() -> None:
    text = md(
        """
        ---
        ticket: PROJ-42
        title: Front matter title
        iteration: 3
        ---
        # Heading title loses to front matter
        ## Task 1: a
        """
    )
    parsed = plan.parse(text, "plan.md", ".md")
    assert parsed.ticket == "PROJ-42"
    assert parsed.title == "Front matter title"
    assert plan.ticket_for(parsed, Path("whatever.md")) == "PROJ-42"


def test_front_matter_without_title_uses_heading_and_numeric_ticket() -> None:
    parsed = plan.parse("---\nticket: 123\n---\n# Heading\n- [ ] a\n", "p.md", ".md")
    assert parsed.ticket == "123"
    assert parsed.title == "Heading"


def test_empty_front_matter_and_unclosed_rule() -> None:
    assert plan.parse("---\n---\n- [ ] a\n", "p.md", ".md").ticket is None
    parsed = plan.parse("---\n- [ ] a\n", "p.md", ".md")
    assert [t.title for t in parsed.tasks] == ["a"]


def test_ticket_from_file_name() -> None:
    parsed = plan.parse("- [ ] a\n", "PROJ-12-plan.md", ".md")
    assert parsed.ticket is None
    assert plan.ticket_for(parsed, Path("plans/PROJ-12-plan.md")) == "PROJ-12-plan"
    assert plan.ticket_for(parsed, Path("my plan (v2).md")) == "my-plan-v2"


def test_ticket_from_unusable_file_name() -> None:
    parsed = plan.parse("- [ ] a\n", "p.md", ".md")
    with pytest.raises(BadInput, match="cannot derive a ticket id"):
        plan.ticket_for(parsed, Path("...md"))


def test_ticket_for_revalidates_a_constructed_plan() -> None:
    constructed = Plan(
        ticket="../x", tasks=[PlanTask(number=0, title="a")], source="x", format="yaml"
    )
    with pytest.raises(BadInput, match="invalid ticket id"):
        plan.ticket_for(constructed, Path("x.yaml"))


# --------------------------------------------------------------------------- YAML and JSON

YAML_PLAN = md(
    """
    ticket: PROJ-9
    title: Structured plan
    tasks:
      - title: Add the parser
        details: |
          Parse all four formats.
        acceptance:
          - parses markdown
          - parses YAML
      - Add the CLI
      - title: Ship it
        number: 5
        done: true
        status: ignored   # unknown keys are ignored
    """
)


def test_yaml_plan() -> None:
    parsed = plan.parse(YAML_PLAN, "plan.yaml", ".yaml")
    assert parsed.format == "yaml"
    assert parsed.ticket == "PROJ-9"
    assert parsed.title == "Structured plan"
    assert [(t.number, t.title, t.done) for t in parsed.tasks] == [
        (0, "Add the parser", False),
        (1, "Add the CLI", False),
        (5, "Ship it", True),
    ]
    assert parsed.tasks[0].details == "Parse all four formats."
    assert parsed.tasks[0].acceptance == ["parses markdown", "parses YAML"]
    assert parsed.tasks[1].details == ""


def test_yml_bare_list() -> None:
    parsed = plan.parse('- "Add parser"\n- title: Add tests\n', "p.yml", ".yml")
    assert parsed.format == "yaml"
    assert [(t.number, t.title) for t in parsed.tasks] == [(0, "Add parser"), (1, "Add tests")]
    assert parsed.ticket is None
    assert parsed.title is None


def test_json_plan() -> None:
    data = {
        "ticket": "PROJ-3",
        "tasks": [
            {"title": "One", "acceptance": ["a", "b"]},
            "Two",
            {"title": "Three", "number": 7, "details": "  more  "},
        ],
    }
    parsed = plan.parse(json.dumps(data, indent="\t"), "plan.json", ".json")
    assert parsed.format == "json"
    assert parsed.ticket == "PROJ-3"
    assert [(t.number, t.title) for t in parsed.tasks] == [(0, "One"), (1, "Two"), (7, "Three")]
    assert parsed.tasks[0].acceptance == ["a", "b"]
    assert parsed.tasks[2].details == "more"


def test_json_bare_list() -> None:
    parsed = plan.parse('["a", {"title": "b"}]', "p.json", "json")
    assert [t.title for t in parsed.tasks] == ["a", "b"]


def test_unknown_suffix_tries_markdown() -> None:
    assert plan.parse("## Task 1: a\n", "PLAN", "").format == "markdown-headings"
    assert plan.parse("- [ ] a\n", "plan.todo", ".todo").format == "checklist"
    assert plan.parse("- [ ] a\n", "plan.MD", ".MD").format == "checklist"


# --------------------------------------------------------------------------- load


def test_load_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "PROJ-5.md"
    path.write_text(HEADINGS_PLAN)
    parsed = plan.load(path)
    assert parsed.source == str(path)
    assert len(parsed.tasks) == 3
    assert plan.ticket_for(parsed, path) == "PROJ-5"


def test_load_missing(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"plan .*nope\.md not found"):
        plan.load(tmp_path / "nope.md")


def test_load_directory(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="is a directory"):
        plan.load(tmp_path)


def test_load_follows_a_symlink_and_refuses_oversize(tmp_path: Path) -> None:
    real = tmp_path / "real.md"
    real.write_text("- [ ] a\n")
    link = tmp_path / "link.md"
    os.symlink(real, link)
    assert plan.load(link).tasks[0].title == "a"
    big = tmp_path / "big.md"
    big.write_bytes(b"- [ ] a\n" * (plan.PLAN_READ_LIMIT // 8 + 1))
    with pytest.raises(BadInput, match="byte limit"):
        plan.load(big)


def test_load_binary(tmp_path: Path) -> None:
    path = tmp_path / "plan.md"
    path.write_bytes(b"- [ ] a\n- [ ] b\n\x00\x01\x02")
    with pytest.raises(BadInput) as info:
        plan.load(path)
    assert str(info.value) == f"{path}:3: the plan is binary, not text; " + plan.FIX_FORMAT


def test_load_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "plan.md"
    path.write_bytes(b"- [ ] a\n- [ ] caf\xe9\n")
    with pytest.raises(BadInput) as info:
        plan.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}:2: the plan is not UTF-8 text (byte 17)")
    assert "\n" not in message


# --------------------------------------------------------------------------- errors


def test_no_tasks_markdown() -> None:
    message = bad("# Plan\n\nJust prose.\n- a bullet, not a checkbox\n")
    assert message.startswith("plan.md:1: no tasks found; ")
    assert "## Task 1: title" in message
    assert "- [ ] title" in message
    assert "'tasks' list" in message


def test_no_tasks_only_inside_fence() -> None:
    assert "no tasks found" in bad("```\n## Task 1: a\n- [ ] b\n```\n")


def test_no_tasks_structured() -> None:
    assert bad("", ".yaml", "p.yaml").startswith("p.yaml:1: no tasks found")
    assert bad("tasks: []\n", ".yaml", "p.yaml").startswith("p.yaml:1: no tasks found")
    assert bad("[]", ".json", "p.json").startswith("p.json:1: no tasks found")
    assert bad("title: x\n", ".yaml", "p.yaml").startswith("p.yaml:1: the plan has no 'tasks'")


def test_duplicate_task_number() -> None:
    text = "## Task 1: a\n\n## Task 2: b\n\n## Task 2: c\n"
    message = bad(text)
    assert message.startswith("plan.md:5: duplicate task number 2 (first used at line 3); ")


def test_decreasing_task_number() -> None:
    text = "## Task 1: a\n## Task 3: b\nbody\n### Task 2: c\n"
    message = bad(text)
    assert message.startswith("plan.md:4: task number 2 comes after task 3 (line 2); ")
    assert "increasing order" in message


@pytest.mark.parametrize(
    "heading", ["## Task 3:", "## Task 3:   ", "### Task 3 —", "## Task 3", "## Task 3 - ##"]
)
def test_empty_heading_title(heading: str) -> None:
    text = f"## Task 1: a\n{heading}\n"
    assert bad(text).startswith("plan.md:2: task 3 has an empty title; ")


def test_empty_checklist_title() -> None:
    message = bad("- [ ] a\n- [x]   \n")
    assert message.startswith("plan.md:2: checklist item 1 has an empty title; ")


@pytest.mark.parametrize("token", ["two", "1a", "1.2", "IV", "#x1"])
def test_non_numeric_task_number(token: str) -> None:
    text = f"# Plan\n## Task 1: a\n### Task {token}: x\n"
    message = bad(text)
    assert message.startswith("plan.md:3: task heading has a non-numeric number ")
    assert "number tasks with digits" in message


def test_invalid_yaml() -> None:
    text = "tasks:\n  - title: a\n  - title: [unclosed\n"
    # The parser reports where it noticed the problem: at the end of the input.
    assert bad(text, ".yaml", "p.yaml").startswith("p.yaml:4: invalid YAML: ")
    text = "tasks:\n  - title: a\n    details: x\n   bad: indent\n"
    assert bad(text, ".yaml", "p.yaml").startswith("p.yaml:4: invalid YAML: ")


def test_invalid_json() -> None:
    text = '{\n  "tasks": [\n    "a",\n    "b"\n    "c"\n  ]\n}\n'
    message = bad(text, ".json", "p.json")
    assert message.startswith("p.json:5: invalid JSON: Expecting ',' delimiter (column 5); ")


def test_tasks_not_a_list() -> None:
    text = "ticket: PROJ-1\ntasks: add the parser\n"
    message = bad(text, ".yaml", "p.yaml")
    assert message.startswith("p.yaml:2: 'tasks' must be a list, not a string; ")


def test_top_level_scalar() -> None:
    assert bad("just words\n", ".yaml", "p.yaml").startswith(
        "p.yaml:1: the plan must be a mapping with 'tasks' or a list of tasks, not a string"
    )


def test_task_without_title_yaml() -> None:
    text = "tasks:\n  - title: a\n  - details: no title here\n    acceptance: [x]\n"
    assert bad(text, ".yaml", "p.yaml").startswith("p.yaml:3: task 1 has no 'title'; ")


def test_task_without_title_json() -> None:
    text = '{\n\t"tasks": [\n\t\t{"title": "a"},\n\t\t{"details": "x"}\n\t]\n}\n'
    assert bad(text, ".json", "p.json").startswith("p.json:4: task 1 has no 'title'; ")


@pytest.mark.parametrize(
    ("snippet", "line", "problem"),
    [
        ("  - title: 42\n", 3, "task 1 'title' must be a string, not a number"),
        ("  - title: '   '\n", 3, "task 1 has an empty title"),
        ("  - title: |\n      two\n      lines\n", 3, "task 1 'title' must be one line"),
        ("  - 7\n", 3, "task 1 must be a title or a mapping with 'title', not a number"),
        ("  - title: b\n    number: -1\n", 4, "task 1 'number' must be a whole number 0 or more"),
        ("  - title: b\n    number: true\n", 4, "task 1 'number' must be a whole number 0 or"),
        ("  - title: b\n    details: [x]\n", 4, "task 1 'details' must be a string, not a list"),
        ("  - title: b\n    done: 'yes'\n", 4, "task 1 'done' must be true or false, not a string"),
    ],
)
def test_wrong_task_types(snippet: str, line: int, problem: str) -> None:
    text = "tasks:\n  - title: a\n" + snippet
    assert bad(text, ".yaml", "p.yaml").startswith(f"p.yaml:{line}: {problem}")


def test_wrong_type_line_points_at_the_key() -> None:
    text = "tasks:\n  - title: a\n  - title: b\n    details: x\n    number: -3\n"
    assert bad(text, ".yaml", "p.yaml").startswith("p.yaml:5: task 1 'number' must be")


def test_acceptance_not_a_list() -> None:
    text = "tasks:\n  - title: a\n    acceptance: it works\n"
    message = bad(text, ".yaml", "p.yaml")
    assert message.startswith(
        "p.yaml:3: task 0 'acceptance' must be a list of strings, not a string; "
    )


def test_acceptance_item_not_a_string() -> None:
    text = "tasks:\n  - title: a\n    acceptance:\n      - ok\n      - {nested: map}\n"
    message = bad(text, ".yaml", "p.yaml")
    assert message.startswith("p.yaml:5: task 0 'acceptance' item 1 must be a string, not a ")


def test_structured_duplicate_and_decreasing_numbers() -> None:
    text = "tasks:\n  - title: a\n    number: 3\n  - title: b\n    number: 3\n"
    assert bad(text, ".yaml", "p.yaml").startswith(
        "p.yaml:4: duplicate task number 3 (first used at line 2); "
    )
    text = '[{"title": "a", "number": 4},\n "b"]'
    assert bad(text, ".json", "p.json").startswith(
        "p.json:2: task number 1 comes after task 4 (line 1); "
    )


def test_invalid_ticket_in_front_matter() -> None:
    text = "---\ntitle: x\nticket: ../escape\n---\n- [ ] a\n"
    message = bad(text)
    assert message.startswith("plan.md:3: invalid ticket id '../escape': it contains '..'; ")
    assert "try --ticket" in message


def test_invalid_ticket_in_yaml_and_json() -> None:
    text = "title: x\n\nticket: 'a b'\ntasks: [a]\n"
    assert bad(text, ".yaml", "p.yaml").startswith("p.yaml:3: invalid ticket id 'a b'")
    text = '{\n  "tasks": ["a"],\n  "ticket": "-rf"\n}'
    assert bad(text, ".json", "p.json").startswith("p.json:3: invalid ticket id '-rf'")
    text = "ticket: [x]\ntasks: [a]\n"
    assert bad(text, ".yaml", "p.yaml").startswith("p.yaml:1: 'ticket' must be a string")


def test_front_matter_not_a_mapping() -> None:
    message = bad("---\n- a\n- b\n---\n- [ ] a\n")
    assert message.startswith("plan.md:2: the front matter must be a YAML mapping, not a list; ")


def test_front_matter_invalid_yaml() -> None:
    message = bad("---\nticket: x\n  title: oops\n---\n- [ ] a\n")
    assert message.startswith("plan.md:3: invalid YAML in the front matter: ")
    assert message.endswith("; fix the block between the '---' lines")


def test_binary_text_passed_to_parse() -> None:
    assert bad("- [ ] a\n\x00").startswith("plan.md:2: the plan is binary, not text; ")


# --------------------------------------------------------------------------- models and scale


def test_models_validate() -> None:
    assert PlanTask(number=0, title="  padded  ").title == "padded"
    with pytest.raises(ValueError):
        msgspec.convert({"number": -1, "title": "a"}, PlanTask)
    with pytest.raises(ValueError):
        PlanTask(number=0, title="two\nlines")
    with pytest.raises(ValueError):
        msgspec.convert({"tasks": [], "source": "x", "format": "yaml"}, Plan)


def big_markdown(count: int) -> str:
    parts = ["# Big plan\n"]
    for n in range(count):
        parts.append(
            f"## Task {n}: Step {n}\nDo thing {n}.\n\n```\n### Task 9: fenced\n```\n"
            f"**Acceptance criteria:**\n- [ ] check {n}\n- [ ] check {n} again\n\n"
        )
    return "".join(parts)


def test_a_large_plan_parses_whole() -> None:
    """2,000 tasks of every shape parse whole; their speed is bench/plans.py's (linear)."""
    parsed = plan.parse(big_markdown(2000), "big.md", ".md")
    assert len(parsed.tasks) == 2000
    assert parsed.tasks[-1].acceptance == ["check 1999", "check 1999 again"]
    checklist = "".join(f"- [ ] item {n}\n  detail {n}\n" for n in range(2000))
    assert len(plan.parse(checklist, "c.md", ".md").tasks) == 2000
    structured = "tasks:\n" + "".join(
        f"  - title: item {n}\n    acceptance: [ok]\n" for n in range(2000)
    )
    assert plan.parse(structured, "c.yaml", ".yaml").tasks[-1].title == "item 1999"
