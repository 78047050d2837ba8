"""Error types. Each carries the exit code and a one-line message for the CLI."""

from __future__ import annotations


class CairnError(Exception):
    """Base class: `str(err)` is the one-line message shown to the user."""

    exit_code = 1


class BadInput(CairnError):
    """The user asked for something invalid; nothing was written. Exit 2."""

    exit_code = 2


class NotARepository(BadInput):
    pass


class GitError(CairnError):
    """A git command failed unexpectedly."""

    def __init__(self, args: list[str], returncode: int, problem: str) -> None:
        self.git_args = args
        self.returncode = returncode
        super().__init__(f"git {' '.join(args[:2])} failed: {problem}")


class SaveTimeout(CairnError):
    """The snapshot did not finish within its time budget; no ref was moved. Exit 1."""


class RestoreRefused(CairnError):
    """A restore would overwrite something no snapshot holds. Exit 1."""
