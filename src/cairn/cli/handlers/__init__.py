"""What a command does and prints, free of Typer, for the commands whose work is more than one
call into the API: one module a command or command group, one function a command.

Each function takes the parameters its command declares in ``cairn.cli.commands``, with the same
defaults. Typer calls every one of them; the fast dispatcher (``cairn.cli.fast``) calls those of
the commands agents and hooks run per tool call or per task directly, so both paths run the same
code. ``tests/cli/test_fast_path.py`` holds them together.
"""
