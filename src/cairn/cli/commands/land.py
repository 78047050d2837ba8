"""``cairn fleet land TICKET…``: merge approved or completed tickets' branches into the fleet's
base branch, as the ticket page's "Land" button does it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn.cli.parsing import Parser, json_flag, workspace

if TYPE_CHECKING:
    from cairn.errors import ExitCode


def land(parser: Parser) -> ExitCode:
    """Land tickets in the order given, each on top of the one before: 0 all landed, 1 one
    conflicted (its agent gets a fix round, and it lands once that passes)."""
    parser.add_argument("tickets", nargs="+", metavar="TICKET", help="Tickets to land, in order.")
    json_flag(parser)
    workspace(parser)
    a = parser.parse()
    from cairn.cli.handlers import fleet_land

    return fleet_land.land(**vars(a))
