"""A ticket on a shared git remote: its refs there (branch, snapshot, run state), the run state
as a commit, and the fenced checkpoint that pushes the three at once. Plain git: the fleet on
Temporal (``cairn.scale``) and a run with ``--remote`` (``cairn.remote.portable``) both build on
it, so a ticket moves between workers and machines the same way."""
