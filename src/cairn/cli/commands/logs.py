"""``cairn logs``: print a run's transcripts (each dispatch's agent events) readably."""

from __future__ import annotations

from cairn.cli.parsing import Parser, integer, workspace


def logs(parser: Parser) -> None:
    """Print the latest run's transcripts: turns, tool calls, messages."""
    parser.add_argument("ticket", nargs="?", help="Ticket id (default: the branch name).")
    parser.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="Tail the live run's transcript until it ends.",
    )
    parser.add_argument(
        "--dispatch",
        type=integer(minimum=1),
        metavar="N",
        help="Only dispatch N (the NN of its transcript).",
    )
    parser.add_argument("--json", action="store_true", help="Print the raw events as JSON lines.")
    workspace(parser)
    args = parser.parse()
    from cairn.cli.handlers.logs import logs as show

    show(**vars(args))
