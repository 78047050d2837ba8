"""Plan parsing grows linearly with the plan: the time of a plan four times as long, against
the time of the shorter one measured in the same run (linear is about 4x, quadratic 16x).

    .venv/bin/python bench/plans.py

Three shapes, each at 500 and 2,000 tasks, each timed as the best of 5: a Markdown plan of
``## Task N`` sections (with fenced headings and acceptance checklists), a plain checklist,
and a structured YAML plan. Exits 1 when a ratio is 8 or more.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from cairn.run import plan

SMALL, LARGE, TRIES, LIMIT = 500, 2000, 5, 8.0


def markdown(count: int) -> str:
    parts = ["# Big plan\n"]
    for n in range(count):
        parts.append(
            f"## Task {n}: Step {n}\nDo thing {n}.\n\n```\n### Task 9: fenced\n```\n"
            f"**Acceptance criteria:**\n- [ ] check {n}\n- [ ] check {n} again\n\n"
        )
    return "".join(parts)


def checklist(count: int) -> str:
    return "".join(f"- [ ] item {n}\n  detail {n}\n" for n in range(count))


def structured(count: int) -> str:
    return "tasks:\n" + "".join(
        f"  - title: item {n}\n    acceptance: [ok]\n" for n in range(count)
    )


SHAPES: dict[str, tuple[Callable[[int], str], str, str]] = {
    "markdown sections": (markdown, "big.md", ".md"),
    "checklist": (checklist, "c.md", ".md"),
    "structured YAML": (structured, "c.yaml", ".yaml"),
}


def best(text: str, name: str, suffix: str) -> float:
    times = []
    for _ in range(TRIES):
        started = time.perf_counter()
        plan.parse(text, name, suffix)
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> int:
    failed = False
    print(f"| shape | {SMALL} tasks | {LARGE} tasks | ratio (linear ~4) | target < {LIMIT:g} |")
    print("|---|---:|---:|---:|---|")
    for shape, (make, name, suffix) in SHAPES.items():
        small = best(make(SMALL), name, suffix)
        large = best(make(LARGE), name, suffix)
        ratio = large / small
        ok = ratio < LIMIT
        failed |= not ok
        print(
            f"| {shape} | {small * 1000:.1f} ms | {large * 1000:.1f} ms | {ratio:.2f}x | "
            f"{'pass' if ok else 'FAIL'} |"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
