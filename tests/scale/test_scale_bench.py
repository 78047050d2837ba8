"""The scale bench's smoke run: ``bench/scale_out.py`` with 2 workers, 2 tickets and one kill of
a busy worker's machine, Temporal only; it must report both tickets completed, the killed
segment retried, nothing lost and nothing redone (about 30 s)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_scale_bench_s_smoke_run(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            *(sys.executable, str(ROOT / "bench" / "scale_out.py")),
            *("--workers", "2", "--tickets", "2", "--max-kills", "1", "--busy-only"),
            *("--kill-every", "1.5,2.5", "--no-embedded", "--json"),
            *("--work-dir", str(tmp_path / "bench")),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    report = json.loads(done.stdout)
    assert report["failures"] == []
    (run,) = report["runs"]
    assert run["completed"] == 2 and run["lost"] == {} and run["redone"] == []
    (kill,) = run["kills"]
    assert kill["running"]  # it hit a running segment…
    assert run["retries"] >= 1  # …which another attempt finished
