"""``cairn demo``: a whole interrupted-and-resumed run with the scripted agent (no API key).

The project, plan and agent script are ``cairn.run.demo``; this command plays them through the
same entry points a person uses (``cairn run``, ``cairn catchup``, ``cairn resume``) and narrates:
the cutoff, the snapshot holding the new untracked file, the partial change summary, catch-up,
the resumed run through review and fix, and where everything is.
"""

from __future__ import annotations

import shutil
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from cairn.cli.output import emit_json, say
from cairn.cli.parsing import Parser, as_path, json_flag

if TYPE_CHECKING:
    from cairn.run.events import EventSink


def demo(parser: Parser) -> int:
    """Run a 4-task plan, get cut off at the turn cap, catch up, resume, review and finish."""
    parser.add_argument(
        "--dir",
        dest="directory",
        type=as_path,
        metavar="DIR",
        help="An empty directory to use and keep (default: a new one).",
    )
    parser.add_argument(
        "--keep", action="store_true", help="Keep the new temporary directory to look around."
    )
    json_flag(parser)
    args = parser.parse()
    from cairn.cli.display import Display

    directory: Path | None = args.directory
    temporary = directory is None
    # absolute: every path the tour prints and passes on (-C, the agent's script) must hold
    # from wherever it is read, not only from the directory the command was typed in
    where = Path(tempfile.mkdtemp(prefix="cairn-demo-")) if directory is None else directory
    where = where.expanduser().absolute()
    removed = temporary and not args.keep
    tell: Callable[[str], None] = (lambda _line: None) if args.json else say
    try:
        facts = tour(where, tell, Display("silent" if args.json else "plain"), removed=removed)
    finally:
        if removed:
            shutil.rmtree(where, ignore_errors=True)
    if args.json:
        emit_json({"directory": str(where), "kept": not removed, **facts})
    return int(facts["exit_code"])


def tour(
    directory: Path, say: Callable[[str], None], sink: EventSink, *, removed: bool = False
) -> dict[str, Any]:
    """Play the demo; returns what happened: the project, both outcomes, and the exit code of
    the final resume (0 when all went well). ``removed``: the directory goes when it ends."""
    from cairn import summary
    from cairn.git import base_runner
    from cairn.run import launch
    from cairn.run.demo import prepare
    from cairn.state import catchup, catchup_text
    from cairn.summary.render import status_line

    repo, plan = prepare(directory)
    say(f"\n1. A project in {repo} and a 4-task plan ({plan.name}); the scripted agent")
    say("   has a 3-turn cap and is scripted to be cut off in task 2, right after it")
    say("   creates a new, untracked file (src/divide.py).\n")
    say(f"$ cairn run {plan.name}")
    first = launch.run(repo, plan, sink=sink)
    say(f"→ {first.status} ({first.reason}), exit code {first.exit_code}\n")

    say("2. Nothing is lost. The snapshot holds the untracked file:")
    git = base_runner(repo)
    ref = f"refs/cairn/wip/{first.ticket}"
    listed = git.out(["ls-tree", "-r", "--name-only", ref]).split()
    status = git.out(["status", "--short"]).strip()
    say(f"   {ref} → {first.snapshot[:12] if first.snapshot else '?'}: {', '.join(listed)}")
    say(f"   the work tree is untouched (git status: {status.replace(chr(10), '; ')})\n")

    say("   The change summary, written at every step, says where the run stopped:")
    loaded = summary.load(Path(first.summary_path or ""))
    if loaded is not None:
        say(f"   ## Status: {status_line(loaded)}")
        for task in loaded.tasks:
            say(f"   ### Task {task.number}: {task.title} — {task.status}")
    say("")
    say(f"$ cairn catchup {first.ticket} --format context")
    report = catchup.catchup(repo, first.ticket)
    for line in textwrap.wrap(catchup_text.context_paragraph(report), 92):
        say(f"   {line}")
    say("")

    say(f"3. $ cairn resume {first.ticket}")
    second = launch.resume(repo, first.ticket, sink=sink)
    say(f"→ {second.status}, exit code {second.exit_code}\n")

    final = summary.load(Path(second.summary_path or ""))
    say("4. Where everything is:" if not removed else "4. Where everything was:")
    say(f"   project:         {repo}")
    say(f"   run directory:   {second.run_dir}")
    say(f"   change summary:  {first.summary_path}")
    if final is not None and final.mode == "review":
        say(f"   review fixes:    {second.summary_path}")
    say(f"   journal:         {Path(second.run_dir) / 'run-log.jsonl'}")
    say(f"   snapshots:       git log {ref}")
    if removed:
        say(f"   ({directory} is removed now; `cairn demo --keep` keeps it to look around)")
    else:
        say(f"   try:             cairn status -C {repo}")
    return {
        "project": str(repo),
        "ticket": first.ticket,
        "interrupted": msgspec.to_builtins(first),
        "resumed": msgspec.to_builtins(second),
        "exit_code": second.exit_code,
    }
