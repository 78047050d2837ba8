"""The git runner (``Git``) and a repository's paths (``Repo``): every git command cairn runs goes
through them, with the environment and config overrides of ``cairn.git.command``."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from cairn.errors import CairnError, GitError, NotARepository, SaveTimeout
from cairn.git.command import BASE_CONFIG, argv, scrubbed_env
from cairn.git.discovery import DISCOVER_ARGS
from cairn.git.discovery import parse as parse_discovery
from cairn.git.process import Deadline, GitResult, Started, kill_and_reap, popen, timed_out
from cairn.util.tuples import NamedTuple

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cairn.git.sessions import Session

MIN_VERSION = (2, 31)

# Subcommands that write an index file: on git >= 2.40 they skip the index's trailing hash.
INDEX_WRITERS = frozenset(
    {"update-index", "write-tree", "read-tree", "checkout-index", "add", "rm", "reset", "stash"}
)


class Git:
    """A git runner bound to a directory (and optionally a private index file). Treat it as
    immutable: ``with_index`` and ``with_config`` return new runners."""

    __slots__ = ("config", "cwd", "env", "skip_index_hash")

    def __init__(
        self,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        config: tuple[str, ...] = BASE_CONFIG,
        skip_index_hash: bool = False,  # ask git's version only when a command writes an index
    ) -> None:
        self.cwd = cwd
        self.env = scrubbed_env() if env is None else env
        self.config = config
        self.skip_index_hash = skip_index_hash

    def replace(self, **changes: object) -> Git:
        fields = {name: getattr(self, name) for name in self.__slots__}
        return Git(**{**fields, **changes})

    def _argv(self, args: Sequence[str]) -> list[str]:
        config = self.config
        if self.skip_index_hash and args and args[0] in INDEX_WRITERS and version() >= (2, 40):
            config = (*config, "index.skipHash=true")
        return argv(list(args), config)

    def with_index(self, index_file: Path) -> Git:
        return self.replace(env={**self.env, "GIT_INDEX_FILE": str(index_file)})

    def with_config(self, *entries: str) -> Git:
        return self.replace(config=self.config + entries)

    def run(
        self,
        args: Sequence[str],
        *,
        input: bytes | None = None,
        check: bool = True,
        deadline: Deadline | None = None,
        critical: bool = False,
        keep_fds: Sequence[int] = (),
    ) -> GitResult:
        """Run ``git <args>``; ``keep_fds`` are passed on to it (a lock it must hold while it
        lives, however this process ends).

        With a deadline the process is killed (with its whole process group) when time runs out
        and SaveTimeout is raised. A ``critical`` call (a ref update) is never killed half-way:
        it is only started while time remains and then allowed to finish, because a killed
        update-ref would leave a stale ``.lock`` behind.
        """
        argv = self._argv(args)
        timeout = None
        if deadline is not None:
            timeout = deadline.remaining()
            if timeout is not None and timeout <= 0:
                raise SaveTimeout(f"time budget spent before `git {args[0]}`")
            if critical:
                timeout = None
        import subprocess

        stdin = subprocess.PIPE if input is not None else subprocess.DEVNULL
        proc = popen(argv, self.cwd, self.env, stdin=stdin, keep_fds=keep_fds)
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_and_reap(proc)
            raise timed_out(args) from None
        except BaseException:
            if critical:
                proc.communicate()
            else:
                kill_and_reap(proc)
            raise
        result = GitResult(list(args), proc.returncode, out, err)
        if check and not result.ok:
            raise GitError(list(args), result.returncode, result.error_line)
        return result

    def start(self, args: Sequence[str]) -> Started:
        """Start ``git <args>`` now (no input) and collect it later with ``Started.result``:
        the caller works meanwhile."""
        return Started(list(args), popen(self._argv(args), self.cwd, self.env))

    def out(self, args: Sequence[str], **kwargs: object) -> str:
        return self.run(args, **kwargs).text  # type: ignore[arg-type]

    def session(self, args: Sequence[str], deadline: Deadline | None = None) -> Session:
        """A long-running ``git <args>`` that answers requests on stdin (``--batch`` modes)."""
        from cairn.git.sessions import Session

        return Session(self._argv(args), args[0], self.cwd, self.env, deadline)


@cache
def version() -> tuple[int, ...]:
    text = Git(Path("/")).out(["version"])  # any directory will do; / always exists
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not match:
        raise CairnError(f"cannot read the git version from {text!r}")
    return tuple(int(part or 0) for part in match.groups())


def base_runner(cwd: Path) -> Git:
    git = Git(cwd)
    found = version()
    if found < MIN_VERSION:
        need = ".".join(map(str, MIN_VERSION))
        have = ".".join(map(str, found))
        raise CairnError(f"git {need} or newer is required (found {have}); upgrade git")
    if found >= (2, 40):
        git = git.with_config("index.skipHash=true")
    return git


class Repo(NamedTuple):
    """A work tree and its git directories, all as absolute paths."""

    toplevel: Path
    git_dir: Path
    common_dir: Path
    index_path: Path
    object_format: str
    git: Git

    @classmethod
    def discover(cls, path: Path | str, discovery: Started | None = None) -> Repo:
        """The repository of the work tree at ``path``; ``discovery``: its ``DISCOVER_ARGS``
        started earlier by the caller (``cairn.git.status.start_early``), else run now."""
        start = Path(path).expanduser()
        if not start.is_dir():
            if discovery is not None:
                discovery.abandon()
            raise NotARepository(f"{start} is not a directory; pass -C <path of a git work tree>")
        git = Git(start.resolve(), skip_index_hash=True)
        if discovery is not None:
            result = discovery.result(check=False)
        else:
            result = git.run(DISCOVER_ARGS, check=False)
        found = parse_discovery(result.returncode, result.stdout)
        if found is None:
            base_runner(start)  # a git older than 2.31 does not know --path-format: say so
            raise NotARepository(
                f"{start} is not inside a git work tree; run `git init` there or pass -C <repo>"
            )
        toplevel, git_dir, common_dir, index = (
            Path(p) for p in (found.toplevel, found.git_dir, found.common_dir, found.index)
        )
        at_top = git.replace(cwd=toplevel)
        return cls(toplevel, git_dir, common_dir, index, found.object_format, at_top)

    def state_root(self) -> Path:
        return self.common_dir / "cairn"

    def current_branch(self) -> str | None:
        """The checked-out branch's short name; None when HEAD is detached."""
        result = self.git.run(["symbolic-ref", "--quiet", "--short", "HEAD"], check=False)
        return (result.text.strip() or None) if result.ok else None


def null_oid(like: str) -> str:
    return "0" * len(like)
