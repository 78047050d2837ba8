"""The docs are the spec: their examples must match what the code does."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import pytest

from cairn import summary
from cairn.config import load
from cairn.config.records import Config
from cairn.state import marker
from cairn.state.catchup import CatchupReport
from cairn.state.status import StatusRow
from cairn.terms import JOURNAL_EVENTS
from cairn.wip.meta import SnapshotMeta
from cairn.wip.models import RestoreResult, SaveResult, SnapshotInfo
from doc_blocks import ROOT, blocks


def test_trailer_example_round_trips() -> None:
    (example,) = [b for b in blocks("snapshots.md", "") if b.startswith("cairn wip ")]
    meta = SnapshotMeta.parse(example)
    assert meta is not None
    assert meta.ticket == "main" and meta.seq == 3 and meta.run == "20261129-231500Z"
    assert meta.skipped[0].path == "data/fixture.bin"
    assert meta.render() == example


def test_json_examples_have_the_model_fields() -> None:
    save_example, list_example, restore_example, status_example = blocks("cli.md", "json")
    assert list(json.loads(save_example)) == list(SaveResult.__struct_fields__)
    msgspec.json.decode(save_example, type=SaveResult)
    keys = re.findall(r'"(\w+)":', list_example)
    assert keys == list(SnapshotInfo.__struct_fields__)
    assert list(json.loads(restore_example)) == list(RestoreResult.__struct_fields__)
    (row,) = json.loads(status_example)
    assert list(row) == list(StatusRow.__struct_fields__)
    msgspec.convert(row, StatusRow)


def test_config_example_is_valid_and_states_the_defaults(tmp_path: Path) -> None:
    (example,) = blocks("cli.md", "toml")
    (tmp_path / "cairn.toml").write_text(example)
    assert load(tmp_path) == Config()


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    commands = [line for line in readme.splitlines() if line.startswith("python3 -m venv")]
    assert len(commands) == 2
    demo, tests = commands
    assert demo.endswith("cairn demo")
    assert tests in ci.splitlines()


def test_marker_examples_parse_and_render_back() -> None:
    """The marker as cairn writes it (JSON) renders back byte for byte; the hand-written YAML
    one is the same marker but for the keys it leaves out."""
    (example,) = [block for block in blocks("state.md", "json") if block.startswith(MARKER_START)]
    parsed = marker.parse(example, Path("example"))
    assert parsed.dispatch is not None and parsed.dispatch.max_turns == 60
    assert parsed.owner is not None and parsed.owner.host == "build-3"
    assert marker.render(parsed) == example
    (by_hand,) = blocks("state.md", "yaml")
    assert marker.parse(by_hand, Path("by hand")) == marker.Marker(
        phase=parsed.phase,
        round=parsed.round,
        started_at=parsed.started_at,
        last_updated=parsed.last_updated,
    )


def test_summary_examples_round_trip_exactly() -> None:
    implementation, review = blocks("state.md", "markdown")
    for example in (implementation, review):
        assert summary.render(summary.parse(example)) == example
    assert summary.parse(implementation).tasks[1].title == "Wire the *CLI*"
    assert summary.parse(review).findings[0].status == "FIXED"


MARKER_START = '{\n  "version": '  # what tells the marker's JSON example from the others


def test_journal_and_catchup_examples() -> None:
    journal_example, catchup_example = [
        b for b in blocks("state.md", "json") if not b.startswith(MARKER_START)
    ]
    for line in journal_example.splitlines():
        entry = json.loads(line)
        assert list(entry)[:2] == ["t", "event"]
        assert entry["event"] in JOURNAL_EVENTS
    table = (ROOT / "docs" / "state.md").read_text()
    for event in JOURNAL_EVENTS:
        assert f"`{event}`" in table, event
    assert list(json.loads(catchup_example)) == list(CatchupReport.__struct_fields__)
    msgspec.json.decode(catchup_example, type=CatchupReport)


def test_run_outcome_example_and_prompt_table() -> None:
    from cairn.run import prompts
    from cairn.run.orchestrator import RunOutcome

    (outcome,) = blocks("run.md", "json")
    assert list(json.loads(outcome)) == list(RunOutcome.__struct_fields__)
    msgspec.json.decode(outcome, type=RunOutcome)
    text = (ROOT / "docs" / "run.md").read_text()
    for name in prompts.NAMES:
        assert f"| `{name}` |" in text, name
        template = (ROOT / "src" / "cairn" / "run" / "prompts" / f"{name}.md").read_text()
        row = next(line for line in text.splitlines() if line.startswith(f"| `{name}` |"))
        documented = set(re.findall(r"`(\w+)`", row.split("|")[3]))
        assert documented == set(re.findall(r"\$(\w+)", template)), name


def resolve(dotted: str) -> object:
    """The object a dotted name such as ``cairn.state.marker.Marker.phase`` names: the longest
    importable module, then attributes, then a dataclass or record field."""
    import dataclasses
    import importlib

    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:end]))
        except ModuleNotFoundError:
            continue
        for name in parts[end:]:
            if hasattr(found, name):
                found = getattr(found, name)
                continue
            fields = {n: n for n in getattr(found, "__struct_fields__", ())}
            if dataclasses.is_dataclass(found):
                fields = {f.name: f for f in dataclasses.fields(found)}
            assert name in fields, f"{dotted}: {name} is not in {found!r}"
            found = fields[name]
        return found
    raise AssertionError(f"{dotted}: no such module")


def test_every_identifier_in_the_architecture_doc_exists() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    names = set(re.findall(r"`(cairn(?:\.\w+)+)`", text)) - {"cairn.toml"}  # a file, not code
    glossary = text.split("## Glossary", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in glossary.splitlines() if line.startswith("| ") and "`cairn." in line]
    assert len(rows) >= 18 and len(names) >= 60
    for name in sorted(names):
        resolve(name)
    for bad in ("cairn.state.marker.Marker.no_such_field", "cairn.no_such_module", "cairn.terms.X"):
        with pytest.raises(AssertionError):
            resolve(bad)


def test_readme_links_every_doc() -> None:
    readme = (ROOT / "README.md").read_text()
    for doc in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{doc.name})" in readme, doc.name
