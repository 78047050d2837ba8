"""Front matter and code spans: the format pieces plans and change summaries share."""

from __future__ import annotations

import pytest

from cairn.util import frontmatter
from cairn.util.codespans import parse_code_spans


def test_a_block_is_found_between_its_fences() -> None:
    lines = ["---", "ticket: T-1", "...", "body", "---"]
    assert frontmatter.opens(lines)
    assert frontmatter.closing_line(lines) == 2
    assert frontmatter.closing_line(lines, closings=("---",)) == 4
    assert frontmatter.load(lines, 2) == {"ticket": "T-1"}


def test_no_block_without_an_opening_or_a_closing_fence() -> None:
    assert not frontmatter.opens([])
    assert not frontmatter.opens(["# Title", "---"])
    assert frontmatter.closing_line(["# Title", "---"]) is None
    assert frontmatter.closing_line(["---", "ticket: T-1"]) is None
    assert frontmatter.opens(["---  "]) and frontmatter.closing_line(["---  ", "---\t"]) == 1


def test_an_empty_block_is_none() -> None:
    assert frontmatter.load(["---", "---"], 1) is None
    assert frontmatter.load(["---", "", "# only a comment", "---"], 3) is None


def test_invalid_yaml_names_the_line_in_the_file() -> None:
    lines = ["---", "ticket: T-1", "title: [unclosed", "---"]
    with pytest.raises(frontmatter.InvalidYAML) as caught:
        frontmatter.load(lines, 3)
    assert caught.value.line == 4
    assert caught.value.problem and "\n" not in caught.value.problem


def test_a_value_other_than_a_mapping_is_refused_with_the_value() -> None:
    with pytest.raises(frontmatter.NotAMapping) as caught:
        frontmatter.load(["---", "- a", "- b", "---"], 3)
    assert (caught.value.line, caught.value.value) == (2, ["a", "b"])


def test_code_spans_read_back_what_cairn_writes() -> None:
    assert parse_code_spans("`a`") == ["a"]
    assert parse_code_spans("``a`b``, `` `x ``, `  lead `, ` `") == ["a`b", "`x", " lead", " "]
    for bad, problem in (
        ("a", "expected a `code span`"),
        ("`a", "a code span is not closed"),
        ("`a` `b`", "code spans must be separated by ', '"),
    ):
        with pytest.raises(ValueError, match=problem):
            parse_code_spans(bad)
