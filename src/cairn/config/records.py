"""The config's records: every key, its default and its check (``cairn.config`` finds the file
and loads it through ``validate``). Loaded only when a config file exists or a command reads a
setting: a repository without one costs the hot paths no records library.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct, field

from cairn.config import webhooks
from cairn.config.chains import check_chains, named_agents
from cairn.config.trackers import GitHubConfig, LinearConfig
from cairn.defaults import CUTOFF_TIMEOUT_MS
from cairn.errors import BadInput
from cairn.terms import AgentPermissions, Engine, LoopPhase, OnLimit
from cairn.util.durations import parse_duration
from cairn.util.invalid import problem
from cairn.util.text import is_branch_name

MiB = 1024 * 1024
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1024, "m": MiB, "g": 1024 * MiB, "t": 1024 * 1024 * MiB}


def _size(value: Any) -> Any:
    if isinstance(value, str):
        match = _SIZE.fullmatch(value.strip())
        if not match:
            raise ValueError(f"{value!r} is not a size; use a number of bytes or forms like 10MiB")
        return int(float(match[1]) * _SIZE_UNITS[match[2].lower()])
    return value


def _duration(value: Any) -> Any:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        parse_duration(str(value))  # a bare number is refused, the message saying which unit
    return value


def _in_unit(scale: float, whole: bool) -> dict[str, Callable[[Any], Any]]:
    """``Meta(extra=…)`` of a key whose name says its unit (``_ms``, ``_seconds``): a number in
    that unit, or a duration with its own (``"90s"``) that ``read_as`` converts (``_read``)."""

    def convert(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        amount = parse_duration(value) * scale
        return round(amount) if whole else amount

    return {"read_as": convert}


Size = Annotated[int, Meta(ge=0, extra={"read_as": _size})]
Duration = Annotated[str, Meta(extra={"read_as": _duration})]
Ms = Annotated[int, Meta(ge=1, extra=_in_unit(1000, whole=True))]
Seconds = Annotated[float, Meta(ge=0, extra=_in_unit(1, whole=False))]


class Section(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A table of the config file: unknown keys refused, read strictly (no "5" for 5)."""


class SnapshotConfig(Section, frozen=True):
    max_new_file_bytes: Size = 10 * MiB
    max_new_files: Annotated[int, Meta(ge=0)] = 5000
    max_new_bytes: Size = 100 * MiB
    ref_prefix: str = "refs/cairn/wip"
    fsync: bool = True

    def __post_init__(self) -> None:
        prefix = self.ref_prefix.rstrip("/")
        if not prefix.startswith("refs/") or prefix.split("/")[1] in {"heads", "tags", "remotes"}:
            raise ValueError("ref_prefix must be under refs/ and outside refs/heads, tags, remotes")


DEFAULT_PRESSURE_TURNS = 2
DEFAULT_MAX_COST_USD = 10.0  # agent.max_cost_usd: a run session's cost cap in USD


def pressure_for(max_turns: int) -> int:
    """The default ``budget_pressure_turns`` for a turn cap: 2, but always below the cap."""
    return max(0, min(DEFAULT_PRESSURE_TURNS, max_turns - 1))


def _derive_pressure(data: dict[str, Any]) -> dict[str, Any]:
    """A file that sets ``agent.max_turns`` but not ``budget_pressure_turns`` gets the
    default derived from its cap (``max_turns = 2`` alone is valid)."""
    agent = data.get("agent")
    if not isinstance(agent, dict) or "budget_pressure_turns" in agent:
        return data
    cap = agent.get("max_turns")
    if type(cap) is not int or cap < 1:
        return data
    return {**data, "agent": {**agent, "budget_pressure_turns": pressure_for(cap)}}


def pressure_given(config: Config) -> bool:
    """Whether the config file itself sets ``agent.budget_pressure_turns``."""
    agent = config.given.get("agent")
    return isinstance(agent, dict) and "budget_pressure_turns" in agent


class AgentConfig(Section, frozen=True):
    kind: str | None = None
    command: str | list[str] | None = None
    script: str | None = None
    max_turns: Annotated[int, Meta(ge=1)] = 150
    budget_pressure_turns: Annotated[int, Meta(ge=0)] = DEFAULT_PRESSURE_TURNS
    preserve_uncommitted_work: bool = True
    preserve_uncommitted_work_branch: bool = False
    cutoff_timeout_ms: Ms = CUTOFF_TIMEOUT_MS
    max_continuations: Annotated[int, Meta(ge=0)] = 2
    max_seconds: Annotated[float, Meta(gt=0, extra=_in_unit(1, whole=False))] | None = None
    max_cost_usd: Annotated[float, Meta(ge=0)] = DEFAULT_MAX_COST_USD  # 0: no cap
    max_idle_dispatches: Annotated[int, Meta(ge=0)] = 2  # 0: no no-progress stop
    permissions: AgentPermissions = "preset"
    allow: list[str] = []
    api_retries: Annotated[int, Meta(ge=0)] = 2
    api_retry_backoff_seconds: Seconds = 1.0
    # limits (cairn.run.limits): the agents a run may move to, in order ([agents.NAME] or a
    # kind), what it does on a usage or rate limit (None: failover with a fallback, else wait
    # for a known reset within max_wait, else stop), and whether it goes back to this agent
    fallback: list[str] = []
    on_limit: OnLimit | None = None
    max_wait: Duration = "1h"
    failback: bool = True

    def __post_init__(self) -> None:
        if self.on_limit == "failover" and not self.fallback:
            raise ValueError(
                'on_limit = "failover" needs a fallback; list the agents to move to in '
                'fallback = ["NAME", …], or choose on_limit = "wait" or "stop"'
            )
        if self.budget_pressure_turns >= self.max_turns:
            raise ValueError(
                f"budget_pressure_turns ({self.budget_pressure_turns}) must be smaller than "
                f"max_turns ({self.max_turns}); left out, budget_pressure_turns defaults to "
                f"{DEFAULT_PRESSURE_TURNS}, or max_turns - 1 when that is smaller"
            )
        for command in self.allow:
            if not command.strip() or any(c in command for c in "()\n*"):
                raise ValueError(
                    f"allow: {command!r} is not a command; give a program and its leading "
                    'arguments, e.g. "pytest" or "npm test"'
                )


class RoleConfig(Section, frozen=True):
    max_turns: Annotated[int, Meta(ge=1)] | None = None


class LoopConfig(Section, frozen=True):
    phases: Annotated[list[LoopPhase], Meta(min_length=1)] = field(
        default_factory=lambda: ["implement", "review", "fix"]
    )
    max_rounds: Annotated[int, Meta(ge=1)] = 3


class RunConfig(Section, frozen=True):
    """``[run]``: a run's shared remote (``--remote``, docs/ci.md)."""

    remote: str | None = None  # push the ticket's branch, snapshot and state there (--remote)
    push_every: Duration = "5m"  # a --remote run's checkpoint: snapshot and push this often

    def __post_init__(self) -> None:
        if parse_duration(self.push_every) <= 0:
            raise ValueError("push_every must be longer than 0s; give one such as 5m")


class MarkerConfig(Section, frozen=True):
    stale_after: Duration = "24h"


class FleetHooks(Section, frozen=True):
    """Shell commands run in a ticket's worktree (docs/fleet.md, "Workspace hooks")."""

    after_create: str | None = None
    before_run: str | None = None
    after_run: str | None = None
    before_remove: str | None = None
    timeout: Duration = "5m"

    def __post_init__(self) -> None:
        if parse_duration(self.timeout) <= 0:
            raise ValueError("timeout must be longer than 0s; give one such as 5m")
        for name in ("after_create", "before_run", "after_run", "before_remove"):
            command = getattr(self, name)
            if command is not None and not command.strip():
                raise ValueError(f"{name} is empty; give a shell command or remove the key")


FLEET_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # [fleet] id: in workflow ids


class FleetConfig(Section, frozen=True):
    """``cairn fleet``: the queue, concurrency, worktrees, retries (docs/fleet.md), the tracker,
    pushes and notifications (docs/fleet.md)."""

    engine: Engine = "embedded"  # temporal: docs/scale-out.md
    tracker: Literal["dir", "github", "linear"] = "dir"
    remote: str = "origin"
    id: str | None = None  # the fleet's name in Temporal's workflow ids (default: the root commit)
    base: str | None = None  # the branch cairn/<ticket> starts from (default: HEAD / the remote's)
    push: bool | None = None  # None: false for the dir tracker, true for github and linear
    notify: list[webhooks.NotifyEntry] = []  # webhook URLs, or {url, format} tables
    notify_attention: list[webhooks.NotifyEntry] | None = None  # None: the notify entries
    dashboard_port: Annotated[int, Meta(ge=1)] | None = None
    dashboard_url: str | None = None  # the dashboard's address as people reach it, for links
    queue: str = "cairn-queue"
    concurrency: Annotated[int, Meta(ge=1)] = 2
    workspace_root: str | None = None
    poll_interval: Duration = "30s"
    max_attempts: Annotated[int, Meta(ge=1)] = 3
    retry_backoff: Duration = "10s"
    retry_backoff_cap: Duration = "5m"
    stall_timeout: Duration = "10m"
    min_free_memory: Size = 1024 * MiB
    min_free_disk: Size = 1024 * MiB  # of the state root's and the worktrees' file systems
    max_cost_usd: Annotated[float, Meta(ge=0)] | None = None  # the fleet's total spend; 0: none
    hooks: FleetHooks = field(default_factory=FleetHooks)
    github: GitHubConfig = field(default_factory=GitHubConfig)
    linear: LinearConfig = field(default_factory=LinearConfig)

    @property
    def pushes(self) -> bool:
        """Whether a completed ticket's branch is pushed to ``remote``."""
        return self.push if self.push is not None else self.tracker in ("github", "linear")

    def __post_init__(self) -> None:
        if self.tracker == "github" and self.github.repo is None:
            raise ValueError(
                'tracker "github" needs the repository; set [fleet.github] repo = "owner/name"'
            )
        if self.tracker == "linear" and self.linear.team is None:
            raise ValueError(
                'tracker "linear" needs the team; set [fleet.linear] team = "IDE" (the key its '
                "issue ids start with)"
            )
        if not self.remote.strip() or self.remote.startswith("-"):
            raise ValueError(f"remote {self.remote!r} is not a remote; give one such as origin")
        if self.id is not None and not FLEET_ID.fullmatch(self.id):
            raise ValueError(f"id {self.id!r} is not a fleet id; give one such as acme-app")
        if self.base is not None and not is_branch_name(self.base):
            raise ValueError(f"base {self.base!r} is not a branch name; give one such as main")
        webhooks.check(self.notify, self.notify_attention, self.dashboard_url)
        if self.dashboard_port is not None and self.dashboard_port > 65535:
            raise ValueError(f"dashboard_port {self.dashboard_port} is not a port (1-65535)")
        if not self.queue.strip():
            raise ValueError("queue is empty; give the queue directory, e.g. cairn-queue")
        if self.workspace_root is not None and not self.workspace_root.strip():
            raise ValueError("workspace_root is empty; give a directory or remove the key")
        for name in ("poll_interval", "stall_timeout"):
            if parse_duration(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be longer than 0s; give one such as 30s")
        if parse_duration(self.retry_backoff_cap) < parse_duration(self.retry_backoff):
            raise ValueError(
                f"retry_backoff_cap ({self.retry_backoff_cap}) is shorter than retry_backoff "
                f"({self.retry_backoff}); raise the cap or lower the backoff"
            )


_ADDRESS = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class TemporalConfig(Section, frozen=True):
    """``[temporal]``: the server of ``engine = "temporal"`` (docs/scale-out.md)."""

    address: str = "127.0.0.1:7233"  # host:port of the frontend
    namespace: str = "default"
    task_queue: str = "cairn"
    heartbeat_timeout: Duration = "30s"
    max_backoff: Duration = "1m"  # the cap of a retried segment's backoff (never given up)
    retry_jitter: Duration = "10s"  # a retried segment starts after a random delay up to this
    rebuilds: Annotated[int, Meta(ge=1)] = (
        2  # worktree rebuilds at once per worker (the remote sees workers x this)
    )
    work_timeout: Duration = "10m"  # a rebuild or checkpoint running longer is taken as hung
    tls: bool = False  # true: TLS with the system's roots
    tls_cert: str | None = None  # mTLS: the client certificate's file (PEM), with tls_key
    tls_key: str | None = None
    api_key_env: str | None = None  # the environment variable holding an API key (Temporal Cloud)

    def __post_init__(self) -> None:
        port = _ADDRESS.fullmatch(self.address)
        if port is None or not 1 <= int(port.group(1)) <= 65535:
            raise ValueError(
                f"address {self.address!r} is not host:port; give one such as 127.0.0.1:7233"
            )
        for name in ("namespace", "task_queue"):
            if not _NAME.fullmatch(getattr(self, name)):
                raise ValueError(
                    f"{name} {getattr(self, name)!r} is not a name (letters, digits, ., _, -); "
                    'give one such as "default"'
                )
        if parse_duration(self.heartbeat_timeout) < 1:
            raise ValueError("heartbeat_timeout must be at least 1s; give one such as 30s")
        for name in ("max_backoff", "work_timeout"):
            if parse_duration(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be longer than 0s; give one such as 1m")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together; give both files, or neither")
        if self.api_key_env is not None and not _ENV_NAME.fullmatch(self.api_key_env):
            raise ValueError(
                f"api_key_env {self.api_key_env!r} is not an environment variable's name; give "
                'one such as "TEMPORAL_API_KEY" (never the key itself)'
            )


DEFAULT_ROLES = {"reviewer": RoleConfig(max_turns=60), "evaluator": RoleConfig(max_turns=45)}


class Config(Section, frozen=True, dict=True):
    """The settings; ``source`` and ``given`` (the file and its tables) are in ``__dict__``."""

    agent: AgentConfig = field(default_factory=AgentConfig)
    # named agents: [agents.NAME] takes [agent]'s keys, and has [agent]'s values for the ones it
    # leaves out (but fallback and on_limit, its own); a fallback chain names them
    agents: dict[str, AgentConfig] = {}
    roles: dict[str, RoleConfig] = field(default_factory=lambda: dict(DEFAULT_ROLES))
    loop: LoopConfig = field(default_factory=LoopConfig)
    marker: MarkerConfig = field(default_factory=MarkerConfig)
    run: RunConfig = field(default_factory=RunConfig)
    snapshot: SnapshotConfig = field(default_factory=SnapshotConfig)
    fleet: FleetConfig = field(default_factory=FleetConfig)
    temporal: TemporalConfig = field(default_factory=TemporalConfig)
    state_dir: str | None = None

    @property
    def source(self) -> Path | None:
        """The file the values came from; None when every value is a default."""
        return typing.cast("Path | None", self.__dict__.get("source"))

    @property
    def given(self) -> dict[str, Any]:
        """The file's tables as written (empty without a file)."""
        return typing.cast("dict[str, Any]", self.__dict__.get("given", {}))


def _read(kind: Any, data: dict[str, Any], at: str) -> dict[str, Any]:
    """Table ``data`` of section ``kind``, each value converted as its field's ``read_as`` says;
    ``[roles.x]`` tables validated one by one (``_role``), over the default roles."""
    hints = typing.get_type_hints(kind, include_extras=True)
    out = dict(data)
    for key, value in data.items():
        hint, where = hints.get(key), f"{at}.{key}"
        metas = [m for a in (hint, *typing.get_args(hint)) for m in getattr(a, "__metadata__", ())]
        for meta in metas:
            try:
                value = (meta.extra or {}).get("read_as", lambda same: same)(value)
            except ValueError as exc:
                raise msgspec.ValidationError(f"{exc} - at `${where}`") from None
        if kind is Config and key == "roles" and isinstance(value, dict):
            value = {**DEFAULT_ROLES, **{k: _role(v, f"{where}.{k}") for k, v in value.items()}}
        elif kind is Config and key == "agents" and isinstance(value, dict):
            value = named_agents(
                value,
                data.get("agent"),
                where,
                lambda t, w: _read(AgentConfig, _derive_pressure({"agent": t})["agent"], w),
            )
        elif isinstance(hint, type) and issubclass(hint, Struct) and isinstance(value, dict):
            value = _read(hint, value, where)
        out[key] = value
    return out


def _agent_table(table: dict[str, Any], where: str) -> dict[str, Any]:
    return _read(AgentConfig, _derive_pressure({"agent": table})["agent"], where)


def _role(table: Any, where: str) -> RoleConfig:  # its errors name the role
    try:
        return msgspec.convert(table, RoleConfig, strict=True)
    except msgspec.ValidationError as exc:
        message, _, inner = str(exc).partition(" - at `$")
        raise msgspec.ValidationError(f"{message} - at `${where}{inner.rstrip('`')}`") from None


def validate(data: dict[str, Any], path: Path) -> Config:
    """The config the table ``data`` of the file at ``path`` sets; not in shape is bad input
    naming the key and the file."""
    try:
        config = msgspec.convert(_read(Config, _derive_pressure(data), ""), Config, strict=True)
    except msgspec.ValidationError as exc:  # the file is not in shape
        key, why = problem(exc, Config)
        raise BadInput(f"{path}: {key or '(top level)'}: {why}; fix or remove it") from None
    config.__dict__.update(source=path, given=data)
    check_chains(config.agent, config.agents, path)
    return config
