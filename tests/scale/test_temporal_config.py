"""``[fleet] engine`` and ``[temporal]``: defaults, values, strict types, config show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cairn import config
from cairn.config.records import Config, TemporalConfig
from cairn.errors import BadInput
from helpers import assert_one_line_error, cairn, git, make_repo, untouched_state, write


def bad(tmp_path: Path, text: str) -> str:
    write(tmp_path, "cairn.toml", text)
    with pytest.raises(BadInput) as caught:
        config.load(tmp_path)
    message = str(caught.value)
    assert "\n" not in message and str(tmp_path / "cairn.toml") in message
    return message


def test_defaults(tmp_path: Path) -> None:
    loaded = config.load(tmp_path)
    assert loaded.fleet.engine == "embedded"
    temporal = loaded.temporal
    assert (temporal.address, temporal.namespace, temporal.task_queue) == (
        "127.0.0.1:7233",
        "default",
        "cairn",
    )
    assert (temporal.heartbeat_timeout, temporal.tls) == ("30s", False)
    assert loaded == Config()


def test_values_from_cairn_toml(tmp_path: Path) -> None:
    write(
        tmp_path,
        "cairn.toml",
        '[fleet]\nengine = "temporal"\n'
        '[temporal]\naddress = "temporal.internal:7233"\nnamespace = "team-a"\n'
        'task_queue = "cairn.app"\nheartbeat_timeout = "45s"\ntls = true\n',
    )
    loaded = config.load(tmp_path)
    assert loaded.fleet.engine == "temporal"
    t = loaded.temporal
    assert (t.address, t.namespace) == ("temporal.internal:7233", "team-a")
    assert t.task_queue == "cairn.app"
    assert (t.heartbeat_timeout, t.tls) == ("45s", True)


def test_an_ipv6_address(tmp_path: Path) -> None:
    write(tmp_path, "cairn.toml", '[temporal]\naddress = "[::1]:7233"\n')
    assert config.load(tmp_path).temporal.address == "[::1]:7233"


@pytest.mark.parametrize(
    ("text", "key", "why"),
    [
        ('[fleet]\nengine = "celery"\n', "fleet.engine", "'embedded'"),
        ("[temporal]\nbogus = 1\n", "temporal.bogus", "unknown key"),
        ('[temporal]\naddress = "localhost"\n', "temporal", "is not host:port"),
        ('[temporal]\naddress = "host:99999"\n', "temporal", "is not host:port"),
        ('[temporal]\naddress = "http://h:7233"\n', "temporal", "is not host:port"),
        ("[temporal]\naddress = 7233\n", "temporal.address", "string"),
        ('[temporal]\nnamespace = ""\n', "temporal", "namespace '' is not a name"),
        ('[temporal]\ntask_queue = "a queue"\n', "temporal", "task_queue 'a queue' is not"),
        ("[temporal]\nheartbeat_timeout = 30\n", "temporal.heartbeat_timeout", "has no unit"),
        ('[temporal]\nheartbeat_timeout = "soon"\n', "temporal.heartbeat_timeout", "duration"),
        ('[temporal]\nheartbeat_timeout = "0s"\n', "heartbeat_timeout must be at least 1s", ""),
        ('[temporal]\ntls = "yes"\n', "temporal.tls", ""),
        ('[temporal]\ntls_cert = "c.pem"\n', "tls_cert and tls_key go together", ""),
        ('[temporal]\ntls_key = "k.pem"\n', "tls_cert and tls_key go together", ""),
        ('[temporal]\napi_key_env = "sk-123 456"\n', "is not an environment variable", ""),
        ("temporal = 3\n", "temporal", ""),
    ],
)
def test_invalid_values_name_the_key(tmp_path: Path, text: str, key: str, why: str) -> None:
    message = bad(tmp_path, text)
    assert key in message and why in message


def test_config_show_lists_every_temporal_key(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    write(repo, "cairn.toml", '[fleet]\nengine = "temporal"\n[temporal]\nnamespace = "ns"\n')
    result = cairn("config", "show", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    rows = {row["key"]: (row["value"], row["source"]) for row in json.loads(result.stdout)}
    source = str(repo / "cairn.toml")
    assert rows["fleet.engine"] == ("temporal", source)
    assert rows["temporal.namespace"] == ("ns", source)
    assert rows["temporal.address"] == ("127.0.0.1:7233", "default")
    assert rows["temporal.heartbeat_timeout"] == ("30s", "default")
    assert ("temporal.task_queue" in rows) and ("temporal.tls" in rows)


def test_a_bad_temporal_key_is_one_line_exit_2_through_the_cli(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    write(repo, "cairn.toml", '[temporal]\naddress = "nowhere"\n')
    before = untouched_state(repo)
    result = cairn("config", "show", cwd=repo)
    assert_one_line_error(result)
    assert "temporal: address 'nowhere' is not host:port" in result.stderr
    assert untouched_state(repo) == before


def test_tls_and_api_key_reach_the_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from temporalio.service import TLSConfig

    from cairn.scale.connection import api_key_of, tls_of

    (tmp_path / "c.pem").write_bytes(b"CERT")
    (tmp_path / "k.pem").write_bytes(b"KEY")
    plain = TemporalConfig()
    assert (tls_of(plain), api_key_of(plain)) == (False, None)
    mtls = TemporalConfig(tls_cert=str(tmp_path / "c.pem"), tls_key=str(tmp_path / "k.pem"))
    found = tls_of(mtls)
    assert isinstance(found, TLSConfig)
    assert (found.client_cert, found.client_private_key) == (b"CERT", b"KEY")
    cloud = TemporalConfig(api_key_env="TEMPORAL_CLOUD_KEY_OF_THIS_TEST")
    monkeypatch.setenv("TEMPORAL_CLOUD_KEY_OF_THIS_TEST", "secret")
    assert (tls_of(cloud), api_key_of(cloud)) == (True, "secret")


@pytest.mark.parametrize(
    ("section", "said"),
    [
        (
            'api_key_env = "TEMPORAL_KEY_NEVER_SET"',
            "api_key_env names TEMPORAL_KEY_NEVER_SET, which is not set",
        ),
        (
            'tls_cert = "/nonexistent/c.pem"\ntls_key = "/nonexistent/k.pem"',
            "cannot read [temporal] tls_cert /nonexistent/c.pem",
        ),
    ],
)
def test_missing_credentials_are_one_line_exit_2(tmp_path: Path, section: str, said: str) -> None:
    repo = make_repo(tmp_path / "repo")
    bare = tmp_path / "shared.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    write(repo, "cairn.toml", f'[fleet]\nengine = "temporal"\n[temporal]\n{section}\n')
    before = untouched_state(repo)
    for command in (("fleet", "status"), ("fleet", "start", "--once")):
        result = cairn(*command, cwd=repo)
        assert_one_line_error(result)
        assert said in result.stderr
    assert untouched_state(repo) == before
