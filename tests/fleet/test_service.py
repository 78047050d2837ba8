"""``cairn fleet service install|uninstall``: the unit file it writes (its command, directory,
restart policy, target and mark), where it goes, ``--dry-run``, and every bad input through the
real CLI. No systemd runs here: the commands it prints are only checked for their words."""

from __future__ import annotations

import json
import os
import plistlib
import sys
from pathlib import Path

import pytest

from cairn.errors import BadInput
from cairn.fleet import service
from helpers import assert_one_line_error, cairn, make_repo, tree_state, write


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """HOME and XDG_CONFIG_HOME of the test's own: the unit goes under them and nowhere else."""
    (tmp_path / "home").mkdir()
    return {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}


@pytest.fixture
def fleet_repo(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "my app")
    (repo / "cairn-queue").mkdir()
    return repo


def unit_dir(env: dict[str, str]) -> Path:
    return Path(env["XDG_CONFIG_HOME"]) / "systemd" / "user"


def installed(env: dict[str, str]) -> Path:
    (path,) = unit_dir(env).iterdir()
    return path


def everything(root: Path) -> tuple[object, ...]:
    """Every file's content and every directory under ``root`` (an empty one too)."""
    dirs = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir())
    return tree_state(root), dirs


def settings(content: str) -> dict[str, str]:
    return dict(
        line.split("=", 1) for line in content.splitlines() if "=" in line and line[0] != "#"
    )


def test_install_user_writes_the_unit_under_xdg_config_home(
    fleet_repo: Path, env: dict[str, str]
) -> None:
    result = cairn("fleet", "service", "install", "--user", "-C", str(fleet_repo), env=env)
    assert result.returncode == 0, result.stderr
    path = installed(env)
    assert path.name.startswith("cairn-fleet-my_app-") and path.name.endswith(".service")
    content = path.read_text()
    assert content.startswith(service.MARK)
    keys = settings(content)
    python = str(Path(sys.executable).absolute())
    assert keys["ExecStart"] == f"{python} -m cairn fleet start"
    assert keys["WorkingDirectory"] == str(fleet_repo)
    assert keys["Environment"] == f'"PATH={os.environ["PATH"]}"'
    assert keys["Restart"] == "on-failure"
    assert keys["RestartSec"] == "10s"
    assert keys["SuccessExitStatus"] == "3"  # a stop (cairn fleet stop) is no failure
    assert keys["RestartPreventExitStatus"] == "2"  # bad input waits for a person
    assert keys["KillMode"] == "process"
    assert keys["TimeoutStopSec"] == "150s"  # 2 x the default 60 s cutoff, plus 30 s
    assert keys["WantedBy"] == "default.target"
    assert "User" not in keys
    unit = path.name
    assert f"systemctl --user daemon-reload && systemctl --user enable --now {unit}" in (
        result.stdout
    )
    assert f"systemctl --user status {unit}" in result.stdout
    assert f"journalctl --user -u {unit}" in result.stdout


def test_the_stop_timeout_follows_the_cutoff(fleet_repo: Path, env: dict[str, str]) -> None:
    write(fleet_repo, "cairn.toml", "[agent]\ncutoff_timeout_ms = 200000\n")
    result = cairn("fleet", "service", "install", "--user", "-C", str(fleet_repo), env=env)
    assert result.returncode == 0, result.stderr
    assert settings(installed(env).read_text())["TimeoutStopSec"] == "430s"


def test_dry_run_writes_nothing_and_shows_the_unit(fleet_repo: Path, env: dict[str, str]) -> None:
    before = everything(Path(env["HOME"]).parent)
    result = cairn(
        "fleet", "service", "install", "--user", "--dry-run", "-C", str(fleet_repo), env=env
    )
    assert result.returncode == 0, result.stderr
    assert everything(Path(env["HOME"]).parent) == before
    assert not unit_dir(env).exists()
    assert result.stdout.startswith(service.MARK)
    assert f"would write {unit_dir(env)}/cairn-fleet-my_app-" in result.stdout


def test_the_system_unit_runs_as_the_user_at_boot(fleet_repo: Path, env: dict[str, str]) -> None:
    """Only its dry run: the real one would write /etc/systemd/system."""
    result = cairn(
        "fleet", "service", "install", "--dry-run", "--json", "-C", str(fleet_repo), env=env
    )
    if not os.access(service.SYSTEM_DIR, os.W_OK):
        assert_one_line_error(result)
        assert "--user" in result.stderr and "sudo" in result.stderr
        return
    shown = json.loads(result.stdout)
    assert shown["scope"] == "system" and shown["written"] is False
    assert shown["path"].startswith("/etc/systemd/system/cairn-fleet-my_app-")
    keys = settings(shown["content"])
    assert keys["WantedBy"] == "multi-user.target"
    assert keys["User"] == service.invoking_user(os.environ)
    assert keys["After"] == "network-online.target"
    assert shown["commands"][0].startswith("sudo systemctl daemon-reload")


def test_install_twice_is_no_change_and_a_changed_unit_is_rewritten(
    fleet_repo: Path, env: dict[str, str]
) -> None:
    args = ("fleet", "service", "install", "--user", "--json", "-C", str(fleet_repo))
    first = json.loads(cairn(*args, env=env).stdout)
    assert first["written"] and first["changed"]
    path = installed(env)
    content = path.read_text()
    second = json.loads(cairn(*args, env=env).stdout)
    assert not second["written"] and not second["changed"]
    assert path.read_text() == content
    # another PATH (a new agent CLI): the unit cairn wrote is brought up to date
    third = json.loads(
        cairn(*args, env={**env, "PATH": f"/opt/agents:{os.environ['PATH']}"}).stdout
    )
    assert third["written"] and third["changed"]
    assert '"PATH=/opt/agents:' in path.read_text()


def test_uninstall_removes_the_unit_and_its_enable_link(
    fleet_repo: Path, env: dict[str, str]
) -> None:
    assert (
        cairn("fleet", "service", "install", "--user", "-C", str(fleet_repo), env=env).returncode
        == 0
    )
    path = installed(env)
    wants = unit_dir(env) / "default.target.wants"
    wants.mkdir()
    (wants / path.name).symlink_to(path)  # what systemctl --user enable makes
    dry = cairn(
        "fleet", "service", "uninstall", "--user", "--dry-run", "-C", str(fleet_repo), env=env
    )
    assert dry.returncode == 0 and path.exists() and "would remove" in dry.stdout
    (fleet_repo / "cairn-queue").rmdir()  # no fleet any more: its service still goes
    result = cairn("fleet", "service", "uninstall", "--user", "-C", str(fleet_repo), env=env)
    assert result.returncode == 0, result.stderr
    assert not path.exists() and not (wants / path.name).is_symlink()
    assert f"systemctl --user stop {path.name}; systemctl --user daemon-reload" in result.stdout
    again = cairn("fleet", "service", "uninstall", "--user", "-C", str(fleet_repo), env=env)
    assert_one_line_error(again)
    assert "no fleet service is installed" in again.stderr


def _bad(name: str, repo: Path, env: dict[str, str]) -> tuple[list[str], str]:
    """The command line of each bad input, after setting it up; the error's fragment."""
    install = ["fleet", "service", "install", "--user", "-C", str(repo)]
    uninstall = ["fleet", "service", "uninstall", "--user", "-C", str(repo)]
    if name == "no-queue":
        (repo / "cairn-queue").rmdir()
        return install, "no fleet to supervise here: the queue cairn-queue/"
    if name == "queue-is-a-file":
        (repo / "cairn-queue").rmdir()
        write(repo, "cairn-queue", "x")
        return install, "is not a directory"
    if name == "not-a-repository":
        return ["fleet", "service", "install", "--user", "-C", str(repo.parent)], "git work tree"
    if name == "unit-dir-not-writable":
        write(Path(env["XDG_CONFIG_HOME"]), "systemd", "a file where a directory belongs")
        return install, "cannot write the unit directory"
    if name == "unwritable-dry-run":
        write(Path(env["XDG_CONFIG_HOME"]), "systemd", "a file")
        return [*install, "--dry-run"], "cannot write the unit directory"
    if name == "broken-config":
        write(repo, "cairn.toml", "[fleet]\nconcurency = 3\n")
        return install, "fleet.concurency"
    if name == "uninstall-none":
        return uninstall, "no fleet service is installed"
    unit = unit_dir(env) / f"cairn-fleet-{service.slug(repo)}.service"
    write(unit.parent, unit.name, "[Service]\nExecStart=/bin/true\n")
    if name == "install-over-a-foreign-unit":
        return install, "was not written by cairn"
    return uninstall, "was not written by cairn"  # uninstall-a-foreign-unit


@pytest.mark.parametrize(
    "name",
    [
        "no-queue",
        "queue-is-a-file",
        "not-a-repository",
        "unit-dir-not-writable",
        "unwritable-dry-run",
        "broken-config",
        "uninstall-none",
        "install-over-a-foreign-unit",
        "uninstall-a-foreign-unit",
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    name: str, fleet_repo: Path, env: dict[str, str]
) -> None:
    args, fragment = _bad(name, fleet_repo, env)
    root = fleet_repo.parent
    before = everything(root)
    result = cairn(*args, env=env)
    assert_one_line_error(result)
    assert fragment in result.stderr, result.stderr
    assert everything(root) == before
    as_json = cairn(*args, "--json", env=env)
    assert as_json.returncode == 2 and json.loads(as_json.stdout)["error"]["exit_code"] == 2


def test_a_unit_directory_without_write_permission_is_refused(
    fleet_repo: Path, env: dict[str, str]
) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes a directory whatever its mode")
    locked = unit_dir(env)
    locked.mkdir(parents=True)
    locked.chmod(0o500)
    try:
        result = cairn("fleet", "service", "install", "--user", "-C", str(fleet_repo), env=env)
        assert_one_line_error(result)
        assert "cannot write the unit directory" in result.stderr
    finally:
        locked.chmod(0o700)


def test_the_system_directory_must_be_writable(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="with --user, or run it with sudo"):
        service.writable_dir(tmp_path / "absent" / "system", user=False)
    service.writable_dir(tmp_path, user=False)  # an existing one is taken
    service.writable_dir(tmp_path / "a" / "b", user=True)  # a user one is made


def test_the_name_is_one_per_path_in_unit_characters(tmp_path: Path) -> None:
    one, two = tmp_path / "a" / "my app!", tmp_path / "b" / "my app!"
    assert service.slug(one).startswith("my_app_-") and service.slug(one) != service.slug(two)
    assert service.slug(Path("/srv/.hidden")).startswith("hidden-")
    assert service.slug(Path("/")).startswith("repo-")


def test_paths_with_spaces_and_percent_are_quoted_for_systemd(tmp_path: Path) -> None:
    where = tmp_path / "50% of it"
    text = service.systemd_unit(
        where, ["/opt/my env/bin/python", "-m", "cairn"], "/bin", user=None, stop_timeout=90
    )
    keys = settings(text)
    assert keys["WorkingDirectory"] == f"{tmp_path}/50%% of it"
    assert keys["ExecStart"] == '"/opt/my env/bin/python" -m cairn'
    with pytest.raises(BadInput, match="control character"):
        service.systemd_unit(tmp_path / "a\nb", ["/x"], "/bin", user=None, stop_timeout=90)


def test_macos_prints_a_launchd_agent_and_writes_nothing(fleet_repo: Path, tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home"), "PATH": "/usr/local/bin:/usr/bin"}
    unit = service.plan(fleet_repo, user=True, cutoff_timeout_ms=60000, platform="darwin", env=env)
    assert unit.scope == "launchd"
    assert unit.path.parent == tmp_path / "home" / "Library" / "LaunchAgents"
    plist = plistlib.loads(unit.content.encode())
    assert plist["Label"] == unit.path.stem
    assert plist["ProgramArguments"] == [
        str(Path(sys.executable).absolute()),
        "-m",
        "cairn",
        "fleet",
        "start",
    ]
    assert plist["WorkingDirectory"] == str(fleet_repo)
    assert plist["RunAtLoad"] is True
    assert plist["KeepAlive"] == {"Crashed": True}
    assert plist["EnvironmentVariables"] == {"PATH": "/usr/local/bin:/usr/bin"}
    assert plist["ExitTimeOut"] == 150
    assert unit.commands[0] == f"launchctl load -w {unit.path}"
    outcome = service.install(unit, dry_run=False)
    assert not outcome.written and not (tmp_path / "home").exists()
    assert service.uninstall_commands(unit) == [
        f"launchctl unload -w {unit.path} && rm {unit.path}"
    ]
