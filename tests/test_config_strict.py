"""A config cairn cannot read exactly is bad input, never ignored or guessed at (issue 12,
defects 3 and 4): a binary ``cairn.toml`` was an internal error, a ``cairn.toml`` that is a
directory was silently skipped, a misspelt phase ran a loop without its review, and
``fsync = "yes"`` was taken for true."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import assert_one_line_error, cairn, untouched_state, write

CASES = {
    "binary": (b"\x00\x01\x02\xff[agent]\n", "binary"),
    "not-utf8": (b"[agent]\nkind = '\xff\xfe'\n", "UTF-8"),
    "misspelt-phase": (b'[loop]\nphases = ["implement", "reveiw", "fix"]\n', "loop.phases.1"),
    "no-phases": (b"[loop]\nphases = []\n", "loop.phases"),
    "fsync-yes": (b'[snapshot]\nfsync = "yes"\n', "snapshot.fsync"),
    "fsync-1": (b"[snapshot]\nfsync = 1\n", "snapshot.fsync"),
    "turns-as-text": (b'[agent]\nmax_turns = "60"\n', "agent.max_turns"),
    "role-turns-as-text": (b'[roles.reviewer]\nmax_turns = "6"\n', "roles.reviewer.max_turns"),
    "rounds-float": (b"[loop]\nmax_rounds = 2.5\n", "loop.max_rounds"),
}


@pytest.mark.parametrize("case", sorted(CASES))
# (status, catchup and the wip commands go on with the defaults and a warning instead: issue 22,
# tests/state/test_recovery_broken_config.py)
@pytest.mark.parametrize("command", [("config", "show"), ("resume", "T-1"), ("wip", "diff", "T-1")])
def test_a_config_that_is_not_exactly_right_is_one_line_exit_2(
    repo: Path, case: str, command: tuple[str, ...]
) -> None:
    content, says = CASES[case]
    write(repo, "cairn.toml", content)
    before = untouched_state(repo)
    result = cairn(*command, cwd=repo)
    assert_one_line_error(result)
    assert says in result.stderr and "cairn.toml" in result.stderr
    assert "internal error" not in result.stderr
    assert untouched_state(repo) == before


@pytest.mark.parametrize("name", ["cairn.toml", "pyproject.toml"])
def test_a_config_file_that_is_a_directory_is_not_ignored(repo: Path, name: str) -> None:
    (repo / name).mkdir()
    (repo / name / "x").write_text("[agent]\n")
    result = cairn("config", "show", cwd=repo)
    assert_one_line_error(result)
    assert f"{name} is not a regular file" in result.stderr


def test_valid_values_of_every_type_still_load(repo: Path) -> None:
    write(
        repo,
        "cairn.toml",
        '[snapshot]\nfsync = false\nmax_new_file_bytes = "1MiB"\n\n'
        "[agent]\nmax_turns = 9\nmax_seconds = 60\n\n"
        '[loop]\nphases = ["implement", "evaluate", "review", "fix"]\n\n'
        '[marker]\nstale_after = "2h"\n',
    )
    result = cairn("config", "show", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
