"""The scripted agent: a deterministic agent for demos, tests and fault injection."""
