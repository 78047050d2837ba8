"""The run loop: implement, then review and fix for up to ``loop.max_rounds`` rounds.

Every dispatch runs under a turn budget; when it ends without finishing its work (turn cap,
timeout, a signal to cairn, an agent crash or error) the agent is stopped first, the work tree is
snapshotted, and the change summary, marker and journal say where and why. Up to
``agent.max_continuations`` new dispatches continue from the summary; a completed task is never
dispatched again. Exit codes: 0 done, 1 needs review or needs input (the coder made no
progress: resumable), 3 interrupted (resumable).

``loop`` has the phases (the Orchestrator), ``dispatch`` one dispatch and the recording of its
events, ``prompting`` every prompt, ``checkpoints`` phases, snapshots and cutoffs, ``todo_list``
the agent's own to-do list, ``idle`` the no-progress stop, ``signals`` SIGINT/SIGTERM,
``outcome`` the ends and ``RunOutcome``, ``context`` what they share.
"""

from cairn.run.orchestrator.loop import Orchestrator
from cairn.run.orchestrator.outcome import RunOutcome

__all__ = ["Orchestrator", "RunOutcome"]
