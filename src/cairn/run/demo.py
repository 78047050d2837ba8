"""The project ``cairn demo`` runs: a tiny repository, a 4-task plan and a scripted agent.

The agent is scripted to hit its 3-turn cap in task 2 right after creating a new, untracked
file; resumed, it finishes the plan, and the reviewer raises one blocking finding that the coder
then fixes. ``prepare`` lays it out; the CLI's ``cairn demo`` plays and narrates it.
"""

from __future__ import annotations

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
