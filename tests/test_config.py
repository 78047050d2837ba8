"""Configuration: defaults, `cairn.toml`, `[tool.cairn]` in pyproject, errors that name the key."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from cairn import config, wip
from cairn.cli.commands.config import effective
from cairn.config.records import Config, pressure_given
from cairn.errors import BadInput
from helpers import (
    assert_one_line_error,
    cairn,
    git,
    make_repo,
    snapshot_files,
    untouched_state,
    write,
)

MiB = 1024 * 1024


def load_with(
    tmp_path: Path, cairn_toml: str | None = None, pyproject: str | None = None
) -> Config:
    if cairn_toml is not None:
        write(tmp_path, "cairn.toml", cairn_toml)
    if pyproject is not None:
        write(tmp_path, "pyproject.toml", pyproject)
    return config.load(tmp_path)


def bad(tmp_path: Path, cairn_toml: str | None = None, pyproject: str | None = None) -> str:
    with pytest.raises(BadInput) as caught:
        load_with(tmp_path, cairn_toml, pyproject)
    message = str(caught.value)
    assert "\n" not in message
    return message


# --- where values come from -----------------------------------------------------------------------


def test_defaults_without_any_file(tmp_path: Path) -> None:
    cfg = config.load(tmp_path)
    assert cfg.source is None
    assert cfg == Config()
    assert cfg.snapshot.max_new_file_bytes == 10 * MiB
    assert cfg.snapshot.max_new_files == 5000
    assert cfg.snapshot.max_new_bytes == 100 * MiB
    assert cfg.snapshot.ref_prefix == "refs/cairn/wip"
    assert cfg.snapshot.fsync is True
    assert cfg.agent.max_turns == 150
    assert cfg.agent.budget_pressure_turns == 2
    assert cfg.agent.preserve_uncommitted_work is True
    assert cfg.agent.preserve_uncommitted_work_branch is False
    assert cfg.agent.cutoff_timeout_ms == 60000
    assert cfg.roles["reviewer"].max_turns == 60
    assert cfg.roles["evaluator"].max_turns == 45
    assert cfg.loop.phases == ["implement", "review", "fix"]
    assert cfg.marker.stale_after == "24h"
    assert cfg.state_dir is None


def test_pyproject_without_tool_cairn_means_defaults(tmp_path: Path) -> None:
    cfg = load_with(tmp_path, pyproject='[project]\nname = "x"\n\n[tool.ruff]\nline-length = 99\n')
    assert cfg == Config()
    assert cfg.source is None


def test_values_from_cairn_toml(tmp_path: Path) -> None:
    cfg = load_with(
        tmp_path,
        cairn_toml=(
            "state_dir = '.cairn-state'\n"
            "[snapshot]\nmax_new_file_bytes = 100\nmax_new_files = 7\nfsync = false\n"
            "[agent]\nmax_turns = 40\nbudget_pressure_turns = 5\n"
            "preserve_uncommitted_work_branch = true\n"
            "[marker]\nstale_after = '2h'\n"
        ),
    )
    assert cfg.source == tmp_path / "cairn.toml"
    assert cfg.state_dir == ".cairn-state"
    assert cfg.snapshot.max_new_file_bytes == 100
    assert cfg.snapshot.max_new_files == 7
    assert cfg.snapshot.fsync is False
    assert cfg.snapshot.max_new_bytes == 100 * MiB  # untouched keys keep their defaults
    assert (cfg.agent.max_turns, cfg.agent.budget_pressure_turns) == (40, 5)
    assert cfg.agent.preserve_uncommitted_work_branch is True
    assert cfg.marker.stale_after == "2h"


def test_values_from_pyproject_tool_cairn(tmp_path: Path) -> None:
    cfg = load_with(
        tmp_path,
        pyproject=(
            '[project]\nname = "x"\n\n'
            "[tool.cairn.snapshot]\nmax_new_file_bytes = '2MiB'\nref_prefix = 'refs/other/wip'\n"
            "[tool.cairn.agent]\nmax_turns = 12\n"
        ),
    )
    assert cfg.source == tmp_path / "pyproject.toml"
    assert cfg.snapshot.max_new_file_bytes == 2 * MiB
    assert cfg.snapshot.ref_prefix == "refs/other/wip"
    assert cfg.agent.max_turns == 12


def test_cairn_toml_wins_over_pyproject(tmp_path: Path) -> None:
    cfg = load_with(
        tmp_path,
        cairn_toml="[snapshot]\nmax_new_file_bytes = 111\n",
        pyproject="[tool.cairn.snapshot]\nmax_new_file_bytes = 222\nmax_new_files = 3\n",
    )
    assert cfg.source == tmp_path / "cairn.toml"
    assert cfg.snapshot.max_new_file_bytes == 111
    assert cfg.snapshot.max_new_files == 5000  # not merged from pyproject


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ('"1MiB"', MiB),
        ('"500KB"', 500 * 1024),  # units are binary whether or not the "i" is written
        ('"500KiB"', 500 * 1024),
        ('"1.5MiB"', int(1.5 * MiB)),
        ('"2g"', 2 * 1024 * MiB),
        ('"10 MB"', 10 * MiB),
        ('"100"', 100),
        ('"100B"', 100),
        ("100", 100),
        ("0", 0),
    ],
)
def test_sizes_with_units(tmp_path: Path, value: str, size: int) -> None:
    cfg = load_with(tmp_path, cairn_toml=f"[snapshot]\nmax_new_file_bytes = {value}\n")
    assert cfg.snapshot.max_new_file_bytes == size


# --- errors name the key and the file -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "why"),
    [
        ("[snapshot]\nbogus = 1\n", "snapshot.bogus", "unknown key"),
        ("[bogus]\nx = 1\n", "bogus", "unknown key"),
        ("[roles.reviewer]\nfoo = 1\n", "roles.reviewer.foo", "unknown key"),
        ('[agent]\nmax_turns = "x"\n', "agent.max_turns", "integer"),
        ("[agent]\nmax_turns = 0\n", "agent.max_turns", "greater than"),
        ("[agent]\nmax_turns = 150\nbudget_pressure_turns = 200\n", "budget_pressure_turns", ""),
        ('[snapshot]\nref_prefix = "refs/heads/x"\n', "ref_prefix", "refs/heads"),
        ('[snapshot]\nref_prefix = "refs/tags"\n', "ref_prefix", ""),
        ('[snapshot]\nref_prefix = "cairn/wip"\n', "ref_prefix", ""),
        ('[snapshot]\nmax_new_file_bytes = "10 parsecs"\n', "snapshot.max_new_file_bytes", "size"),
        ("[snapshot]\nmax_new_file_bytes = -1\n", "snapshot.max_new_file_bytes", ""),
        ('[snapshot]\nfsync = "perhaps"\n', "snapshot.fsync", "boolean"),
        ('[marker]\nstale_after = "soon"\n', "marker.stale_after", "duration"),
        ("agent = 3\n", "agent", ""),
    ],
)
def test_invalid_values_name_key_and_file(tmp_path: Path, text: str, key: str, why: str) -> None:
    message = bad(tmp_path, cairn_toml=text)
    assert str(tmp_path / "cairn.toml") in message
    assert key in message
    assert why in message


def test_invalid_pyproject_names_key_and_file(tmp_path: Path) -> None:
    message = bad(tmp_path, pyproject="[tool.cairn.snapshot]\nbogus = 1\n")
    assert "snapshot.bogus" in message and str(tmp_path / "pyproject.toml") in message
    message = bad(tmp_path, pyproject="[tool]\ncairn = 3\n")
    assert "[tool.cairn]" in message and str(tmp_path / "pyproject.toml") in message


@pytest.mark.parametrize("which", ["cairn.toml", "pyproject.toml"])
def test_bad_toml_names_the_file(tmp_path: Path, which: str) -> None:
    write(tmp_path, which, "[snapshot\nmax_new_file_bytes = \n")
    with pytest.raises(BadInput) as caught:
        config.load(tmp_path)
    assert str(tmp_path / which) in str(caught.value)
    assert "TOML" in str(caught.value)


# --- through the CLI and the snapshot engine ------------------------------------------------------


@pytest.mark.parametrize(
    "broken",
    ["[snapshot]\nbogus = 1\n", "[snapshot\n", '[agent]\nmax_turns = "x"\n'],
)
def test_save_with_broken_config_uses_the_defaults_and_says_so(tmp_path: Path, broken: str) -> None:
    """The safety net never depends on a config file (issue 12, defect 12)."""
    repo = make_repo(tmp_path / "repo")
    write(repo, "cairn.toml", broken)
    write(repo, "README.md", "dirty\n")
    write(repo, "new.txt", "new\n")
    result = cairn("wip", "save", "--ticket", "T", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert "warning:" in result.stdout and str(repo / "cairn.toml") in result.stdout
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/cairn") == "refs/cairn/wip/T\n"


def test_every_command_stops_on_a_broken_config(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    write(repo, "README.md", "dirty\n")
    commit = wip.save(repo, ticket="T").commit
    assert commit is not None
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    write(repo, "pyproject.toml", "[tool.cairn.snapshot]\nref_prefix = 'refs/heads/wip'\n")
    before = untouched_state(repo)
    result = cairn("wip", "diff", commit, cwd=repo)
    assert_one_line_error(result, 2)
    assert "ref_prefix" in result.stderr and "pyproject.toml" in result.stderr
    calls: list[Callable[[], object]] = [
        lambda: wip.list_snapshots(repo),
        lambda: wip.show(repo, "T"),
        lambda: wip.diff(repo, commit),
        lambda: wip.prune(repo, older_than=0),
        lambda: wip.push(repo, str(remote)),
    ]
    for call in calls:
        with pytest.raises(BadInput, match="ref_prefix"):
            call()
    assert untouched_state(repo) == before
    assert git(remote, "for-each-ref") == ""
    # except a snapshot (issue 12, defect 12) and recovery (issue 22, item 14): they go ahead
    # with the defaults when asked to (tests/state/test_recovery_broken_config.py)
    saved = wip.save(repo, ticket="T")
    assert saved.ref == "refs/cairn/wip/T" and any("ref_prefix" in w for w in saved.warnings)


def test_save_honours_ref_prefix(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", files={"README.md": "hi\n", "cairn.toml": ""})
    write(repo, "cairn.toml", '[snapshot]\nref_prefix = "refs/mywip"\n')
    result = cairn("wip", "save", "--ticket", "T", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["ref"] == "refs/mywip/T"
    assert git(repo, "rev-parse", "refs/mywip/T").strip() == out["commit"]
    assert git(repo, "for-each-ref", "refs/cairn") == ""
    assert snapshot_files(repo, out["commit"])["cairn.toml"].startswith(b"[snapshot]")
    # reading back uses the same prefix; from a subdirectory too
    write(repo, "sub/x.txt", "x\n")
    again = wip.save(repo / "sub", ticket="T", reason="from sub")
    assert again.ref == "refs/mywip/T" and again.created
    listed = wip.list_snapshots(repo)
    assert [(s.ref, s.seq) for s in listed] == [("refs/mywip/T", 2), ("refs/mywip/T", 1)]
    assert wip.show(repo, "T~1").snapshot.commit == out["commit"]
    assert [p.ref for p in wip.prune(repo, older_than=0, dry_run=True).pruned] == ["refs/mywip/T"]
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    pushed = wip.push(repo, str(remote))
    assert pushed.pushed == ["refs/mywip/T"]
    assert git(remote, "for-each-ref", "--format=%(refname) %(objectname)").split() == [
        "refs/mywip/T",
        again.commit,
    ]


@pytest.mark.parametrize(
    ("where", "text", "cap"),
    [
        ("cairn.toml", "[snapshot]\nmax_new_file_bytes = 100\n", 100),
        ("pyproject.toml", "[tool.cairn.snapshot]\nmax_new_file_bytes = '1KiB'\n", 1024),
    ],
)
def test_save_honours_max_new_file_bytes(tmp_path: Path, where: str, text: str, cap: int) -> None:
    repo = make_repo(tmp_path / "repo", files={"README.md": "hi\n", where: text})
    write(repo, "at-cap.txt", "a" * cap)
    write(repo, "over-cap.txt", "b" * (cap + 1))
    result = wip.save(repo, ticket="T")
    assert [(s.path, s.reason, s.bytes) for s in result.skipped] == [
        ("over-cap.txt", "too_large", cap + 1)
    ]
    files = snapshot_files(repo, result.commit)
    assert files["at-cap.txt"] == b"a" * cap
    assert "over-cap.txt" not in files
    assert result.files_changed == 1


def test_max_new_file_bytes_zero_means_no_cap(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        files={"README.md": "hi\n", "cairn.toml": "[snapshot]\nmax_new_file_bytes = 0\n"},
    )
    write(repo, "big.bin", b"\0" * (2 * MiB))
    result = wip.save(repo, ticket="T")
    assert result.skipped == []
    assert len(snapshot_files(repo, result.commit)["big.bin"]) == 2 * MiB


def test_a_role_table_keeps_the_other_default_roles(tmp_path: Path) -> None:
    (tmp_path / "cairn.toml").write_text("[roles.reviewer]\nmax_turns = 10\n[roles.tester]\n")
    roles = config.load(tmp_path).roles
    assert roles["reviewer"].max_turns == 10
    assert roles["evaluator"].max_turns == 45
    assert roles["tester"].max_turns is None


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ('[agent]\ncutoff_timeout_ms = "90s"\n', "cutoff_timeout_ms", 90000),
        ("[agent]\ncutoff_timeout_ms = 1500\n", "cutoff_timeout_ms", 1500),
        ('[agent]\nmax_seconds = "1h"\n', "max_seconds", 3600.0),
        ("[agent]\nmax_seconds = 90\n", "max_seconds", 90),
    ],
)
def test_keys_named_in_a_unit_take_that_unit_or_a_duration(
    tmp_path: Path, text: str, key: str, value: float
) -> None:
    write(tmp_path, "cairn.toml", text)
    assert getattr(config.load(tmp_path).agent, key) == value


@pytest.mark.parametrize(
    "text",
    [
        '[marker]\nstale_after = "3600"\n',
        "[marker]\nstale_after = 3600\n",
        '[agent]\nmax_seconds = "60"\n',
    ],
)
def test_a_duration_key_without_a_unit_in_its_name_needs_one(tmp_path: Path, text: str) -> None:
    message = bad(tmp_path, cairn_toml=text)
    assert str(tmp_path / "cairn.toml") in message
    assert "has no unit" in message


# --- budget_pressure_turns derived from max_turns ---------------------------------------------


@pytest.mark.parametrize(("cap", "pressure"), [(1, 0), (2, 1), (3, 2), (40, 2)])
def test_pressure_default_follows_a_small_turn_cap(tmp_path: Path, cap: int, pressure: int) -> None:
    cfg = load_with(tmp_path, cairn_toml=f"[agent]\nmax_turns = {cap}\n")
    assert (cfg.agent.max_turns, cfg.agent.budget_pressure_turns) == (cap, pressure)
    assert not pressure_given(cfg)
    rows = {key: (value, source) for key, value, source in effective(cfg)}
    assert rows["agent.budget_pressure_turns"] == (pressure, "default")


def test_pressure_set_against_the_cap_names_both_keys_and_the_default(tmp_path: Path) -> None:
    message = bad(tmp_path, cairn_toml="[agent]\nmax_turns = 2\nbudget_pressure_turns = 2\n")
    assert "budget_pressure_turns (2) must be smaller than max_turns (2)" in message
    assert "defaults to 2, or max_turns - 1" in message
    cfg = load_with(tmp_path, cairn_toml="[agent]\nmax_turns = 3\nbudget_pressure_turns = 1\n")
    assert pressure_given(cfg) and cfg.agent.budget_pressure_turns == 1
