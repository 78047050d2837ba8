"""``cairn task|finding|gate|defer|ac``: progress reports into the current run's change summary;
what they do is in ``cairn.cli.handlers.progress``."""

from __future__ import annotations

from cairn.cli.parsing import Parser, choices_metavar, json_flag, one_of, workspace
from cairn.terms import FINDING_RESOLUTIONS, VERDICTS


def _report(parser: Parser, notes: bool = False) -> None:
    """The options every report takes: the run's ticket, ``--json``, ``-C``."""
    if notes:
        parser.add_argument("--notes", help="Why, or what is left.")
    parser.add_argument(
        "-t", "--ticket", help="Ticket whose live run gets the report (default: CAIRN_RUN_DIR)."
    )
    json_flag(parser)
    workspace(parser)


def _number(parser: Parser) -> None:
    parser.add_argument("number", metavar="N", help="Task number as the plan gives it.")


def _verdict(parser: Parser) -> None:
    parser.add_argument(
        "--result",
        type=one_of(VERDICTS),
        metavar=choices_metavar(VERDICTS),
        help="Whether it passed.",
    )


def task_start(parser: Parser) -> None:
    """Mark task N in progress."""
    _number(parser)
    _report(parser)
    args = parser.parse()
    from cairn.cli.handlers import progress

    progress.task_start(**vars(args))


def task_done(parser: Parser) -> None:
    """Mark task N completed, with the files it changed and its outcome."""
    _number(parser)
    parser.add_argument(
        "-f",
        "--files",
        action="append",
        help="Files changed (repeat, or separate with commas).",
    )
    parser.add_argument("--outcome", help="What now works.")
    _report(parser, notes=True)
    args = parser.parse()
    from cairn.cli.handlers import progress

    progress.task_done(**vars(args))


def task_skip(parser: Parser) -> None:
    """Mark task N skipped; --notes says why."""
    _number(parser)
    _report(parser, notes=True)
    args = parser.parse()
    from cairn.cli.handlers import progress

    progress.task_skip(**vars(args))


def task_defer(parser: Parser) -> None:
    """Mark task N deferred; --notes says what is left."""
    _number(parser)
    _report(parser, notes=True)
    args = parser.parse()
    from cairn.cli.handlers import progress

    progress.task_defer(**vars(args))


def finding(parser: Parser) -> None:
    """Record how a review finding was addressed, or (reviewers) add one: finding add F1 "…"."""
    parser.add_argument(
        "words",
        nargs="+",
        metavar="[add] ID [TITLE]",
        help="ID to report how a finding was addressed; or: add ID TITLE (reviewers).",
    )
    parser.add_argument(
        "--status",
        type=one_of(FINDING_RESOLUTIONS),
        metavar=choices_metavar(FINDING_RESOLUTIONS),
        help="How it was addressed.",
    )
    parser.add_argument("--action", help="What was done.")
    parser.add_argument("--location", help="path:line (add)")
    parser.add_argument("--details", help="What is wrong (add)")
    _report(parser)
    args = parser.parse()
    from cairn.cli.handlers import progress

    progress.finding(**vars(args))


def gate(parser: Parser) -> None:
    """Record a quality gate's result."""
    parser.add_argument("name", help="Gate name, e.g. Tests or Lint.")
    _verdict(parser)
    parser.add_argument("--command", help="The command run.")
    _report(parser)
    args = parser.parse()
    from cairn.cli.handlers import progress

    progress.gate(**vars(args))


def defer(parser: Parser) -> None:
    """Add an item to the summary's deferred items."""
    parser.add_argument("item", help="What is left for later.")
    _report(parser)
    args = parser.parse()
    from cairn.cli.handlers import progress

    progress.defer(**vars(args))


def ac(parser: Parser) -> None:
    """(Evaluators) record whether an acceptance criterion is met."""
    parser.add_argument("criterion", help="Acceptance criterion id, e.g. AC-2.")
    _verdict(parser)
    parser.add_argument("--reason", help="Why it fails.")
    _report(parser)
    args = parser.parse()
    from cairn.cli.handlers import progress

    progress.ac(**vars(args))
