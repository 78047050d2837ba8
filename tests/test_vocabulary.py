"""One vocabulary: every ``CAIRN_*`` variable spelled in ``cairn.envnames`` only, the old word
for a run that needs a person only where old files are read, and the final states of both
engines one set."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import get_args

from cairn import envnames, terms

ROOT = Path(__file__).resolve().parents[1]
SPELLED = ROOT / "src" / "cairn" / "envnames.py"
# Where the old word may stand: its one definition, and the test of a format 1 journal.
OLD_WORD_READERS = {
    ROOT / "src" / "cairn" / "terms.py",
    ROOT / "tests" / "state" / "test_run_format.py",
}


def python_files() -> list[Path]:
    return sorted(p for top in ("src", "tests", "bench") for p in (ROOT / top).rglob("*.py"))


def literals(path: Path) -> list[tuple[int, str]]:
    """The string constants of ``path`` (f-strings' literal parts included)."""
    tree = ast.parse(path.read_text(), str(path))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def variable_names(path: Path, root: Path = ROOT) -> list[str]:
    """Where ``path`` spells a cairn variable's name as a string of its own (or one's prefix),
    as ``file:line name``."""
    return [
        f"{path.relative_to(root)}:{line} {value}"
        for line, value in literals(path)
        if re.fullmatch(r"CAIRN_[A-Z_]*", value)
    ]


def test_every_cairn_variable_is_spelled_once() -> None:
    names = {k: v for k, v in vars(envnames).items() if k.startswith("ENV_")}
    assert all(v.startswith(envnames.ENV_PREFIX) for v in names.values())
    assert len(set(names.values())) == len(names)
    assert {k: getattr(terms, k) for k in names} == names
    found = [hit for path in python_files() if path != SPELLED for hit in variable_names(path)]
    assert found == []


def test_the_guard_sees_a_spelled_variable(tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    path.write_text('import os\nos.environ.get("CAIRN_RUN_DIR")\nx = "set CAIRN_RUN_DIR first"\n')
    assert variable_names(path, tmp_path) == ["probe.py:2 CAIRN_RUN_DIR"]


def test_the_old_word_is_only_read() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in python_files()
        if path not in OLD_WORD_READERS
        for line, value in literals(path)
        if terms.OLD_NEEDS_REVIEW in value
    ]
    assert found == []
    assert terms.run_status(terms.OLD_NEEDS_REVIEW) == "needs_review"
    assert [terms.run_status(s) for s in get_args(terms.RunStatus)] == list(
        get_args(terms.RunStatus)
    )


def test_final_states_are_one_set_of_both_engines() -> None:
    assert set(terms.FLEET_STATES) >= terms.FINAL_STATES
    assert set(terms.FINISHED) <= terms.SETTLED_STATES < terms.FINAL_STATES
    assert terms.FINAL_STATES - {"completed", "needs_review", "approved"} == terms.RETRYABLE_STATES
    assert {*terms.FINISHED, "approved"} == terms.REVIEWABLE_STATES
    ended = [s for s in terms.WORKFLOW_STATES if s in terms.FINAL_STATES]
    assert ended == ["completed", "needs_review", "interrupted", "failed", "stopped"]
    assert set(terms.FINISHED) <= set(get_args(terms.RunStatus))
