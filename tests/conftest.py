"""Fixtures shared by every test: an isolated git environment and a fresh repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import isolate_git_env, make_repo


@pytest.fixture(autouse=True)
def isolated_git(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git_env(monkeypatch, tmp_path_factory.mktemp("home"))
    # the suite run as a GitHub Actions job: the runs it starts report to no job of its own
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


# The inner loop (`pytest -n 2 -m "not slow"`, README) leaves out, besides the tests marked slow
# in their own files (every hypothesis property test, the real agent CLIs, the chaos campaigns),
# the groups that start servers or many processes: Temporal (tests/scale), the bad-input corpus
# (a cairn process per case), the fleet's supervisors, the browser, the fast-path parity runs, the
# broken-config matrix and the end-to-end `cairn run` sessions of tests/run (a scripted agent
# process per dispatch). CI runs everything.
SLOW_GROUPS = (
    "tests/scale/",
    "tests/corpus/",
    "tests/fleet/test_fleet_",
    "tests/fleet/test_refused",
    "tests/fleet/test_github_",
    "tests/fleet/test_dashboard_browser",
    "tests/fleet/test_review_browser",
    "tests/integrations/test_hooks_install",
    "tests/state/test_recovery_broken_config",
    "tests/run/test_run.py",
    "tests/run/test_tickets_and_trees",
    "tests/run/test_evaluate",
    "tests/run/test_no_progress",
    "tests/run/test_plan_size",
    "tests/run/test_watch",
    "tests/run/test_disk_full",
    "tests/run/test_run_budget",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(SLOW_GROUPS):
            item.add_marker(pytest.mark.slow)
    # the modules holding a slow test run first (each module kept whole, so its module fixtures
    # are built once; the order otherwise unchanged): under `-n 2` the run then ends on many
    # short tests rather than on one worker finishing a long property test or campaign alone
    # while the other idles
    slow_modules = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in slow_modules)
