"""The fleet beyond one machine: tickets as Temporal workflows, run segments as activities on
any worker, the state every worker needs on a shared git remote (docs/scale-out.md).

Imports temporalio only in the modules that need it (``workflow``, ``segment``, ``worker``,
``starter``); ``shared`` is plain git, as the ticket's refs on the remote are
(``cairn.remote``)."""
