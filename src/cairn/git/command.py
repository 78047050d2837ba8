"""How cairn runs git, in one place: every call gets a scrubbed environment (inherited ``GIT_*``
removed, a fixed identity, no optional locks, no prompts) and config overrides that disable hooks,
auto-gc and split-index writes, so that cairn never fires a user's hook or rewrites anything it
did not ask for. Standard library only (``os``): ``cairn.git.status`` starts a snapshot's
``git status`` from here before the rest of cairn is imported."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from collections.abc import Mapping

IDENTITY = {
    "GIT_AUTHOR_NAME": "cairn",
    "GIT_AUTHOR_EMAIL": "cairn@localhost",
    "GIT_COMMITTER_NAME": "cairn",
    "GIT_COMMITTER_EMAIL": "cairn@localhost",
}

# Transport and helper variables a push may legitimately need; every other GIT_* is dropped.
_KEPT_GIT_VARS = frozenset(
    {
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_SSH_VARIANT",
        "GIT_ASKPASS",
        "GIT_SSL_CAINFO",
        "GIT_SSL_CAPATH",
        "GIT_SSL_NO_VERIFY",
        "GIT_PROXY_COMMAND",
        "GIT_EXEC_PATH",
    }
)

BASE_CONFIG = (
    "core.hooksPath=/dev/null",
    "gc.auto=0",
    "maintenance.auto=false",
    "core.splitIndex=false",
    "advice.addEmbeddedRepo=false",
    "advice.detachedHead=false",
    "core.quotePath=false",
    "color.ui=false",
    "log.showSignature=false",
    "commit.gpgSign=false",
    "core.pager=cat",
)


def scrubbed_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if not k.startswith("GIT_") or k in _KEPT_GIT_VARS}
    env.update(IDENTITY)
    env.update(
        LC_ALL="C",
        LANGUAGE="C",
        GIT_OPTIONAL_LOCKS="0",
        GIT_TERMINAL_PROMPT="0",
        GIT_ADVICE="0",
    )
    return env


def argv(args: list[str], config: tuple[str, ...] = BASE_CONFIG) -> list[str]:
    """``git -c <each of config> <args>``."""
    found = ["git"]
    for entry in config:
        found += ["-c", entry]
    return found + args
