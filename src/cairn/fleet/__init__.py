"""The fleet: many tickets at once, each run by the orchestrator in its own git worktree.

``supervisor`` is ``cairn fleet start`` (the loop), ``watch`` one child ``cairn run|resume``
process and its progress, ``schedule`` the retry and resource rules, ``lease`` the one
supervisor per repository; ``trackers/`` feed it tickets and ``workspaces`` give each ticket its
worktree.
"""
