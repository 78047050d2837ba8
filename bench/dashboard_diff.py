"""The dashboard's memory under big diffs (issue 22): a ticket whose branch and latest snapshot
each hold an 8 MB diff, 50 ticket pages requested at once from a real ``cairn fleet dashboard``.

    .venv/bin/python bench/dashboard_diff.py [--requests 50] [--mib 8]

Reports the server's resident memory after one warm-up page (VmRSS) and its peak (VmHWM) once
the 50 answers are in. A page reads at most the shown 200 KB of each diff (streamed from git and
cut), so the peak no longer follows the size of the diff. Exits 1 when the peak grew by more
than 150 MiB (tests/fleet/test_dashboard_faces.py asserts the same).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
from pathlib import Path

from common import log, machine

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
# the scenario lives with the test that asserts it, imported as the tests import it
# (`fleet.big_diff`, tests/ on the path); bench/, whose fleet.py would shadow that folder, is off
# the path meanwhile
_path = sys.path[:]
sys.path[:] = [str(ROOT / "tests"), *(p for p in _path if Path(p or ".").resolve() != HERE)]
big_diff = importlib.import_module("fleet.big_diff")
sys.path[:] = _path

MiB = 1024 * 1024
LIMIT = 150 * MiB


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--mib", type=int, default=8, help="size of each diff, in MiB")
    args = parser.parse_args(argv)
    info = machine()
    with tempfile.TemporaryDirectory(prefix="cairn-bench-diff-") as scratch:
        log(f"building a ticket with two {args.mib} MiB diffs …")
        repo = big_diff.build(Path(scratch), size=args.mib * MiB)
        log(f"{args.requests} ticket pages at once …")
        measured = big_diff.measure(repo, requests=args.requests)
    before, after = measured["before"], measured["after"]
    growth = after["VmHWM"] - before["VmRSS"]
    print(
        f"{info['cairn']}, {info['git']}, Python {info['python']}, {info['cpus']} CPUs, "
        f"load average {info['load'][0]}\n"
    )
    print(f"### {args.requests} ticket pages at once, two {args.mib} MiB diffs\n")
    print("| server memory | MiB |")
    print("|---|---:|")
    print(f"| resident after one page (VmRSS) | {before['VmRSS'] / MiB:.0f} |")
    print(f"| peak once every page is answered (VmHWM) | {after['VmHWM'] / MiB:.0f} |")
    print(f"| growth | {growth / MiB:.0f} |")
    ok = growth <= LIMIT
    print(f"\ntarget: growth ≤ {LIMIT // MiB} MiB: {'pass' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
