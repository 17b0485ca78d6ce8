"""The machine's model of a host: which runs exist, what they did, and what a replay must do.

Independent of the host's code paths: it recomputes usability (§C), derivation (§D) and
matching (RFC 0244) from what the model saw the agents do.
"""

from __future__ import annotations

from typing import Any

import attrs

from refsim.domain.canonical import canonical, integral
from refsim.domain.tools import COUNTER, ToolGateway, ToolResult


@attrs.frozen
class Call:
    agent: str
    tool: str
    args: Any
    status: str
    outcome: Any
    error: Any

    @property
    def failed(self) -> bool:
        return self.status != "ok"


@attrs.frozen
class Entry:
    tool: str
    args: Any
    response: Any
    is_error: bool


@attrs.define
class ModelRun:
    id: str
    tenant: str
    kind: str  # eval | workflow | noop | waiting | fork-replay
    agent: str | None
    terminal: bool
    calls: list[Call] = attrs.Factory(list)
    invoked: set[str] = attrs.Factory(set)
    held: bool = True
    erased: bool = False
    deleted: bool = False  # taken out of the host outright (in process only)
    fixture_runs: dict[str, str] | None = None
    # sources whose tool content this run was served (erasing one reaches this run)
    content_from: set[str] = attrs.Factory(set)
    # the derived entries per task, as the model derived them at create
    derived: dict[str, tuple[Entry, ...]] = attrs.Factory(dict)
    script: list[Any] = attrs.Factory(list)
    trials: int = 1
    expected_misses: int = 0
    expected_passed: bool = True


@attrs.define
class Model:
    fixture_errors: bool
    unheld_agents: frozenset[str]
    world: ToolGateway = attrs.Factory(ToolGateway)
    runs: dict[str, ModelRun] = attrs.Factory(dict)

    def usable(self, caller_tenant: str, value: Any, agent: str) -> ModelRun | None:
        run = self.runs.get(value) if isinstance(value, str) else None
        if run is None or run.tenant != caller_tenant or not run.terminal:
            return None
        if agent not in run.invoked or not run.held or run.erased:
            return None
        if agent in self.unheld_agents and any(c.agent == agent for c in run.calls):
            return None  # a lane the host does not keep; with no calls there is nothing to keep
        if any(c.failed for c in run.calls if c.agent == agent) and not self.fixture_errors:
            return None
        return run

    def unusable_kind(self, caller_tenant: str, value: Any, agent: str) -> str:
        run = self.runs.get(value) if isinstance(value, str) else None
        if run is None or run.deleted:
            return "unknown"
        if run.tenant != caller_tenant:
            return "foreign"
        if not run.terminal:
            return "non-terminal"
        if agent not in run.invoked:
            return "no-agent"
        if run.erased:
            return "erased"
        if not run.held or agent in self.unheld_agents:
            return "not-held"
        return "failed-call"

    @staticmethod
    def derive(run: ModelRun, agent: str) -> tuple[Entry, ...]:
        return tuple(Entry(c.tool, c.args, c.error if c.failed else c.outcome, c.failed)
                     for c in run.calls if c.agent == agent)

    # -- executing a script the way the recorder does

    def run_live(self, tenant: str, agent: str, script: list[Any], calls: list[Call],
                 invoked: set[str]) -> Any:
        def tool(agent_id: str, name: str, args: Any) -> ToolResult:
            result = self.world.call(tenant, name, args)
            calls.append(Call(agent_id, name, args, result.status, result.outcome, result.error))
            return result
        return _execute(agent, script, tool, invoked)

    def take_in(self, tenant: str, calls: list[Call], events: list[Any]) -> None:
        """Correct the model's live calls with what the wire showed they returned: a host
        whose counters the machine cannot read (no counter seam, a host that served other
        traffic) answers from counts the model cannot know. The world takes the counts in."""
        returned = [e.get("payload") or {} for e in events
                    if isinstance(e, dict) and e.get("type") == "agent.tool-returned"]
        if len(returned) != len(calls):
            return
        for index, (call, payload) in enumerate(zip(calls, returned, strict=True)):
            outcome = payload.get("outcome")
            if call.status != "ok" or "outcome" not in payload or outcome == call.outcome:
                continue
            calls[index] = attrs.evolve(call, outcome=outcome)
            count = integral(outcome.get("count")) if isinstance(outcome, dict) else None
            if (call.tool == COUNTER and isinstance(outcome, dict)
                    and isinstance(outcome.get("key"), str) and count is not None):
                self.world.counters[(tenant, outcome["key"])] = count

    @staticmethod
    def run_replay(agent: str, script: list[Any], entries: tuple[Entry, ...], trials: int,
                   calls: list[Call], invoked: set[str]) -> tuple[int, list[Any], list[Any]]:
        """Misses, decisions per trial, and what each call was answered (fail-closed)."""
        misses = 0
        decisions: list[Any] = []
        answers: list[Any] = []
        for _ in range(trials):
            used: set[int] = set()

            def tool(agent_id: str, name: str, args: Any, used: set[int] = used) -> ToolResult:
                nonlocal misses
                index = next((i for i, e in enumerate(entries) if i not in used
                              and e.tool == name and canonical(e.args) == canonical(args)), None)
                if index is None:
                    misses += 1
                    result = ToolResult("error", error={"code": "fixture_miss"})
                else:
                    used.add(index)
                    entry = entries[index]
                    result = (ToolResult("error", error=entry.response) if entry.is_error
                              else ToolResult.ok(entry.response))
                answers.append((result.error if result.failed else result.outcome,
                                result.failed))
                calls.append(Call(agent_id, name, args, result.status, result.outcome,
                                  result.error))
                return result
            decisions.append(_execute(agent, script, tool, invoked))
        return misses, decisions, answers


def _execute(agent: str, script: list[Any], tool: Any, invoked: set[str], depth: int = 0) -> Any:
    invoked.add(agent)
    for step in script:
        if "call" in step:
            tool(agent, step["call"], step.get("args"))
        elif "delegate" in step:
            if depth < 4:
                _execute(step["delegate"], step["script"], tool, invoked, depth + 1)
        elif "decide" in step:
            return step["decide"]
    return "done"
