"""Markdown code spans as cairn writes lists of them: `` `a`, ``b`c``, `d` ``.

A span is fenced by a run of backticks longer than any run inside it, and padded with one space
on each side when its text starts or ends with a backtick or a space (CommonMark's rule);
``cairn.summary.render.code_span`` writes one.
"""

from __future__ import annotations


def parse_code_spans(text: str) -> list[str]:
    """Code spans separated by ``, ``; ValueError on any other text."""
    spans: list[str] = []
    i = 0
    while True:
        if not text.startswith("`", i):
            raise ValueError("expected a `code span`")
        start = i
        while i < len(text) and text[i] == "`":
            i += 1
        fence = i - start
        j = i
        while True:
            j = text.find("`", j)
            if j < 0:
                raise ValueError("a code span is not closed")
            end = j
            while end < len(text) and text[end] == "`":
                end += 1
            if end - j == fence:
                break
            j = end
        content = text[i:j]
        if len(content) >= 2 and content[0] == content[-1] == " " and content.strip(" "):
            content = content[1:-1]
        spans.append(content)
        i = end
        if i == len(text):
            return spans
        if not text.startswith(", ", i):
            raise ValueError("code spans must be separated by ', '")
        i += 2
