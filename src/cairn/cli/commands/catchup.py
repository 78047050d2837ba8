"""``cairn catchup``: where the last run of a ticket got to, and the next command."""

from __future__ import annotations

from cairn.cli.parsing import (
    Parser,
    choices_metavar,
    json_flag,
    one_of,
    remote_name,
    workspace,
)

FORMATS = ("text", "context")


def catchup(parser: Parser) -> None:
    """Report a ticket's state: marker, summary, snapshot, journal, then artifacts."""
    parser.add_argument("ticket", nargs="?", help="Ticket id (default: the branch name).")
    json_flag(parser)
    parser.add_argument(
        "--format",
        dest="format_",
        type=one_of(FORMATS),
        default="text",
        metavar=choices_metavar(FORMATS),
        help="text, or context: a paragraph for an agent.",
    )
    parser.add_argument(
        "--clear-stale", action="store_true", help="Remove the ticket's marker if it is stale."
    )
    parser.add_argument(
        "--remote",
        type=remote_name,
        metavar="NAME",
        help="Report what this git remote holds of the ticket (a --remote run's pushed state).",
    )
    workspace(parser)
    args = parser.parse()
    from cairn.cli.handlers.catchup import catchup as report

    report(**vars(args))
