"""The ``cairn`` entry point: the commands of the fast table run without loading Typer; every
other command line goes to the Typer app (``cairn.cli.app``)."""

from __future__ import annotations

import sys


def main() -> None:
    from cairn.cli.fast import dispatch

    code = dispatch(sys.argv[1:])
    if code is None:
        from cairn.cli.app import main as typer_main

        typer_main()
        return
    sys.exit(code)
