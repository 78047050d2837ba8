"""What the commands the fast path serves do and print, free of Typer.

Each function takes the same parameters, with the same defaults, as the Typer command that
declares it in ``cairn.cli.commands``; the fast dispatcher (``cairn.cli.fast``) and Typer both
call it, so the two paths run the same code. ``tests/cli/test_fast_path.py`` holds them together.
"""
