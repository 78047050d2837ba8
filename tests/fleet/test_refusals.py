"""The refused listing (``<state root>/fleet/refused.json``) and its reporter: each refusal is
said once per change, the listing is written only when it changes, and one that cannot be read
is a warning of ``cairn fleet status``, never an error."""

from __future__ import annotations

import json
from pathlib import Path

from cairn import config as config_module
from cairn.fleet import refusals
from cairn.fleet.refusals import Rejected, Reporter
from cairn.git import Repo
from cairn.state.layout import Layout
from helpers import cairn


def layout_of(repo: Path) -> Layout:
    found = Repo.discover(repo)
    return Layout.for_repo(found, config_module.load(found.toplevel))


def test_each_refusal_is_said_once_per_change(repo: Path) -> None:
    layout = layout_of(repo)
    name = Rejected("q/fix it.md", "plan fix it.md: bad name; rename it", None, "1:10")
    empty = Rejected("q/E-1.md", "q/E-1.md:1: no tasks found; write them", "E-1", "2:0")
    reporter = Reporter(layout)
    assert [r.plan for r in reporter.poll([name, empty])] == ["q/fix it.md", "q/E-1.md"]
    reporter.save()
    listing = refusals.path_of(layout)
    written = listing.stat().st_mtime_ns
    assert reporter.poll([name, empty]) == []  # the next poll: nothing new
    reporter.save()
    assert listing.stat().st_mtime_ns == written  # nor written again
    since = refusals.read(layout)[1].since
    changed = name._replace(version="3:12")  # the file was edited, still refused
    assert [r.plan for r in reporter.poll([changed, empty])] == ["q/fix it.md"]
    assert reporter.current[1].since == since  # E-1 unchanged: refused since then
    reporter.save()
    assert [r.plan for r in reporter.poll([empty])] == []  # fixed: gone from the listing
    reporter.save()
    assert [r.plan for r in refusals.read(layout)] == ["q/E-1.md"]
    assert [r.plan for r in reporter.poll([changed, empty])] == ["q/fix it.md"]  # back: said
    # a new supervisor says them all once, and keeps when they were first refused
    again = Reporter(layout)
    assert [r.plan for r in again.poll([empty])] == ["q/E-1.md"]
    assert again.current[0].since == since


def test_a_broken_listing_is_a_warning_of_fleet_status(repo: Path) -> None:
    layout = layout_of(repo)
    listing = refusals.path_of(layout)
    listing.parent.mkdir(parents=True)
    listing.write_text('{"refused": [{"plan": 3}], "updated": "x"}')
    result = cairn("fleet", "status", "--json", cwd=repo)
    assert result.returncode == 0 and json.loads(result.stdout) == []
    assert result.stderr.startswith("cairn: warning: refused listing ")
    assert "the next poll of `cairn fleet start` rewrites it" in result.stderr
    listing.write_text("not json")
    warned: list[str] = []
    assert refusals.read(layout, warned) == [] and len(warned) == 1
