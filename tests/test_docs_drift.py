"""Where the docs had drifted from the code (issue 22): a fixture path outside the repository,
the agent kinds of the config example, the exit-code table (Ctrl+C is 130, but 3 in a run),
pages linking to themselves by file name, config keys no page documents."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from cairn.agents import ADAPTERS
from cairn.cli.commands.config import effective
from cairn.config.records import Config
from cairn.errors import ExitCode
from doc_blocks import ROOT, blocks
from helpers import git, make_repo, write

DOCS = sorted((ROOT / "docs").glob("*.md"))


def test_fixture_paths_are_the_repositorys_and_exist() -> None:
    for doc in [*DOCS, ROOT / "README.md"]:
        for path in re.findall(r"[\w/.~-]*fixtures/[\w/.-]*", doc.read_text()):
            assert path.startswith("tests/fixtures/"), f"{doc.name}: {path}"
            assert (ROOT / path.rstrip(".")).exists(), f"{doc.name}: {path}"


def test_no_page_links_to_itself_by_file_name() -> None:
    for doc in DOCS:
        assert f"]({doc.name}" not in doc.read_text(), f"{doc.name}: use an #anchor"


def test_the_config_example_names_every_agent_kind() -> None:
    (example,) = blocks("cli.md", "toml")
    line = next(line for line in example.splitlines() if re.match(r"#\s*kind\s*=", line))
    assert set(re.findall(r'"([a-z-]+)"', line)) == set(ADAPTERS)


def documented_keys() -> set[str]:
    """Every ``key`` or ``table.key`` the TOML examples of the docs show, commented or not."""
    found = set()
    for doc in DOCS:
        for example in blocks(doc.name, "toml"):
            table = ""
            for line in example.splitlines():
                header = re.match(r"\s*#?\s*\[([a-z0-9_.-]+)\]", line)
                if header:  # [agents.NAME] documents the table agents
                    table = header.group(1) + "."
                    found.add(header.group(1).split(".")[0])
                    continue
                key = re.match(r"\s*#?\s*([a-z_]+)\s*=", line)
                if key:
                    found.add(table + key.group(1))
    return found


def test_every_config_key_is_documented() -> None:
    keys = {key for key, _, _ in effective(Config())}
    assert keys - documented_keys() == set()
    (example,) = blocks("cli.md", "toml")
    assert example.lstrip().startswith("# state_dir"), "a top-level key goes above every table"


def test_the_exit_code_table_is_the_codes_cairn_returns() -> None:
    text = (ROOT / "docs" / "cli.md").read_text().split("## Exit codes", 1)[1]
    table = text.split("\n\n", 2)[1]
    rows = {int(m) for m in re.findall(r"^\| (\d+) \|", table, re.M)}
    assert rows == {int(code) for code in ExitCode}
    assert "Ctrl+C or SIGTERM" in table.split("| 3 |")[1].split("\n")[0]
    assert "Ctrl+C to any other command" in table.split("| 130 |")[1]


def test_ctrl_c_to_a_command_that_is_not_a_run_exits_130(tmp_path: Path) -> None:
    """(A run cut off by Ctrl+C exits 3: tests/run/test_run.py.)"""
    repo = make_repo(tmp_path / "repo")
    started = tmp_path / "filter-started"
    git(repo, "config", "filter.slow.clean", f"touch {started}; sleep 60; cat")
    write(repo, ".gitattributes", "*.slow filter=slow\n")
    write(repo, "data.slow", "x")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn", "wip", "save", "--ticket", "T-1"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not started.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert err == "cairn: error: interrupted\n"
    assert git(repo, "for-each-ref", "refs/cairn") == ""
