"""``cairn fleet service install|uninstall``: the repository's fleet supervisor (``cairn fleet
start`` there) as a service of the machine, started at login (a systemd user unit) or at boot (a
system unit), and started again when it dies; on macOS, the launchd agent that does the same,
printed for the person to load. Nothing here runs ``systemctl`` or ``launchctl``: it writes (or
prints) the file and says the commands (docs/fleet.md, Running the supervisor as a service)."""

from __future__ import annotations

import hashlib
import math
import os
import plistlib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cairn.errors import BadInput

Scope = Literal["user", "system", "launchd"]

# The first line of every unit cairn writes: uninstall removes only a file that starts so.
MARK = "# Written by cairn fleet service install"
SYSTEM_DIR = Path("/etc/systemd/system")
RESTART_SEC = (
    10  # seconds between a death and the restart (systemd's RestartSec, launchd's throttle)
)
STOP_MARGIN = 30  # seconds of TimeoutStopSec beyond the runs' own stop
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Service:
    """The unit (or plist) of one repository's supervisor, and where it goes."""

    unit: str  # the file name: cairn-fleet-<dir>-<hash>.service, or <label>.plist
    path: Path
    scope: Scope
    content: str
    commands: list[str] = field(default_factory=list)  # to enable it and see it run


@dataclass(frozen=True)
class Outcome:
    service: Service
    changed: bool  # the file is (or would be) different afterwards
    written: bool  # something was written or removed
    wants_link: Path | None = None  # the .wants/ link uninstall removed with the unit


def slug(toplevel: Path) -> str:
    """``<dir name>-<8 hex of the path>``: unit-name characters only, one per repository."""
    name = _UNSAFE.sub("_", toplevel.name).lstrip(".")[:48] or "repo"
    return f"{name}-{hashlib.sha256(os.fsencode(toplevel)).hexdigest()[:8]}"


def supervisor_argv() -> list[str]:
    """This cairn's ``fleet start``: the interpreter by absolute path (a venv's own, not the one
    it links to), so the service runs the install that wrote it, whatever PATH it has."""
    if not sys.executable:
        raise BadInput(
            "this Python does not know its own interpreter's path; run cairn from an "
            "installed interpreter (a venv's bin/python, pipx or uv tool)"
        )
    return [str(Path(sys.executable).absolute()), "-m", "cairn", "fleet", "start"]


def check_fleet(toplevel: Path, tracker: str, queue: Path) -> None:
    """A supervisor needs tickets to read: the ``github`` tracker (the config checks its repo),
    or the ``dir`` tracker's queue directory."""
    if tracker != "dir":
        return
    if queue.is_dir():
        return
    if queue.exists():
        raise BadInput(
            f"fleet.queue {queue} is not a directory; point fleet.queue at the directory of "
            "plan files"
        )
    try:
        shown = queue.relative_to(toplevel)
    except ValueError:
        shown = queue
    raise BadInput(
        f"no fleet to supervise here: the queue {shown}/ (fleet.queue) does not exist and "
        f'fleet.tracker is "dir"; create it (mkdir {shown}) or set [fleet] tracker = "github", '
        "then install the service"
    )


def stop_timeout(cutoff_timeout_ms: int) -> int:
    """Seconds ``systemctl stop`` waits before SIGKILL: each run stops its agent and saves its
    snapshot, each bounded by ``agent.cutoff_timeout_ms``, and the supervisor records them."""
    return math.ceil(2 * cutoff_timeout_ms / 1000) + STOP_MARGIN


def user_unit_dir(env: dict[str, str] | os._Environ[str]) -> Path:
    config = env.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(config):  # unset, empty or relative: the spec says to ignore it
        config = os.path.join(env.get("HOME") or str(Path.home()), ".config")
    return Path(config) / "systemd" / "user"


def invoking_user(env: dict[str, str] | os._Environ[str]) -> str:
    """The user the system unit runs as: the one who ran sudo, else this process's."""
    import pwd

    if os.geteuid() == 0 and env.get("SUDO_USER"):
        return env["SUDO_USER"]
    return pwd.getpwuid(os.geteuid()).pw_name


def _plain(value: str, what: str) -> str:
    if _CONTROL.search(value):
        raise BadInput(
            f"{what} {value!r} holds a control character (a newline, a tab) that a unit file "
            "cannot hold; rename it or install from another path"
        )
    return value.replace("%", "%%")  # systemd expands %-specifiers in these settings


def _exec_word(word: str) -> str:
    word = _plain(word, "the path").replace("$", "$$")
    if re.search(r"[\s\"'\\;]", word):
        return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return word


def systemd_unit(
    toplevel: Path, argv: list[str], path_env: str, *, user: str | None, stop_timeout: int
) -> str:
    """The unit file: ``user`` None for a user unit (started at login), a user name for a
    system unit run as that user (started at boot)."""
    where = _plain(str(toplevel), "the repository path")
    env = _plain(path_env, "PATH").replace("\\", "\\\\").replace('"', '\\"')
    lines = [
        f"{MARK} for {where}.",
        "# `cairn fleet service uninstall` removes it; it removes no file without that line.",
        "[Unit]",
        f"Description=cairn fleet supervisor of {where}",
    ]
    if user is not None:
        lines += ["Wants=network-online.target", "After=network-online.target"]
    lines += [
        "",
        "[Service]",
        "Type=simple",
        f"WorkingDirectory={where}",
        f'Environment="PATH={env}"',
        f"ExecStart={' '.join(_exec_word(w) for w in argv)}",
        # a death (a signal, an internal error) restarts it; a stop (cairn fleet stop, SIGTERM:
        # exit 3) and bad input (exit 2: a person must fix the config first) do not
        "Restart=on-failure",
        f"RestartSec={RESTART_SEC}s",
        "SuccessExitStatus=3",
        "RestartPreventExitStatus=2",
        # SIGTERM to the supervisor alone: it stops each run with a snapshot and waits for
        # them; runs outlive a supervisor that died, and the restarted one adopts them
        "KillMode=process",
        "KillSignal=SIGTERM",
        f"TimeoutStopSec={stop_timeout}s",
    ]
    if user is not None:
        lines.append(f"User={_plain(user, 'the user name')}")
    lines += [
        "",
        "[Install]",
        f"WantedBy={'default.target' if user is None else 'multi-user.target'}",
        "",
    ]
    return "\n".join(lines)


def launchd_plist(
    toplevel: Path, argv: list[str], path_env: str, label: str, logs: Path, stop_timeout: int
) -> str:
    """The launchd agent of macOS: started at login (``RunAtLoad``), started again when it
    crashed (``KeepAlive``: a signal, not an exit such as a stop's 3)."""
    data = {
        "Label": label,
        "ProgramArguments": argv,
        "WorkingDirectory": str(toplevel),
        "EnvironmentVariables": {"PATH": path_env},
        "RunAtLoad": True,
        "KeepAlive": {"Crashed": True},
        "ThrottleInterval": RESTART_SEC,
        "ExitTimeOut": stop_timeout,
        "StandardOutPath": str(logs),
        "StandardErrorPath": str(logs),
    }
    return plistlib.dumps(data, sort_keys=False).decode()


def plan(
    toplevel: Path,
    *,
    user: bool,
    cutoff_timeout_ms: int,
    platform: str = sys.platform,
    env: dict[str, str] | os._Environ[str] = os.environ,
) -> Service:
    """The service for the repository at ``toplevel``, and where it goes on this platform."""
    argv, path_env = supervisor_argv(), env.get("PATH", os.defpath)
    timeout, name = stop_timeout(cutoff_timeout_ms), slug(toplevel)
    if platform == "darwin":
        home = Path(env.get("HOME") or str(Path.home()))
        label = f"com.cairn.fleet.{name}"
        path = home / "Library" / "LaunchAgents" / f"{label}.plist"
        logs = home / "Library" / "Logs" / f"{label}.log"
        content = launchd_plist(toplevel, argv, path_env, label, logs, timeout)
        commands = [f"launchctl load -w {path}", f"launchctl list {label}", f"tail -f {logs}"]
        return Service(f"{label}.plist", path, "launchd", content, commands)
    unit = f"cairn-fleet-{name}.service"
    if user:
        content = systemd_unit(toplevel, argv, path_env, user=None, stop_timeout=timeout)
        ctl, journal = "systemctl --user", "journalctl --user"
        path = user_unit_dir(env) / unit
    else:
        run_as = invoking_user(env)
        content = systemd_unit(toplevel, argv, path_env, user=run_as, stop_timeout=timeout)
        ctl, journal = "sudo systemctl", "journalctl"
        path = SYSTEM_DIR / unit
    commands = [
        f"{ctl} daemon-reload && {ctl} enable --now {unit}",
        f"{ctl.removeprefix('sudo ')} status {unit}",
        f"{journal} -u {unit} -f",
    ]
    return Service(unit, path, "user" if user else "system", content, commands)


def uninstall_commands(service: Service) -> list[str]:
    """What stops a removed unit and makes systemd forget it (launchd: unload, then remove)."""
    if service.scope == "launchd":
        return [f"launchctl unload -w {service.path} && rm {service.path}"]
    ctl = "systemctl --user" if service.scope == "user" else "sudo systemctl"
    return [f"{ctl} stop {service.unit}; {ctl} daemon-reload"]


def for_repository(
    workspace: Path, *, user: bool, installing: bool = True, platform: str = sys.platform
) -> Service:
    """The service of the repository at ``workspace``: BadInput when it is not a git work tree,
    its config does not load, or (``installing``) it has no fleet to supervise."""
    from cairn.config import load
    from cairn.fleet.trackers.dir import queue_dir
    from cairn.git import Repo

    repo = Repo.discover(workspace)
    config = load(repo.toplevel)
    if installing:
        check_fleet(repo.toplevel, config.fleet.tracker, queue_dir(repo, config))
    return plan(
        repo.toplevel,
        user=user,
        cutoff_timeout_ms=config.agent.cutoff_timeout_ms,
        platform=platform,
    )


def writable_dir(directory: Path, user: bool) -> None:
    """BadInput unless ``directory`` exists as a writable directory, or can be made in the
    nearest one that does (a user unit's directory is often not there yet)."""
    probe = directory
    while not probe.exists() and probe != probe.parent and user:
        if probe.is_symlink():  # a link to nothing
            break
        probe = probe.parent
    if probe.is_dir() and os.access(probe, os.W_OK | os.X_OK):
        return
    if user:
        fix = "point XDG_CONFIG_HOME (or HOME) at a directory you can write"
    else:
        fix = "install a user unit with --user, or run it with sudo"
    raise BadInput(f"cannot write the unit directory {directory}; {fix}")


def cairns(path: Path) -> bool:
    """Whether the file at ``path`` is one cairn wrote (its first line is the mark)."""
    try:
        with path.open("rb") as file:
            return file.readline(len(MARK) + 1).decode("utf-8", "replace").startswith(MARK)
    except OSError:
        return False


def _not_cairns(path: Path) -> BadInput:
    return BadInput(
        f"{path} exists and was not written by cairn (no '{MARK}' first line); move it away "
        "or remove it by hand, cairn leaves it alone"
    )


def install(service: Service, *, dry_run: bool) -> Outcome:
    """Write the unit (the same content again is no change); a file of that name that cairn
    did not write is refused. launchd's plist and ``dry_run`` write nothing."""
    if service.scope == "launchd":
        return Outcome(service, changed=True, written=False)
    path = service.path
    writable_dir(path.parent, service.scope == "user")
    if path.is_symlink() or (path.exists() and not cairns(path)):
        raise _not_cairns(path)
    try:
        same = path.read_text() == service.content
    except (OSError, UnicodeDecodeError):
        same = False
    if same or dry_run:
        return Outcome(service, changed=not same, written=False)
    from cairn.util.durable import atomic_write

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, service.content)
    except PermissionError as exc:
        raise BadInput(
            f"cannot write {path} ({exc.strerror}); install a user unit with --user, or use sudo"
        ) from None
    return Outcome(service, changed=True, written=True)


def uninstall(service: Service, *, dry_run: bool) -> Outcome:
    """Remove the unit cairn wrote, and its ``.wants/`` link when it was enabled; refuse a
    missing file, or one cairn did not write."""
    path = service.path
    if service.scope == "launchd":
        return Outcome(service, changed=True, written=False)
    if not path.is_symlink() and not path.exists():
        flag = " --user" if service.scope == "user" else ""
        raise BadInput(
            f"no fleet service is installed for this repository ({path} does not exist); "
            f"install one with cairn fleet service install{flag}"
        )
    if path.is_symlink() or not cairns(path):
        raise _not_cairns(path)
    target = "default.target" if service.scope == "user" else "multi-user.target"
    link = path.parent / f"{target}.wants" / service.unit
    wants = link if link.is_symlink() and os.readlink(link) == str(path) else None
    if dry_run:
        return Outcome(service, changed=True, written=False, wants_link=wants)
    writable_dir(path.parent, service.scope == "user")
    try:
        if wants is not None:
            wants.unlink()
        path.unlink()
    except PermissionError as exc:
        raise BadInput(f"cannot remove {path} ({exc.strerror}); run it with sudo") from None
    return Outcome(service, changed=True, written=True, wants_link=wants)
