"""``cairn worker``: run ticket segments for a fleet on Temporal (docs/scale-out.md)."""

from __future__ import annotations

from cairn.cli.parsing import Parser, as_path, integer, json_flag, workspace
from cairn.errors import ExitCode


def worker(parser: Parser) -> ExitCode:
    """Run ticket segments from the Temporal task queue until SIGINT or SIGTERM."""
    parser.add_argument("--engine", help="temporal (default: fleet.engine).")
    parser.add_argument(
        "--concurrency",
        type=integer(minimum=1),
        metavar="N",
        help="Segments at once (default: fleet.concurrency).",
    )
    parser.add_argument(
        "--workspace-root",
        type=as_path,
        metavar="DIR",
        help="Where the clone and worktrees go (default: <repo>.cairn-worker beside it).",
    )
    json_flag(parser)
    workspace(parser)
    args = parser.parse()
    from cairn.cli.handlers import scale

    return scale.worker(
        args.engine, args.concurrency, args.workspace_root, args.json, args.workspace
    )
