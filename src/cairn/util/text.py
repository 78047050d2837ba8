"""Free text that cairn stores and prints: one line, nothing a terminal would act on; names
that must be plausible git branch names; counts and sizes in words (``1 task``, ``2 tasks``,
``1.5 MiB``)."""

from __future__ import annotations


def printable(text: str) -> str:
    """``text`` on one line without control characters (an ESC would drive the terminal that
    prints it): each run of them, and of whitespace, becomes one space."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


def one_line(text: str, limit: int = 160) -> str:
    """``printable(text)`` cut to ``limit`` characters (an ellipsis marks the cut)."""
    flat = printable(text)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def is_branch_name(name: str) -> bool:
    """A plausible git branch name (the rules of git check-ref-format that matter here)."""
    bad = (" ", "~", "^", ":", "?", "*", "[", "\\", "..", "@{", "//")
    return (
        bool(name)
        and not name.startswith(("-", "/", "."))
        and not name.endswith(("/", ".", ".lock"))
        and not any(b in name for b in bad)
        and all(ord(c) >= 32 and ord(c) != 127 for c in name)
    )


def human_bytes(size: int | None) -> str:
    """A size as people read it: ``512 B``, ``1.5 MiB``; ``?`` when unknown."""
    if size is None:
        return "?"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and its noun, in the number the count asks for: ``1 task``, ``2 tasks``,
    ``0 tasks``, ``3 dispatches`` (``plural`` when adding an ``s`` is not it)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


# The keys of a tool call's input that say what it acts on, in order: the command, the path, …
TARGET_KEYS = (
    "command",
    "cmd",
    "file_path",
    "notebook_path",
    "path",
    "target",
    "url",
    "pattern",
    "query",
)


def tool_target(given: object) -> str:
    """What a tool call acts on, on one line: its command or path (the first of
    ``TARGET_KEYS`` its input has), the words of a list, the text itself; ``""`` for none."""
    if isinstance(given, dict):
        found = next((given[k] for k in TARGET_KEYS if isinstance(given.get(k), str | list)), "")
        return tool_target(found)
    if isinstance(given, list):
        return printable(" ".join(str(a) for a in given))
    if given is None or isinstance(given, bool):
        return ""
    return printable(str(given))
