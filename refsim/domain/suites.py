"""Eval suites as values, golden scoring, and the catalogue a host serves.

Suite documents are parsed outside the domain (`refsim.wire.suite_docs`): built-in suites come
from specs/fixtures/ (their file stem is the fixture id); tenants may register more through
a seam, visible to that tenant only.
"""

from __future__ import annotations

from typing import Any

import attrs

from refsim.domain.canonical import canonical
from refsim.domain.fixtures import FixtureEntry


@attrs.frozen
class TaskFixtures:
    entries: tuple[FixtureEntry, ...]
    on_miss: str | None
    has_tool_responses: bool

    @property
    def sets_tool_fixtures(self) -> bool:
        """Whether the task's tool calls are served from fixtures (a memorySeed alone is not)."""
        return self.has_tool_responses or self.on_miss is not None

    @property
    def conflicts_with_recorded(self) -> bool:
        """RFC 0252 §B: a task carrying `toolResponses` or `onMiss` cannot take a source."""
        return self.has_tool_responses or self.on_miss is not None


@attrs.frozen
class Task:
    task_id: str
    input: Any
    expected: dict[str, Any]
    fixtures: TaskFixtures | None


@attrs.frozen
class Suite:
    suite_id: str
    version: str
    modes: tuple[str, ...]
    tasks: tuple[Task, ...]
    trials: int
    pass_score: float | None
    target_agent_id: str | None
    doc: dict[str, Any] = attrs.field(eq=False, repr=False)

    def task(self, task_id: str) -> Task | None:
        return next((t for t in self.tasks if t.task_id == task_id), None)


# What one eval run may serve from fixtures at most: calls x trials x the largest entry's
# response (docs/host-author.md). A run's events hold every response it served, so this bounds
# its event stream too (a 900 kB entry served 200 times was a 180 MB stream).
MAX_RUN_SERVED_BYTES = 16 * 1_048_576


def script_calls(script: Any, depth: int = 0) -> int:
    """The tool calls a script makes when run once, delegates' calls included."""
    if not isinstance(script, list) or depth > 8:
        return 0
    calls = 0
    for step in script:
        if isinstance(step, dict) and "call" in step:
            calls += 1
        elif isinstance(step, dict) and "delegate" in step:
            calls += script_calls(step.get("script"), depth + 1)
    return calls


def golden_match(expected: dict[str, Any], decision: Any) -> bool:
    """Golden scoring of a decision against `expected.match`."""
    if expected.get("kind") != "golden":
        return False  # rubric needs a judge this host does not implement
    match = expected.get("match")
    if not isinstance(match, dict):
        return False  # a golden task without a match can never pass
    strategy, value = match["strategy"], match["value"]
    if strategy == "exact":
        return canonical(decision) == canonical(value)
    if strategy == "contains":
        if isinstance(decision, str) and isinstance(value, str):
            return value in decision
        if isinstance(decision, list):
            wanted = canonical(value)  # once, not once per element
            return any(canonical(v) == wanted for v in decision)
        return False
    return _json_subset(value, decision)


def _json_subset(pattern: Any, actual: Any) -> bool:
    if isinstance(pattern, dict):
        return isinstance(actual, dict) and all(
            k in actual and _json_subset(v, actual[k]) for k, v in pattern.items())
    return canonical(pattern) == canonical(actual)


@attrs.define
class SuiteCatalogue:
    builtin: dict[str, Suite]
    by_tenant: dict[str, dict[str, Suite]] = attrs.Factory(dict)

    @property
    def fixture_ids(self) -> list[str]:
        return sorted(self.builtin)

    def lookup(self, tenant: str, ref: str) -> Suite | None:
        """A suite by fixture id or suiteId; a tenant's own suites first."""
        own = self.by_tenant.get(tenant, {})
        if ref in own:
            return own[ref]
        if ref in self.builtin:
            return self.builtin[ref]
        return next((s for s in self.builtin.values() if s.suite_id == ref), None)

    def register(self, tenant: str, suite: Suite) -> bool:
        """Add a tenant's suite; False when that suiteId is already a different document
        (the tenant's own, or a built-in one, which a tenant never shadows)."""
        builtin = next((s for s in self.builtin.values() if s.suite_id == suite.suite_id), None)
        if builtin is not None:
            return canonical(builtin.doc) == canonical(suite.doc)
        own = self.by_tenant.setdefault(tenant, {})
        existing = own.get(suite.suite_id)
        if existing is not None and canonical(existing.doc) != canonical(suite.doc):
            return False
        own[suite.suite_id] = suite
        return True
