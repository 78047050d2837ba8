"""Cross-agent continuation: the real Claude Code and Codex CLIs under ``cairn run``, the primary
answering a usage limit at a random point of the plan, the fallback finishing it; count completed
runs, tasks redone and bytes lost.

    .venv/bin/python bench/chaos/failover.py --quick      # CI: 2 runs (one each way), 15 to 40 s
    .venv/bin/python bench/chaos/failover.py              # 50 runs, 6 to 14 minutes
    .venv/bin/python bench/chaos/failover.py --self-test  # a redone task, lost bytes: exit 1

Each run is a fresh repository, a plan of K tasks (2 to 5) and cairn's scripted model server on
127.0.0.1 (``cairn.modelserver``), which both CLIs talk to. Runs take turns at the direction:
Claude Code first with Codex as its fallback (``[agent] fallback = ["codex"]``), then Codex
first with Claude Code as its fallback. The primary's script does tasks 1..s (s random,
1 <= s < K; each task a file, a commit and ``cairn task done``), writes 1 to 4 uncommitted files
(random names and sizes of a few KB, some in new subdirectories) and then answers a usage
limit the way the real API does (``{"limit": "usage"}``). One run in three is cut mid-task:
the primary has started task s+1 and written its file, uncommitted, before the limit. The
fallback's script does exactly tasks s+1..K: first it copies every uncommitted file the primary
left into ``seen.txt`` (proof they are in its tree), then one command per task, then its last
answer; anything it asks the model server beyond that is a request past its script.

After each run:

- ``not_completed``: ``cairn run`` did not exit 0 with the run ``completed``;
- ``task_redone``: a task's ``completed`` journal event appears more than once, or the handoff
  prompt the fallback received does not list every task 1..s as completed (or lists a later
  one);
- ``script_overrun``: an agent asked the model server for more answers than its script has
  (it was asked to do more than its tasks);
- ``bytes_lost``: a byte of an uncommitted file written before the limit is missing or
  different in the final work tree, in the branch, or in the snapshot of the cutoff;
- ``not_seen``: the fallback's ``seen.txt`` is not those files' bytes (they were not in its
  tree when it started);
- ``wrong_agent``: the change summary names another agent for a task than the one that did it
  (the primary for 1..s, the fallback for the rest);
- ``no_switch``: the journal has not exactly one ``agent_switched`` from the primary to the
  fallback for a usage limit;
- ``run_failed``: ``cairn run`` printed a traceback or did not finish in time.

The model is scripted, so the campaign proves cairn's handover (the run state, the work tree,
the snapshot, the prompt and the accounting), not what a real model makes of it.
"""

from __future__ import annotations

import json
import random
import statistics
import string
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import processes

from common import (
    Sizes,
    Tally,
    case_seeds,
    cli,
    git,
    log,
    make_repo,
    parse_args,
    scratch,
    table,
)

# isort: split
# common has put tests/ on sys.path: the helpers the real-agent tests use

from agents.real_agents import (
    CLAUDE_COMMAND,
    HANDOFF,
    LOCAL_BIN,
    agent_env,
    bash_tool,
    codex_command,
    exec_tool,
    toml_value,
    write_tool,
)
from cairn import summary
from cairn.modelserver import ModelServer, read_requests, user_texts
from cairn.state import journal, marker
from cairn.state.layout import artifacts
from cairn.util import procs
from helpers import snapshot_files

SIZES = Sizes(quick=2, full=50, unit="runs")
TICKET = "FO"
RUN_TIMEOUT = 300.0
LIMIT = {"limit": "usage", "resets_in": 7200}
# Claude Code shows a usage limit only when logged in to a subscription (docs/agents.md)
SUBSCRIPTION = {"CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-fake"}
CLAUDE, CODEX = "claude-code", "codex"
API = {CLAUDE: "anthropic", CODEX: "openai"}
DIRECTIONS = [(CLAUDE, CODEX), (CODEX, CLAUDE)]
# the fallback's name in [agents.NAME]; the primary is [agent] and goes by its kind
FALLBACK_NAME = {CODEX: "codex", CLAUDE: "claude"}
TITLES = [
    "Parse the input",
    "Report errors with their line",
    "Document the format",
    "Add a cache",
    "Time out slow reads",
    "Log every retry",
    "Handle empty files",
    "Rename the config key",
]

KINDS = {
    "not_completed": "cairn run did not exit 0 with the run completed",
    "task_redone": "a task completed twice, or the handoff did not list every task 1..s completed",
    "script_overrun": "an agent asked the model server for more than its script holds",
    "bytes_lost": "an uncommitted file's byte is missing from the final tree, branch or snapshot",
    "not_seen": "the fallback's copy of the uncommitted files is not their bytes",
    "wrong_agent": "the change summary names the wrong agent for a task",
    "no_switch": "not exactly one agent_switched, primary to fallback, for a usage limit",
    "run_failed": "cairn run printed a traceback or did not finish in time",
}

FIGURES = [
    "runs",
    "completed runs",
    "share completed (%)",
    "runs Claude Code → Codex",
    "runs Codex → Claude Code",
    "switches",
    "runs cut right after a task",
    "runs cut mid-task",
    "tasks",
    "tasks by the primary",
    "tasks by the fallback",
    "tasks redone",
    "handoff prompts listing every earlier task completed",
    "requests past a script",
    "uncommitted files",
    "uncommitted files in new subdirectories",
    "uncommitted bytes",
    "bytes lost",
    "tasks whose summary agent is wrong",
    "model requests",
    "median seconds per run",
    "slowest run (s)",
    "faults injected",
    "faults missed",
]


@dataclass
class Draft:
    """An uncommitted file the primary writes just before its limit."""

    path: str
    content: str

    @property
    def data(self) -> bytes:
        return self.content.encode()


@dataclass
class Run:
    """One repository, one plan, one cut-off primary and its fallback."""

    number: int
    seed: int
    root: Path
    primary: str
    fallback: str
    tasks: list[str]
    s: int  # the last task the primary completes
    mid_task: bool  # the primary started task s+1 and wrote its file before the limit
    drafts: list[Draft]
    inject: set[str] = field(default_factory=set)  # self-test faults put in the scripts
    repo: Path = field(init=False)
    plan: Path = field(init=False)
    record: Path = field(init=False)
    scripts: dict[str, int] = field(default_factory=dict)  # entries in each API's script
    seconds: float = 0.0
    row: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        base = self.root / f"run-{self.number}"
        base.mkdir()
        self.repo = base / "repo"
        self.plan = base / f"{TICKET}.md"
        self.record = base / "requests.jsonl"

    @property
    def k(self) -> int:
        return len(self.tasks)

    @property
    def fallback_name(self) -> str:
        return FALLBACK_NAME[self.fallback]

    def where(self) -> str:
        cut = f"mid-task {self.s + 1}" if self.mid_task else f"after task {self.s}"
        return (
            f"run {self.number} (seed {self.seed}, {self.primary} → {self.fallback_name}, "
            f"{self.k} tasks, cut {cut})"
        )

    def task_file(self, n: int) -> str:
        return f"task-{n}.txt"

    def task_text(self, n: int, agent: str) -> str:
        return f"task {n}: {self.tasks[n - 1]}, by {agent}\n"

    @property
    def run_dir(self) -> Path | None:
        ticket_dir = self.repo / ".git" / "cairn" / "tickets" / TICKET
        runs = sorted(p for p in ticket_dir.glob("*") if p.is_dir() and p.name[0].isdigit())
        return runs[-1] if runs else None


# --- random runs -----------------------------------------------------------------------------


def other(agent: str) -> str:
    return CODEX if agent == CLAUDE else CLAUDE


def random_content(rng: random.Random, size: int) -> str:
    """About ``size`` bytes of lines of letters, digits and spaces, ending in a newline. No line
    ends in a space: Claude Code's Write tool strips trailing whitespace (but in Markdown), so
    such a file would not be what the script wrote, whatever cairn does."""
    alphabet = string.ascii_letters + string.digits + "     "
    lines, total = [], 0
    while total < size:
        width = rng.randint(20, 79)
        words = "".join(rng.choice(alphabet) for _ in range(width)).strip() or "x"
        lines.append(words + "\n")
        total += len(words) + 1
    return "".join(lines)


def random_drafts(rng: random.Random) -> list[Draft]:
    drafts: list[Draft] = []
    for _ in range(rng.randint(1, 4)):
        name = f"{rng.choice(['draft', 'notes', 'wip', 'half'])}-{rng.randrange(16**6):06x}"
        name += rng.choice([".txt", ".md", ".py", ".json"])
        if rng.random() < 0.4:  # in a new subdirectory, sometimes two deep
            folder = f"new-{rng.randrange(16**4):04x}"
            if rng.random() < 0.5:
                folder += f"/deep-{rng.randrange(16**3):03x}"
            name = f"{folder}/{name}"
        drafts.append(Draft(name, random_content(rng, rng.randint(500, 6000))))
    return drafts


def make_run(number: int, seed: int, root: Path, first: str = CLAUDE) -> Run:
    rng = random.Random(seed)
    primary, fallback = DIRECTIONS[(number - 1 + DIRECTIONS.index((first, other(first)))) % 2]
    k = rng.randint(2, 5)
    s = rng.randint(1, k - 1)
    mid_task = rng.random() < 1 / 3
    tasks = rng.sample(TITLES, k)
    drafts = random_drafts(rng)
    run = Run(number, seed, root, primary, fallback, tasks, s, mid_task, drafts)
    if mid_task:  # the task in progress's own file, written and not reported
        size = rng.randint(500, 4000)
        run.drafts.insert(0, Draft(run.task_file(s + 1), random_content(rng, size)))
    return run


# --- the scripts -----------------------------------------------------------------------------


def heredoc(draft: Draft) -> str:
    folder = str(Path(draft.path).parent)
    mkdir = f"mkdir -p '{folder}' && " if folder != "." else ""
    return f"{mkdir}cat > '{draft.path}' <<'END_OF_DRAFT'\n{draft.content}END_OF_DRAFT"


def shell(agent: str, command: str) -> dict[str, Any]:
    return {"tool": bash_tool(command) if agent == CLAUDE else exec_tool(command)}


def primary_script(run: Run) -> list[dict[str, Any]]:
    """Tasks 1..s done and committed, (task s+1 started and its file written,) the other
    uncommitted files written, then the usage limit."""
    agent = run.primary
    script = []
    for n in range(1, run.s + 1):
        name = run.task_file(n)
        script.append(
            shell(
                agent,
                f"printf '%s' '{run.task_text(n, agent)}' > {name} && git add {name} && "
                f"git commit -qm 'task {n}' && cairn task done {n} --files {name}",
            )
        )
    if run.mid_task:
        script.append(shell(agent, f"cairn task start {run.s + 1}"))
    for draft in run.drafts:
        if agent == CLAUDE:  # Claude Code writes with its Write tool (creating the folders)
            script.append({"tool": write_tool(run.repo / draft.path, draft.content)})
        else:
            script.append(shell(agent, heredoc(draft)))
    return [*script, LIMIT]


def fallback_script(run: Run) -> list[dict[str, Any]]:
    """Exactly tasks s+1..K, after copying the uncommitted files into ``seen.txt``."""
    agent = run.fallback
    names = " ".join(f"'{d.path}'" for d in run.drafts)
    script = [shell(agent, f"cat {names} > seen.txt")]
    if "task redone" in run.inject:
        first = run.task_file(1)
        script.append(shell(agent, f"cairn task done 1 --files {first}"))
    for n in range(run.s + 1, run.k + 1):
        name = run.task_file(n)
        write = (
            ""
            if run.mid_task and n == run.s + 1
            else f"printf '%s' '{run.task_text(n, agent)}' > {name} && "
        )
        last = n == run.k
        add = "git add -A" if last else f"git add {name}"
        script.append(
            shell(
                agent,
                f"{write}{add} && git commit -qm 'task {n}' && cairn task done {n} --files {name}",
            )
        )
    if "script overrun" not in run.inject:
        script.append({"text": f"Tasks {run.s + 1} to {run.k} are done."})
    return script


# --- one run ---------------------------------------------------------------------------------


def config(run: Run, url: str) -> str:
    def command(kind: str) -> list[str]:
        return CLAUDE_COMMAND if kind == CLAUDE else codex_command(url, run.repo)

    keys = {
        "kind": run.primary,
        "command": command(run.primary),
        "max_turns": 20,
        "budget_pressure_turns": 0,
        "max_continuations": 0,
        "cutoff_timeout_ms": 3000,
        "fallback": [run.fallback_name],
    }
    text = "[agent]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in keys.items())
    text += '\n[loop]\nphases = ["implement"]\n'
    text += f"\n[agents.{run.fallback_name}]\n"
    named = {"kind": run.fallback, "command": command(run.fallback), "max_turns": 20}
    return text + "".join(f"{k} = {toml_value(v)}\n" for k, v in named.items())


def plan_text(run: Run) -> str:
    sections = [
        f"### Task {n}: {title}\n\nDo {title.lower()}.\n" for n, title in enumerate(run.tasks, 1)
    ]
    return f"# Plan: failover run {run.number}\n\n" + "\n".join(sections)


def execute(run: Run) -> tuple[int | None, str]:
    """Start the model server, make the repository, ``cairn run`` the plan to its end."""
    scenario = {API[run.primary]: primary_script(run), API[run.fallback]: fallback_script(run)}
    run.scripts = {api: len(entries) for api, entries in scenario.items()}
    server = ModelServer(scenario, run.record)
    url = server.start()
    try:
        make_repo(run.repo, {"README.md": "# project\n", "cairn.toml": config(run, url)})
        git(run.repo, "config", "user.name", "Failover Campaign")
        git(run.repo, "config", "user.email", "failover@example.com")
        run.plan.write_text(plan_text(run))
        env = agent_env(run.repo.parent, url)
        if run.primary == CLAUDE:  # a subscription, so the limit is a usage limit
            del env["ANTHROPIC_API_KEY"]
            env.update(SUBSCRIPTION)
        started = time.monotonic()
        done = cli("run", str(run.plan), "--json", cwd=run.repo, env=env, timeout=RUN_TIMEOUT)
        run.seconds = time.monotonic() - started
    finally:
        stop_agent(run)
        server.stop()
    return done.returncode, done.stdout + done.stderr


def stop_agent(run: Run) -> None:
    """Stop an agent a timed-out cairn left running (its own process group)."""
    run_dir = run.run_dir
    path = run_dir.parent / ".in-progress.yaml" if run_dir else None
    try:
        found = marker.read(path) if path and path.exists() else None
    except Exception:
        found = None
    if found and found.dispatch and found.dispatch.pid:
        procs.kill_group(found.dispatch.pid)


# --- the checks after a run --------------------------------------------------------------------


def outcome_of(output: str) -> dict[str, Any]:
    for line in reversed(output.strip().splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict) and "status" in found:
            return found
    return {}


def bytes_missing(expected: bytes, found: bytes | None) -> int:
    """Bytes of ``expected`` that ``found`` does not have at the same place."""
    if found is None:
        return len(expected)
    same = sum(a == b for a, b in zip(expected, found, strict=False))
    return len(expected) - same + max(0, len(found) - len(expected))


def handoff_section(prompt: str, heading: str) -> str:
    after = prompt.split(f"\n{heading}\n", 1)
    return after[1].split("\n\n", 1)[0] if len(after) == 2 else ""


def check(run: Run, code: int | None, output: str, tally: Tally) -> None:
    where = run.where()
    row = run.row
    row.update(completed=False, redone=0, lost=0, agents="", switches=0)
    if code is None or "Traceback (most recent call last)" in output:
        tally.violation("run_failed", where, f"exit {code}: {tail(output)}")
    got = outcome_of(output)
    completed = code == 0 and got.get("status") == "completed"
    row["completed"] = completed
    if completed:
        tally.count("completed runs")
    else:
        tally.violation(
            "not_completed", where, f"exit {code}, status {got.get('status')}: {tail(output)}"
        )
    run_dir = run.run_dir
    events, _ = journal.read(run_dir) if run_dir else ([], [])
    check_redone(run, events, tally)
    check_requests(run, tally)
    check_switch(run, events, tally)
    check_agents(run, tally)
    check_bytes(run, events, tally)


def check_redone(run: Run, events: list[dict[str, Any]], tally: Tally) -> None:
    done = [e["task"] for e in events if e["event"] == "task" and e.get("status") == "completed"]
    tally.count("tasks", run.k)
    redone = sum(done.count(n) - 1 for n in set(done))
    for n in sorted(set(done)):
        if done.count(n) > 1:
            tally.violation("task_redone", run.where(), f"task {n} completed {done.count(n)} times")
    # the handoff: tasks 1..s completed, none after s; everything else still to do
    requests = read_requests(run.record) if run.record.exists() else []
    told = next((r for r in requests if r["api"] == API[run.fallback]), None)
    prompt = "\n".join(user_texts(told, latest=True)) if told else ""
    completed = handoff_section(prompt, "Completed:")
    listed = {
        n for n in range(1, run.k + 1) if f"- Task {n}: {run.tasks[n - 1]} (completed)" in completed
    }
    missing = set(range(1, run.s + 1)) - listed
    extra = listed - set(range(1, run.s + 1))
    usage = f"usage limit of {run.primary}"
    if HANDOFF not in prompt or usage not in prompt or missing or extra:
        what = f"missing {sorted(missing)}, extra {sorted(extra)}" if prompt else "no prompt"
        if prompt and (HANDOFF not in prompt or usage not in prompt):
            what += f"; no {HANDOFF!r} or {usage!r}"
        tally.violation("task_redone", run.where(), f"the handoff's completed tasks: {what}")
        redone += len(missing)
    else:
        tally.count("handoff prompts listing every earlier task completed")
    tally.count("tasks redone", redone)
    run.row["redone"] = redone


def check_requests(run: Run, tally: Tally) -> None:
    requests = read_requests(run.record) if run.record.exists() else []
    tally.count("model requests", len(requests))
    for api in sorted({r["api"] for r in requests}):
        past = [r for r in requests if r["api"] == api and r["entry"] is None]
        tally.count("requests past a script", len(past))
        if past:
            tally.violation(
                "script_overrun",
                run.where(),
                f"{len(past)} {api} requests past the script's {run.scripts.get(api, 0)} entries",
            )


def check_switch(run: Run, events: list[dict[str, Any]], tally: Tally) -> None:
    switched = [e for e in events if e["event"] == "agent_switched"]
    tally.count("switches", len(switched))
    run.row["switches"] = len(switched)
    wanted = (run.primary, run.fallback_name, "usage_limit")
    if [(e.get("from"), e.get("to"), e.get("reason")) for e in switched] != [wanted]:
        got = [(e.get("from"), e.get("to"), e.get("reason")) for e in switched]
        tally.violation("no_switch", run.where(), f"agent_switched {got}, wanted [{wanted}]")


def final_summary(run: Run) -> summary.Summary | None:
    run_dir = run.run_dir
    if run_dir is None:
        return None
    paths = [a.path for a in artifacts(run_dir) if a.role == "coder" and a.name == "change-summary"]
    return summary.load(paths[-1]) if paths else None


def check_agents(run: Run, tally: Tally) -> None:
    found = final_summary(run)
    agents = [t.agent for t in found.tasks] if found else []
    wanted = [run.primary] * run.s + [run.fallback_name] * (run.k - run.s)
    tally.count("tasks by the primary", sum(a == run.primary for a in agents))
    tally.count("tasks by the fallback", sum(a == run.fallback_name for a in agents))
    wrong = [n for n, want in enumerate(wanted, 1) if n > len(agents) or agents[n - 1] != want]
    tally.count("tasks whose summary agent is wrong", len(wrong))
    short = {CLAUDE: "claude", CODEX: "codex", "claude": "claude"}
    run.row["agents"] = " ".join(short.get(a or "", str(a)) for a in agents)
    if wrong:
        tally.violation("wrong_agent", run.where(), f"summary agents {agents}, wanted {wanted}")


def check_bytes(run: Run, events: list[dict[str, Any]], tally: Tally) -> None:
    cuts = [e for e in events if e["event"] == "cutoff"]
    snapshot = cuts[0].get("snapshot") if cuts else None
    saved = snapshot_files(run.repo, snapshot) if snapshot else {}
    head = snapshot_files(run.repo, "HEAD") if (run.repo / ".git").exists() else {}
    lost = 0
    for draft in run.drafts:
        tally.count("uncommitted files")
        tally.count("uncommitted bytes", len(draft.data))
        if "/" in draft.path:
            tally.count("uncommitted files in new subdirectories")
        path = run.repo / draft.path
        places = {
            "work tree": path.read_bytes() if path.is_file() else None,
            "branch": head.get(draft.path),
            "cutoff snapshot": saved.get(draft.path),
        }
        missing = {where: bytes_missing(draft.data, got) for where, got in places.items()}
        worst = max(missing.values())
        lost += worst
        if worst:
            places_lost = ", ".join(f"{w} {n}" for w, n in missing.items() if n)
            tally.violation(
                "bytes_lost",
                run.where(),
                f"{draft.path} ({len(draft.data)} bytes): lost in {places_lost}",
            )
    tally.count("bytes lost", lost)
    run.row["lost"] = lost
    seen = run.repo / "seen.txt"
    wanted = b"".join(d.data for d in run.drafts)
    if not seen.is_file() or seen.read_bytes() != wanted:
        got = seen.stat().st_size if seen.is_file() else "no file"
        tally.violation("not_seen", run.where(), f"seen.txt: {got}, wanted {len(wanted)} bytes")


def tail(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


# --- self-test -------------------------------------------------------------------------------


def lose_bytes(run: Run) -> None:
    """One byte of an uncommitted file changed in the work tree."""
    path = run.repo / run.drafts[-1].path
    data = bytearray(path.read_bytes())
    data[0] = ord("#") if data[0] != ord("#") else ord("!")
    path.write_bytes(bytes(data))


def forget_a_task(run: Run) -> None:
    """The handoff prompt as it would be if cairn had not listed task 1 as completed."""
    text = run.record.read_text()
    done = f"- Task 1: {run.tasks[0]} (completed)"
    run.record.write_text(text.replace(done, f"- Task 1: {run.tasks[0]} (pending)"))


# injected in the fallback's script (before the run) or after it; each with the kind it must be
# reported: the kind, and words of its example
FAULTS = {
    "task redone": (None, "task_redone", "completed 2 times"),
    "script overrun": (None, "script_overrun", "past the script"),
    "bytes lost": (lose_bytes, "bytes_lost", "lost in work tree"),
    "handoff forgets a task": (forget_a_task, "task_redone", "the handoff's completed tasks"),
}


# --- main ------------------------------------------------------------------------------------


def rows_table(runs: list[Run]) -> list[list[str]]:
    head = ["run", "direction", "cut", "agent of each task", "K", "files", "bytes"]
    rows = [[*head, "completed", "redone", "lost", "seconds"]]
    for run in runs:
        cut = f"mid-task {run.s + 1}" if run.mid_task else f"after task {run.s}"
        rows.append(
            [
                str(run.number),
                f"{run.primary} → {run.fallback_name}",
                cut,
                run.row.get("agents", ""),
                str(run.k),
                str(len(run.drafts)),
                f"{sum(len(d.data) for d in run.drafts):,}",
                "yes" if run.row.get("completed") else "NO",
                str(run.row.get("redone", 0)),
                f"{run.row.get('lost', 0):,}",
                f"{run.seconds:.1f}",
            ]
        )
    return rows


def have_clis() -> str | None:
    import shutil

    for name in ("claude", "codex"):
        if not (shutil.which(name) or shutil.which(name, path=str(LOCAL_BIN))):
            return f"the real {name} CLI is neither on PATH nor in {LOCAL_BIN}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    def extra(parser: Any) -> None:
        parser.add_argument("--runs", type=int, dest="cases", help="the same as --cases")
        parser.add_argument(
            "--first",
            choices=[CLAUDE, CODEX],
            default=CLAUDE,
            help="the primary of the first run (then they take turns); default claude-code",
        )

    args = parse_args(__doc__ or "", SIZES, argv, extra)
    if args.self_test:
        args.cases = 1
    missing = have_clis()
    if missing:
        log(f"failover: {missing} (npm install --prefix .agents, as README.md says)")
        return 2
    log(f"failover: seed {args.seed}, {args.cases} runs")
    processes.become_subreaper()
    tally = Tally("failover", args.seed, KINDS)
    runs: list[Run] = []
    with scratch("failover", args.keep) as root:
        for number, seed in enumerate(case_seeds(args.seed, args.cases), start=1):
            run = make_run(number, seed, root, args.first)
            if args.self_test:
                run.inject = {"task redone", "script overrun"}
            runs.append(run)
            tally.count("runs")
            tally.count(
                f"runs {'Claude Code → Codex' if run.primary == CLAUDE else 'Codex → Claude Code'}"
            )
            tally.count("runs cut mid-task" if run.mid_task else "runs cut right after a task")
            try:
                code, output = execute(run)
                if args.self_test:
                    for inject, _, _ in FAULTS.values():
                        if inject is not None:
                            inject(run)
                        tally.count("faults injected")
                    check(run, code, output, tally)
                    for name, (_, kind, words) in FAULTS.items():
                        if not any(words in e for e in tally.examples.get(kind, [])):
                            tally.count("faults missed")
                            log(f"SELF-TEST: {name!r} was not caught")
                else:
                    check(run, code, output, tally)
            finally:
                processes.kill_descendants()
                processes.quiesce(5)
            log(
                f"{run.where()}: {'completed' if run.row.get('completed') else 'NOT completed'}, "
                f"{run.row.get('redone', 0)} redone, {run.row.get('lost', 0)} bytes lost, "
                f"{run.seconds:.1f} s"
            )
    times = [run.seconds for run in runs]
    if times:
        tally.figures["median seconds per run"] = round(statistics.median(times), 1)
        tally.figures["slowest run (s)"] = round(max(times), 1)
    tally.figures["share completed (%)"] = round(
        100 * tally.figures.get("completed runs", 0) / max(1, len(runs)), 1
    )
    print(table(rows_table(runs), text_columns=4))
    print()
    code = tally.report(args, FIGURES)
    if args.json:
        data = json.loads(args.json.read_text())
        data["runs"] = [
            {
                "number": r.number,
                "seed": r.seed,
                "primary": r.primary,
                "fallback": r.fallback_name,
                "tasks": r.k,
                "s": r.s,
                "mid_task": r.mid_task,
                "files": [d.path for d in r.drafts],
                "bytes": sum(len(d.data) for d in r.drafts),
                "seconds": round(r.seconds, 1),
                **r.row,
            }
            for r in runs
        ]
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
