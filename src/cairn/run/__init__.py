"""Running a plan: plan formats, the orchestrator loop, budgets, prompts, review, evaluation."""
