"""Fault injection: named crash points, for recovery tests (docs/reliability.md "Crash points").

The ending sequences of a run and of the supervisor (push, pull request, comment, label,
notification, record write, worktree removal) call ``crash_at(point)`` between their steps. In
normal use that is one dictionary lookup and nothing happens. A test, or a ``bench/chaos``
campaign, sets ``CAIRN_FAULT_INJECTION=1`` and ``CAIRN_CRASH_AT=<point>[@<n>]``: the process
that reaches ``point`` for the ``n``-th time (the first, without ``@n``) kills itself with
SIGKILL there, as a power cut would, and the test checks that the next start recovers. The
points are ``cairn.terms.CRASH_POINTS``; a fleet's runs inherit both variables from their
supervisor.
"""

from __future__ import annotations

import os
import signal

from cairn.envnames import ENV_CRASH_AT, ENV_FAULT_INJECTION

_reached: dict[str, int] = {}


def crash_at(point: str) -> None:
    """Kill this process here when the test variables ask for ``point`` (else nothing)."""
    if os.environ.get(ENV_FAULT_INJECTION) != "1":
        return
    wanted, _, nth = os.environ.get(ENV_CRASH_AT, "").partition("@")
    if wanted != point:
        return
    _reached[point] = _reached.get(point, 0) + 1
    if _reached[point] == (int(nth) if nth.isdigit() else 1):
        os.kill(os.getpid(), signal.SIGKILL)
