"""The spec checker: findings, pure judges, the conformance scenario, examples, invariants."""
