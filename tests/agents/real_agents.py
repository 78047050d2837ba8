"""Helpers shared by the tests in tests/agents/ (not a test module)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cairn import summary
from cairn.modelserver import ModelServer, read_requests, user_texts
from cairn.state import journal, marker
from cairn.state.layout import artifacts
from cairn.terms import ENV_PREFIX, ENV_REQUIRE_AGENT_CLIS
from cairn.util import procs
from helpers import CliResult

ROOT = Path(__file__).resolve().parents[2]
LOCAL_BIN = ROOT / ".agents" / "node_modules" / ".bin"
TICKET = "T-1"
HANDOFF = "Do not redo completed tasks"
BUDGET = "BUDGET:"
TIMEOUT = 150  # seconds for one cairn or CLI subprocess; a hang fails instead of blocking CI
TASKS = ("One", "Two", "Three")
# Inherited variables that would point a CLI elsewhere (a real key, a proxy, an outer cairn run).
FOREIGN = ("ANTHROPIC_", "CLAUDE", "OPENAI_", "CODEX_", ENV_PREFIX)
PROXIES = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}


def find_cli(name: str) -> Path:
    found = shutil.which(name) or shutil.which(name, path=str(LOCAL_BIN))
    if found is None:
        why = f"the real {name} CLI is neither on PATH nor in {LOCAL_BIN} (.ci/run installs it)"
        if os.environ.get(ENV_REQUIRE_AGENT_CLIS) == "1":
            pytest.fail(f"{why}; CAIRN_REQUIRE_AGENT_CLIS=1 requires it")
        pytest.skip(why)
    return Path(found)


def venv_has_cairn() -> None:
    """cairn puts its interpreter's directory first on the agent's PATH; the agent's
    ``cairn task done`` works only if a ``cairn`` script is there."""
    script = Path(sys.executable).parent / "cairn"
    assert script.is_file(), f"{script} is missing: the agent's `cairn task done` would not run"


def write_tool(path: Path, content: str) -> dict[str, Any]:
    return {"name": "Write", "input": {"file_path": str(path), "content": content}}


def bash_tool(command: str) -> dict[str, Any]:
    return {"name": "Bash", "input": {"command": command, "description": command[:40]}}


def exec_tool(cmd: str) -> dict[str, Any]:
    return {"name": "exec_command", "input": {"cmd": cmd, "login": False}}


def codex_command(url: str, repo: Path, *, git_writable: bool = True) -> list[str]:
    """``codex exec`` pointed at the model server. Codex's workspace-write sandbox keeps
    ``<repo>/.git`` read-only; cairn's state and the agent's commits live there, so it is added
    as a writable root (see test_codex_workspace_write_alone_lets_cairn_report)."""
    provider = (
        f'{{name="fake",base_url="{url}/v1",wire_api="responses",env_key="OPENAI_API_KEY",'
        "request_max_retries=0,stream_max_retries=0}"
    )
    argv = ["codex", "exec", "-s", "workspace-write"]
    if git_writable:
        argv += ["-c", f'sandbox_workspace_write.writable_roots=["{repo / ".git"}"]']
    argv += ["-c", "model_provider=fake", "-c", f"model_providers.fake={provider}"]
    return [*argv, "-m", "fake-model"]


CLAUDE_COMMAND = ["claude", "--dangerously-skip-permissions"]


@dataclass
class Real:
    """A repository whose committed cairn.toml names a real agent, the plan, the model server
    the agent talks to, and the environment every subprocess gets."""

    tmp: Path
    repo: Path
    plan: Path
    server: ModelServer
    record: Path
    env: dict[str, str]
    run_leases: list[Any] = field(default_factory=list)

    # running things

    def cairn(self, *args: str, env: dict[str, str] | None = None) -> CliResult:
        proc = subprocess.run(
            [sys.executable, "-m", "cairn", *args],
            cwd=self.repo,
            env={**self.env, **(env or {})},
            capture_output=True,
            timeout=TIMEOUT,
            check=False,
        )
        return CliResult(proc.returncode, proc.stdout.decode(), proc.stderr.decode())

    def run(self, env: dict[str, str] | None = None) -> CliResult:
        return self.cairn("run", str(self.plan), "--json", env=env)

    def resume(self) -> CliResult:
        return self.cairn("resume", TICKET, "--json")

    def claude(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """``claude -p …`` by hand (no cairn run), in the repository."""
        return subprocess.run(
            ["claude", *args],
            cwd=self.repo,
            env={**self.env, **(env or {})},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=TIMEOUT,
            check=False,
        )

    # reading back

    def requests(self) -> list[dict[str, Any]]:
        return read_requests(self.record) if self.record.exists() else []

    @property
    def ticket_dir(self) -> Path:
        return self.repo / ".git" / "cairn" / "tickets" / TICKET

    @property
    def marker_path(self) -> Path:
        return self.ticket_dir / ".in-progress.yaml"

    @property
    def run_dir(self) -> Path:
        dirs = [p for p in self.ticket_dir.iterdir() if p.is_dir() and p.name[0].isdigit()]
        assert len(dirs) == 1, dirs
        return dirs[0]

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        events, warnings = journal.read(self.run_dir)
        assert warnings == []
        return [e for e in events if name is None or e["event"] == name]

    def summary(self) -> summary.Summary:
        paths = [
            a.path
            for a in artifacts(self.run_dir)
            if a.role == "coder" and a.name == "change-summary"
        ]
        loaded = summary.load(paths[-1])
        assert loaded is not None
        return loaded

    def cleanup(self) -> None:
        """Stop an agent a timed-out cairn left running (its own process group)."""
        found = marker.read(self.marker_path) if self.marker_path.exists() else None
        pid = found.dispatch.pid if found and found.dispatch else None
        if pid:
            procs.kill_group(pid)
        for lease in self.run_leases:
            with contextlib.suppress(Exception):
                lease.release()
        self.server.stop()


def agent_env(tmp: Path, url: str) -> dict[str, str]:
    """This environment without anything that points a CLI elsewhere, plus the fake keys, the
    server's URL, scratch homes, and the CLIs' directory on PATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(FOREIGN) and k.lower() not in PROXIES
    }
    home = tmp / "agent-home"
    codex_home = tmp / "codex-home"
    home.mkdir(exist_ok=True)
    codex_home.mkdir(exist_ok=True)
    bins = []
    for name in ("claude", "codex"):
        found = shutil.which(name) or shutil.which(name, path=str(LOCAL_BIN))
        if found and str(Path(found).parent) not in bins:
            bins.append(str(Path(found).parent))
    env.update(
        {
            "PATH": os.pathsep.join([*bins, env.get("PATH", os.defpath)]),
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": "sk-fake",
            "IS_SANDBOX": "1",  # --dangerously-skip-permissions as root
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "OPENAI_API_KEY": "sk-fake",
            "CODEX_HOME": str(codex_home),
            "NO_PROXY": "127.0.0.1,localhost",
        }
    )
    return env


def toml_value(value: Any) -> str:
    return json.dumps(value)  # strings, ints and lists of strings read the same in TOML


def no_traceback(result: CliResult) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert "internal error" not in result.stderr, result.stderr


def outcome(result: CliResult) -> dict[str, Any]:
    """The RunOutcome that ``--json`` prints last."""
    loaded: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return loaded


def latest(request: dict[str, Any]) -> str:
    """Everything the agent was shown since it last spoke, as one string."""
    return "\n".join(user_texts(request, latest=True))


def hook_context(request: dict[str, Any], *, newest: bool = True) -> list[str]:
    """Hook ``additionalContext`` in an Anthropic request: Claude Code 2.1.328 sends it as
    ``{"role": "system"}`` messages; ``newest``: only those after the last assistant message."""
    found: list[str] = []
    for message in request["body"]["messages"]:
        if message["role"] == "assistant" and newest:
            found = []
        elif message["role"] == "system":
            content = message["content"]
            texts = [content] if isinstance(content, str) else [b.get("text", "") for b in content]
            found += [t for t in texts if "hook additional context" in t]
    return found


def capped_then_done(repo: Path) -> dict[str, Any]:
    """Three writes that spend a 3-turn cap, then (in the next dispatch, a continuation or a
    resume of the same session) the task reported done."""
    return {
        "anthropic": [
            {"tool": write_tool(repo / "x.txt", "x\n")},
            {"tool": write_tool(repo / "y.txt", "y\n")},
            {"tool": write_tool(repo / "z.txt", "z\n")},  # the cap: 3 of 3
            {"tool": bash_tool("cairn task done 1 --files x.txt,y.txt,z.txt")},
            {"text": "Done."},
        ]
    }


def codex_provider_config(p: Real) -> None:
    """Codex pointed at the model server through its own config.toml, so cairn's config needs
    no ``agent.command`` at all (what a new user has)."""
    provider = (
        f'name = "fake"\nbase_url = "{p.server.url}/v1"\nwire_api = "responses"\n'
        'env_key = "OPENAI_API_KEY"\nrequest_max_retries = 0\nstream_max_retries = 0\n'
    )
    config = 'model_provider = "fake"\nmodel = "fake-model"\n\n[model_providers.fake]\n'
    # The test's directories are all under /tmp, which workspace-write leaves writable.
    sandbox = (
        "\n[sandbox_workspace_write]\nexclude_slash_tmp = true\nexclude_tmpdir_env_var = true\n"
    )
    (p.tmp / "codex-home" / "config.toml").write_text(config + provider + sandbox)
