"""Printing results: JSON for machines, short plain lines for people, errors as one line."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import typer

from cairn.errors import explain

P = ParamSpec("P")
R = TypeVar("R")


class LazyConsole:
    """A Rich console created on first use, so commands that print JSON never import Rich."""

    def __init__(self, stderr: bool = False) -> None:
        self._stderr = stderr
        self._console: Any = None

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if self._console is None:
            from rich.console import Console

            self._console = Console(
                stderr=self._stderr, markup=False, highlight=False, soft_wrap=True
            )
        self._console.print(*objects, **kwargs)


console = LazyConsole()
err_console = LazyConsole(stderr=True)


def _plain(data: Any) -> Any:
    return data.model_dump(mode="json") if hasattr(data, "model_dump") else data


def emit_json(data: Any) -> None:
    if isinstance(data, list) and data and all(hasattr(d, "model_dump_json") for d in data):
        from pydantic import TypeAdapter

        encoded = TypeAdapter(list[type(data[0])]).dump_json(data, indent=2)  # type: ignore[misc]
        sys.stdout.write(encoded.decode() + "\n")
        return
    payload = [_plain(d) for d in data] if isinstance(data, list) else _plain(data)
    sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")


def fail(message: str, code: int) -> typer.Exit:
    err_console.print(f"cairn: error: {message}")
    return typer.Exit(code)


def guarded(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn errors into one line on stderr and their exit code; never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except (Exception, KeyboardInterrupt) as exc:
            code, message = explain(exc)
            raise fail(message, code) from None

    return wrapper


def human_bytes(size: int | None) -> str:
    if size is None:
        return "?"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"
