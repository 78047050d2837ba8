"""Fixtures shared by every test: an isolated git environment and a fresh repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import isolate_git_env, make_repo


@pytest.fixture(autouse=True)
def isolated_git(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git_env(monkeypatch, tmp_path_factory.mktemp("home"))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")
