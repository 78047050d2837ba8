"""Configuration: ``cairn.toml`` at the repo root, or ``[tool.cairn]`` in ``pyproject.toml``.

Every key has a default, so no file is needed. An unknown key or an invalid value is bad input
(exit 2) and the message names the key and the file.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from cairn.errors import BadInput
from cairn.terms import LoopPhase
from cairn.util.durations import parse_duration

MiB = 1024 * 1024
MAX_CONFIG_BYTES = MiB
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1024, "m": MiB, "g": 1024 * MiB, "t": 1024 * 1024 * MiB}


def _size(value: Any) -> Any:
    if isinstance(value, str):
        match = _SIZE.fullmatch(value.strip())
        if not match:
            raise ValueError(f"{value!r} is not a size; use a number of bytes or forms like 10MiB")
        number, unit, _ = match.groups()
        return int(float(number) * _SIZE_UNITS[unit.lower()])
    return value


def _duration(value: Any) -> Any:
    if isinstance(value, str):
        parse_duration(value)
    return value


Size = Annotated[int, BeforeValidator(_size), Field(ge=0)]
Duration = Annotated[str, BeforeValidator(_duration)]


class _Section(BaseModel):
    # strict: "yes" is not a boolean and "5" not a number; sizes and durations parse their own
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class SnapshotConfig(_Section):
    max_new_file_bytes: Size = 10 * MiB
    max_new_files: int = Field(default=5000, ge=0)
    max_new_bytes: Size = 100 * MiB
    ref_prefix: str = "refs/cairn/wip"
    fsync: bool = True

    @model_validator(mode="after")
    def _prefix_is_private(self) -> SnapshotConfig:
        prefix = self.ref_prefix.rstrip("/")
        if not prefix.startswith("refs/") or prefix.split("/")[1] in {"heads", "tags", "remotes"}:
            raise ValueError("ref_prefix must be under refs/ and outside refs/heads, tags, remotes")
        return self


class AgentConfig(_Section):
    kind: str | None = None
    command: str | list[str] | None = None
    script: str | None = None
    max_turns: int = Field(default=150, ge=1)
    budget_pressure_turns: int = Field(default=2, ge=0)
    preserve_uncommitted_work: bool = True
    preserve_uncommitted_work_branch: bool = False
    cutoff_timeout_ms: int = Field(default=60000, ge=1)
    max_continuations: int = Field(default=2, ge=0)
    max_seconds: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _pressure_below_cap(self) -> AgentConfig:
        if self.budget_pressure_turns >= self.max_turns:
            raise ValueError("budget_pressure_turns must be smaller than max_turns")
        return self


class RoleConfig(_Section):
    max_turns: int | None = Field(default=None, ge=1)


class LoopConfig(_Section):
    phases: list[LoopPhase] = Field(default=["implement", "review", "fix"], min_length=1)
    max_rounds: int = Field(default=3, ge=1)


class MarkerConfig(_Section):
    stale_after: Duration = "24h"


DEFAULT_ROLES = {"reviewer": RoleConfig(max_turns=60), "evaluator": RoleConfig(max_turns=45)}


class Config(_Section):
    agent: AgentConfig = AgentConfig()
    roles: dict[str, RoleConfig] = DEFAULT_ROLES
    loop: LoopConfig = LoopConfig()
    marker: MarkerConfig = MarkerConfig()
    snapshot: SnapshotConfig = SnapshotConfig()
    state_dir: str | None = None
    _source: Path | None = PrivateAttr(default=None)
    _roles_set: frozenset[str] = PrivateAttr(default=frozenset())

    @field_validator("roles", mode="before")
    @classmethod
    def _keep_default_roles(cls, value: Any) -> Any:
        """A ``[roles.x]`` table adds to or overrides the default roles; it does not drop them."""
        if isinstance(value, dict):
            return {**DEFAULT_ROLES, **value}
        return value

    @property
    def source(self) -> Path | None:
        """The file the values came from; None when every value is a default."""
        return self._source


def load(toplevel: Path) -> Config:
    """The effective config for the work tree at ``toplevel``."""
    path = toplevel / "cairn.toml"
    if _present(path):
        data = _read_toml(path)
    else:
        path = toplevel / "pyproject.toml"
        if not _present(path):
            return Config()
        tool = _read_toml(path).get("tool", {})
        if not isinstance(tool, dict) or "cairn" not in tool:
            return Config()
        data = tool["cairn"]
        if not isinstance(data, dict):
            raise BadInput(f"{path}: [tool.cairn] must be a table; put its keys under [tool.cairn]")
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"]) or "(top level)"
        why = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            why = "unknown key"
        raise BadInput(f"{path}: {key}: {why}; fix or remove it") from None
    config._source = path
    roles = data.get("roles")
    config._roles_set = frozenset(roles) if isinstance(roles, dict) else frozenset()
    return config


def _present(path: Path) -> bool:
    """Whether ``path`` is there to be read: a file, or anything else (a directory, a dangling
    link) that is then reported rather than silently ignored."""
    return path.is_file() or path.exists() or path.is_symlink()


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise BadInput(f"{path} is not a regular file; make it a TOML file or remove it")
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise BadInput(f"{path}: cannot be read ({exc.strerror})") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise BadInput(f"{path} is over {MAX_CONFIG_BYTES} bytes, not a config; fix the file")
    if b"\0" in data:
        raise BadInput(f"{path} is binary, not TOML text; fix or remove it")
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path} is not UTF-8 text (byte {exc.start}); fix the file") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path}: not valid TOML ({exc}); fix the file") from None


def effective(config: Config) -> list[tuple[str, Any, str]]:
    """Every key with its value and where the value came from (the file, or ``default``)."""
    source = str(config.source) if config.source else "default"
    rows: list[tuple[str, Any, str]] = []

    def walk(model: BaseModel, prefix: str, explicit: bool) -> None:
        for name in type(model).model_fields:
            value = getattr(model, name)
            key = f"{prefix}{name}"
            here = explicit and name in model.model_fields_set
            if isinstance(value, BaseModel):
                walk(value, f"{key}.", here)
            elif (
                isinstance(value, dict)
                and value
                and all(isinstance(v, BaseModel) for v in value.values())
            ):
                for sub, item in sorted(value.items()):
                    walk(item, f"{key}.{sub}.", here and sub in (_set_roles(config)))
            else:
                rows.append((key, value, source if here else "default"))

    walk(config, "", config.source is not None)
    return rows


def _set_roles(config: Config) -> set[str]:
    return set(config._roles_set)
