"""Ticket ids: validated when given, mapped safely from branch names, always a valid ref."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn import tickets, wip
from cairn.errors import BadInput
from helpers import (
    assert_one_line_error,
    cairn,
    git,
    make_repo,
    untouched_state,
    write,
)

HOSTILE = [
    ("../x", "contains '..'"),
    ("..", "contains '..'"),
    ("a..b", "contains '..'"),
    ("x.lock", "ends with '.lock'"),
    ("a\nb", "control characters"),
    ("a\x7fb", "control characters"),
    ("a\x00b", "control characters"),
    ("x@{1}", "'@{'"),
    ("-rf", "starts with '-'"),
    ("--upload-pack=x", "starts with '-'"),
    ("", "empty"),
    ("a/b", "only letters, digits"),
    (".hidden", "starting with a letter or digit"),
    ("_x", "starting with a letter or digit"),
    ("x" * 101, "longer than 100"),
    ("trailing.", "ends with '.'"),
    ("a b", "only letters, digits"),
    ("a:b", "only letters, digits"),
    ("a~1", "only letters, digits"),
    ("a^", "only letters, digits"),
    ("a*", "only letters, digits"),
    ("a?", "only letters, digits"),
    ("a[b", "only letters, digits"),
    ("a\\b", "only letters, digits"),
    ("héllo", "only letters, digits"),
    ("HEAD@{", "'@{'"),
]

VALID = ["PROJ-123", "a", "A", "x_y", "v1.2.3", "lock", "x.locked", "a-", "9", "x" * 100]


def ref_ok(ref: str) -> bool:
    return subprocess.run(["git", "check-ref-format", ref], capture_output=True).returncode == 0


@pytest.mark.parametrize(("ticket", "why"), HOSTILE, ids=[repr(t[:12]) for t, _ in HOSTILE])
def test_hostile_ids_are_refused_with_the_reason(ticket: str, why: str) -> None:
    assert tickets.problem(ticket) is not None
    with pytest.raises(BadInput) as caught:
        tickets.validate(ticket)
    message = str(caught.value)
    assert why in message
    assert message.startswith("invalid ticket id ")
    assert "\n" not in message and "\x7f" not in message  # the id is shown escaped
    suggestion = tickets.map_name(ticket)
    if suggestion:
        assert f"try --ticket {suggestion}" in message
        assert tickets.validate(suggestion) == suggestion


@pytest.mark.parametrize("ticket", VALID)
def test_valid_ids_pass_and_make_valid_refs(ticket: str) -> None:
    assert tickets.problem(ticket) is None
    assert tickets.validate(ticket) == ticket
    assert ref_ok(f"refs/cairn/wip/{ticket}")


def test_cli_save_refuses_hostile_tickets_and_writes_nothing(repo: Path) -> None:
    write(repo, "README.md", "dirty\n")
    write(repo, "new.txt", "new\n")
    before = untouched_state(repo)
    for ticket, why in [("../x", "'..'"), ("-rf", "'-'"), ("a\nb", "control")]:
        result = cairn("wip", "save", f"--ticket={ticket}", cwd=repo)
        assert_one_line_error(result, 2)
        assert "invalid ticket id" in result.stderr and why in result.stderr
    run = cairn("wip", "save", "--ticket", "ok", "--run", "x.lock", cwd=repo)
    assert_one_line_error(run, 2)
    assert git(repo, "for-each-ref", "refs/cairn") == ""
    assert untouched_state(repo) == before


def test_api_save_refuses_hostile_tickets_and_run_ids(repo: Path) -> None:
    write(repo, "README.md", "dirty\n")
    before = untouched_state(repo)
    for ticket, why in HOSTILE:
        with pytest.raises(BadInput, match=re.escape(why)):
            wip.save(repo, ticket=ticket)
        with pytest.raises(BadInput, match=re.escape(why)):
            wip.save(repo, ticket="ok", run_id=ticket)
    assert untouched_state(repo) == before


# --- mapping branch names -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("branch", "expected"),
    [
        ("feature/login", "feature-login"),
        ("feature/x", "feature-x"),
        ("main", "main"),
        ("user/JIRA-12..fix", None),
        ("x.lock", None),
        ("héllo", None),
        ("a/b.lock/c.lock", None),
        ("release/1.2", "release-1.2"),
        ("-weird-", "weird"),
        ("..dots..", "dots"),
        ("x" * 300, "x" * 100),
    ],
)
def test_branch_names_map_to_valid_ids(branch: str, expected: str | None) -> None:
    mapped = tickets.map_name(branch)
    assert mapped, branch
    assert tickets.validate(mapped) == mapped
    assert ref_ok(f"refs/cairn/wip/{mapped}")
    if expected is not None:
        assert mapped == expected
    assert tickets.from_branch(branch) == mapped
    assert tickets.map_name(mapped) == mapped  # mapping is idempotent


def test_from_branch_without_a_branch_is_default() -> None:
    assert tickets.from_branch(None) == "default"
    assert tickets.from_branch("") == "default"


def test_from_branch_with_nothing_usable_is_bad_input() -> None:
    with pytest.raises(BadInput, match="--ticket"):
        tickets.from_branch("ñ/ü")


def test_default_ticket_follows_the_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", branch="feature/x")
    write(repo, "README.md", "dirty\n")
    result = cairn("wip", "save", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/cairn").split() == [
        "refs/cairn/wip/feature-x"
    ]
    assert wip.list_snapshots(repo)[0].ticket == "feature-x"
    assert wip.list_snapshots(repo)[0].branch == "feature/x"


def test_default_ticket_on_detached_head_and_unborn_branch(tmp_path: Path) -> None:
    detached = make_repo(tmp_path / "detached")
    git(detached, "checkout", "-q", "--detach")
    write(detached, "README.md", "dirty\n")
    saved = wip.save(detached)
    assert (saved.ticket, saved.ref, saved.branch) == ("default", "refs/cairn/wip/default", None)

    unborn = make_repo(tmp_path / "unborn", files={}, branch="feature/y")
    write(unborn, "first.txt", "x\n")
    saved = wip.save(unborn)
    assert (saved.ticket, saved.ref) == ("default", "refs/cairn/wip/default")
    assert git(unborn, "rev-parse", "refs/cairn/wip/default").strip() == saved.commit


def test_branch_with_no_usable_characters_needs_a_ticket(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", branch="ñ")
    write(repo, "README.md", "dirty\n")
    before = untouched_state(repo)
    result = cairn("wip", "save", cwd=repo)
    assert_one_line_error(result, 2)
    assert "--ticket" in result.stderr
    assert untouched_state(repo) == before
    assert wip.save(repo, ticket="manual").ref == "refs/cairn/wip/manual"


# --- property: whatever the input, a mapped id is a valid id and a valid ref ----------------------


BRANCHY = st.text(alphabet="ab.-_/@{}~^:?*[\\ \x7féX.lock", max_size=110)


@pytest.mark.slow
@settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(name=st.one_of(st.text(max_size=120), BRANCHY))
def test_map_name_always_yields_a_valid_id_and_ref(name: str) -> None:
    slug = tickets.map_name(name)
    if slug:
        assert tickets.validate(slug) == slug
        assert len(slug) <= tickets.MAX_LENGTH
        assert tickets.map_name(slug) == slug
        assert ref_ok(f"refs/cairn/wip/{slug}"), slug
    else:
        with pytest.raises(BadInput):
            tickets.from_branch(name) if name else tickets.validate(name)


@pytest.mark.slow
@settings(
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ticket=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", fullmatch=True))
def test_every_id_validate_accepts_is_a_valid_ref(ticket: str) -> None:
    if tickets.problem(ticket) is None:
        assert ref_ok(f"refs/cairn/wip/{ticket}"), ticket
    else:
        with pytest.raises(BadInput):
            tickets.validate(ticket)
