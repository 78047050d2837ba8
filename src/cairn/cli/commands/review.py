"""``cairn review TICKET``: a person's review of a fleet ticket's branch, as the ticket page's
"Request changes" and "Approve" buttons do it."""

from __future__ import annotations

from cairn.cli.parsing import Parser, json_flag, workspace


def review(parser: Parser) -> None:
    """Comment on lines of a fleet ticket's branch diff, then request changes (a fix round of
    its run: each comment a finding R1, R2, … the agent answers) or approve it."""
    parser.add_argument("ticket", metavar="TICKET", help="The fleet ticket to review.")
    parser.add_argument(
        "--comment",
        action="append",
        default=[],
        metavar="PATH:LINE:TEXT",
        help="A comment on line LINE of PATH (a line the branch diff shows); repeat for more.",
    )
    parser.add_argument(
        "--request-changes",
        action="store_true",
        help="Start a fix round: the agent answers each comment.",
    )
    parser.add_argument("--approve", action="store_true", help="Mark the ticket approved.")
    parser.add_argument("--by", help="Who reviews (default: git config user.name).")
    json_flag(parser)
    workspace(parser)
    a = parser.parse()
    from cairn.cli.handlers import review as handler

    handler.review(**vars(a))
