"""``cairn config show``: the effective configuration and where each value came from."""

from __future__ import annotations

import json as jsonlib
import sys
from typing import TYPE_CHECKING, Any

from cairn.cli.output import say
from cairn.cli.parsing import Parser, json_flag, workspace

if TYPE_CHECKING:
    from cairn.config.records import Config


def show(parser: Parser) -> None:
    """Print every key, its value, and the file it came from (or default)."""
    json_flag(parser)
    workspace(parser)
    args = parser.parse()
    from cairn.config import load
    from cairn.git import Repo

    config = load(Repo.discover(args.workspace).toplevel)
    rows = effective(config)
    if args.json:
        payload = [{"key": k, "value": v, "source": s} for k, v, s in rows]
        sys.stdout.write(jsonlib.dumps(payload, indent=2, default=str) + "\n")
        return
    width = max(len(k) for k, _, _ in rows)
    for key, value, source in rows:
        shown = jsonlib.dumps(value, default=str)
        say(f"{key.ljust(width)}  {shown}  ({source})")


def effective(config: Config) -> list[tuple[str, Any, str]]:
    """Every key with its value and where the value came from (the file, or ``default``)."""
    source = str(config.source) if config.source else "default"
    rows: list[tuple[str, Any, str]] = []

    from msgspec import Struct, to_builtins

    def walk(node: Struct, prefix: str, given: dict[str, Any] | None) -> None:
        for name in node.__struct_fields__:
            value = getattr(node, name)
            key = f"{prefix}{name}"
            here = given is not None and name in given
            table = given.get(name) if given is not None and here else None
            table = table if isinstance(table, dict) else None
            if isinstance(value, Struct):
                walk(value, f"{key}.", table)
            elif (
                isinstance(value, dict)
                and value
                and all(isinstance(v, Struct) for v in value.values())
            ):
                for sub, item in sorted(value.items()):
                    inner = table.get(sub) if table is not None else None
                    walk(item, f"{key}.{sub}.", inner if isinstance(inner, dict) else None)
            else:  # a list may hold tables ([fleet] notify's {url, format}): shown as tables
                shown = to_builtins(value) if isinstance(value, list) else value
                rows.append((key, shown, source if here else "default"))

    walk(config, "", config.given if config.source is not None else None)
    return rows
