"""Every ``CAIRN_*`` environment variable cairn sets or reads, spelled once, in a module that
imports nothing: the command line's first steps and the hooks Claude Code runs per tool call read
them without loading ``typing``. ``cairn.terms`` re-exports them with the rest of the vocabulary.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from collections.abc import Mapping

# Every variable cairn sets or reads starts so; a child cairn process (a fleet's attempt, a
# segment's run) inherits none of its parent's but ENV_DEBUG.
ENV_PREFIX = "CAIRN_"
# What cairn sets for the agent it runs (and reads back in `cairn task …`, hooks and MCP).
ENV_RUN_DIR = "CAIRN_RUN_DIR"
ENV_TICKET = "CAIRN_TICKET"
ENV_DISPATCH_ID = "CAIRN_DISPATCH_ID"
ENV_MAX_TURNS = "CAIRN_MAX_TURNS"
ENV_PRESSURE_TURNS = "CAIRN_PRESSURE_TURNS"
ENV_TASK = "CAIRN_TASK"
ENV_TURN = "CAIRN_TURN"
ENV_AGENT = "CAIRN_AGENT"  # the agent of the run's chain dispatching now (its name)
# What the embedded fleet's supervisor sets for the attempts it starts: the ticket (a `cairn
# resume` with it is the fleet's own, not a person's by hand: cairn.fleet.byhand).
ENV_FLEET_ATTEMPT = "CAIRN_FLEET_ATTEMPT"
# What a worker of the fleet on Temporal sets for its runs (cairn.util.barrier).
ENV_CHECKPOINT_DIR = "CAIRN_CHECKPOINT_DIR"
ENV_CHECKPOINT_WAIT = "CAIRN_CHECKPOINT_WAIT"  # seconds a report waits for the worker's push
# What a worker of the fleet on Temporal sets for the git processes of an attempt: a token,
# so a cancelled attempt finds and kills them (cairn.scale.liveness).
ENV_SCALE_WORK = "CAIRN_SCALE_WORK"
# What the fleet sets for its workspace hooks (fleet.hooks), besides ENV_TICKET.
ENV_WORKTREE = "CAIRN_WORKTREE"
ENV_HOOK = "CAIRN_HOOK"  # after_create, before_run, after_run or before_remove
# What people set.
ENV_DEBUG = "CAIRN_DEBUG"  # show the traceback of an unexpected error
ENV_DASHBOARD_TOKEN = "CAIRN_DASHBOARD_TOKEN"  # the token a dashboard beyond loopback asks for
ENV_FAST = "CAIRN_FAST"  # 0: every command through the full command line parser
ENV_ACTIONS_ISSUE = "CAIRN_ACTIONS_ISSUE"  # the issue or PR number a run in Actions comments on
# What only tests set: fault injection, and the test suite's own switches.
ENV_TEMPORAL_RECONNECT_CAP = "CAIRN_TEMPORAL_RECONNECT_CAP"  # seconds between reconnects
ENV_KILL_SEED = "CAIRN_KILL_SEED"  # the seed of the kill test's random cut points
# Fault injection (cairn.faults): crash points are read only while ENV_FAULT_INJECTION is "1".
ENV_FAULT_INJECTION = "CAIRN_FAULT_INJECTION"
ENV_CRASH_AT = "CAIRN_CRASH_AT"  # <point>[@<n>]: SIGKILL the process the n-th time it gets there
ENV_REQUIRE_BROWSER = "CAIRN_REQUIRE_BROWSER"  # set: no Chromium fails the browser test
ENV_REQUIRE_AGENT_CLIS = "CAIRN_REQUIRE_AGENT_CLIS"  # 1: a missing agent CLI fails its tests
ENV_UPDATE_SCREENSHOT = "CAIRN_UPDATE_SCREENSHOT"  # set: the browser test rewrites its image


def fleet_run(environ: "Mapping[str, str]") -> bool:
    """Whether the process with ``environ`` (``os.environ``) is one of a fleet's runs: the
    embedded supervisor's attempt (``ENV_FLEET_ATTEMPT``) or a segment of the fleet on Temporal
    (``ENV_CHECKPOINT_DIR``). Such a run frees its slot instead of waiting for a limit's reset,
    and pushes nothing by ``[run] remote``: the fleet does both itself."""
    get = environ.get
    return bool(get(ENV_FLEET_ATTEMPT) or get(ENV_CHECKPOINT_DIR))
