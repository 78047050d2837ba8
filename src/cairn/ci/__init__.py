"""cairn inside GitHub Actions (``GITHUB_ACTIONS=true``): what a run tells the job once it ends,
the step summary and one comment on the issue or pull request that started the workflow
(``cairn.ci.actions.report``). Only the command line imports it; this module imports nothing, so
asking whether a run is inside Actions costs nothing.

docs/ci.md is the spec: the composite action (``action.yml``), the comment, the step summary.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping

GITHUB_ACTIONS = "GITHUB_ACTIONS"  # "true" on every Actions runner


def in_actions(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` is a step of a GitHub Actions job."""
    return environ.get(GITHUB_ACTIONS) == "true"
