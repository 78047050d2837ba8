"""Printing results: JSON for machines, short plain lines for people, errors as one line."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import typer
from pydantic import BaseModel
from rich.console import Console

from cairn.errors import CairnError

P = ParamSpec("P")
R = TypeVar("R")

console = Console(markup=False, highlight=False, soft_wrap=True)
err_console = Console(stderr=True, markup=False, highlight=False, soft_wrap=True)


def emit_json(data: BaseModel | list[Any] | dict[str, Any]) -> None:
    if isinstance(data, BaseModel):
        payload: Any = data.model_dump(mode="json")
    elif isinstance(data, list):
        payload = [d.model_dump(mode="json") if isinstance(d, BaseModel) else d for d in data]
    else:
        payload = data
    sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")


def fail(message: str, code: int) -> typer.Exit:
    err_console.print(f"cairn: error: {message}")
    return typer.Exit(code)


def guarded(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn cairn errors into one line on stderr and their exit code; never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except CairnError as exc:
            raise fail(str(exc), exc.exit_code) from None
        except KeyboardInterrupt:
            raise fail("interrupted", 130) from None
        except Exception as exc:
            if os.environ.get("CAIRN_DEBUG"):
                raise
            raise fail(
                f"internal error: {type(exc).__name__}: {exc} (CAIRN_DEBUG=1 shows the traceback)",
                1,
            ) from None

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
