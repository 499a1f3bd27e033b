"""The gate: budgets, baselines, allowlists, verdicts and their text. See docs/architecture.md."""
