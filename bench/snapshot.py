"""Benchmark ``cairn wip save`` against ``git status`` and the alternatives.

Run with the project's interpreter, so that the in-process API can be imported::

    .venv/bin/python bench/snapshot.py --sizes 10000,100000 --runs 5

For each synthetic repository (``--sizes`` tracked files, about 10 KB each, 20 files a directory,
three levels deep) and each work-tree state, every method below is timed ``--runs`` times,
round-robin, so that background noise spreads evenly over the methods:

* ``status``: ``git status --porcelain -uall``, the baseline;
* ``cli new`` / ``cli no-op``: ``cairn wip save`` as a subprocess, with a new ticket each run
  (every run records a new snapshot commit) or with one fixed ticket (nothing changed since the
  last snapshot, so the run records nothing);
* ``api new`` / ``api no-op``: the same through ``cairn.wip.save`` inside this process, which
  leaves out the interpreter start-up and the imports;
* ``naive``: ``GIT_INDEX_FILE=tmp git read-tree HEAD`` → ``git add -A`` → ``git write-tree``
  with a fresh temporary index each run (git-wip, Codex ghost commits);
* ``stash``: ``git stash create``, for reference only: it misses untracked files and rewrites
  the real index.

Steady states (``clean``; ``modified``: 10 tracked files edited; ``untracked``: 1000 new files in
5 new directories) are set up once, followed by one ``git status`` (what a shell prompt or an IDE
does) and one untimed warm-up round; the timed runs then repeat on an unchanged work tree, so the
objects of its content already exist. The ``-new`` states (``modified-new``, ``untracked-new``)
rewrite the changed files with never-seen content (and run ``git status``) before *every* timed
call, so each call pays for hashing and writing the new objects, which is what a snapshot after
each step of an agent pays.

Between states the edits are undone, the new files removed, ``refs/cairn/*`` deleted, loose
objects pruned and the index refreshed (after a pause, so that no entry is racily clean).
``--breakdown`` also times each git process of an in-process save. Built repositories are cached
under ``bench/.work/`` keyed by size; ``--rebuild`` rebuilds them. Results: docs/performance.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import (
    WORK,
    Stat,
    add_cairn_argument,
    dump_json,
    git,
    git_env,
    log,
    new_repo,
    print_header,
    ratio,
    run_cmd,
    start,
    table,
    timed,
)
from common import ms as _ms

LAYOUT_VERSION = 1  # bump when the generated layout changes, to invalidate cached repositories

FILES_PER_DIR = 20
FANOUT = 10  # top-level and second-level directories
MIN_FILE, MAX_FILE = 2 * 1024, 18 * 1024  # uniform, so about 10 KB a file on average
EXTENSIONS = (".py", ".c", ".h", ".md", ".json", ".txt")
MODIFIED = 10
UNTRACKED_DIRS = 5
UNTRACKED_PER_DIR = 200
MIN_NEW, MAX_NEW = 1024, 4 * 1024
# Past this, a file modified in the same second as the index write is no longer "racily clean".
RACY_PAUSE = 1.1

METHODS = ("status", "cli new", "cli no-op", "api new", "api no-op", "naive", "stash")
STEADY = ("clean", "modified", "untracked")
FRESH = ("modified-new", "untracked-new")
LABELS = {
    "clean": "clean",
    "modified": "10 modified",
    "untracked": "1000 untracked",
    "modified-new": "10 modified, new content each call",
    "untracked-new": "1000 untracked, new content each call",
}


# --- synthetic content ----------------------------------------------------------------------------

_VOCABULARY = (
    "self return import from def class if else elif for while in not and or None True False "
    "value index result config path item data error yield async await lambda with try except "
    "int str list dict bytes len range print open read write close node tree commit ref blob"
)


def make_corpus(size: int = 1 << 20) -> bytes:
    """About 1 MB of source-like text; files are slices of it behind a unique first line."""
    rng = random.Random(20240601)
    words = _VOCABULARY.split()
    lines: list[str] = []
    total = 0
    while total < size + MAX_FILE:
        indent = "    " * rng.randrange(4)
        line = indent + " ".join(rng.choice(words) for _ in range(rng.randrange(3, 12)))
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines).encode()


CORPUS = make_corpus()


def _mix(i: int) -> int:
    return (i * 2654435761 + 0x9E3779B9) & 0xFFFFFFFF


def slice_of(i: int, lo: int, hi: int) -> bytes:
    h = _mix(i)
    size = lo + h % (hi - lo + 1)
    start = (h >> 7) % (len(CORPUS) - size)
    return CORPUS[start : start + size]


def tracked_path(i: int) -> str:
    leaf = i // FILES_PER_DIR
    top, mid, low = leaf % FANOUT, (leaf // FANOUT) % FANOUT, leaf // (FANOUT * FANOUT)
    ext = EXTENSIONS[i % len(EXTENSIONS)]
    return f"src/pkg{top:02d}/mod{mid:02d}/part{low:04d}/file{i % FILES_PER_DIR:02d}{ext}"


def tracked_content(i: int) -> bytes:
    return f"// file {i}\n".encode() + slice_of(i, MIN_FILE, MAX_FILE)


def modified_indices(n: int) -> list[int]:
    """One file in each of 10 leaf directories under 10 different top-level packages."""
    leaves = n // FILES_PER_DIR
    return [(k * (leaves // MODIFIED + 11)) % leaves * FILES_PER_DIR + 7 for k in range(MODIFIED)]


def untracked_files(salt: str) -> Iterator[tuple[str, bytes]]:
    for d in range(UNTRACKED_DIRS):
        for j in range(UNTRACKED_PER_DIR):
            k = d * UNTRACKED_PER_DIR + j
            body = slice_of(k + 7_000_000, MIN_NEW, MAX_NEW)
            yield f"src/newfeature{d}/gen{j:03d}.py", f"# new {k} {salt}\n".encode() + body


# --- building and resetting the repositories ------------------------------------------------------


@dataclass
class BenchRepo:
    path: Path
    files: int  # generated files; a .gitignore comes on top
    bytes: int
    dirs: int

    @property
    def tracked(self) -> int:
        return self.files + 1

    def index_bytes(self) -> int:
        return (self.path / ".git" / "index").stat().st_size


def build(n: int, rebuild: bool) -> BenchRepo:
    path = WORK / f"repo-{n}"
    marker = path / ".git" / "cairn-bench.json"
    if not rebuild and marker.exists():
        info = json.loads(marker.read_text())
        if info.get("layout") == LAYOUT_VERSION and info.get("files") == n:
            repo = BenchRepo(path, n, info["bytes"], info["dirs"])
            reset_clean(repo)
            return repo
    started = new_repo(path, f"{n:,} files")
    importer = subprocess.Popen(
        ["git", "fast-import", "--quiet", "--done"],
        cwd=path,
        env=git_env(),
        stdin=subprocess.PIPE,
    )
    assert importer.stdin is not None
    out = importer.stdin
    made: set[Path] = set()
    total = 0
    manifest: list[bytes] = []
    entries = ((tracked_path(i), tracked_content(i)) for i in range(n))
    gitignore = (".gitignore", b"*.o\n*.pyc\n/build/\n")
    for mark, (rel, data) in enumerate(itertools.chain(entries, [gitignore]), start=1):
        target = path / rel
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        target.write_bytes(data)
        total += len(data)
        out.write(b"blob\nmark :%d\ndata %d\n%s\n" % (mark, len(data), data))
        manifest.append(b"M 100644 :%d %s\n" % (mark, rel.encode()))
    message = f"synthetic repository of {n} files\n".encode()
    stamp = b"cairn bench <bench@example.invalid> 1700000000 +0000"
    out.write(b"commit refs/heads/main\nauthor %s\ncommitter %s\n" % (stamp, stamp))
    out.write(b"data %d\n%s\n" % (len(message), message))
    out.writelines(manifest)
    out.write(b"\ndone\n")
    out.close()
    if importer.wait() != 0:
        raise RuntimeError("git fast-import failed")
    git(path, "read-tree", "HEAD")
    git(path, "update-index", "-q", "--refresh")  # hashes every file once and fills the stat
    repo = BenchRepo(path, n, total, len(made))
    settle(repo)
    marker.write_text(
        json.dumps({"layout": LAYOUT_VERSION, "files": n, "bytes": total, "dirs": len(made)})
    )
    log(
        f"built in {time.monotonic() - started:.0f} s: {total / 1e6:,.0f} MB, "
        f"{len(made):,} directories, index {repo.index_bytes() / 1e6:.1f} MB"
    )
    return repo


def settle(repo: Path | BenchRepo) -> None:
    """Refresh the index stat cache like a user's prompt would, and check the tree is clean."""
    path = repo.path if isinstance(repo, BenchRepo) else repo
    time.sleep(RACY_PAUSE)
    git(path, "status", "--porcelain")
    dirty = git(path, "status", "--porcelain", "-uall")
    if dirty:
        raise RuntimeError(f"{path} is not clean after reset:\n{dirty.decode()[:2000]}")


def delete_cairn_refs(path: Path) -> None:
    refs = git(path, "for-each-ref", "--format=%(refname)", "refs/cairn/").split()
    if refs:
        git(path, "update-ref", "--stdin", data=b"".join(b"delete %s\n" % r for r in refs))


def reset_clean(repo: BenchRepo) -> None:
    """Undo whatever an interrupted run left: edits, new files, refs, unreachable objects."""
    for d in range(UNTRACKED_DIRS):
        shutil.rmtree(repo.path / f"src/newfeature{d}", ignore_errors=True)
    for i in modified_indices(repo.files):
        target = repo.path / tracked_path(i)
        if target.read_bytes() != tracked_content(i):
            target.write_bytes(tracked_content(i))
    delete_cairn_refs(repo.path)
    shutil.rmtree(repo.path / ".git" / "cairn", ignore_errors=True)
    git(repo.path, "prune", "--expire=now")  # drop the loose objects of earlier runs
    settle(repo)


# --- work-tree states -----------------------------------------------------------------------------


@dataclass
class State:
    name: str
    repo: BenchRepo
    counter: int = 0

    @property
    def fresh(self) -> bool:
        return self.name in FRESH

    def setup(self) -> None:
        self.apply("setup")
        git(self.repo.path, "status", "--porcelain")

    def before_each(self) -> None:
        """New content before every timed call (the ``-new`` states only), then a status."""
        if self.fresh:
            self.counter += 1
            self.apply(f"run {self.counter}")
            git(self.repo.path, "status", "--porcelain")

    def apply(self, salt: str) -> None:
        root = self.repo.path
        if self.name.startswith("modified"):
            for i in modified_indices(self.repo.files):
                (root / tracked_path(i)).write_bytes(
                    tracked_content(i) + f"\n// bench edit {salt}\n".encode()
                )
        elif self.name.startswith("untracked"):
            for rel, data in untracked_files(salt):
                target = root / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)

    def teardown(self) -> None:
        reset_clean(self.repo)


# --- the timed methods ----------------------------------------------------------------------------


@dataclass
class Runner:
    repo: Path
    cairn: Path
    seq: int = 0
    cli_tickets: list[str] = field(default_factory=list)
    created: dict[str, list[bool]] = field(default_factory=lambda: defaultdict(list))

    def ticket(self, kind: str) -> str:
        self.seq += 1
        return f"bench-{kind}-{self.seq}"

    def cli(self, ticket: str) -> None:
        args = ["wip", "save", "-C", str(self.repo), "--ticket", ticket, "--reason", "bench"]
        run_cmd([str(self.cairn), *args])

    def api(self, ticket: str, config: Any = None) -> bool:
        from cairn import wip

        return wip.save(self.repo, ticket=ticket, reason="bench", config=config).created

    def run(self, method: str) -> Callable[[], object]:
        repo = self.repo
        if method == "status":
            return lambda: git(repo, "status", "--porcelain", "-uall")
        if method == "cli new":
            ticket = self.ticket("cli")
            self.cli_tickets.append(ticket)
            return lambda: self.cli(ticket)
        if method == "cli no-op":
            return lambda: self.cli("bench-noop-cli")
        if method == "api new":
            ticket = self.ticket("api")
            return lambda: self.created["api new"].append(self.api(ticket))
        if method == "api no-op":
            return lambda: self.created["api no-op"].append(self.api("bench-noop-api"))
        if method == "naive":
            return self.naive
        if method == "stash":
            return lambda: git(repo, "stash", "create")
        raise ValueError(method)

    def naive(self) -> None:
        index = self.repo / ".git" / "bench-naive-index"
        index.unlink(missing_ok=True)
        env = git_env(GIT_INDEX_FILE=str(index))
        git(self.repo, "read-tree", "HEAD", env=env)
        git(self.repo, "add", "-A", env=env)
        git(self.repo, "write-tree", env=env)
        index.unlink()


@dataclass
class Result(Stat):
    """The timed runs (``samples``) of one method in one state of one repository."""

    size: int
    state: str
    method: str


def methods_for(state: State) -> list[str]:
    # A no-op save needs an unchanged work tree; "new content" states change it before each call.
    return [m for m in METHODS if not (state.fresh and m.endswith("no-op"))]


def measure_state(repo: BenchRepo, state: State, runs: int, cairn: Path) -> list[Result]:
    runner = Runner(repo.path, cairn)
    methods = methods_for(state)
    state.setup()
    if not state.fresh:  # warm-up: objects written, no-op tickets primed
        for method in methods:
            runner.run(method)()
    runner.created.clear()
    times: dict[str, list[float]] = {m: [] for m in methods}
    for _ in range(runs):
        for method in methods:
            state.before_each()
            fn = runner.run(method)
            times[method].append(timed(fn))
    check_created(repo.path, state, runner)
    state.teardown()
    return [
        Result(samples=t, size=repo.files, state=state.name, method=m) for m, t in times.items()
    ]


def check_created(path: Path, state: State, runner: Runner) -> None:
    """A wrong benchmark is worse than none: new saves must record, no-op saves must not."""
    expect_new = state.name != "clean"
    if any(c != expect_new for c in runner.created["api new"]):
        raise RuntimeError(f"{state.name}: api new saves created={runner.created['api new']}")
    if any(runner.created["api no-op"]):
        raise RuntimeError(f"{state.name}: a no-op api save recorded a snapshot")
    refs = set(git(path, "for-each-ref", "--format=%(refname)", "refs/cairn/").decode().split())
    cli_refs = {r for r in refs if r.startswith("refs/cairn/wip/bench-cli-")}
    expected = {f"refs/cairn/wip/{t}" for t in runner.cli_tickets} if expect_new else set()
    if cli_refs != expected:
        raise RuntimeError(f"{state.name}: cli snapshot refs {sorted(cli_refs)}, unexpected")
    if not state.fresh and expect_new:
        log_file = path / ".git" / "logs" / "refs" / "cairn" / "wip" / "bench-noop-cli"
        if len(log_file.read_bytes().splitlines()) != 1:
            raise RuntimeError(f"{state.name}: a no-op cli save moved its ref")


# --- the per-step breakdown -----------------------------------------------------------------------


@contextmanager
def instrumented(steps: dict[str, float]) -> Iterator[None]:
    """Time every git process cairn starts, and the index copy, inside this process."""
    from cairn import git as cairn_git
    from cairn.git import process as git_process
    from cairn.git import sessions as git_sessions
    from cairn.wip import saving as cairn_save

    original_run = cairn_git.Git.run
    original_result = git_process.Started.result
    methods = ("__init__", "readline", "read")
    original_session = {n: getattr(git_sessions.Session, n) for n in methods}
    original_copy = shutil.copy2
    original_select = cairn_save.select_untracked

    def run(self: Any, args: Sequence[str], **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original_run(self, args, **kwargs)
        finally:
            steps[f"git {args[0]}"] += time.perf_counter() - started

    def result(self: Any, **kwargs: Any) -> Any:  # a command started early (git status)
        started = time.perf_counter()
        try:
            return original_result(self, **kwargs)
        finally:
            steps[f"git {self.args[0]} (wait)"] += time.perf_counter() - started

    def timed_session(name: str) -> Any:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original_session[name](self, *args, **kwargs)
            finally:
                label = getattr(self, "name", None) or (args[1] if len(args) > 1 else "?")
                steps[f"git {label} (session)"] += time.perf_counter() - started

        return method

    def copy(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original_copy(*args, **kwargs)
        finally:
            steps["copy index"] += time.perf_counter() - started

    def select(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original_select(*args, **kwargs)
        finally:
            steps["select untracked (lstat)"] += time.perf_counter() - started

    cairn_git.Git.run = run  # type: ignore[method-assign]
    git_process.Started.result = result  # type: ignore[method-assign]
    for name in original_session:
        setattr(git_sessions.Session, name, timed_session(name))
    shutil.copy2 = copy  # type: ignore[assignment]
    cairn_save.select_untracked = select  # type: ignore[assignment]
    try:
        yield
    finally:
        cairn_git.Git.run = original_run  # type: ignore[method-assign]
        git_process.Started.result = original_result  # type: ignore[method-assign]
        for name, method in original_session.items():
            setattr(git_sessions.Session, name, method)
        shutil.copy2 = original_copy
        cairn_save.select_untracked = original_select


NO_FSYNC = "total, snapshot.fsync = false"


def breakdown_state(repo: BenchRepo, state: State, runs: int) -> dict[str, float]:
    """Median seconds per step of ``api new`` saves (each step summed within one save), and the
    total of the same save with ``snapshot.fsync = false``."""
    from cairn.config.records import Config, SnapshotConfig

    no_fsync = Config(snapshot=SnapshotConfig(fsync=False))
    runner = Runner(repo.path, Path())
    state.setup()
    runner.api("bench-warm")
    runner.api("bench-warm-nofsync", no_fsync)
    samples: dict[str, list[float]] = defaultdict(list)
    for _ in range(runs):
        state.before_each()
        steps: dict[str, float] = defaultdict(float)
        with instrumented(steps):
            total = timed(lambda: runner.api(runner.ticket("api")))
        steps["python (rest)"] = total - sum(steps.values())
        steps["total"] = total
        state.before_each()
        steps[NO_FSYNC] = timed(lambda: runner.api(runner.ticket("api"), no_fsync))
        for key, value in steps.items():
            samples[key].append(value)
    state.teardown()
    return {k: statistics.median(v + [0.0] * (runs - len(v))) for k, v in samples.items()}


# --- reporting ------------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return _ms(seconds, below_1=1)


def lookup(results: list[Result]) -> dict[tuple[int, str, str], Result]:
    return {(r.size, r.state, r.method): r for r in results}


def time_table(results: list[Result], size: int) -> str:
    found = lookup(results)
    rows = [["state", *(f"{m} (ms)" for m in METHODS)]]
    for state in (*STEADY, *FRESH):
        row = [LABELS[state]]
        for method in METHODS:
            r = found.get((size, state, method))
            row.append(f"{ms(r.median)} ({ms(r.min)})" if r else "—")
        if len(row) > 1 and any(c != "—" for c in row[1:]):
            rows.append(row)
    return table(rows)


RATIOS = (
    ("cli new / status", "cli new", "status"),
    ("api new / status", "api new", "status"),
    ("cli no-op / status", "cli no-op", "status"),
    ("api no-op / status", "api no-op", "status"),
    ("naive / cli new", "naive", "cli new"),
    ("naive / api new", "naive", "api new"),
    ("stash / status", "stash", "status"),
)


def median_of(found: dict[tuple[int, str, str], Result], key: tuple[int, str, str]) -> float | None:
    r = found.get(key)
    return r.median if r else None


def ratio_table(results: list[Result], size: int) -> str:
    found = lookup(results)
    rows = [["state", *(name for name, _, _ in RATIOS)]]
    for state in (*STEADY, *FRESH):
        if (size, state, "status") not in found:
            continue
        rows.append(
            [LABELS[state]]
            + [
                ratio(median_of(found, (size, state, a)), median_of(found, (size, state, b)))
                for _, a, b in RATIOS
            ]
        )
    return table(rows)


@dataclass
class Target:
    name: str
    state: str
    value: float
    limit: float
    at_most: bool

    @property
    def ok(self) -> bool:
        return self.value <= self.limit if self.at_most else self.value >= self.limit


def targets(results: list[Result]) -> list[Target]:
    found = lookup(results)
    size = max(r.size for r in results)
    out: list[Target] = []

    def add(name: str, state: str, a: str, b: str, limit: float, at_most: bool) -> None:
        num, den = median_of(found, (size, state, a)), median_of(found, (size, state, b))
        if num is not None and den:
            out.append(Target(name, state, num / den, limit, at_most))

    for state in ("clean", "modified", "modified-new"):
        for kind in ("cli", "api"):
            add(f"{kind} new ≤ 1.5× status", state, f"{kind} new", "status", 1.5, True)
    for state in ("clean", "modified", "modified-new"):
        for kind in ("cli", "api"):
            add(f"naive ≥ 10× {kind} new", state, "naive", f"{kind} new", 10.0, False)
    for state in STEADY:
        for kind in ("cli", "api"):
            add(f"{kind} no-op ≤ 1.2× status", state, f"{kind} no-op", "status", 1.2, True)
    return out


def target_table(found: list[Target], size: int) -> str:
    rows = [[f"target (at {size:,} files)", "state", "measured", "result"]]
    for t in found:
        rows.append([t.name, LABELS[t.state], f"{t.value:.2f}×", "pass" if t.ok else "FAIL"])
    return table(rows, text_columns=2)


def breakdown_table(data: dict[str, dict[str, float]]) -> str:
    last = ("python (rest)", "total", NO_FSYNC)
    keys = sorted({k for steps in data.values() for k in steps if k not in last})
    rows = [["step (ms, median)", *(LABELS[k] for k in data)]]
    for key in [*keys, *last]:
        rows.append([key] + [ms(steps.get(key, 0.0)) for steps in data.values()])
    return table(rows)


def startup(cairn: Path, runs: int) -> float:
    """Median wall time of ``cairn --version``: start-up and the command line (no API)."""
    samples = [timed(lambda: run_cmd([str(cairn), "--version"])) for _ in range(runs)]
    return statistics.median(samples)


# --- main -----------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default="10000,100000",
        help="comma-separated tracked-file counts (default: %(default)s)",
    )
    parser.add_argument("--runs", type=int, default=5, help="timed runs per method (default 5)")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached repositories")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument(
        "--states",
        default=",".join((*STEADY, *FRESH)),
        help="comma-separated subset of the states to measure",
    )
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="also time each step of an in-process save (git process by process)",
    )
    add_cairn_argument(parser)
    args = parser.parse_args(argv)
    args.size_list = [int(s.replace("_", "")) for s in args.sizes.split(",") if s]
    args.state_list = [s.strip() for s in args.states.split(",") if s.strip()]
    unknown = set(args.state_list) - set(STEADY) - set(FRESH)
    if unknown:
        parser.error(f"unknown states: {', '.join(sorted(unknown))}")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    ready = start("snapshot.py", argv, args.cairn, "cairn.wip")
    if ready is None:
        return 2
    info, command = ready
    info["cli_startup_s"] = startup(args.cairn, max(args.runs, 5))
    results: list[Result] = []
    repos: dict[int, dict[str, Any]] = {}
    breakdowns: dict[int, dict[str, dict[str, float]]] = {}
    for size in args.size_list:
        repo = build(size, args.rebuild)
        repos[size] = {
            "files": repo.files,
            "tracked": repo.tracked,
            "bytes": repo.bytes,
            "dirs": repo.dirs,
            "index_bytes": repo.index_bytes(),
            "load_before": os.getloadavg()[0],
        }
        for name in args.state_list:
            log(f"{size:,} files · {name}: {args.runs} runs…")
            results += measure_state(repo, State(name, repo), args.runs, args.cairn)
        if args.breakdown:
            breakdowns[size] = {}
            for name in args.state_list:
                log(f"{size:,} files · {name}: breakdown…")
                breakdowns[size][name] = breakdown_state(repo, State(name, repo), args.runs)
        repos[size]["load_after"] = os.getloadavg()[0]
    info["load_end"] = [round(x, 2) for x in os.getloadavg()]
    found = targets(results)
    if args.json:
        dump_json(
            {
                "command": command,
                "machine": info,
                "repos": {str(k): v for k, v in repos.items()},
                "results": [
                    {
                        "size": r.size,
                        "state": r.state,
                        "method": r.method,
                        "median_s": r.median,
                        "min_s": r.min,
                        "times_s": r.samples,
                    }
                    for r in results
                ],
                "targets": [
                    {
                        "name": t.name,
                        "state": t.state,
                        "ratio": t.value,
                        "limit": t.limit,
                        "pass": t.ok,
                    }
                    for t in found
                ],
                "breakdown_s": {str(k): v for k, v in breakdowns.items()},
            }
        )
        return 0
    print_header(command, info)
    print(f"# median (min) of {args.runs} runs; ratios from medians")
    print(
        f"# `cairn --version` (interpreter start-up + the command line; the API loads lazily): "
        f"{ms(info['cli_startup_s'])} ms"
    )
    for size, meta in repos.items():
        print(
            f"\n## {meta['tracked']:,} tracked files, {meta['bytes'] / 1e6:,.0f} MB, "
            f"{meta['dirs']:,} directories, index {meta['index_bytes'] / 1e6:.1f} MB "
            f"(load {meta['load_before']:.2f} → {meta['load_after']:.2f})\n"
        )
        print(time_table(results, size))
        print()
        print(ratio_table(results, size))
        if size in breakdowns:
            print(f"\nIn-process `api new` save, step by step (median of {args.runs}):\n")
            print(breakdown_table(breakdowns[size]))
    if found:
        print()
        print(target_table(found, max(r.size for r in results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
