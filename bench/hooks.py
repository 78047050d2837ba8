"""The hot paths through the command line, against the targets of issue 10, in one table.

Run with the project's interpreter (it imports cairn and the other benchmarks)::

    .venv/bin/python bench/hooks.py            # about 2 minutes with the repositories built
    .venv/bin/python bench/hooks.py --quick    # about 1 minute: fewer runs

    git archive 5b99551 src | tar -x -C /tmp/before   # an older cairn, to compare with:
    .venv/bin/python bench/hooks.py --before /tmp/before/src

Three groups, each timed round-robin (every method once per round, so background noise spreads
evenly over them) after one untimed warm-up round; every figure is a median, and a target is
judged on the median of the per-round differences or ratios (a command against the baseline
timed just before it):

1. **Per tool call and per task**, in a small repository on branch ``BENCH-1`` with a run in
   progress (a marker), 3 modified and 5 untracked files: ``python -c pass`` and ``git status``
   (the baselines), then ``cairn hook claude heartbeat`` (the marker's ``last_updated`` is set
   back before each call, untimed, so every call rewrites it), ``post-tool-use`` (under the
   run's environment, budget not yet low), ``snapshot --reason stop`` (nothing changed since the
   last snapshot: a Stop after a reply that touched no file) and ``cairn task done 1``. Hooks run
   as ``python -m cairn`` (what ``cairn hooks install`` and ``cairn run`` write), ``task done``
   as the ``cairn`` script (what an agent types). The same calls in-process give the API
   figures beside them.
2. **``cairn status`` over 10,000 tickets**: ``bench/state.py``'s repository; the targets are
   judged on the calls after the first (settled tickets' rows kept, ``cairn.state.rowcache``);
   the first call, with the row cache removed before it, is timed beside them.
3. **``cairn wip save`` at 100,000 files**: ``bench/snapshot.py``'s repository and states:
   10 modified files (a new ticket each save, so each records a commit), the naive
   read-tree/add/write-tree, and no-op saves (one ticket, nothing changed since its last
   snapshot) on a clean tree, with 10 modified files and with 1,000 untracked files; every
   save is timed right after a ``git status`` of its own, its pair for the ratio.

Beside each command through the command line: the CPU time of the processes it started (user
and system, steadier than the wall time on a shared machine), and its **floor**: a ``python -c``
that imports every module from outside cairn the command loaded (read from one ``-X importtime``
run of it) and does nothing else. The command minus its floor is what cairn's own modules and
work add; the floor is what the standard library and the dependencies it uses cost on this
machine. ``--before SRC`` runs an older cairn's same calls in a copy of the small repository of
its own, so that neither reads the other's formats or undoes the other's caches.

Python's byte-code is compiled first (``compileall``), as pip does on install: without it every
CLI call would compile cairn's modules again. Results: docs/performance.md.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec

import snapshot as snap
import state as status_bench
from cairn.state.rowcache import NAME as ROW_CACHE
from cairn.terms import (
    ENV_DISPATCH_ID,
    ENV_MAX_TURNS,
    ENV_PREFIX,
    ENV_PRESSURE_TURNS,
    ENV_RUN_DIR,
)
from cairn.wip.hashcache import RACY_WINDOW_NS
from common import (
    WORK,
    Stat,
    add_cairn_argument,
    dump_json,
    git,
    log,
    new_repo,
    print_header,
    run_cmd,
    start,
    table,
    timed,
)

TICKET = "BENCH-1"
CATCHUP_RUNS = 100  # as bench/state.py builds it, so the two share the repository
PY = sys.executable


# --- 1. per tool call and per task ----------------------------------------------------------


class SmallRepo:
    """A small dirty repository with a run in progress, its payloads and environments."""

    def __init__(self) -> None:
        self.path = WORK / "hooks-small"
        new_repo(self.path, "a small repository with a run in progress")
        for i in range(20):
            (self.path / f"src/mod{i}.py").parent.mkdir(parents=True, exist_ok=True)
            (self.path / f"src/mod{i}.py").write_text(f"value = {i}\n")
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", "initial")
        git(self.path, "checkout", "-q", "-b", TICKET)
        for i in range(3):
            (self.path / f"src/mod{i}.py").write_text(f"value = {i * 10}  # edited\n")
        for i in range(5):
            (self.path / f"notes/new{i}.md").parent.mkdir(exist_ok=True)
            (self.path / f"notes/new{i}.md").write_text(f"note {i}\n")
        hour_ago = time.time_ns() - 3600 * 10**9  # not racy: the stat cache may keep them
        for changed in [*self.path.glob("src/mod[0-2].py"), *self.path.glob("notes/*.md")]:
            os.utime(changed, ns=(hour_ago, hour_ago))
        self.ref = self._begin_run()
        transcript = self.path / ".git" / "transcript.jsonl"
        lines = [{"type": "assistant", "message": {"id": f"m{i}"}} for i in range(5)]
        transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))
        self.payload = json.dumps(
            {"cwd": str(self.path), "transcript_path": str(transcript), "hook_event_name": "Stop"}
        ).encode()
        self.run_env = {
            ENV_RUN_DIR: str(self.ref.run_dir),
            ENV_MAX_TURNS: "100",
            ENV_PRESSURE_TURNS: "2",
            ENV_DISPATCH_ID: "coder-bench",
        }
        git(self.path, "status", "--porcelain")

    def _begin_run(self) -> Any:
        from cairn import summary
        from cairn.config import load
        from cairn.git import Repo
        from cairn.state.layout import Layout
        from cairn.state.runstate import begin
        from cairn.util import clock

        repo = Repo.discover(self.path)
        layout = Layout.for_repo(repo, load(repo.toplevel))
        tasks = [(0, "Parse"), (1, "Wire"), (2, "Document")]
        ref, lease = begin(
            layout,
            TICKET,
            lambda run_id: summary.scaffold_tasks(TICKET, run_id, tasks, clock.now()),
            stale_after=86400,
        )
        lease.release()  # the marker stays: the heartbeat has one to touch
        return ref

    def age_marker(self) -> None:
        """Set the marker's last_updated back, so the next heartbeat rewrites it."""
        from cairn.state import marker
        from cairn.util import durable

        path = self.ref.marker_path
        current = marker.read(path)
        assert current is not None
        earlier = current.last_updated - timedelta(minutes=5)
        text = marker.render(msgspec.structs.replace(current, last_updated=earlier))
        durable.atomic_write(path, text)


Spec = tuple[list[str], dict[str, str], bytes | None]  # a command line, its environment, stdin


def hot_methods(
    small: SmallRepo, cairn: Path, before: Path | None
) -> tuple[dict[str, Spec], dict[str, Callable[[], object]]]:
    """The hot commands through the command line (what their floors are measured of), and
    every method timed."""
    from cairn.integrations import claude_hooks
    from cairn.run import progress

    hook = [PY, "-m", "cairn", "hook", "claude"]
    payload, path, env = small.payload, small.path, small.run_env
    by_hand = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    in_run = {**by_hand, **env}
    done = ["task", "done", "1", "--files", "src/mod1.py", "--outcome", "bench"]
    as_payload = json.loads(payload)

    def heartbeat_cli() -> None:
        run_cmd([*hook, "heartbeat"], env=by_hand, data=payload)

    def heartbeat_api() -> None:
        claude_hooks.heartbeat(as_payload, by_hand)

    old: dict[str, Callable[[], object]] = {}
    if before is not None:  # an older cairn's source tree, run through -m the same way
        # in a copy of the repository of its own: each cairn reads and writes its own formats
        # (marker, summary, no-op proof) and none undoes the other's caches. Its marker is not
        # set back: it is rewritten when its second has changed, as the current one is.
        other = path.with_name(path.name + "-before")
        shutil.rmtree(other, ignore_errors=True)
        shutil.copytree(path, other, symlinks=True)

        def moved(text: str) -> str:
            return text.replace(str(path), str(other))

        old_payload = moved(payload.decode()).encode()
        old_hand = {**by_hand, "PYTHONPATH": str(before)}
        old_run = {**{k: moved(v) for k, v in in_run.items()}, "PYTHONPATH": str(before)}
        old = {
            "heartbeat (before)": lambda: run_cmd(
                [*hook, "heartbeat"], env=old_hand, data=old_payload
            ),
            "post-tool-use (before)": lambda: run_cmd(
                [*hook, "post-tool-use"], env=old_run, data=old_payload
            ),
            "snapshot (before)": lambda: run_cmd(
                [*hook, "snapshot", "--reason", "stop"], env=old_hand, data=old_payload
            ),
            "task done (before)": lambda: run_cmd(
                [PY, "-m", "cairn", *done], cwd=other, env=old_run
            ),
        }
    cli = {
        "heartbeat": ([*hook, "heartbeat"], by_hand, payload),
        "post-tool-use": ([*hook, "post-tool-use"], in_run, payload),
        "snapshot": ([*hook, "snapshot", "--reason", "stop"], by_hand, payload),
        "task done": ([str(cairn), *done], in_run, None),
    }
    return cli, (
        old
        | {
            "python -c pass": lambda: run_cmd([PY, "-c", "pass"]),
            "git status": lambda: run_cmd(["git", "status", "--porcelain", "-uall"], cwd=path),
            "heartbeat (CLI)": heartbeat_cli,
            "heartbeat (API)": heartbeat_api,
            "post-tool-use (CLI)": lambda: run_cmd(
                [*hook, "post-tool-use"], env=in_run, data=payload
            ),
            "post-tool-use (API)": lambda: claude_hooks.post_tool_use(as_payload, in_run),
            "snapshot (CLI)": lambda: run_cmd(
                [*hook, "snapshot", "--reason", "stop"], env=by_hand, data=payload
            ),
            "snapshot (API)": lambda: claude_hooks.snapshot(as_payload, by_hand, "stop"),
            "task done (CLI)": lambda: run_cmd([str(cairn), *done], cwd=path, env=in_run),
            "task done (API)": lambda: progress.task_done(
                progress.locate(path, None, env), 1, files=["src/mod1.py"], outcome="bench"
            ),
        }
    )


def floor_of(
    small: SmallRepo, argv: list[str], env: dict[str, str], data: bytes | None
) -> Callable[[], object]:
    """What a command's imports from outside cairn cost: a ``python -c`` that imports, in the
    command's order, every module from outside cairn that the command had loaded when it
    exited (its second call, the first being a warm-up; quick commands leave by ``os._exit``,
    which the probe wraps), and does nothing else."""
    for _ in range(2):
        if argv[1:3] == ["-m", "cairn"] and argv[-1] == "heartbeat":
            small.age_marker()
        with tempfile.TemporaryDirectory() as scratch:
            listing = Path(scratch, "modules")
            start = (
                "runpy.run_module('cairn', run_name='__main__', alter_sys=True)"
                if argv[1:3] == ["-m", "cairn"]
                else f"runpy.run_path({argv[0]!r}, run_name='__main__')"
            )
            probe = (
                "import atexit, os, sys, runpy\n"
                f"out = {str(listing)!r}\n"
                "def listed(*_):\n"
                "    open(out, 'w').write('\\n'.join(sys.modules))\n"
                "atexit.register(listed)\n"
                "os._exit = lambda code, leave=os._exit: (listed(), leave(code))\n"
                f"sys.argv = {['cairn', *argv[3 if argv[0] == PY else 1 :]]!r}\n"
                f"{start}\n"
            )
            proc = subprocess.run(
                [PY, "-c", probe], cwd=small.path, env=env, input=data, capture_output=True
            )
            names = listing.read_text().split("\n") if listing.exists() else []
    if proc.returncode != 0 or "cairn.cli.main" not in names:
        raise RuntimeError(f"{argv} did not run: {proc.stderr[-300:]!r}")
    outside = [n for n in names if n == "cairn" or not n.startswith("cairn.")]
    # cairn: what its __init__ sets up; os._exit: as the quick commands leave (cli.main.leave)
    code = f"import os\nfor name in {outside!r}:\n    __import__(name)\nos._exit(0)\n"
    return lambda: run_cmd([PY, "-c", code], cwd=small.path)


def measure_hot(
    small: SmallRepo, cairn: Path, runs: int, before: Path | None
) -> tuple[dict[str, Stat], dict[str, Stat]]:
    """Each method's wall time, and the CPU time of the processes it started (user and
    system: steadier than the wall time on a shared machine) of the command-line ones."""
    cli, methods = hot_methods(small, cairn, before)
    for round_ in range(runs + 1):  # round 0 warms up: page cache, the first snapshot
        if round_ == 1:  # the floors of the steady state, past git's racy window
            time.sleep(RACY_WINDOW_NS / 1e9 + 0.1)
            methods |= {f"{name} (floor)": floor_of(small, *spec) for name, spec in cli.items()}
            times: dict[str, list[float]] = {name: [] for name in methods}
            cpu: dict[str, list[float]] = {name: [] for name in methods}
        for name, fn in methods.items():
            if name in ("heartbeat (CLI)", "heartbeat (API)"):
                small.age_marker()
            used = children_cpu()
            took = timed(fn)
            if round_:
                times[name].append(took)
                cpu[name].append(children_cpu() - used)
    check_hot(small)
    return (
        {name: Stat(samples) for name, samples in times.items()},
        {name: Stat(samples) for name, samples in cpu.items() if "(API)" not in name},
    )


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def check_hot(small: SmallRepo) -> None:
    """A wrong benchmark is worse than none: the calls must have done their work."""
    from cairn.state import marker

    refs = git(small.path, "for-each-ref", "--format=%(refname)", "refs/cairn/wip/").split()
    if refs != [f"refs/cairn/wip/{TICKET}".encode()]:
        raise RuntimeError(f"expected one snapshot ref, found {refs}")
    log_file = small.path / ".git" / "logs" / "refs" / "cairn" / "wip" / TICKET
    if len(log_file.read_bytes().splitlines()) != 1:
        raise RuntimeError("a no-op snapshot hook recorded a snapshot")
    from cairn import summary

    current = marker.read(small.ref.marker_path)
    if current is None or current.run != small.ref.run_id:
        raise RuntimeError(f"unexpected marker after the benchmark: {current}")
    path = small.ref.summary_path()
    done = summary.load(path) if path else None
    if done is None or done.tasks[1].status != "completed":
        raise RuntimeError("task done did not complete task 1")


# --- 2. status over 10,000 tickets ------------------------------------------------------------


def measure_status(cairn: Path, runs: int, rebuild: bool) -> dict[str, Stat]:
    from cairn.state.status import status

    repo = status_bench.build_repo(status_bench.TARGET_TICKETS, CATCHUP_RUNS, rebuild)
    status_bench.check_status(repo, status(repo.path))
    path = str(repo.path)
    rows = json.loads(run_cmd([str(cairn), "status", "--json", "-C", path]))
    if len(rows) != sum(repo.expected_states().values()):
        raise RuntimeError(f"cairn status printed {len(rows)} rows")
    log(f"status over {repo.tickets:,} tickets: {runs} runs…")
    cache = repo.path / ".git" / "cairn" / "cache" / ROW_CACHE

    def first_call() -> None:  # the call that reads every ticket and keeps their rows
        cache.unlink(missing_ok=True)
        run_cmd([str(cairn), "status", "--json", "-C", path])

    return status_bench.round_robin(
        {
            "status --json, no row cache (CLI)": first_call,
            "status --json (CLI)": lambda: run_cmd([str(cairn), "status", "--json", "-C", path]),
            "status, table (CLI)": lambda: run_cmd([str(cairn), "status", "-C", path]),
            "status (API)": lambda: status(repo.path),
        },
        runs,
    )


# --- 3. wip save at 100,000 files ---------------------------------------------------------------


SAVE_METHODS = {
    "modified": ("status", "cli new", "api new", "cli no-op", "api no-op", "naive"),
    "clean": ("status", "cli no-op", "api no-op"),
    "untracked": ("status", "cli no-op", "api no-op"),
}


def measure_save(cairn: Path, runs: int, files: int, rebuild: bool) -> dict[str, dict[str, Stat]]:
    repo = snap.build(files, rebuild)
    found: dict[str, dict[str, Stat]] = {}
    for name, methods in SAVE_METHODS.items():
        log(f"wip save, {files:,} files · {name}: {runs} runs…")
        state = snap.State(name, repo)
        runner = snap.Runner(repo.path, cairn)
        state.setup()
        if name == "untracked":
            # a file changed less than RACY_WINDOW_NS before a snapshot is hashed again by the
            # next save, by design (git's racy rule): the no-op measured here is the steady
            # state, files older than that, as an agent's untracked files are between saves
            time.sleep(RACY_WINDOW_NS / 1e9 + 0.2)
        for method in methods:  # warm-up: objects written, the no-op tickets' first snapshot
            runner.run(method)()
        runner.created.clear()
        times: dict[str, list[float]] = {m: [] for m in methods}
        times.update({paired_status(m): [] for m in methods if m != "status"})
        baseline = runner.run("status")
        for _ in range(runs):
            for method in methods:
                if method != "status":  # its own git status just before it: a tight pair
                    times[paired_status(method)].append(timed(baseline))
                times[method].append(timed(runner.run(method)))
        if any(runner.created["api no-op"]) or (
            name != "clean" and not all(runner.created["api new"])
        ):
            raise RuntimeError(f"{name}: a save recorded (or failed to record) a snapshot")
        state.teardown()
        found[name] = {m: Stat(t) for m, t in times.items()}
    return found


# --- the report -------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds >= 0.1 else f"{seconds * 1000:.1f} ms"


Row = list[Any]  # measure, CLI, API, baseline, measured, target, met
TARGET_KEYS = ("measure", "cli", "api", "baseline", "measured", "target", "pass")


def targets(
    hot: dict[str, Stat], status: dict[str, Stat], save: dict[str, dict[str, Stat]]
) -> list[Row]:
    m = {k: v.median for k, v in hot.items()}
    rows: list[Row] = []

    def overhead(label: str, name: str, bases: tuple[str, ...], limit: float) -> None:
        """The median of the per-round differences (CLI minus the baselines of the same round),
        as the per-round ratios below."""
        cli, api = hot[f"{name} (CLI)"], hot[f"{name} (API)"]
        rounds = zip(cli.samples, *(hot[b].samples for b in bases), strict=True)
        measured = statistics.median(c - sum(rest) for c, *rest in rounds)
        base = sum(m[b] for b in bases)
        base_label = " + ".join("python" if b == "python -c pass" else "status" for b in bases)
        target = f"≤ +{limit * 1000:.0f} ms"
        rows.append(
            [
                label,
                ms(cli.median),
                ms(api.median),
                f"{base_label} {ms(base)}",
                f"+{ms(measured)}",
                target,
                measured <= limit,
            ]
        )

    python, gstatus = "python -c pass", "git status"
    overhead("hook claude heartbeat", "heartbeat", (python,), 0.040)
    overhead("hook claude post-tool-use", "post-tool-use", (python,), 0.040)
    overhead("hook claude snapshot (Stop)", "snapshot", (python, gstatus), 0.060)
    overhead("task done N", "task done", (python,), 0.060)
    api = ms(status["status (API)"].median)
    for label, key in (
        ("status --json, 10,000 tickets", "status --json (CLI)"),
        ("status (table), 10,000 tickets", "status, table (CLI)"),
    ):
        value = status[key].median
        rows.append([label, ms(value), api, "—", ms(value), "≤ 1 s", value <= 1.0])

    def ratio(label: str, state: str, cli: str, base: str, limit: float, at_most: bool) -> None:
        """The median of the per-round ratios (a save against the ``git status`` timed just
        before it, the naive against a save of the same round, so a burst of load elsewhere
        hits both), with the ratio of the medians beside it."""
        stats = save[state]
        api = cli.replace("cli", "api")
        num, den, api_num, api_den = (cli, base, api, base) if at_most else (base, cli, base, api)
        value = paired(stats[num], stats[pair_of(num, den)])
        api_value = paired(stats[api_num], stats[pair_of(api_num, api_den)])
        of_medians = stats[num].median / stats[den].median
        shown = (
            ms(stats[cli].median),
            f"{ms(stats[api].median)} ({api_value:.2f}×)",
            f"{base} {ms(stats[base].median)}",
        )
        met = value <= limit if at_most else value >= limit
        measured = f"{value:.2f}× ({of_medians:.2f}×)"
        rows.append([label, *shown, measured, f"{'≤' if at_most else '≥'} {limit}×", met])

    ratio("wip save, 10 modified ÷ git status", "modified", "cli new", "status", 1.5, True)
    ratio("naive ÷ wip save, 10 modified", "modified", "cli new", "naive", 10.0, False)
    for state, label in (
        ("clean", "clean"),
        ("modified", "10 modified"),
        ("untracked", "1000 untracked"),
    ):
        ratio(f"no-op wip save ÷ git status, {label}", state, "cli no-op", "status", 1.2, True)
    return rows


def paired_status(method: str) -> str:
    return f"status before {method}"


def pair_of(method: str, base: str) -> str:
    """The baseline ``method`` is paired with: the git status timed just before it."""
    return paired_status(method) if base == "status" else base


def paired(a: Stat, b: Stat) -> float:
    """The median of a/b over rounds: both were timed in each round, one after the other."""
    return statistics.median(x / y for x, y in zip(a.samples, b.samples, strict=True))


def report(rows: list[list[Any]]) -> str:
    header = ["measure", "CLI", "API", "baseline", "measured", "target", "result"]
    body = [[*row[:-1], "pass" if row[-1] else "FAIL"] for row in rows]
    return table([header, *body], text_columns=1)


HOT = ("heartbeat", "post-tool-use", "snapshot", "task done")


def over(stats: dict[str, Stat], name: str, base: str = "python -c pass") -> float:
    """The median of the per-round differences of ``name`` and ``base``."""
    pairs = zip(stats[name].samples, stats[base].samples, strict=True)
    return statistics.median(a - b for a, b in pairs)


def before_table(hot: dict[str, Stat], cpu: dict[str, Stat]) -> str:
    head = ["command", "before", "now", "before, over python", "now, over python"]
    rows = [[*head, "CPU: before", "now"]]
    for name in HOT:
        old, new = f"{name} (before)", f"{name} (CLI)"
        rows.append(
            [
                name,
                ms(hot[old].median),
                ms(hot[new].median),
                f"+{ms(over(hot, old))}",
                f"+{ms(over(hot, new))}",
                f"+{ms(over(cpu, old))}",
                f"+{ms(over(cpu, new))}",
            ]
        )
    return table(rows)


def floor_table(hot: dict[str, Stat], cpu: dict[str, Stat]) -> str:
    """Each command over ``python -c pass``, beside its floor: the modules from outside cairn it
    loads, imported alone; the rest is cairn's own modules and work."""
    parts = ["floor", "cairn's own"]
    rows = [["command", "over python", *parts, "CPU: over python", *parts]]
    for name in HOT:
        cli, floor = f"{name} (CLI)", f"{name} (floor)"
        rows.append(
            [
                name,
                f"+{ms(over(hot, cli))}",
                f"+{ms(over(hot, floor))}",
                f"+{ms(over(hot, cli, floor))}",
                f"+{ms(over(cpu, cli))}",
                f"+{ms(over(cpu, floor))}",
                f"+{ms(over(cpu, cli, floor))}",
            ]
        )
    return table(rows)


def times_table(groups: dict[str, dict[str, Stat]]) -> str:
    rows = [["group", "method", "median", "min", "runs"]]
    for group, stats in groups.items():
        for name, stat in stats.items():
            rows.append([group, name, ms(stat.median), ms(stat.min), str(len(stat))])
    return table(rows, text_columns=2)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs (3 and 3)")
    parser.add_argument("--runs", type=int, help="timed runs of the per-call group (15)")
    parser.add_argument("--save-runs", type=int, help="runs of the status and save groups (15)")
    parser.add_argument("--files", type=int, default=100_000, help="files of the save repository")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached repositories")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument(
        "--before",
        type=Path,
        help="the src/ of an older cairn (git archive REV src): its hooks and task done too",
    )
    add_cairn_argument(parser)
    args = parser.parse_args(argv)
    args.runs = args.runs or (5 if args.quick else 15)
    args.save_runs = args.save_runs or (3 if args.quick else 15)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    ready = start("hooks.py", argv, args.cairn, "cairn.cli.main", with_filesystem=True)
    if ready is None:
        return 2
    info, command = ready
    import cairn

    compileall.compile_dir(Path(cairn.__file__).parent, quiet=1)
    log(f"per tool call and per task: {args.runs} runs…")
    if args.before is not None:
        compileall.compile_dir(args.before / "cairn", quiet=1)
    hot, cpu = measure_hot(SmallRepo(), args.cairn, args.runs, args.before)
    load_hot = os.getloadavg()[0]
    status = measure_status(args.cairn, max(3, args.save_runs), args.rebuild)
    save = measure_save(args.cairn, args.save_runs, args.files, args.rebuild)
    info["load_end"] = [round(x, 2) for x in os.getloadavg()]
    rows = targets(hot, status, save)
    groups = {"per call": hot, "status": status}
    groups.update({f"save, {k}": v for k, v in save.items()})
    if args.json:
        dump_json(
            {
                "command": command,
                "machine": info,
                "times_s": {g: {k: v.as_json() for k, v in s.items()} for g, s in groups.items()},
                "cpu_s": {k: v.as_json() for k, v in cpu.items()},
                "targets": [dict(zip(TARGET_KEYS, row, strict=True)) for row in rows],
            }
        )
        return 0
    print_header(command, info)
    print(
        f"# medians; per-call group {args.runs} runs (load after it {load_hot:.2f}), "
        f"status and save {args.save_runs} runs, round-robin\n"
    )
    print(report(rows))
    print()
    print(floor_table(hot, cpu))
    if args.before is not None:
        print()
        print(before_table(hot, cpu))
    print()
    print(times_table(groups))
    return 0 if all(row[-1] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
