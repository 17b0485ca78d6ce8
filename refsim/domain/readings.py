"""Other readings of open points, as swappable components (see specs/assumptions.yaml).

The reference host takes the defaults; `refsim check --assume NAME=VALUE` builds a
host with one of these instead, to show which checks change and why.
"""

from __future__ import annotations

from typing import Any

from refsim.domain.core import HostCore, RequestRules, TaskPlan, TaskPlanner
from refsim.domain.fixtures import FixtureEntry
from refsim.domain.recorded import Deriver
from refsim.domain.refusals import Refusal, validation
from refsim.domain.runs import RunRecord
from refsim.domain.suites import Suite, Task
from refsim.domain.view import HostView


class MergingRules(RequestRules):
    """RFC 0252 alternative 5: a task with suite fixtures may also take a source."""

    def conflicts(self, suite: Suite, fixture_runs: dict[str, Any]) -> Refusal | None:
        return None


class MergingPlanner(TaskPlanner):
    """Alternative 5's serving half: recorded entries first, then the suite's."""

    def plan(self, core: HostCore, task: Task, modes: tuple[str, ...],
             derived: tuple[FixtureEntry, ...] | None) -> TaskPlan:
        if derived is not None and task.fixtures is not None and "live-shadow" not in modes:
            return TaskPlan(derived + task.fixtures.entries, "fail")
        return super().plan(core, task, modes, derived)


class ReasonedRefusals(RequestRules):
    """Same status and code for every unusable source, but a message naming the reason."""

    def unusable_source(self, value: Any, kind: str) -> Refusal:
        return validation(f"fixtureRuns names a source run that cannot be used: {kind}")


class DelegateDeriver(Deriver):
    """Derives the calls of the agent's delegates too (RFC 0244 §A's default excludes them)."""

    def derive(self, core: HostView, source: RunRecord, agent_id: str
               ) -> tuple[FixtureEntry, ...]:
        calls = sorted((c for c in source.held_calls
                        if c.agent_id == agent_id or c.root_agent == agent_id),
                       key=lambda c: c.sequence)
        return tuple(self.entry(c) for c in calls)
