"""The ``cairn`` entry point: the commands of the fast table run without loading Typer; every
other command line goes to the Typer app (``cairn.cli.app``)."""

from __future__ import annotations

import gc
import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from typing import NoReturn


def main() -> None:
    # A fast command lives for tens of milliseconds and frees what it allocates by reference
    # counting; the cycle collector's passes over the modules being imported cost it ~3 ms.
    gc.disable()
    from cairn.cli.fast import dispatch

    code = dispatch(sys.argv[1:])
    if code is None:
        gc.enable()  # Typer's commands include long ones: cairn run, cairn mcp
        from cairn.cli.app import main as typer_main

        typer_main()
        return
    leave(code)


def leave(code: int) -> NoReturn:
    """Exit without tearing the interpreter down, which costs a fast command about 6 ms and
    serves nothing: every state file is written and every git process waited for; only the
    standard streams need flushing. A stdout whose reader has gone (``cairn status | head``)
    ends quietly; any other stream that cannot be flushed is left to Python's own exit, which
    reports it as it always has."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError) as exc:
        from cairn.cli.output import drop_stdout, stdout_gone

        if not stdout_gone(exc):
            sys.exit(code)
        drop_stdout()
    os._exit(code)
