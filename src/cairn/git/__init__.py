"""The only code that runs git (docs/architecture.md): ``Git`` runs one command, ``Repo`` finds
a repository's paths, ``cairn.git.command`` says how every command is run (environment and
config overrides), ``cairn.git.process`` starts every git process (and waits for it with a
deadline, and kills its group), ``cairn.git.sessions`` keeps ``--batch`` processes spoken to
request by request, ``cairn.git.status`` starts a snapshot's status pass and discovery early.

The names below live in ``cairn.git.runner`` and are loaded on first use, so that importing a
light submodule (``cairn.git.command``, ``cairn.git.status``) does not load the runner.
"""

from __future__ import annotations

from cairn.util.lazy import names_from

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from cairn.git.command import IDENTITY as IDENTITY
    from cairn.git.command import scrubbed_env as scrubbed_env
    from cairn.git.process import Deadline as Deadline
    from cairn.git.process import kill_and_reap as kill_and_reap
    from cairn.git.result import GitResult as GitResult
    from cairn.git.result import telling_line as telling_line
    from cairn.git.runner import INDEX_WRITERS as INDEX_WRITERS
    from cairn.git.runner import MIN_VERSION as MIN_VERSION
    from cairn.git.runner import Git as Git
    from cairn.git.runner import Repo as Repo
    from cairn.git.runner import base_runner as base_runner
    from cairn.git.runner import null_oid as null_oid
    from cairn.git.runner import version as version

# where each name lives: loaded on first use
_HOMES = {
    "IDENTITY": "command",
    "scrubbed_env": "command",
    "Deadline": "process",
    "GitResult": "result",
    "kill_and_reap": "process",
    "telling_line": "result",
    "INDEX_WRITERS": "runner",
    "MIN_VERSION": "runner",
    "Git": "runner",
    "Repo": "runner",
    "base_runner": "runner",
    "null_oid": "runner",
    "version": "runner",
}


__getattr__ = names_from(__name__, _HOMES)
