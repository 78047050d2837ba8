"""The scale bench's smoke runs: ``bench/scale_out.py`` with 2 workers, 2 tickets and one kill
of a busy worker's machine, Temporal only; it must report both tickets completed, the killed
segment retried, nothing lost and nothing redone (about 30 s). And one fault at its smallest:
the dev server restarted on its ports and database while a segment runs (about 20 s)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def bench(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "scale_out.py"), *args, "--json"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["failures"] == []
    return report


def test_the_scale_bench_s_smoke_run(tmp_path: Path) -> None:
    report = bench(
        *("--workers", "2", "--tickets", "2", "--max-kills", "1", "--busy-only"),
        *("--kill-every", "1.5,2.5", "--no-embedded", "--retry-jitter", "1s"),
        *("--work-dir", str(tmp_path / "bench")),
    )
    (run,) = report["runs"]
    assert run["completed"] == 2 and run["lost"] == {} and run["redone"] == []
    (kill,) = run["kills"]
    assert kill["running"]  # it hit a running segment…
    assert run["retries"] >= 1  # …which another attempt finished


def test_the_scale_bench_restarts_the_dev_server_under_a_running_segment(tmp_path: Path) -> None:
    report = bench(
        *("--fault", "temporal-restart", "--workers", "1", "--tickets", "1"),
        *("--down-seconds", "1", "--sleep", "1,1.5", "--retry-jitter", "1s"),
        *("--work-dir", str(tmp_path / "bench")),
    )
    (run,) = report["runs"]
    assert run["completed"] == 1 and run["failed_for_good"] == {}
    assert run["lost"] == {} and run["redone"] == {} and run["fleet_exit_code"] == 0
    stopped, answered = run["notes"]
    assert "stopping the Temporal dev server" in stopped
    assert "answers again on the same ports" in answered
