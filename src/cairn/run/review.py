"""A reviewer's findings for one round: ``{NN}_reviewer_review.md``.

```
# Review — ticket PROJ-12, round 1

### F1: Null check missing in load()
- **Location:** src/load.py:12
- **Details:** load() crashes on an empty file.
```

Ids follow the usual scheme: ``F`` blocking (must be fixed), ``W`` warning, ``S``/``R``/``T``
suggestions; ``AC`` findings are acceptance criteria the evaluator failed. ``F`` and ``AC``
block. cairn scaffolds the file; the reviewer adds findings with ``cairn finding add``.

A person's review (``by`` set: the header ends ``(by NAME)``, written by ``cairn.fleet.fixround``
from review comments ``R1``, ``R2``…) is answered whole: each of its findings blocks until the
coder has answered it, whatever its letter.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
from msgspec import Struct

from cairn.errors import BadInput
from cairn.util import durable

ID = re.compile(r"[A-Z]{1,3}[0-9]{1,4}")
_HEAD = re.compile(r"# Review — ticket (\S+), round (\d+)(?: \(by (.+)\))?")
_HEADING = re.compile(r"### ([A-Z]{1,3}[0-9]{1,4}): (.+)")
_FIELD = re.compile(r"- \*\*(Location|Details):\*\* (.*)")


class ReviewFinding(Struct, kw_only=True):
    id: str
    title: str
    location: str | None = None
    details: str | None = None

    @property
    def blocking(self) -> bool:
        """F findings and failed acceptance criteria (AC) block; W, S, R, T do not."""
        return self.id.startswith(("F", "AC"))

    @property
    def to_fix(self) -> bool:
        return self.blocking or self.id.startswith("W")


class Review(Struct, kw_only=True):
    ticket: str
    round: int
    findings: list[ReviewFinding] = []
    by: str | None = None  # a person's review (a fix round asked by them): every finding counts

    def blocking(self) -> list[ReviewFinding]:
        if self.by is not None:
            return list(self.findings)
        return [f for f in self.findings if f.blocking]

    def to_fix(self) -> list[ReviewFinding]:
        """The findings a fix round answers: blocking ones and warnings (all of a person's)."""
        if self.by is not None:
            return list(self.findings)
        return [f for f in self.findings if f.to_fix]


def _line(text: str) -> str:
    return " ".join(text.split())


def render(review: Review) -> str:
    by = f" (by {_line(review.by)})" if review.by else ""
    lines = [f"# Review — ticket {review.ticket}, round {review.round}{by}", ""]
    if not review.findings:
        lines += ["(no findings)", ""]
    for finding in review.findings:
        lines.append(f"### {finding.id}: {finding.title}")
        if finding.location:
            lines.append(f"- **Location:** {finding.location}")
        if finding.details:
            lines.append(f"- **Details:** {finding.details}")
        lines.append("")
    return "\n".join(lines)


def parse(text: str, source: str) -> Review:
    lines = text.splitlines()
    head = _HEAD.fullmatch(lines[0].strip()) if lines else None
    if head is None:
        raise BadInput(f"{source}:1: not a cairn review (expected '# Review — ticket T, round R')")
    review = Review(ticket=head.group(1), round=int(head.group(2)), by=head.group(3))
    current: ReviewFinding | None = None
    for number, raw in enumerate(lines[1:], start=2):
        line = raw.rstrip()
        heading = _HEADING.fullmatch(line)
        if heading:
            if any(f.id == heading.group(1) for f in review.findings):
                raise BadInput(f"{source}:{number}: finding {heading.group(1)} appears twice")
            current = ReviewFinding(id=heading.group(1), title=heading.group(2).strip())
            review.findings.append(current)
            continue
        field = _FIELD.fullmatch(line)
        if field and current is not None:
            setattr(current, field.group(1).lower(), field.group(2).strip() or None)
    return review


def load(path: Path) -> Review:
    data = durable.read_state_file(path, "review", 4 * 1024 * 1024)
    if data is None:
        raise BadInput(f"review {path} is missing")
    return parse(durable.decode_text(data, path, "review"), str(path))


def save(path: Path, review: Review) -> None:
    durable.atomic_write(path, render(review))


def add(
    review: Review, finding_id: str, title: str, location: str | None, details: str | None
) -> Review:
    if not ID.fullmatch(finding_id):
        raise BadInput(
            f"finding id {finding_id!r} is not like F1, W2 or S3; "
            "use F for blocking, W for warnings, S for suggestions"
        )
    if any(f.id == finding_id for f in review.findings):
        raise BadInput(f"finding {finding_id} is already recorded in round {review.round}")
    if not _line(title):
        raise BadInput("a finding needs a title")
    found = ReviewFinding(
        id=finding_id,
        title=_line(title),
        location=_line(location) if location else None,
        details=_line(details) if details else None,
    )
    return msgspec.structs.replace(review, findings=[*review.findings, found])
