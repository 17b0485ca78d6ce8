"""Faulty hosts that get a fixture miss wrong (RFC 0252 §D, §E and Security): a miss served by
the live tool (always, on a fork, from the third miss on, or while it is counted), derived
fixtures planned live, or a miss not reported through fixtureMissCount (forgotten, hidden on
the SSE stream or on a second read of the summary, or written as a boolean). A new host
whose fault is in running fail-closed or in counting misses goes here.
"""

from __future__ import annotations

import weakref
from typing import Any

import attrs

from refsim.domain.core import HostCore, MissPolicy, TaskPlan, TaskPlanner
from refsim.domain.fixtures import FixtureEntry
from refsim.domain.suites import Task
from refsim.domain.tools import ToolResult
from refsim.host import Edge, SimHost
from refsim.wire.response import Response
from refsim.zoo.faulty.base import Mutant, _stream_only, _swap


class ServesMissLive(MissPolicy):
    def on_miss(self, core: HostCore, tenant: str, tool: str, args: Any,
                on_miss: str) -> tuple[ToolResult, bool]:
        return core.gateway.call(tenant, tool, args), False


class _ForgetsMisses(MissPolicy):
    def on_miss(self, core: HostCore, tenant: str, tool: str, args: Any,
                on_miss: str) -> tuple[ToolResult, bool]:
        result, _ = super().on_miss(core, tenant, tool, args, on_miss)
        return result, False


class _CountsMissButCallsLive(MissPolicy):
    def on_miss(self, core: HostCore, tenant: str, tool: str, args: Any,
                on_miss: str) -> tuple[ToolResult, bool]:
        core.gateway.call(tenant, tool, args)
        return ToolResult("error", error={"code": "fixture_miss", "message": "x"}), True


class _PlansLive(TaskPlanner):
    def plan(self, core: HostCore, task: Task, modes: tuple[str, ...],
             derived: tuple[FixtureEntry, ...] | None) -> TaskPlan:
        plan = super().plan(core, task, modes, derived)
        return TaskPlan(plan.entries, "live") if derived is not None else plan


class _ForksMissLive(TaskPlanner):
    """A fork of an eval run runs its task's misses against the live tools."""

    def plan(self, core: HostCore, task: Task, modes: tuple[str, ...],
             derived: tuple[FixtureEntry, ...] | None) -> TaskPlan:
        plan = super().plan(core, task, modes, derived)
        run = list(core.runs.values())[-1]  # the run being executed
        if derived is not None and run.parent is not None:
            return TaskPlan(plan.entries, "live")
        return plan


def _scored_clean(host: SimHost, event: dict[str, Any]) -> dict[str, Any]:
    """eval.scored and eval.completed as if nothing had missed."""
    payload = event.get("payload") or {}
    if (event.get("type") in ("eval.scored", "eval.completed")
            and payload.get("fixtureMissCount")):
        return {**event, "payload": {**payload, "fixtureMissCount": 0, "passed": True}}
    return event


def _as_bool(count: Any) -> Any:
    return bool(count) if count in (0, 1) and not isinstance(count, bool) else count


def _misses_as_bool(host: SimHost, method: str, target: str, headers: dict[str, str],
                    body: bytes | None, response: Response) -> Response:
    """fixtureMissCount as a JSON boolean where it is 0 or 1, in the polled events and the
    summary: `true` reads as 1 to a loose client, but it is no count."""
    path = target.split("?", 1)[0]
    doc = response.json
    if method != "GET" or response.status != 200 or not isinstance(doc, dict):
        return response
    if path.endswith("/events/poll") and isinstance(doc.get("events"), list):
        events = [{**e, "payload": {**e["payload"], "fixtureMissCount": _as_bool(
                      e["payload"]["fixtureMissCount"])}}
                  if e.get("type") == "eval.scored" and isinstance(e.get("payload"), dict)
                  and "fixtureMissCount" in e["payload"] else e for e in doc["events"]]
        return Response(response.status, dict(response.headers), {**doc, "events": events})
    if path.endswith("/eval-summary") and isinstance(doc.get("tasks"), list):
        tasks = [{**task, "fixtureMissCount": _as_bool(task["fixtureMissCount"])}
                 if isinstance(task, dict) and "fixtureMissCount" in task else task
                 for task in doc["tasks"]]
        return Response(response.status, dict(response.headers), {**doc, "tasks": tasks})
    return response


def _forgets_misses_on_reread() -> Edge:
    """From its second read on, a run's EvalSummary reports no misses: every task's
    fixtureMissCount 0 (a cache rebuilt from the scores, without the misses)."""
    reads: weakref.WeakKeyDictionary[SimHost, dict[str, int]] = weakref.WeakKeyDictionary()

    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        if (method != "GET" or not target.split("?")[0].endswith("/eval-summary")
                or response.status != 200 or not isinstance(response.json, dict)):
            return response
        counts = reads.setdefault(host, {})
        counts[target] = counts.get(target, 0) + 1
        tasks = response.json.get("tasks")
        if counts[target] < 2 or not isinstance(tasks, list):
            return response
        forgot = [{**t, "fixtureMissCount": 0} if isinstance(t, dict) else t for t in tasks]
        return attrs.evolve(response, json={**response.json, "tasks": forgot}, text=None)
    return edge


class _ThirdMissLive(MissPolicy):
    """A fallback after repeated misses: from a tenant's third fail-closed miss on, the miss
    is still counted (fixtureMissCount right, the task fails) but the live tool runs too."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def on_miss(self, core: HostCore, tenant: str, tool: str, args: Any,
                on_miss: str) -> tuple[ToolResult, bool]:
        result, missed = super().on_miss(core, tenant, tool, args, on_miss)
        if missed:
            self.seen[tenant] = self.seen.get(tenant, 0) + 1
            if self.seen[tenant] >= 3:
                core.gateway.call(tenant, tool, args)
        return result, missed


# This family's hosts (the package puts them in the zoo's order, its `ORDER`).
HOSTS: tuple[Mutant, ...] = (
    Mutant("serves-miss-live", "§D/Security: the task runs onMiss fail; a miss reaches no "
           "live tool", _swap(misses=ServesMissLive)),
    Mutant("forgets-misses", "§D/§E: a miss is reported through fixtureMissCount",
           _swap(misses=_ForgetsMisses)),
    Mutant("counts-miss-calls-live", "Security: a miss reaches no live tool, even when it is "
           "counted", _swap(misses=_CountsMissButCallsLive)),
    Mutant("plans-live", "§D: derived fixtures run onMiss fail", _swap(planner=_PlansLive)),
    Mutant("branch-misses-live", "§D/Security: a fork runs fail-closed too (here its misses "
           "reach the live tools)", _swap(planner=_ForksMissLive)),
    Mutant("forgets-misses-on-reread", "§E: a miss is reported through fixtureMissCount "
           "(here only the first read of the summary reports it)",
           edge=_forgets_misses_on_reread()),
    Mutant("stream-hides-misses", "§E: a miss is reported through fixtureMissCount (here "
           "the SSE stream says none missed; the poll and summary are right)",
           edge=_stream_only(_scored_clean)),
    Mutant("misses-as-bool", "§D/§E: fixtureMissCount 0 on a replay, 1 on a drift: a "
           "count (here false and true, in the polled events and the summary)",
           edge=_misses_as_bool),
    Mutant("third-miss-live", "§D/Security: a miss reaches no live tool (here from a tenant's "
           "third miss on it is counted and the live tool runs too)",
           _swap(misses=_ThirdMissLive)),
)
