"""The fenced code blocks of docs/ (read by test_docs.py and test_docs_drift.py)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def blocks(doc: str, lang: str) -> list[str]:
    """The fenced code blocks of ``doc`` whose info string is ``lang``."""
    found: list[str] = []
    current: list[str] | None = None
    keep = False
    for line in (ROOT / "docs" / doc).read_text().splitlines(keepends=True):
        if not line.startswith("```"):
            if current is not None:
                current.append(line)
        elif current is None:
            current, keep = [], line.strip() == f"```{lang}"
        else:
            if keep:
                found.append("".join(current))
            current = None
    return found
