"""``cairn status``: one row per ticket with a marker, a snapshot or a run."""

from __future__ import annotations

from cairn.cli.parsing import Parser, json_flag, workspace


def status(parser: Parser) -> None:
    """List tickets: state, phase, round, task N/K, age, owner."""
    json_flag(parser)
    workspace(parser)
    args = parser.parse()
    from cairn.cli.handlers.status import status as show

    show(**vars(args))
