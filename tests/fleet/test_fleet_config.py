"""``[fleet]`` and ``[fleet.hooks]``: defaults, values, strict types, unknown keys, config show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cairn import config
from cairn.config.records import Config
from cairn.errors import BadInput
from helpers import assert_one_line_error, cairn, make_repo, untouched_state, write

GiB = 1024 * 1024 * 1024


def bad(tmp_path: Path, text: str) -> str:
    write(tmp_path, "cairn.toml", text)
    with pytest.raises(BadInput) as caught:
        config.load(tmp_path)
    message = str(caught.value)
    assert "\n" not in message and str(tmp_path / "cairn.toml") in message
    return message


def test_defaults(tmp_path: Path) -> None:
    fleet = config.load(tmp_path).fleet
    assert (fleet.tracker, fleet.queue, fleet.concurrency, fleet.workspace_root) == (
        "dir",
        "cairn-queue",
        2,
        None,
    )
    assert (fleet.poll_interval, fleet.max_attempts, fleet.stall_timeout) == ("30s", 3, "10m")
    assert (fleet.retry_backoff, fleet.retry_backoff_cap) == ("10s", "5m")
    assert fleet.min_free_memory == GiB
    hooks = fleet.hooks
    assert (hooks.after_create, hooks.before_run, hooks.after_run, hooks.before_remove) == (
        None,
        None,
        None,
        None,
    )
    assert hooks.timeout == "5m"
    assert config.load(tmp_path) == Config()


def test_values_from_cairn_toml(tmp_path: Path) -> None:
    write(
        tmp_path,
        "cairn.toml",
        '[fleet]\nqueue = "plans"\nconcurrency = 8\nworkspace_root = "/srv/wt"\n'
        'poll_interval = "5s"\nmax_attempts = 5\nretry_backoff = "1m"\nretry_backoff_cap = "1h"\n'
        'stall_timeout = "90s"\nmin_free_memory = "512MiB"\n'
        '[fleet.hooks]\nafter_create = "uv sync"\nbefore_remove = "make clean"\ntimeout = "2m"\n',
    )
    fleet = config.load(tmp_path).fleet
    assert (fleet.queue, fleet.concurrency, fleet.workspace_root) == ("plans", 8, "/srv/wt")
    assert (fleet.poll_interval, fleet.max_attempts, fleet.stall_timeout) == ("5s", 5, "90s")
    assert fleet.min_free_memory == 512 * 1024 * 1024
    assert (fleet.hooks.after_create, fleet.hooks.before_remove) == ("uv sync", "make clean")
    assert fleet.hooks.timeout == "2m"


@pytest.mark.parametrize(
    ("text", "key", "why"),
    [
        ("[fleet]\nbogus = 1\n", "fleet.bogus", "unknown key; fix or remove it"),
        ("[fleet.hooks]\nafter_craete = 'x'\n", "fleet.hooks.after_craete", "unknown key"),
        ('[fleet]\ntracker = "jira"\n', "fleet.tracker", "'dir'"),
        ('[fleet]\ntracker = "linear"\n', "fleet", '[fleet.linear] team = "IDE"'),
        ('[fleet.linear]\nteam = "I D E"\n', "fleet.linear", "is not a Linear team key"),
        ('[fleet.linear.states]\nstarted = " "\n', "fleet.linear.states", "states.started is"),
        ('[fleet.linear]\nbranch_url = "https://x/tree"\n', "fleet.linear", "{branch}"),
        ('[fleet]\ntracker = "github"\n', "fleet", '[fleet.github] repo = "owner/name"'),
        ('[fleet.github]\nrepo = "app"\n', "fleet.github", "is not owner/name"),
        ('[fleet.github]\napi_url = "ftp://x"\n', "fleet.github", "not an http(s) URL"),
        ('[fleet]\nnotify = ["mailto:a@b"]\n', "fleet", "notify: 'mailto:a@b' is not"),
        ('[fleet]\nnotify = "http://x"\n', "fleet.notify", ""),
        ('[fleet]\npush = "yes"\n', "fleet.push", ""),
        ('[fleet]\nremote = "--upload-pack=x"\n', "fleet", "is not a remote"),
        ('[fleet]\nbase = "-x"\n', "fleet", "base '-x' is not a branch name"),
        ('[fleet]\nbase = "a b"\n', "fleet", "base 'a b' is not a branch name"),
        ('[fleet]\nbase = "main..dev"\n', "fleet", "is not a branch name"),
        ("[fleet]\nbase = 1\n", "fleet.base", "string"),
        ("[fleet]\nconcurrency = 0\n", "fleet.concurrency", "greater than or equal to 1"),
        ('[fleet]\nconcurrency = "4"\n', "fleet.concurrency", "integer"),
        ("[fleet]\nconcurrency = 2.5\n", "fleet.concurrency", "integer"),
        ("[fleet]\nmax_attempts = 0\n", "fleet.max_attempts", "greater than"),
        ("[fleet]\npoll_interval = 30\n", "fleet.poll_interval", "has no unit"),
        ('[fleet]\nstall_timeout = "soon"\n', "fleet.stall_timeout", "not a duration"),
        ('[fleet]\nstall_timeout = "0s"\n', "stall_timeout must be longer than 0s", ""),
        ('[fleet]\nretry_backoff = "10m"\n', "retry_backoff_cap (5m) is shorter", ""),
        ('[fleet]\nmin_free_memory = "lots"\n', "fleet.min_free_memory", "size"),
        ('[fleet]\nqueue = ""\n', "queue is empty", ""),
        ('[fleet]\nworkspace_root = " "\n', "workspace_root is empty", ""),
        ("[fleet.hooks]\nafter_create = 3\n", "fleet.hooks.after_create", "string"),
        ('[fleet.hooks]\nbefore_run = "  "\n', "before_run is empty", ""),
        ('[fleet.hooks]\ntimeout = "0s"\n', "timeout must be longer than 0s", ""),
        ("fleet = 3\n", "fleet", ""),
    ],
)
def test_invalid_values_name_the_key(tmp_path: Path, text: str, key: str, why: str) -> None:
    message = bad(tmp_path, text)
    assert key in message and why in message


def test_config_show_lists_every_fleet_key(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    write(repo, "cairn.toml", '[fleet]\nconcurrency = 4\n[fleet.hooks]\nafter_create = "true"\n')
    result = cairn("config", "show", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    rows = {row["key"]: (row["value"], row["source"]) for row in json.loads(result.stdout)}
    source = str(repo / "cairn.toml")
    assert rows["fleet.concurrency"] == (4, source)
    assert rows["fleet.hooks.after_create"] == ("true", source)
    assert rows["fleet.tracker"] == ("dir", "default")
    assert rows["fleet.hooks.timeout"] == ("5m", "default")
    assert rows["fleet.min_free_memory"] == (GiB, "default")
    for key in ("queue", "workspace_root", "poll_interval", "max_attempts", "retry_backoff"):
        assert f"fleet.{key}" in rows
    text = cairn("config", "show", cwd=repo).stdout
    assert "fleet.hooks.before_remove" in text


def test_a_bad_fleet_key_is_one_line_exit_2_through_the_cli(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    write(repo, "cairn.toml", "[fleet]\nconcurency = 4\n")
    before = untouched_state(repo)
    result = cairn("config", "show", cwd=repo)
    assert_one_line_error(result)
    assert "fleet.concurency: unknown key" in result.stderr
    assert untouched_state(repo) == before


def test_tracker_push_and_notify_keys(tmp_path: Path) -> None:
    fleet = config.load(tmp_path).fleet
    assert (fleet.remote, fleet.push, fleet.pushes, fleet.notify) == ("origin", None, False, [])
    assert (fleet.github.repo, fleet.github.label) == (None, "cairn")
    assert fleet.github.api_url == "https://api.github.com"
    write(
        tmp_path,
        "cairn.toml",
        '[fleet]\ntracker = "github"\nremote = "upstream"\nnotify = ["http://127.0.0.1:9/hook"]\n'
        'dashboard_port = 8765\n[fleet.github]\nrepo = "octo/app"\nlabel = "agent"\n'
        'api_url = "http://127.0.0.1:9/api"\n',
    )
    fleet = config.load(tmp_path).fleet
    assert (fleet.tracker, fleet.remote, fleet.pushes) == ("github", "upstream", True)
    assert (fleet.notify, fleet.dashboard_port) == (["http://127.0.0.1:9/hook"], 8765)
    assert (fleet.github.repo, fleet.github.label) == ("octo/app", "agent")
    write(tmp_path, "cairn.toml", '[fleet]\npush = false\n[fleet.github]\nrepo = "o/a"\n')
    assert config.load(tmp_path).fleet.pushes is False
