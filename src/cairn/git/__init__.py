"""The only code that runs git (docs/architecture.md): ``Git`` runs one command, ``Repo`` finds
a repository's paths, ``cairn.git.command`` says how every command is run (environment and
config overrides), ``cairn.git.sessions`` keeps processes that outlive a call,
``cairn.git.status`` starts a snapshot's status pass early.

The names below live in ``cairn.git.runner`` and are loaded on first use, so that importing a
light submodule (``cairn.git.command``, ``cairn.git.status``) does not load the runner.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from typing import Any

    from cairn.git.command import IDENTITY, scrubbed_env
    from cairn.git.runner import (
        INDEX_WRITERS,
        MIN_VERSION,
        Deadline,
        Git,
        GitResult,
        Repo,
        base_runner,
        kill_and_reap,
        null_oid,
        telling_line,
        version,
    )

__all__ = [
    "IDENTITY",
    "INDEX_WRITERS",
    "MIN_VERSION",
    "Deadline",
    "Git",
    "GitResult",
    "Repo",
    "base_runner",
    "kill_and_reap",
    "null_oid",
    "scrubbed_env",
    "telling_line",
    "version",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from cairn.git import runner

        return getattr(runner, name)
    raise AttributeError(f"module 'cairn.git' has no attribute {name!r}")
