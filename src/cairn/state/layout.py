"""Where cairn keeps run state: the state root, ticket and run directories, artifact names.

```
<state root>/tickets/<ticket>/.in-progress.yaml   marker
                              lease               lock held by the live owner
                              .lock               short lock for read-modify-write
                              <run-id>/run-log.jsonl
                              <run-id>/{NN}_{role}_{artifact}.md
<state root>/fleet/tickets/<ticket>.json          fleet record (cairn.fleet.fleetstate)
```
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from cairn import config, tickets
from cairn.envnames import ENV_RUN_DIR
from cairn.errors import BadInput
from cairn.state.names import JOURNAL as JOURNAL
from cairn.state.names import LEASE as LEASE
from cairn.state.names import LOCK as LOCK
from cairn.state.names import MARKER as MARKER
from cairn.util import durable
from cairn.util.tuples import NamedTuple

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from datetime import datetime

    from cairn.config.records import Config
    from cairn.git import Repo

SUMMARY_ROLE = "coder"
FLEET_RECORD = ".json"  # fleet/tickets/<ticket>.json
SUMMARY_ARTIFACT = "change-summary"

RUN_ID = re.compile(r"(\d{8}-\d{6}Z)(?:-(\d+))?")
_NAME_PART = re.compile(r"[a-z][a-z0-9-]*")
ARTIFACT = re.compile(r"(\d{2,})_([a-z][a-z0-9-]*)_([a-z][a-z0-9-]*)\.(md|json|yaml|txt)")


def run_sort_key(run_id: str) -> tuple[str, int]:
    match = RUN_ID.fullmatch(run_id)
    if not match:
        return ("", 0)
    return match.group(1), int(match.group(2) or 1)


def is_run_id(name: str) -> bool:
    return RUN_ID.fullmatch(name) is not None


def new_run_id(now: datetime) -> str:
    from datetime import UTC

    return now.astimezone(UTC).strftime("%Y%m%d-%H%M%SZ")


def discover(
    workspace: Path | str, warnings: list[str] | None = None
) -> tuple[Repo, Config, Layout]:
    """The repository at ``workspace``, its config, and where its run state lives; given
    ``warnings``, a config that does not load gives the defaults and a line there
    (``cairn.config.load``), for the commands that recover work."""
    from cairn.git import Repo

    repo = Repo.discover(workspace)
    settings = config.load(repo.toplevel, warnings)
    return repo, settings, Layout.for_repo(repo, settings)


def locate(workspace: Path | str, warnings: list[str] | None = None) -> tuple[Repo, Layout]:
    """``discover`` for what needs no setting but ``state_dir``: without a config file, no
    config is built (``cairn.config.found``)."""
    from cairn.git import Repo

    repo = Repo.discover(workspace)
    return repo, Layout.for_repo(repo, config.found(repo.toplevel, warnings))


class Artifact(NamedTuple):
    number: int
    role: str
    name: str
    path: Path


class Layout(NamedTuple):  # not a dataclass: dataclasses costs every hook call ~4 ms
    root: Path

    @classmethod
    def for_repo(cls, repo: Repo, settings: Config | None) -> Layout:
        """The state root of ``repo``: inside its git dir, or where ``state_dir`` says (None:
        no config file, the default). A root that resolves outside the repository (a symlinked
        ``.git/cairn``, ``state_dir = "../x"``) is refused; only an absolute ``state_dir`` may
        point anywhere."""
        if settings is None or not settings.state_dir:
            return cls(durable.inside(repo.state_root(), [repo.common_dir], "the state root"))
        state_dir = Path(settings.state_dir).expanduser()
        if state_dir.is_absolute():
            return cls(state_dir)
        where = f"state_dir {settings.state_dir!r} in {settings.source or 'the config'}"
        return cls(
            durable.inside(repo.toplevel / state_dir, [repo.toplevel, repo.common_dir], where)
        )

    @classmethod
    def from_run_dir(cls, run_dir: Path) -> tuple[Layout, str, str]:
        """The layout, ticket and run id of a run directory (``CAIRN_RUN_DIR``): a real
        directory, reached without symlinks, holding the journal every run starts with."""
        run_dir = Path(run_dir).expanduser().absolute()
        ticket_dir = run_dir.parent
        if not (is_run_id(run_dir.name) and ticket_dir.parent.name == "tickets"):
            raise BadInput(
                f"{run_dir} is not a cairn run directory (<state>/tickets/<ticket>/<run-id>); "
                f"unset {ENV_RUN_DIR} or pass --ticket"
            )
        tickets.validate(ticket_dir.name)
        layout = cls(ticket_dir.parent.parent)
        layout.run_dir(ticket_dir.name, run_dir.name)
        if not run_dir.is_dir():
            raise BadInput(f"run directory {run_dir} does not exist; unset {ENV_RUN_DIR}")
        if not os.path.lexists(run_dir / JOURNAL):
            raise BadInput(
                f"{run_dir} is not a cairn run directory (no {JOURNAL}); unset {ENV_RUN_DIR} "
                "or pass --ticket"
            )
        return layout, ticket_dir.name, run_dir.name

    @property
    def tickets_dir(self) -> Path:
        durable.check_state_dir(self.root, "state root")
        path = self.root / "tickets"
        durable.check_state_dir(path, "tickets directory")
        return path

    @property
    def fleet_dir(self) -> Path:
        """``<state root>/fleet``: the fleet's records (``cairn.fleet.fleetstate``), its lease
        and its stop request."""
        durable.check_state_dir(self.root, "state root")
        path = self.root / "fleet"
        durable.check_state_dir(path, "fleet directory")
        return path

    @property
    def fleet_tickets_dir(self) -> Path:
        path = self.fleet_dir / "tickets"
        durable.check_state_dir(path, "fleet tickets directory")
        return path

    def list_fleet_tickets(self) -> list[str]:
        """The tickets that have a fleet record file, sorted; no file is read."""
        try:
            entries = os.scandir(self.fleet_tickets_dir)
        except (FileNotFoundError, NotADirectoryError):
            return []
        with entries:
            found = [
                entry.name[: -len(FLEET_RECORD)]
                for entry in entries
                if entry.name.endswith(FLEET_RECORD) and not entry.name.startswith(".")
            ]
        return sorted(found)

    def ticket_dir(self, ticket: str) -> Path:
        path = self.tickets_dir / tickets.validate(ticket)
        durable.check_state_dir(path, "ticket directory")
        return path

    def marker_path(self, ticket: str) -> Path:
        return self.ticket_dir(ticket) / MARKER

    def lease_path(self, ticket: str) -> Path:
        return self.ticket_dir(ticket) / LEASE

    def lock_path(self, ticket: str) -> Path:
        return self.ticket_dir(ticket) / LOCK

    def run_dir(self, ticket: str, run_id: str) -> Path:
        if not is_run_id(run_id):
            raise BadInput(f"invalid run id {run_id!r}; run ids look like 20261130-101500Z")
        path = self.ticket_dir(ticket) / run_id
        durable.check_state_dir(path, "run directory")
        return path

    def list_tickets(self) -> list[str]:
        try:
            entries = os.scandir(self.tickets_dir)
        except FileNotFoundError:
            return []
        with entries:
            return sorted(
                e.name
                for e in entries
                if tickets.problem(e.name) is None and e.is_dir(follow_symlinks=False)
            )

    def list_runs(self, ticket: str) -> list[str]:
        """Run ids of ``ticket``, oldest first."""
        try:
            entries = os.scandir(self.ticket_dir(ticket))
        except FileNotFoundError:
            return []
        with entries:
            names = [
                e.name for e in entries if is_run_id(e.name) and e.is_dir(follow_symlinks=False)
            ]
        return sorted(names, key=run_sort_key)

    def latest_run(self, ticket: str) -> str | None:
        runs = self.list_runs(ticket)
        return runs[-1] if runs else None

    def create_run(self, ticket: str, now: datetime) -> tuple[str, Path]:
        """A new, empty run directory; unique even when several runs start in the same second."""
        ticket_dir = self.ticket_dir(ticket)
        durable.ensure_dir(ticket_dir)
        base = new_run_id(now)
        latest = self.latest_run(ticket)
        suffix = 1
        if latest is not None and run_sort_key(latest)[0] == base:
            suffix = run_sort_key(latest)[1] + 1
        while True:
            run_id = base if suffix == 1 else f"{base}-{suffix}"
            path = ticket_dir / run_id
            try:
                path.mkdir()
            except FileExistsError:
                suffix += 1
                continue
            durable.fsync_dir(ticket_dir)
            return run_id, path


def artifacts(run_dir: Path) -> list[Artifact]:
    """The artifacts of a run, in the order they were written."""
    try:
        entries = os.scandir(run_dir)
    except FileNotFoundError:
        return []
    found = []
    with entries:
        for entry in entries:
            match = ARTIFACT.fullmatch(entry.name)
            if match:
                found.append(
                    Artifact(int(match.group(1)), match.group(2), match.group(3), Path(entry.path))
                )
    return sorted(found, key=lambda a: (a.number, a.path.name))


def latest_artifact(run_dir: Path, role: str, name: str) -> Artifact | None:
    matching = [a for a in artifacts(run_dir) if a.role == role and a.name == name]
    return matching[-1] if matching else None


def artifact_path(
    run_dir: Path, role: str, name: str, ext: str = "md", number: int | None = None
) -> Path:
    """Reserve the next ``{NN}_{role}_{name}.{ext}`` in ``run_dir``.

    The caller must hold the ticket's ``.lock`` so two writers never get the same NN; ``number``
    reuses an NN for a companion file (a plan's ``.md`` and ``.json``).
    """
    for part in (role, name):
        if not _NAME_PART.fullmatch(part):
            raise BadInput(f"invalid artifact name part {part!r}; use lowercase words and '-'")
    if number is None:
        existing = artifacts(run_dir)
        number = (existing[-1].number if existing else 0) + 1
    return run_dir / f"{number:02d}_{role}_{name}.{ext}"
