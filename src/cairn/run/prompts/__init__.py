"""Prompt templates (``string.Template``, ``$name`` placeholders).

A file ``.cairn/prompts/<name>.md`` at the top of the work tree overrides the packaged one.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from string import Template

NAMES = ("dispatch", "continuation", "pressure", "handoff", "evaluate", "review", "fix")


def render(name: str, toplevel: Path | None = None, **values: object) -> str:
    if name not in NAMES:
        raise ValueError(f"unknown prompt {name!r}")
    override = toplevel / ".cairn" / "prompts" / f"{name}.md" if toplevel else None
    if override is not None and override.is_file():
        text = override.read_text(encoding="utf-8")
    else:
        text = resources.files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8")
    return Template(text).safe_substitute({k: str(v) for k, v in values.items()}).strip() + "\n"
