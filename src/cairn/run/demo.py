"""``cairn demo``: a whole run on a throwaway project with the scripted agent (no API key).

The agent is scripted to hit its 3-turn cap in task 2 right after creating a new, untracked
file. The demo shows the cutoff, the snapshot holding that file, the partial change summary and
``cairn catchup``; then it resumes, finishes the plan, goes through a review round with a
blocking finding and its fix, and says where everything is.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

from cairn.errors import BadInput
from cairn.git import base_runner

PROJECT = {
    "README.md": "# calc\n\nA tiny calculator.\n",
    "src/calc.py": "def add(a, b):\n    return a + b\n",
    ".gitignore": "__pycache__/\n",
}

PLAN = """\
# Plan: a tiny calculator

### Task 0: Add subtraction
Add `sub(a, b)` to src/calc.py.

Acceptance criteria:
- sub(5, 3) == 2

### Task 1: Add multiplication
Add `mul(a, b)` to src/calc.py.

### Task 2: Add division
Create src/divide.py with `div(a, b)`.

Acceptance criteria:
- div(6, 3) == 2
- div(1, 0) raises ZeroDivisionError with a clear message

### Task 3: Document the functions
List every function in README.md.
"""

SCRIPT = """\
coder:
  - - cairn: [task, start, "0"]
    - append: {path: src/calc.py, content: "\\n\\ndef sub(a, b):\\n    return a - b\\n"}
    - cairn: [task, done, "0", --files, src/calc.py, --outcome, "sub(5, 3) == 2"]
    - run: git add -A && git commit -qm "Add sub"
  - - cairn: [task, start, "1"]
    - append: {path: src/calc.py, content: "\\n\\ndef mul(a, b):\\n    return a * b\\n"}
    - cairn: [task, done, "1", --files, src/calc.py, --outcome, "mul(2, 3) == 6"]
    - run: git add -A && git commit -qm "Add mul"
  - - cairn: [task, start, "2"]
    - write: {path: src/divide.py, content: "def div(a, b):\\n    return a / b\\n"}
    - say: "Started division in src/divide.py; tests next."
  - - append: {path: src/divide.py, content: "\\n\\nassert div(6, 3) == 2\\n"}
    - cairn: [task, done, "2", --files, src/divide.py, --outcome, "div(6, 3) == 2"]
    - run: git add -A && git commit -qm "Add div"
  - - cairn: [task, start, "3"]
    - append:
        path: README.md
        content: "\\nFunctions: add, sub, mul (src/calc.py), div (src/divide.py).\\n"
    - cairn: [task, done, "3", --files, README.md, --outcome, "README lists every function"]
    - cairn: [gate, Import, --result, pass, --command, "python -c 'import src.calc'"]
    - run: git add -A && git commit -qm "Document functions"
    - say: "All four tasks are done."
  - - write:
        path: src/divide.py
        content: |
          def div(a, b):
              if b == 0:
                  raise ZeroDivisionError('div: b must not be 0')
              return a / b
    - cairn: [finding, F1, --status, FIXED, --action, "div() raises a clear ZeroDivisionError"]
    - run: git add -A && git commit -qm "div refuses b == 0"
reviewer:
  - - cairn: [finding, add, F1, "div(1, 0) has no clear error", --location, "src/divide.py:2"]
    - cairn: [finding, add, S1, "Add a test module", --location, tests/]
  - - say: "No blocking findings."
"""

CONFIG = """\
[agent]
kind = "scripted"
script = "{script}"
max_turns = 3
budget_pressure_turns = 1
max_continuations = 0
cutoff_timeout_ms = 10000

[loop]
phases = ["implement", "review", "fix"]
max_rounds = 3
"""


def prepare(directory: Path) -> tuple[Path, Path]:
    """The project repository and the plan file, in ``directory``."""
    if directory.exists() and any(directory.iterdir()):
        raise BadInput(f"{directory} is not empty; pass --dir a new or empty directory")
    repo = directory / "project"
    repo.mkdir(parents=True)
    script = directory / "agent-script.yaml"
    script.write_text(SCRIPT)
    plan = directory / "DEMO-1.md"
    plan.write_text(PLAN)
    files = {**PROJECT, "cairn.toml": CONFIG.format(script=script)}
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git = base_runner(repo)
    git.run(["init", "-q", "-b", "main"])
    git.run(["config", "user.name", "cairn demo agent"])
    git.run(["config", "user.email", "agent@cairn.invalid"])
    git.run(["add", "-A"])
    git.run(["commit", "-q", "-m", "calc: add()"])
    return repo, plan


def tour(directory: Path, say: Callable[[str], None], run_display: object) -> int:
    """Play the demo; returns the exit code of the final resume (0 when all went well)."""
    from cairn import summary
    from cairn.cli.display import Display
    from cairn.run import launch
    from cairn.state import catchup
    from cairn.summary.render import status_line

    assert isinstance(run_display, Display)
    repo, plan = prepare(directory)
    say(f"\n1. A project in {repo} and a 4-task plan ({plan.name}); the scripted agent")
    say("   has a 3-turn cap and is scripted to be cut off in task 2, right after it")
    say("   creates a new, untracked file (src/divide.py).\n")
    say(f"$ cairn run {plan.name}")
    first = launch.run(repo, plan, display=run_display)
    say(f"→ {first.status} ({first.reason}), exit code {first.exit_code}\n")

    say("2. Nothing is lost. The snapshot holds the untracked file:")
    git = base_runner(repo)
    ref = f"refs/cairn/wip/{first.ticket}"
    listed = git.out(["ls-tree", "-r", "--name-only", ref]).split()
    status = git.out(["status", "--short"]).strip()
    say(f"   {ref} → {first.snapshot[:12] if first.snapshot else '?'}: {', '.join(listed)}")
    say(f"   the work tree is untouched (git status: {status.replace(chr(10), '; ')})\n")

    say("   The change summary, written at every step, says where the run stopped:")
    loaded = summary.load(Path(first.summary_path or ""))
    if loaded is not None:
        say(f"   ## Status: {status_line(loaded)}")
        for task in loaded.tasks:
            say(f"   ### Task {task.number}: {task.title} — {task.status}")
    say("")
    say(f"$ cairn catchup {first.ticket} --format context")
    report = catchup.catchup(repo, first.ticket)
    for line in textwrap.wrap(catchup.context_paragraph(report), 92):
        say(f"   {line}")
    say("")

    say(f"3. $ cairn resume {first.ticket}")
    second = launch.resume(repo, first.ticket, display=run_display)
    say(f"→ {second.status}, exit code {second.exit_code}\n")

    final = summary.load(Path(second.summary_path or ""))
    say("4. Where everything is:")
    say(f"   project:         {repo}")
    say(f"   run directory:   {second.run_dir}")
    say(f"   change summary:  {first.summary_path}")
    if final is not None and final.mode == "review":
        say(f"   review fixes:    {second.summary_path}")
    say(f"   journal:         {Path(second.run_dir) / 'run-log.jsonl'}")
    say(f"   snapshots:       git log {ref}")
    say(f"   try:             cairn status -C {repo}")
    return second.exit_code
