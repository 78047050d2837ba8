"""The fleet: many tickets at once, each in its own git worktree (docs/fleet.md)."""
