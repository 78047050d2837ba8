"""``cairn hooks install|uninstall claude`` and the hooks it installs, run as Claude runs them:
real subprocesses fed the payload shapes Claude Code 2.1.328 sends."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cairn.errors import BadInput
from cairn.integrations import claude_hooks, claude_settings
from cairn.state import marker, runstate
from cairn.state.layout import discover
from cairn.terms import ENV_RUN_DIR
from helpers import assert_one_line_error, begin_run, cairn, git, make_repo, write
from integrations.hook_calls import aged_marker, payload, run_hook

EVENTS = {"SessionStart", "PreCompact", "Stop", "SessionEnd", "PostToolUse"}


def settings_of(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def cairn_commands(settings: dict[str, Any]) -> dict[str, list[str]]:
    """Event → cairn's commands in it."""
    found: dict[str, list[str]] = {}
    for event, groups in settings.get("hooks", {}).items():
        for group in groups:
            for hook in group.get("hooks", []):
                if "cairn hook claude" in hook.get("command", ""):
                    found.setdefault(event, []).append(hook["command"])
    return found


USER_SETTINGS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test)"], "deny": []},
    "env": {"FOO": "bär"},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PostToolUse": [
            {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "prettier -w"}]}
        ],
        "Notification": [{"matcher": "", "hooks": [{"type": "command", "command": "say hi"}]}],
    },
}


# --- install / uninstall ---------------------------------------------------------------------


def test_install_into_an_empty_project(repo: Path) -> None:
    (repo / "src").mkdir(exist_ok=True)
    result = cairn("hooks", "install", "claude", "-C", str(repo / "src"))
    assert result.returncode == 0, result.stderr
    path = repo / ".claude" / "settings.json"
    assert str(path) in result.stdout
    assert sys.executable in result.stdout  # it says which interpreter the hooks run
    text = path.read_text()
    assert text.endswith("}\n") and text.startswith('{\n  "hooks"')
    settings = json.loads(text)
    assert set(settings) == {"hooks"}
    commands = cairn_commands(settings)
    assert set(commands) == EVENTS
    expected = {
        "SessionStart": "session-start",
        "PreCompact": "snapshot --reason pre-compact",
        "Stop": "snapshot --reason stop",
        "SessionEnd": "snapshot --reason session-end",
        "PostToolUse": "heartbeat",
    }
    prefix = f"{shlex.quote(sys.executable)} -m cairn hook claude"
    assert commands == {event: [f"{prefix} {args}"] for event, args in expected.items()}
    for event, groups in settings["hooks"].items():
        entry = {"type": "command", "command": commands[event][0]}
        assert groups == [{"matcher": "*", "hooks": [entry]}]


def test_merge_keeps_the_users_settings_is_idempotent_and_uninstalls_cleanly(
    repo: Path,
) -> None:
    path = repo / ".claude" / "settings.json"
    write(repo, ".claude/settings.json", json.dumps(USER_SETTINGS, indent=4))
    first = cairn("hooks", "install", "claude", "--project", cwd=repo)
    assert first.returncode == 0, first.stderr
    installed = settings_of(path)
    # every other key kept exactly, in order; the user's hooks kept and first in their events
    assert list(installed) == list(USER_SETTINGS)
    for key in ("model", "permissions", "env"):
        assert installed[key] == USER_SETTINGS[key]
    hooks = installed["hooks"]
    assert hooks["Notification"] == USER_SETTINGS["hooks"]["Notification"]
    assert hooks["Stop"][0] == USER_SETTINGS["hooks"]["Stop"][0]
    assert hooks["PostToolUse"][0] == USER_SETTINGS["hooks"]["PostToolUse"][0]
    assert set(cairn_commands(installed)) == EVENTS
    assert all(len(commands) == 1 for commands in cairn_commands(installed).values())
    assert '"FOO": "bär"' in path.read_text()  # non-ASCII stays readable

    before = path.read_bytes()
    again = cairn("hooks", "install", "claude", cwd=repo)
    assert again.returncode == 0, again.stderr
    assert "already installed" in again.stdout
    assert path.read_bytes() == before

    removed = cairn("hooks", "uninstall", "claude", cwd=repo)
    assert removed.returncode == 0, removed.stderr
    assert str(path) in removed.stdout
    assert path.read_text() == json.dumps(USER_SETTINGS, indent=4)  # byte for byte
    nothing = cairn("hooks", "uninstall", "claude", cwd=repo)
    assert nothing.returncode == 0 and "no cairn hooks" in nothing.stdout
    assert settings_of(path) == USER_SETTINGS


def test_uninstall_removes_what_install_created(repo: Path) -> None:
    path = repo / ".claude" / "settings.json"
    assert cairn("hooks", "uninstall", "claude", cwd=repo).returncode == 0
    assert not path.exists()
    assert cairn("hooks", "install", "claude", cwd=repo).returncode == 0
    removed = cairn("hooks", "uninstall", "claude", cwd=repo)
    assert removed.returncode == 0 and "gone again" in removed.stdout
    assert not path.exists() and not (repo / ".claude").exists()
    assert list((repo / ".git" / "cairn" / "claude-settings").iterdir()) == []
    # a .claude/ that was there (with something else in it) stays
    write(repo, ".claude/commands/x.md", "mine\n")
    assert cairn("hooks", "install", "claude", "--local", cwd=repo).returncode == 0
    assert cairn("hooks", "uninstall", "claude", "--local", cwd=repo).returncode == 0
    assert sorted(p.name for p in (repo / ".claude").iterdir()) == ["commands"]


@pytest.mark.parametrize(
    "original",
    [
        b'{\n\t"model": "opus",\n\t"env": {"A": "1"}\n}',
        b'{"model":"opus","hooks":{"Stop":[{"hooks":[{"type":"command","command":"echo"}]}]}}\n',
        b'\xef\xbb\xbf{\n    "model":   "opus"  ,\n    "x": "\\u00e9"\n}\n\n',
        b"",
    ],
    ids=["tabs-no-newline", "minified", "bom-odd-spacing", "empty"],
)
def test_uninstall_restores_the_original_bytes(repo: Path, original: bytes) -> None:
    path = write(repo, ".claude/settings.json", original)
    path.chmod(0o600)
    assert cairn("hooks", "install", "claude", cwd=repo).returncode == 0
    assert cairn("hooks", "install", "claude", cwd=repo).returncode == 0  # again: no change
    assert set(cairn_commands(settings_of(path))) == EVENTS
    removed = cairn("hooks", "uninstall", "claude", cwd=repo)
    assert removed.returncode == 0, removed.stderr
    assert "byte for byte" in removed.stdout
    assert path.read_bytes() == original
    assert path.stat().st_mode & 0o777 == 0o600


def test_install_keeps_the_files_indentation(repo: Path) -> None:
    path = write(repo, ".claude/settings.json", '{\n\t"model": "opus"\n}')
    assert cairn("hooks", "install", "claude", cwd=repo).returncode == 0
    text = path.read_text()
    assert text.startswith('{\n\t"model": "opus",\n\t"hooks": {\n\t\t"SessionStart"')
    assert not text.endswith("\n")


def test_uninstall_after_the_user_edited_the_file_takes_out_only_cairns_entries(
    repo: Path,
) -> None:
    path = write(repo, ".claude/settings.json", '{\n    "model": "opus"\n}\n')
    assert cairn("hooks", "install", "claude", cwd=repo).returncode == 0
    edited = settings_of(path)
    edited["env"] = {"B": "2"}
    path.write_text(json.dumps(edited, indent=4) + "\n")
    removed = cairn("hooks", "uninstall", "claude", cwd=repo)
    assert removed.returncode == 0 and "only cairn's entries" in removed.stdout
    assert path.read_text() == '{\n    "model": "opus",\n    "env": {\n        "B": "2"\n    }\n}\n'
    # a file cairn created and the user emptied again goes, as install found it: absent
    other = repo / ".claude" / "settings.local.json"
    assert cairn("hooks", "install", "claude", "--local", cwd=repo).returncode == 0
    other.write_text(json.dumps(settings_of(other)))
    assert cairn("hooks", "uninstall", "claude", "--local", cwd=repo).returncode == 0
    assert not other.exists()


def test_reinstall_replaces_an_old_interpreter_path(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    old = "/old/venv/bin/python -m cairn hook claude session-start"
    mine = {"type": "command", "command": "echo mine"}
    path.write_text(
        json.dumps(
            {"hooks": {"SessionStart": [{"hooks": [mine, {"type": "command", "command": old}]}]}}
        )
    )
    result = claude_settings.install(path)
    assert {c.event: c.action for c in result.changes}["SessionStart"] == "updated"
    groups = settings_of(path)["hooks"]["SessionStart"]
    assert groups[0] == {"hooks": [mine]}  # the user's hook stays in its group
    assert cairn_commands(settings_of(path))["SessionStart"] == [
        claude_settings.hook_command("session-start")
    ]


def test_user_scope_edits_home(repo: Path) -> None:
    home = Path(os.environ["HOME"])
    path = home / ".claude" / "settings.json"
    result = cairn("hooks", "install", "claude", "--user", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert str(path) in result.stdout
    assert set(cairn_commands(settings_of(path))) == EVENTS
    assert not (repo / ".claude").exists()
    assert cairn("hooks", "uninstall", "claude", "--user", cwd=repo).returncode == 0
    assert not path.exists() and not path.parent.exists()  # neither was there before


def test_invalid_json_is_bad_input_and_nothing_is_written(repo: Path) -> None:
    path = write(repo, ".claude/settings.json", '{"hooks": {,}\n')
    before = path.read_bytes(), path.stat().st_mtime_ns
    for verb in ("install", "uninstall"):
        result = cairn("hooks", verb, "claude", cwd=repo)
        assert_one_line_error(result)
        assert str(path) in result.stderr and "not valid JSON" in result.stderr
        assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    not_an_object = write(repo, ".claude/settings.json", '{"hooks": []}')
    with pytest.raises(BadInput, match='"hooks" is not a JSON object'):
        claude_settings.install(not_an_object)
    with pytest.raises(BadInput, match="not a JSON object"):
        claude_settings.install(write(repo, ".claude/settings.json", "[]"))
    assert_one_line_error(cairn("hooks", "install", "claude", "--user", "--project", cwd=repo))
    assert_one_line_error(cairn("hooks", "install", "codex", cwd=repo))


def test_outside_a_repository_project_scope_is_bad_input(tmp_path: Path) -> None:
    assert_one_line_error(cairn("hooks", "install", "claude", cwd=tmp_path))
    assert not (tmp_path / ".claude").exists()


# --- the hooks themselves --------------------------------------------------------------------


def interrupted_run(repo: Path) -> None:
    """An unfinished run of ticket main whose owner is gone (cut off, marker kept)."""
    ref, lease = begin_run(repo, "main", ["A", "B"])
    runstate.interrupt(ref, lease, "signal")


def test_session_start_tells_claude_about_an_interrupted_run(repo: Path) -> None:
    interrupted_run(repo)
    done = run_hook("session-start", payload("SessionStart", repo, source="startup"), repo / "src")
    assert (done.returncode, done.stderr) == (0, b"")
    reply = json.loads(done.stdout)
    assert reply["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = reply["hookSpecificOutput"]["additionalContext"]
    assert "You were in the middle of" in context
    assert "ticket main" in context and "Resume?" in context
    assert "cairn resume main" in context


def test_session_start_says_nothing_for_a_fresh_repo(repo: Path) -> None:
    done = run_hook("session-start", payload("SessionStart", repo, source="resume"), repo)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_snapshot_saves_a_dirty_tree_and_prints_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", branch="feature/PROJ-7")
    write(repo, "src/app.py", "changed\n")
    write(repo, "new.txt", "untracked\n")
    ref = "refs/cairn/wip/feature-PROJ-7"
    head = git(repo, "rev-parse", "HEAD")
    done = run_hook("snapshot --reason stop", payload("Stop", repo), repo)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    commit = git(repo, "rev-parse", "--verify", ref).strip()
    assert "claude stop" in git(repo, "log", "-1", "--format=%B", commit)
    assert "new.txt" in git(repo, "ls-tree", "-r", "--name-only", commit)
    assert git(repo, "rev-parse", "HEAD") == head
    again = run_hook("snapshot --reason session-end", payload("SessionEnd", repo), repo)
    assert (again.returncode, again.stdout, again.stderr) == (0, b"", b"")
    assert git(repo, "rev-parse", ref).strip() == commit  # unchanged tree: no new snapshot


def test_heartbeat_moves_last_updated(repo: Path) -> None:
    interrupted_run(repo)
    path, aged = aged_marker(repo)
    done = run_hook("heartbeat", payload("PostToolUse", repo), repo)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    now = marker.read(path)
    assert now is not None and now.last_updated > aged.last_updated
    assert msgspec.structs.replace(now, last_updated=aged.last_updated) == aged  # nothing else


def test_heartbeat_rewrites_a_hand_written_yaml_marker_as_json(repo: Path) -> None:
    _, _, layout = discover(repo)
    path = layout.marker_path("main")
    path.parent.mkdir(parents=True)
    path.write_text(
        "skill: impl\nphase: implement\nstarted_at: 2026-11-29T10:00:00+02:00\n"
        "last_updated: 2026-11-29 11:00:00\n"
    )
    before = marker.read(path)
    done = run_hook("heartbeat", payload("PostToolUse", repo), repo)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    text = path.read_text()
    now = marker.parse(text, path)
    assert before is not None and now.last_updated > before.last_updated
    assert msgspec.structs.replace(now, last_updated=before.last_updated) == before
    assert text == marker.render(now)  # JSON now


@pytest.mark.parametrize(
    "text",
    [
        '{"phase": "implement", "last_updated": ',  # cut off
        '{"version": 2, "phase": "p", "started_at": "2026-11-29T10:00:00Z", "last_updated": "x"}',
        "phase: implement\nstarted_at: soon\nlast_updated: 2026-11-29\n",
    ],
)
def test_heartbeat_writes_nothing_to_a_marker_that_does_not_validate(repo: Path, text: str) -> None:
    _, _, layout = discover(repo)
    path = layout.marker_path("main")
    path.parent.mkdir(parents=True)
    path.write_text(text)
    done = run_hook("heartbeat", payload("PostToolUse", repo), repo)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert path.read_text() == text
    assert sorted(p.name for p in path.parent.iterdir()) == [".in-progress.yaml", ".lock"]


def test_heartbeat_finds_the_marker_where_state_dir_says(repo: Path) -> None:
    """With a config file, the heartbeat loads it: its ``state_dir`` is where the marker is."""
    write(repo, "cairn.toml", 'state_dir = "elsewhere"\n')
    interrupted_run(repo)
    path, aged = aged_marker(repo)
    assert path.is_relative_to(repo / "elsewhere")
    done = run_hook("heartbeat", payload("PostToolUse", repo), repo)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    now = marker.read(path)
    assert now is not None and now.last_updated > aged.last_updated


def test_heartbeat_finds_the_ticket_run_from_this_branch(repo: Path) -> None:
    """On branch main, a run of ticket ``plan`` (remembered in branches.json) gets the beat."""
    from cairn.state import branches

    ref, lease = begin_run(repo, "plan", ["A"])
    runstate.interrupt(ref, lease, "signal")
    _, _, layout = discover(repo)
    branches.remember(layout, "main", "plan")
    path, aged = aged_marker(repo, "plan")
    done = run_hook("heartbeat", payload("PostToolUse", repo), repo)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    now = marker.read(path)
    assert now is not None and now.last_updated > aged.last_updated
    assert not layout.marker_path("main").exists()


def test_heartbeat_without_a_marker_writes_nothing(repo: Path) -> None:
    _, _, layout = discover(repo)
    done = run_hook("heartbeat", payload("PostToolUse", repo), repo)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert not layout.tickets_dir.exists()


@pytest.mark.parametrize("args", ["session-start", "snapshot --reason pre-compact", "heartbeat"])
def test_hooks_never_break_the_agent(tmp_path: Path, args: str) -> None:
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    write(outside, "file.txt")
    for stdin in (
        b"\x00\xff garbage",
        payload("SessionStart", outside),
        payload("SessionStart", tmp_path / "missing"),
    ):
        done = run_hook(args, stdin, outside)
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b""), stdin


def test_hooks_step_aside_under_cairn_run(repo: Path) -> None:
    interrupted_run(repo)
    under_run = {ENV_RUN_DIR: str(repo / ".git" / "cairn")}
    shape = {"cwd": str(repo), "hook_event_name": "SessionStart", "source": "startup"}
    assert claude_hooks.session_start(shape, under_run) is None
    assert claude_hooks.heartbeat(shape, under_run) is False
    assert claude_hooks.session_start(shape, {}) is not None
    assert claude_hooks.heartbeat(shape, {}) is True


def test_install_local_keeps_its_file_out_of_git(repo: Path) -> None:
    """(issue 22) ``--local`` wrote ``.claude/settings.local.json`` and git offered it for the
    next commit (with this machine's interpreter path in it). It goes to ``.git/info/exclude``
    unless git ignores it already; uninstalling takes that entry out once the file is gone."""
    exclude = repo / ".git" / "info" / "exclude"
    original = exclude.read_bytes()
    done = cairn("hooks", "install", "claude", "--local", "--json", cwd=repo / "src")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["excluded"] == str(exclude)
    assert (repo / ".claude" / "settings.local.json").is_file()
    assert git(repo, "status", "--porcelain") == ""
    assert exclude.read_bytes().startswith(original)
    assert exclude.read_text().count("/.claude/settings.local.json") == 1
    again = cairn("hooks", "install", "claude", "--local", "--json", cwd=repo)
    assert json.loads(again.stdout)["excluded"] is None  # ignored already: no second entry
    assert exclude.read_text().count("/.claude/settings.local.json") == 1
    gone = cairn("hooks", "uninstall", "claude", "--local", cwd=repo)
    assert gone.returncode == 0 and "taken out of" in gone.stdout
    assert exclude.read_bytes() == original


def test_install_local_leaves_a_file_git_ignores_already_alone(repo: Path) -> None:
    write(repo, ".gitignore", ".claude/\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore .claude")
    exclude = repo / ".git" / "info" / "exclude"
    original = exclude.read_bytes()
    done = cairn("hooks", "install", "claude", "--local", cwd=repo)
    assert done.returncode == 0 and "info/exclude" not in done.stdout
    assert exclude.read_bytes() == original and git(repo, "status", "--porcelain") == ""
    project = cairn("hooks", "install", "claude", "--project", "--json", cwd=repo)
    assert json.loads(project.stdout)["excluded"] is None  # the shared file is meant for git
