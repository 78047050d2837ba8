"""Benchmark the orchestrator: cairn's own work per agent turn, and a task-completion snapshot.

Run with the project's interpreter, so that the in-process API can be imported::

    .venv/bin/python bench/run.py            # the full run (about 65 s)
    .venv/bin/python bench/run.py --quick    # a smoke run: 30 turns, 3 runs, 10,000 files

Two parts, each against a baseline measured in the same run:

1. **Orchestrator overhead per turn** (target: ≤ 20 ms a turn, snapshots excluded). A small
   repository, a one-task plan and a scripted coder that plays ``--turns`` turns: every turn but
   the last is one ``say: "."`` action; the last one runs ``cairn task done 1`` (the only cairn
   subprocess of the run) and ends the script. ``cairn.toml`` has ``agent.kind = "scripted"``,
   ``max_turns = turns + 1``, ``preserve_uncommitted_work = false`` (no snapshots) and
   ``loop.phases = ["implement"]``. Timed (``--runs`` runs of each, round-robin):

   * ``cairn.run.launch.run`` in-process (API): discovery, config, plan, run state, then per
     turn the prompt (summary read, template, pressure check), the marker rewrite, the journal
     append and the summary read after the turn (the task-completion check); then the end;
   * the same with ``os.fsync`` a no-op in this process (the agent's own fsyncs stay): what
     durability costs;
   * the baseline: the same script played through the same adapter with no orchestrator,
     ``cairn.agents.base.get(...).start(DispatchRequest(...))`` with a constant ``next_prompt``,
     iterating its events. Its run directory is made beforehand (untimed) by
     ``cairn.state.runstate.begin``, so the final ``cairn task done 1`` does the same work in both.

   All three use the scripted adapter registered under another kind that timestamps every
   event as it leaves the session (one list append). That gives, in every run, the wall time
   of the final ``cairn task done`` call (``turn_started`` to ``tool_use`` of the last turn),
   which is taken out of the per-turn figures, and the interval between consecutive
   ``turn_completed`` events (one steady-state turn: cairn's work on the turn that ended, the
   next prompt, the agent's turn). Reported: per run (median), minus the final call, divided
   by the turns, so cairn's fixed costs are spread over the turns; per steady-state turn
   (pooled over the runs: median, mean, p99); cairn's overhead is the difference from the
   baseline. One more orchestrated run under cProfile says where cairn's time goes.
2. **A task-completion snapshot** (``cairn.wip.save(repo, ticket=…, reason="task 3 done",
   run_id=…)``, what the orchestrator calls when a task is completed) on the ``--files``
   repository of ``bench/snapshot.py`` (100,000 files, reused from ``bench/.work/`` or built the
   same way), with 10 modified files: against ``git status --porcelain -uall`` on the same work
   tree (median of ``--snapshot-runs``). Two states: the modified files' objects exist (a new
   ticket each save), and new content before every save on one ticket (each save writes new
   blobs and trees and chains on the last snapshot, as a run's task snapshots do).

The orchestrator's repository is rebuilt at every run (it is tiny). The snapshot repository is
``bench/snapshot.py``'s and is reset the way that script resets it (edits undone, ``refs/cairn/*``
deleted, loose objects pruned), so do not run the two at the same time. Results:
docs/performance.md.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import itertools
import os
import pstats
import re
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cairn.terms import ENV_RUN_DIR, ENV_TASK, ENV_TICKET
from common import (
    WORK,
    Stat,
    dump_json,
    git,
    log,
    ms,
    new_repo,
    print_header,
    ratio,
    start,
    table,
    timed,
)

TURN_TARGET_S = 0.020
TARGET_TURNS = 100
PLAN = "# Plan: benchmark\n\n### Task 1: Do nothing, one turn at a time\n\nNothing to do.\n"
PROMPT = "."  # the baseline's prompt for every turn
FINAL = ["task", "done", "1", "--outcome", "bench"]
SNAPSHOT_FILES = 100_000
SNAPSHOT_TICKET = "BENCH-3"
SNAPSHOT_RUN = "20250602-090000Z"
ORCH = "cairn.run.launch.run (API)"
NOFSYNC = "the same, os.fsync a no-op"
BASE = "adapter only (baseline)"
KINDS = (BASE, ORCH, NOFSYNC)


# --- part 1: the orchestrator -------------------------------------------------------------------


@dataclass
class Project:
    """A repository whose cairn.toml plays a ``turns``-turn script, and its plan."""

    path: Path
    plan: Path
    script: Path
    turns: int


def script_text(turns: int) -> str:
    lines = ["coder:"]
    lines += ['  - - say: "."'] * (turns - 1)
    lines.append("  - - cairn: [" + ", ".join(f'"{a}"' for a in FINAL) + "]")
    return "\n".join(lines) + "\n"


def config_text(script: Path, turns: int) -> str:
    return (
        "[agent]\n"
        'kind = "scripted"\n'
        f'script = "{script}"\n'
        f"max_turns = {turns + 1}\n"
        "max_continuations = 0\n"
        "max_idle_dispatches = 0\n"  # 99 turns that only talk: the no-progress stop is off
        "preserve_uncommitted_work = false\n"
        "\n[loop]\n"
        'phases = ["implement"]\n'
    )


def build_project(root: Path, turns: int) -> Project:
    path = root / f"project-{turns}"
    started = new_repo(path, f"a {turns}-turn scripted run")
    script = root / f"script-{turns}.yaml"
    script.write_text(script_text(turns))
    plan = root / "ORCH.md"
    plan.write_text(PLAN)
    (path / "README.md").write_text("# bench\n")
    (path / "cairn.toml").write_text(config_text(script, turns))
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "bench project")
    log(f"built in {time.monotonic() - started:.1f} s")
    return Project(path, plan, script, turns)


TIMED_KIND = "bench-scripted"
STAMPS: list[tuple[str, int, float]] = []  # (event kind, turn, perf_counter) of the last run
FSYNCS: list[float] = []  # when cairn's process called os.fsync in the last orchestrated run


def register_timed_adapter() -> None:
    """The scripted adapter, with a timestamp of every event as it leaves the session (one list
    append per event). Both the orchestrated runs and the baseline use it."""
    from cairn.agents import ADAPTERS
    from cairn.agents.base import Dispatch, DispatchRequest
    from cairn.agents.scripted.adapter import ScriptedAdapter

    class TimedScriptedAdapter(ScriptedAdapter):
        kind = TIMED_KIND

        def start(self, request: DispatchRequest) -> Dispatch:
            session = super().start(request)
            inner = session.events

            def events() -> Any:
                for event in inner():
                    STAMPS.append((event.kind, event.turn, time.perf_counter()))
                    yield event

            session.events = events  # type: ignore[method-assign]
            return session

    ADAPTERS[TIMED_KIND] = TimedScriptedAdapter


@dataclass
class Timing:
    """One run: its wall time, its final cairn call, the intervals between turn completions."""

    total: float
    final_call: float
    intervals: list[float]  # turn_completed(k) → turn_completed(k + 1), before the final turn
    fsyncs: int  # in cairn's process (not the agent's), in those intervals

    @property
    def without_call(self) -> float:
        return self.total - self.final_call

    @property
    def outside(self) -> float:
        """What is not a steady-state turn: start, first turn, last turn without the final
        call, end."""
        return self.without_call - sum(self.intervals)


def timing(total: float, turns: int) -> Timing:
    stamps = {(kind, turn): t for kind, turn, t in STAMPS}
    try:
        call = stamps[("tool_use", turns)] - stamps[("turn_started", turns)]
        done = [stamps[("turn_completed", k)] for k in range(1, turns)]
    except KeyError as missing:
        raise RuntimeError(f"the run emitted no {missing} event") from None
    fsyncs = sum(1 for t in FSYNCS if done[0] < t <= done[-1])
    return Timing(total, call, [b - a for a, b in itertools.pairwise(done)], fsyncs)


@contextlib.contextmanager
def fsyncs_recorded(durable: bool) -> Iterator[None]:
    """Record when this process calls ``os.fsync``; with ``durable`` false, skip the call."""
    original = os.fsync

    def fsync(fd: Any) -> None:
        FSYNCS.append(time.perf_counter())
        if durable:
            original(fd)

    FSYNCS.clear()
    os.fsync = fsync
    try:
        yield
    finally:
        os.fsync = original


def orchestrated(project: Project, ticket: str, durable: bool = True) -> Timing:
    """One ``cairn.run.launch.run``; checks that it did what was scripted."""
    from cairn.run import launch

    STAMPS.clear()
    with fsyncs_recorded(durable):
        started = time.perf_counter()
        outcome = launch.run(project.path, project.plan, ticket=ticket, agent=TIMED_KIND)
        elapsed = time.perf_counter() - started
    if outcome.status != "completed" or outcome.turns != project.turns or outcome.dispatches != 1:
        raise RuntimeError(
            f"orchestrated run {ticket}: {outcome.status} ({outcome.reason}), "
            f"{outcome.turns} turns, {outcome.dispatches} dispatches"
        )
    return timing(elapsed, project.turns)


def direct(project: Project, ticket: str) -> Timing:
    """The same script through the adapter alone, with a constant prompt.

    The run directory (and with it the summary the final ``cairn task done`` reports to) is made
    first, untimed, by ``cairn.state.runstate.begin``; the run is finished afterwards, untimed."""
    from cairn import summary
    from cairn.agents import get
    from cairn.agents.base import DispatchRequest
    from cairn.state import layout, runstate
    from cairn.util import clock
    from cairn.util.durations import parse_duration

    repo, config, state = layout.discover(project.path)
    ref, lease = runstate.begin(
        state,
        ticket,
        lambda run_id: summary.scaffold_tasks(ticket, run_id, [(1, "bench")], clock.now()),
        stale_after=parse_duration(config.marker.stale_after),
    )
    env = {
        ENV_RUN_DIR: str(ref.run_dir),
        ENV_TICKET: ticket,
        ENV_TASK: "",
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
    }
    request = DispatchRequest(
        role="coder",
        workspace=repo.toplevel,
        run_dir=ref.run_dir,
        max_turns=project.turns + 1,
        next_prompt=lambda turn: PROMPT,
        env=env,
        script=project.script,
    )
    exit_code: Any = None
    STAMPS.clear()
    FSYNCS.clear()
    started = time.perf_counter()
    session = get(TIMED_KIND).start(request)
    for event in session.events():
        if event.turn == project.turns and event.kind == "tool_use":
            exit_code = (event.data.get("output") or {}).get("exit_code")
    elapsed = time.perf_counter() - started
    result = session.result
    runstate.finish(ref, lease)
    if result is None or result.reason != "completed" or result.num_turns != project.turns:
        raise RuntimeError(f"baseline run {ticket}: {result}")
    if exit_code != 0:
        raise RuntimeError(f"baseline run {ticket}: cairn {' '.join(FINAL)} exited {exit_code}")
    done = ref.load_summary()[1].task(1)
    if done is None or done.status != "completed":
        raise RuntimeError(f"baseline run {ticket}: task 1 is not completed")
    return timing(elapsed, project.turns)


def measure_turns(project: Project, runs: int) -> dict[str, list[Timing]]:
    """Round-robin over the kinds (the order rotating from run to run), after a warm-up."""
    seq = 0

    def one(kind: str) -> Timing:
        nonlocal seq
        seq += 1
        if kind == BASE:
            return direct(project, f"BASE-{seq}")
        return orchestrated(project, f"ORCH-{seq}", durable=kind == ORCH)

    for kind in KINDS:  # warm-up: imports, pyc files, page cache
        one(kind)
    found: dict[str, list[Timing]] = {kind: [] for kind in KINDS}
    for r in range(runs):
        log(f"orchestrator: run {r + 1} of {runs}…")
        for kind in KINDS[r % 3 :] + KINDS[: r % 3]:
            found[kind].append(one(kind))
    return found


def turn_figures(found: dict[str, list[Timing]], turns: int) -> dict[str, Any]:
    """Per run and per turn for each kind, and cairn's overhead against the baseline: medians
    over the runs; the steady-state intervals pooled over the runs."""
    out: dict[str, Any] = {"turns": turns, "runs": len(found[ORCH]), "kinds": {}}
    for kind, runs in found.items():
        pooled = [i for t in runs for i in t.intervals]
        without_call = Stat([t.without_call for t in runs])
        out["kinds"][kind] = {
            "total": Stat([t.total for t in runs]),
            "final_call": Stat([t.final_call for t in runs]),
            "without_call": without_call,
            "outside": Stat([t.outside for t in runs]),
            "per_turn_s": without_call.median / turns,
            "interval": Stat(pooled),
            "interval_mean_s": statistics.fmean(pooled),
            "fsyncs_per_turn": sum(t.fsyncs for t in runs) / len(pooled),
        }
    b = out["kinds"][BASE]
    for kind in (ORCH, NOFSYNC):
        k = out["kinds"][kind]
        overhead = k["per_turn_s"] - b["per_turn_s"]
        marginal = k["interval_mean_s"] - b["interval_mean_s"]
        k["overhead"] = {
            "per_turn_s": overhead,
            "run_s": k["without_call"].median - b["without_call"].median,
            "steady_median_s": k["interval"].median - b["interval"].median,
            "steady_mean_s": marginal,
            "fixed_per_run_s": k["outside"].median - b["outside"].median,
        }
    o = out["kinds"][ORCH]["overhead"]
    out.update(
        ratio=out["kinds"][ORCH]["per_turn_s"] / b["per_turn_s"],
        target_s=TURN_TARGET_S,
        worst_s=max(o["per_turn_s"], o["steady_mean_s"]),
        target_met=max(o["per_turn_s"], o["steady_mean_s"]) <= TURN_TARGET_S,
    )
    return out


def short_name(filename: str) -> str:
    return re.sub(r"^.*/(?:site-packages|src|lib/python3\.\d+)/", "", filename)


# Waiting for the agent: for its output, and (Popen.wait sleeps) for its exit.
WAITS = (
    ("~", 0, "<method 'poll' of 'select.poll' objects>"),
    ("~", 0, "<built-in method time.sleep>"),
)


def profile_run(project: Project, top: int) -> dict[str, Any]:
    """cProfile of one orchestrated run. cairn's functions by cumulative time, leaving out those
    that enclose a wait for the agent (their time is mostly the agent's); all by own time."""
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    orchestrated(project, "ORCH-PROFILE")
    profiler.disable()
    total = time.perf_counter() - started
    raw = pstats.Stats(profiler, stream=io.StringIO()).stats  # type: ignore[attr-defined]
    waiting: set[Any] = set()
    todo = list(WAITS)
    while todo:  # every function on a call path to a wait
        func = todo.pop()
        if func in waiting or func not in raw:
            continue
        waiting.add(func)
        todo.extend(raw[func][4])
    rows = []
    for func, (_, calls, tottime, cumtime, _) in raw.items():
        filename, line, name = func
        rows.append(
            {
                "function": f"{short_name(filename)}:{line}({name})",
                "cairn": "/cairn/" in filename and func not in waiting,
                "calls": calls,
                "tottime_s": tottime,
                "cumtime_s": cumtime,
            }
        )
    by_cum = sorted((r for r in rows if r["cairn"]), key=lambda r: r["cumtime_s"], reverse=True)
    by_tot = sorted(rows, key=lambda r: r["tottime_s"], reverse=True)
    wait = sum(raw[w][3] for w in WAITS if w in raw)
    return {
        "turns": project.turns,
        "total_s": total,
        "wait_s": wait,
        "enclosing_wait": sorted(
            f"{short_name(f[0])}:{f[1]}({f[2]})" for f in waiting if "/cairn/" in f[0]
        ),
        "by_cumtime": by_cum[:top],
        "by_tottime": by_tot[:top],
    }


# --- part 2: the task-completion snapshot -------------------------------------------------------


def measure_snapshot(files: int, runs: int, rebuild: bool) -> dict[str, Any]:
    """``cairn.wip.save`` with 10 modified files against ``git status`` on the same work tree."""
    import snapshot as sb  # bench/snapshot.py: its repositories, states and reset
    from cairn import wip

    repo = sb.build(files, rebuild)
    out: dict[str, Any] = {
        "files": repo.files,
        "bytes": repo.bytes,
        "index_bytes": repo.index_bytes(),
        "states": {},
    }
    seq = 0

    def save(ticket: str) -> None:
        saved = wip.save(repo.path, ticket=ticket, reason="task 3 done", run_id=SNAPSHOT_RUN)
        if not saved.created:
            raise RuntimeError(f"the snapshot of {ticket} recorded nothing")

    def new_ticket() -> None:
        nonlocal seq
        seq += 1
        save(f"BENCH-{seq}")

    cases = (
        ("modified", "10 modified, objects exist, new ticket each save", new_ticket),
        (
            "modified-new",
            "10 modified, new content before each save, one ticket",
            lambda: save(SNAPSHOT_TICKET),
        ),
    )
    for name, label, method in cases:
        state = sb.State(name, repo)
        log(f"snapshot: {files:,} files · {label}: {runs} runs…")
        state.setup()
        methods: dict[str, Callable[[], object]] = {
            "git status --porcelain -uall": lambda: git(
                repo.path, "status", "--porcelain", "-uall"
            ),
            "cairn.wip.save (API)": method,
        }
        if not state.fresh:
            for fn in methods.values():  # warm-up: the objects of the edits get written
                fn()
        samples: dict[str, list[float]] = {m: [] for m in methods}
        for _ in range(runs):
            for m, fn in methods.items():
                state.before_each()
                samples[m].append(timed(fn))
        state.teardown()
        out["states"][label] = {m: Stat(s) for m, s in samples.items()}
    return out


# --- reporting ----------------------------------------------------------------------------------


def turns_tables(fig: dict[str, Any]) -> str:
    kinds = fig["kinds"]
    b = kinds[BASE]
    runs = [
        [
            f"per run ({fig['turns']} turns)",
            "run: median (ms)",
            "min (ms)",
            "final cairn call (ms)",
            "run without it (ms)",
            "per turn (ms)",
            "/ baseline",
        ]
    ]
    steady = [
        [
            f"one turn, steady state ({len(b['interval']):,} turns)",
            "median (ms)",
            "mean (ms)",
            "p99 (ms)",
            "min (ms)",
            "mean / baseline",
            "fsyncs (cairn's process)",
        ]
    ]
    for kind in KINDS:
        k = kinds[kind]
        runs.append(
            [
                kind,
                ms(k["total"].median),
                ms(k["total"].min),
                ms(k["final_call"].median),
                ms(k["without_call"].median),
                ms(k["per_turn_s"]),
                ratio(k["per_turn_s"], b["per_turn_s"]),
            ]
        )
        steady.append(
            [
                kind,
                ms(k["interval"].median),
                ms(k["interval_mean_s"]),
                ms(k["interval"].p99),
                ms(k["interval"].min),
                ratio(k["interval_mean_s"], b["interval_mean_s"]),
                f"{k['fsyncs_per_turn']:.1f}",
            ]
        )
    for kind, label in ((ORCH, "cairn's overhead"), (NOFSYNC, "cairn's overhead, no fsync")):
        o = kinds[kind]["overhead"]
        runs.append([label, "—", "—", "—", ms(o["run_s"]), ms(o["per_turn_s"]), "—"])
        steady.append([label, ms(o["steady_median_s"]), ms(o["steady_mean_s"]), "—", "—", "—", "—"])
    return table(runs) + "\n\n" + table(steady)


def profile_table(entries: list[dict[str, Any]], turns: int) -> str:
    rows = [["function", "calls", "tottime (ms)", "cumtime (ms)", "cumtime / turns (ms)"]]
    for e in entries:
        rows.append(
            [
                e["function"],
                f"{e['calls']:,}",
                ms(e["tottime_s"]),
                ms(e["cumtime_s"]),
                ms(e["cumtime_s"] / turns),
            ]
        )
    return table(rows)


def snapshot_table(data: dict[str, Any]) -> str:
    rows = [["state", "git status (ms)", "wip.save (ms)", "wip.save min (ms)", "save / status"]]
    for label, stats in data["states"].items():
        status, save = stats["git status --porcelain -uall"], stats["cairn.wip.save (API)"]
        rows.append(
            [
                label,
                ms(status.median),
                ms(save.median),
                ms(save.min),
                ratio(save.median, status.median),
            ]
        )
    return table(rows)


def as_json(value: Any) -> Any:
    if isinstance(value, Stat):
        return value.as_json()
    if isinstance(value, dict):
        return {
            (k if isinstance(k, str) else f"{k[0]}, {k[1]} turns"): as_json(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [as_json(v) for v in value]
    return value


# --- main ---------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 30 turns, 3 runs, 10,000 files"
    )
    parser.add_argument("--turns", type=int, help=f"turns of a scripted run ({TARGET_TURNS})")
    parser.add_argument("--runs", type=int, help="timed runs of each kind (9)")
    parser.add_argument(
        "--files", type=int, help=f"files of the snapshot repository ({SNAPSHOT_FILES:,})"
    )
    parser.add_argument("--snapshot-runs", type=int, help="timed snapshots per state (7)")
    parser.add_argument("--no-snapshot", action="store_true", help="leave out the snapshot part")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the snapshot repository")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = parser.parse_args(argv)
    args.turns = args.turns or (30 if args.quick else TARGET_TURNS)
    args.runs = args.runs or (3 if args.quick else 9)
    args.files = args.files or (10_000 if args.quick else SNAPSHOT_FILES)
    args.snapshot_runs = args.snapshot_runs or (3 if args.quick else 7)
    if args.turns < 4 or args.runs < 1 or args.snapshot_runs < 1:
        parser.error("need --turns ≥ 4 and --runs, --snapshot-runs ≥ 1")
    if args.files < 200:
        parser.error("need --files ≥ 200")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # No cairn executable is run: the scripted agent calls ``python -m cairn``.
    ready = start(
        "run.py", argv, Path(sys.executable), "cairn.run.orchestrator", with_filesystem=True
    )
    if ready is None:
        return 2
    info, command = ready
    started = time.monotonic()

    register_timed_adapter()
    root = WORK / "run-orchestrator"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    project = build_project(root, args.turns)
    figures = turn_figures(measure_turns(project, args.runs), args.turns)
    log("profiling one orchestrated run…")
    profile = profile_run(project, 15)
    snap = None
    if not args.no_snapshot:
        snap = measure_snapshot(args.files, args.snapshot_runs, args.rebuild)
    info["load_end"] = [round(x, 2) for x in os.getloadavg()]
    info["elapsed_s"] = round(time.monotonic() - started, 1)

    if args.json:
        dump_json(
            as_json(
                {
                    "command": command,
                    "machine": info,
                    "orchestrator": figures,
                    "profile": profile,
                    "snapshot": snap,
                }
            )
        )
        return 0

    print_header(command, info)
    print(
        f"# {info['elapsed_s']} s in all (building the snapshot repository included if not cached)"
    )
    print(f"\n## Orchestrator overhead per turn ({args.turns} turns, median of {args.runs} runs)\n")
    print(turns_tables(figures))
    o, n = figures["kinds"][ORCH]["overhead"], figures["kinds"][NOFSYNC]["overhead"]
    print(
        f"\nfixed overhead of a run (start, first and last turn, end; median difference): "
        f"{ms(o['fixed_per_run_s'])} ms ({ms(n['fixed_per_run_s'])} ms without fsync)"
    )
    verdict = "pass" if figures["target_met"] else "FAIL"
    print(
        f"\ntarget: cairn's overhead ≤ {TURN_TARGET_S * 1000:.0f} ms a turn: "
        f"{ms(o['per_turn_s'])} ms per turn of a run (fixed costs included), "
        f"{ms(o['steady_mean_s'])} ms per steady-state turn (mean) → {verdict}"
    )
    print(
        f"\n## cProfile of one orchestrated run ({profile['turns']} turns, "
        f"{profile['total_s'] * 1000:,.0f} ms under the profiler)\n"
    )
    print(
        f"waiting for the agent (select.poll, time.sleep in Popen.wait): "
        f"{profile['wait_s'] * 1000:,.0f} ms; cairn's "
        f"functions by cumulative time, without those that enclose that wait:\n"
    )
    print(profile_table(profile["by_cumtime"], profile["turns"]))
    print("\nAll functions by own time:\n")
    print(profile_table(profile["by_tottime"], profile["turns"]))
    if snap is not None:
        print(
            f"\n## Task-completion snapshot, {snap['files']:,} files "
            f"(median of {args.snapshot_runs})\n"
        )
        print(snapshot_table(snap))
    return 0


if __name__ == "__main__":
    sys.exit(main())
