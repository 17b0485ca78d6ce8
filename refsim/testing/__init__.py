"""Test tooling others can import: the stateful Hypothesis machine for RFC 0252."""
