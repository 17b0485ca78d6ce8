"""The host core: creates, executes, forks and erases runs, and enforces RFC 0252.

Requests arrive here already schema-valid; every decision below is a rule of an
RFC (or a row of specs/assumptions.yaml), and every refusal is a `Refusal` value.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import threading
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from refsim.domain.agents import Agent, default_agents
from refsim.domain.canonical import canonical_or_none, sha256_hex, sha256_text
from refsim.domain.clock import LogicalClock
from refsim.domain.commands import CreateEval, CreateRun, CreateWorkflow, Fork
from refsim.domain.fixtures import FixtureEntry, FixtureMatcher
from refsim.domain.ids import IdMinter, RunId, parse_bound
from refsim.domain.owners import DEFAULT_TENANTS, Owner, Tenant
from refsim.domain.profile import HostProfile
from refsim.domain.recorded import CopyStore, Deriver, SourcePolicy
from refsim.domain.refusals import (
    TENANT_MISMATCH,
    UNUSABLE_BASELINE,
    UNUSABLE_SOURCE,
    Refusal,
    not_found,
    state_conflict,
    tenant_mismatch,
    validation,
)
from refsim.domain.runs import EvalRecord, Event, HeldCall, RunRecord
from refsim.domain.suites import (
    MAX_RUN_SERVED_BYTES,
    Suite,
    SuiteCatalogue,
    Task,
    golden_match,
    script_calls,
)
from refsim.domain.tools import ToolGateway, ToolResult
from refsim.domain.values import Erasure

WORKFLOWS = ("conformance-agent-call", "conformance-noop", "conformance-wait-input")
MAX_DELEGATION_DEPTH = 4
FIXTURE_MISS_ERROR = {"code": "fixture_miss",
                      "message": "no fixture entry matches this call; no live tool ran"}


# ----------------------------------------------------------------------------- components


class RequestRules:
    """§B request rules, in the documented order (assumption `refusal-order`)."""

    def fixture_runs_gate(self, core: HostCore, command: CreateRun) -> Refusal | None:
        if command.fixture_runs is None:
            return None
        if not core.profile.accepts_recorded_fixtures:
            return validation("fixtureRuns is not accepted by this host", field="fixtureRuns")
        if not isinstance(command, CreateEval):
            return validation("fixtureRuns is only meaningful with mode eval",
                              field="fixtureRuns")
        if not command.fixture_runs:
            return validation("fixtureRuns must name at least one task", field="fixtureRuns")
        return None

    def keys(self, suite: Suite, fixture_runs: dict[str, Any]) -> Refusal | None:
        if any(suite.task(key) is None for key in fixture_runs):
            return validation("fixtureRuns names a task the suite does not have",
                              field="fixtureRuns")
        return None

    def conflicts(self, suite: Suite, fixture_runs: dict[str, Any]) -> Refusal | None:
        for key in fixture_runs:
            task = suite.task(key)
            if (task is not None and task.fixtures is not None
                    and task.fixtures.conflicts_with_recorded):
                return validation("a task named in fixtureRuns already carries suite fixtures "
                                  "(toolResponses or onMiss); the two are never merged",
                                  field="fixtureRuns")
        return None

    def live_shadow(self, modes: tuple[str, ...]) -> Refusal | None:
        if "live-shadow" in modes:
            return validation("fixtureRuns cannot be combined with live-shadow, "
                              "which ignores fixtures", field="fixtureRuns")
        return None

    def unusable_source(self, value: Any, kind: str) -> Refusal:
        """The one refusal for every unusable source (§C): the same bytes whatever the value
        and whatever the kind of reason."""
        return UNUSABLE_SOURCE


@attrs.frozen
class TaskPlan:
    entries: tuple[FixtureEntry, ...] | None  # None: every call goes live
    on_miss: str


class TaskPlanner:
    """Which fixtures serve a task, and what a miss does."""

    def plan(self, core: HostCore, task: Task, modes: tuple[str, ...],
             derived: tuple[FixtureEntry, ...] | None) -> TaskPlan:
        if "live-shadow" in modes:
            return TaskPlan(None, "live")  # live-shadow ignores fixtures
        if derived is not None:
            return TaskPlan(derived, "fail")  # §D: recorded fixtures run fail-closed
        if task.fixtures is not None and task.fixtures.sets_tool_fixtures:
            return TaskPlan(task.fixtures.entries,
                            task.fixtures.on_miss or core.profile.default_on_miss)
        return TaskPlan(None, "live")

    def make_matcher(self, entries: tuple[FixtureEntry, ...]) -> FixtureMatcher:
        return FixtureMatcher(entries)


class MissPolicy:
    """What the agent gets when no entry matches (RFC 0244 §D)."""

    def on_miss(self, core: HostCore, tenant: str, tool: str, args: Any,
                on_miss: str) -> tuple[ToolResult, bool]:
        """The result, and whether the call counts as a fixture miss."""
        if on_miss == "live":
            return core.gateway.call(tenant, tool, args), False
        return ToolResult("error", error=dict(FIXTURE_MISS_ERROR)), True


class Echo:
    """§E: `eval.started` carries the accepted map verbatim."""

    def eval_started(self, payload: dict[str, Any], fixture_runs: dict[str, Any] | None) -> None:
        if fixture_runs is not None:
            payload["fixtureRuns"] = dict(fixture_runs)


class ForkPolicy:
    """§E and Security: a fork reads the stored derived copy, never the source again."""

    def copies(self, core: HostCore, run: RunRecord) -> dict[str, tuple[FixtureEntry, ...]] | None:
        assert run.eval is not None
        origin = run.eval.copy_origin or run.run_id
        out: dict[str, tuple[FixtureEntry, ...]] = {}
        for task_id, value in (run.eval.fixture_runs or {}).items():
            source = parse_bound(value)
            entries = None if source is None else core.copies.get(source, origin, task_id)
            if entries is None:
                return None
            out[task_id] = entries
        return out


@attrs.frozen
class Components:
    """The swappable parts of a host. The zoo of faulty hosts replaces exactly one."""

    rules: RequestRules = attrs.Factory(RequestRules)
    sources: SourcePolicy = attrs.Factory(SourcePolicy)
    deriver: Deriver = attrs.Factory(Deriver)
    planner: TaskPlanner = attrs.Factory(TaskPlanner)
    misses: MissPolicy = attrs.Factory(MissPolicy)
    echo: Echo = attrs.Factory(Echo)
    forks: ForkPolicy = attrs.Factory(ForkPolicy)
    copies: Callable[[], CopyStore] = CopyStore


# ----------------------------------------------------------------------------- execution

_SCALARS = frozenset({str, int, float, bool, type(None)})


def copied(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists and scalars, copied by type, which costs a
    fraction of a JSON round trip); anything else an agent passes by `copy.deepcopy`."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {k: v if type(v) in _SCALARS else copied(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _SCALARS else copied(v) for v in value]
    return copy.deepcopy(value)


class NotWireJson(ValueError):
    """A value an agent handed over that the wire cannot carry."""


def wire_copy(value: Any) -> Any:
    """A deep copy of a value the wire can carry as JSON: objects with string keys, arrays,
    strings, booleans, null, integers and finite numbers. Anything else (NaN, infinity, a
    set, a tuple, bytes, an object, a cycle, nesting deeper than the interpreter's stack)
    raises NotWireJson: what crosses from an agent into a recorded fact is JSON, and
    copied, so the agent cannot rewrite it later."""
    try:
        return _wire(value)
    except RecursionError:
        raise NotWireJson("nested too deep (or a cycle)") from None


def _wire(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is bool or value is None or kind is int:
        return value
    if kind is float:
        if value != value or value in (_INF, -_INF):
            raise NotWireJson(f"{value!r} is no JSON number")
        return value
    if kind is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise NotWireJson(f"an object key {k!r} is not a string")
            out[k] = _wire(v)
        return out
    if kind is list:
        return [_wire(v) for v in value]
    raise NotWireJson(f"a {kind.__name__} is no JSON value")


_INF = float("inf")
_GC_LOCK = threading.Lock()
_gc_pauses = 0
_gc_resume = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a run executes.

    A run allocates a few long-lived objects per tool call (events, their payloads, the
    held call) and no cycles, so every collection on the way re-walks them for nothing:
    at 100k calls that was half the cost of a call (each full collection on the way walks
    the whole growing heap). Objects are still freed by reference counting. When the last
    paused run ends the collector resumes, or stays off if it was off before, and takes
    in what the run made as it takes in anything: a young collection or two, then the
    oldest generation, counted there as it goes, so its full collections come when due.

    Not `gc.freeze()` and `gc.unfreeze()`: moving everything straight to the oldest
    generation bypasses the count that decides when a full collection is due, so none
    comes again, and cyclic garbage (Hypothesis makes plenty) piles up there, 85 MB per
    hundred machine examples. Re-entrant, thread-safe.
    """
    global _gc_pauses, _gc_resume
    with _GC_LOCK:
        if _gc_pauses == 0:
            _gc_resume = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_resume:
                gc.enable()


@attrs.define
class _Port:
    """The tool boundary of one task trial: fixtures first, else live."""

    core: HostCore
    tenant: str
    matcher: FixtureMatcher | None
    on_miss: str
    misses: int = 0

    def call(self, tool: str, args: Any, key: str | None = None) -> ToolResult:
        if self.matcher is None:
            return self.core.gateway.call(self.tenant, tool, args)
        entry = self.matcher.select(tool, args, key)
        if entry is None:
            result, missed = self.core.components.misses.on_miss(
                self.core, self.tenant, tool, args, self.on_miss)
            self.misses += int(missed)
            return result
        if entry.is_error:
            return ToolResult("error", error=_error_object(entry.response))
        return ToolResult("ok", entry.response)


def _redacted(event: Event) -> Event:
    """An event without tool content: inputs become their hash, outcomes and errors go.
    One already without it is returned as it is (a run is erased again and again)."""
    payload = event.payload
    if event.type == "agent.tool-called" and "inputs" in payload:
        payload = {k: v for k, v in payload.items() if k != "inputs"}
        payload["argsHash"] = sha256_hex(event.payload["inputs"])
    elif event.type == "agent.tool-returned" and ("outcome" in payload or "error" in payload):
        payload = {k: v for k, v in payload.items() if k not in ("outcome", "error")}
    else:
        return event
    # Built directly: a named tuple's _replace is a Python loop over its fields.
    return Event(event.event_id, event.run, event.type, payload, event.tick, event.sequence)


def _error_object(response: Any) -> dict[str, Any]:
    if (isinstance(response, dict) and isinstance(response.get("code"), str)
            and isinstance(response.get("message"), str) and response["code"]
            and response["message"]):
        return dict(response)
    return {"code": "tool_error", "message": "recorded tool error", "details":
            {"response": response}}


@attrs.define
class _Invocation:
    core: HostCore
    run: RunRecord
    agent_id: str
    invocation_id: str
    port: _Port
    depth: int
    root_agent: str
    ended: bool = False  # once the agent's run returns, the context is dead

    def _alive(self) -> None:
        if self.ended:
            raise RuntimeError(f"the invocation {self.invocation_id} of {self.agent_id} has "
                               "ended: its context calls no tool and delegates nothing")

    def call(self, tool: str, args: Any) -> ToolResult:
        # The tool boundary copies both ways: what the agent passed is recorded as it was
        # then (§D "the call's inputs as the agent passed them"), and what the agent gets
        # back is its own, so an agent that edits either later rewrites no recorded fact.
        # Args the wire cannot carry (NaN, a set) raise in the agent: no call is made.
        self._alive()
        if type(tool) is not str:
            raise NotWireJson("a tool name is a string")
        result = self.core._tool_call(self, tool, wire_copy(args))
        outcome, error = result.outcome, result.error
        if error is None:
            if type(outcome) in _SCALARS:
                return result  # nothing in it the agent could edit
            return ToolResult(result.status, copied(outcome))
        return ToolResult(result.status, copied(outcome), copied(error))

    def delegate(self, agent_id: str, task_input: Any) -> Any:
        self._alive()
        task_input = wire_copy(task_input)
        if (type(agent_id) is not str or self.depth + 1 > MAX_DELEGATION_DEPTH
                or agent_id not in self.core.agents):
            return None
        self.core._emit(self.run, "agent.handoff",
                        {"fromAgentId": self.agent_id, "toAgentId": agent_id})
        decision = self.core._invoke(self.run, agent_id, task_input, self.port,
                                     self.depth + 1, parent=self.invocation_id,
                                     root_agent=self.root_agent)
        # The parent gets its own copy: the delegate's decision as recorded stays as it is.
        return copied(decision)


# ----------------------------------------------------------------------------- the core


@attrs.define
class Created:
    run: RunRecord


@attrs.define
class HostCore:
    seed: int = 0
    profile: HostProfile = attrs.Factory(HostProfile)
    components: Components = attrs.Factory(Components)
    minter: IdMinter = attrs.field(init=False)
    clock: LogicalClock = attrs.Factory(LogicalClock)
    gateway: ToolGateway = attrs.Factory(ToolGateway)
    tenants: dict[str, Tenant] = attrs.Factory(dict)
    runs: dict[RunId, RunRecord] = attrs.Factory(dict)
    agents: dict[str, Agent] = attrs.Factory(default_agents)
    # The built-in suites (fixture id -> Suite), parsed outside the domain and handed in.
    builtin_suites: dict[str, Suite] = attrs.Factory(dict)
    suites: SuiteCatalogue = attrs.field(init=False)
    copies: CopyStore = attrs.field(init=False)
    # How often each source id was resolved, and derived from: a fork must never add to
    # either (§E).
    resolutions: dict[RunId, int] = attrs.Factory(dict)
    derivations: dict[RunId, int] = attrs.Factory(dict)
    # The largest fixture response of a source's agent, or of a suite task's fixtures, in
    # bytes (see `_serves_too_much`), with what it was measured on: measured once, not on
    # every replay of a 10k-call source.
    response_bytes: dict[Any, tuple[Any, int]] = attrs.Factory(dict)

    def __attrs_post_init__(self) -> None:
        self.minter = IdMinter(self.seed)
        self.suites = SuiteCatalogue(dict(self.builtin_suites))
        self.copies = self.components.copies()
        for tenant in DEFAULT_TENANTS:
            self.add_tenant(tenant)

    # -- tenants and agents

    def add_tenant(self, tenant: Tenant) -> None:
        if tenant.api_key in self.tenants and self.tenants[tenant.api_key] != tenant:
            owner = self.tenants[tenant.api_key].name
            raise ValueError(f"API key already belongs to tenant {owner}")
        self.tenants[tenant.api_key] = tenant

    def caller(self, api_key: str) -> Owner | None:
        tenant = self.tenants.get(api_key)
        return tenant.owner() if tenant is not None else None

    # -- reading

    def visible_run(self, caller: Owner, rid: RunId) -> RunRecord | Refusal:
        """A run the caller may read; another tenant's id is a tenant mismatch whether or not
        it exists."""
        if rid.tenant != caller.tenant:
            return tenant_mismatch()
        run = self.runs.get(rid)
        if run is None or not caller.can_read(run.owner):
            return not_found()
        return run

    # -- create

    def create_run(self, caller: Owner, command: CreateRun) -> Created | Refusal:
        with gc_paused():
            return self._create_run(caller, command)

    def _create_run(self, caller: Owner, command: CreateRun) -> Created | Refusal:
        rules = self.components.rules
        refusal = rules.fixture_runs_gate(self, command)
        if refusal is not None:
            return refusal
        tenant_id = command.options.tenant_id
        if tenant_id is not None and tenant_id != caller.tenant:
            return tenant_mismatch()
        if isinstance(command, CreateEval):
            return self._create_eval(caller, command)
        if command.has_eval_options:
            return validation("evalModes and baselineRunId are only meaningful with mode eval")
        return self._create_workflow(caller, command)

    def _create_workflow(self, caller: Owner, command: CreateWorkflow) -> Created | Refusal:
        workflow_id = command.workflow_id
        if workflow_id not in WORKFLOWS:
            return validation("workflowId names no workflow on this host", field="workflowId")
        agent_id = command.agent_id
        script = list(command.script)
        if workflow_id == "conformance-agent-call" and agent_id is None:
            return validation("conformance-agent-call needs inputs.agentId",
                              field="inputs.agentId")
        if agent_id is not None and (not isinstance(agent_id, str) or agent_id not in self.agents):
            return validation("inputs.agentId names no agent on this host",
                              field="inputs.agentId")
        if not command.script_valid:
            return validation("inputs.script is not a valid agent script", field="inputs.script")
        run = self._new_run(caller, workflow_id, command)
        self._emit(run, "run.started", self._run_started(run))
        if agent_id is not None and workflow_id != "conformance-noop":
            port = _Port(self, caller.tenant, None, "live")
            self._invoke(run, agent_id, {"script": script}, port, 0)
        if workflow_id == "conformance-wait-input":
            run.status = "waiting-input"
        else:
            self._finish(run, "completed")
        return Created(run)

    def _create_eval(self, caller: Owner, command: CreateEval) -> Created | Refusal:
        profile, rules = self.profile, self.components.rules
        if not profile.eval_suite:
            return Refusal("capability_not_provided",
                           "this host does not run evals (agents.evalSuite is not advertised)")
        if ((command.eval_modes is not None or command.has_baseline)
                and not profile.baseline_selection):
            return validation("evalModes and baselineRunId need "
                              "agents.evalSuite.baselineSelection, which this host lacks")
        suite = self.suites.lookup(caller.tenant, command.suite_ref)
        if suite is None:
            return validation("evalSuiteRef names no suite on this host", field="evalSuiteRef")
        agent_id = command.agent_id
        if agent_id not in self.agents:
            return validation("agentId names no agent on this host", field="agentId")
        if suite.target_agent_id is not None and suite.target_agent_id != agent_id:
            return validation("agentId differs from the suite's targetAgentId", field="agentId")
        modes = tuple(command.eval_modes or suite.modes)
        if any(m not in suite.modes or m not in profile.modes for m in modes):
            return validation("a requested mode is not declared by the suite or not "
                              "implemented by this host", field="evalModes")
        if command.has_baseline and "regression" not in modes:
            return validation("baselineRunId needs the regression mode", field="baselineRunId")
        fixture_runs = None if command.fixture_runs is None else dict(command.fixture_runs)
        if fixture_runs is not None:
            for check in (rules.keys(suite, fixture_runs), rules.conflicts(suite, fixture_runs),
                          rules.live_shadow(modes)):
                if check is not None:
                    return check
        baseline = None
        if command.has_baseline:
            baseline = self._usable_baseline(caller, command.baseline_run_id, suite)
            if baseline is None:
                return UNUSABLE_BASELINE
        # §C then §D, all before anything is minted: a refusal leaves no trace.
        derived: dict[str, tuple[FixtureEntry, ...]] = {}
        sources: dict[str, RunId] = {}
        for task_id, value in (fixture_runs or {}).items():
            source = self.components.sources.assess(self, caller, value, agent_id)
            if isinstance(source, str):
                return rules.unusable_source(value, source)
            derived[task_id] = self.components.deriver.derive(self, source, agent_id)
            sources[task_id] = source.run_id
        too_much = _serves_too_much(self, suite, derived, sources, agent_id)
        if too_much is not None:
            return too_much
        run = self._new_run(caller, f"eval:{suite.suite_id}", command)
        run.eval = EvalRecord(suite, command.suite_ref, agent_id, modes, fixture_runs,
                              baseline.run_id if baseline else None)
        for task_id, entries in derived.items():
            self.copies.put(sources[task_id], run.run_id, task_id, entries)
            run.content_from |= {sources[task_id], *self.runs[sources[task_id]].content_from}
        self._execute_eval(run, suite, derived, baseline)
        return Created(run)

    def _usable_baseline(self, caller: Owner, value: Any, suite: Suite) -> RunRecord | None:
        rid = parse_bound(value)
        run = self.runs.get(rid) if rid is not None else None
        if run is None or not caller.can_read(run.owner) or run.status != "completed":
            return None
        if run.eval is None or run.eval.summary is None or run.eval.suite_id != suite.suite_id:
            return None
        return run

    # -- eval execution

    def _execute_eval(self, run: RunRecord, suite: Suite,
                      derived: dict[str, tuple[FixtureEntry, ...]],
                      baseline: RunRecord | None) -> None:
        assert run.eval is not None
        ev = run.eval
        self._emit(run, "run.started", self._run_started(run))
        started: dict[str, Any] = {"suiteId": suite.suite_id, "suiteVersion": suite.version,
                                   "taskCount": len(suite.tasks), "modes": list(ev.modes)}
        if baseline is not None:
            started["baselineRunId"] = baseline.run_id.bound
        self.components.echo.eval_started(started, ev.fixture_runs)
        self._emit(run, "eval.started", started)
        results = []
        total_misses = 0
        for task in suite.tasks:
            plan = self.components.planner.plan(self, task, ev.modes, derived.get(task.task_id))
            matcher = (self.components.planner.make_matcher(plan.entries)
                       if plan.entries is not None else None)
            passed_trials, misses = 0, 0
            for _ in range(suite.trials):
                if matcher is not None:
                    matcher.reset()  # consumption resets at the start of every trial
                port = _Port(self, run.owner.tenant, matcher, plan.on_miss)
                decision = self._invoke(run, ev.agent_id, task.input, port, 0)
                misses += port.misses
                if port.misses == 0 and golden_match(task.expected, decision):
                    passed_trials += 1
            score = passed_trials / suite.trials
            result: dict[str, Any] = {"taskId": task.task_id, "score": score,
                                      "passed": passed_trials == suite.trials,
                                      "fixtureMissCount": misses}
            if suite.trials > 1:
                result["trials"] = suite.trials
                result["passedTrials"] = passed_trials
            total_misses += misses
            results.append(result)
            self._emit(run, "eval.scored", dict(result))
        aggregate = sum(r["score"] for r in results) / len(results)
        passed_count = sum(1 for r in results if r["passed"])
        passed = (aggregate >= suite.pass_score if suite.pass_score is not None
                  else passed_count == len(results))
        summary: dict[str, Any] = {"suiteId": suite.suite_id, "suiteVersion": suite.version,
                                   "aggregateScore": aggregate, "passed": passed,
                                   "taskCount": len(results), "passedCount": passed_count,
                                   "tasks": results}
        completed: dict[str, Any] = {"aggregateScore": aggregate, "passed": passed,
                                     "taskCount": len(results), "passedCount": passed_count,
                                     "fixtureMissCount": total_misses}
        if baseline is not None and baseline.eval is not None and baseline.eval.summary:
            delta = max(-1.0, min(1.0, aggregate - baseline.eval.summary["aggregateScore"]))
            completed["regressionVsBaseline"] = delta
            summary["regression"] = {"baselineRunId": baseline.run_id.bound, "scoreDelta": delta}
        ev.summary = summary
        self._emit(run, "eval.completed", completed)
        self._finish(run, "completed")

    # -- agent invocation and the tool boundary

    def _invoke(self, run: RunRecord, agent_id: str, task_input: Any, port: _Port, depth: int,
                parent: str | None = None, root_agent: str | None = None) -> Any:
        invocation_id = self.minter.uuid_like()
        run.invoked_agents.add(agent_id)
        started: dict[str, Any] = {"invocationId": invocation_id, "agentId": agent_id}
        if parent is not None:
            started["parentInvocationId"] = parent
        self._emit(run, "agent.invocation-started", started)
        ctx = _Invocation(self, run, agent_id, invocation_id, port, depth,
                          root_agent or agent_id)
        outcome, error = "completed", None
        try:
            # The decision is recorded as a copy, checked to be JSON the wire can carry:
            # the agent keeps no handle on what the run's events hold.
            decision = wire_copy(self.agents[agent_id].run(ctx, copied(task_input)))
        except NotWireJson as exc:
            decision, outcome = None, "failed"
            error = {"code": "payload_unprojectable",
                     "message": f"the agent's decision or a value it passed is no JSON the "
                                f"wire can carry: {exc}"}
        except Exception:  # a registered Python agent's bug ends its invocation, not the host
            decision, outcome = None, "failed"
        finally:
            ctx.ended = True
        self._emit(run, "agent.decided", {"agentId": agent_id, "decision": decision})
        completed: dict[str, Any] = {"invocationId": invocation_id, "agentId": agent_id,
                                     "outcome": outcome}
        if error is not None:  # a vendor member (run-event.schema.json admits x-*)
            completed["x-refsim-error"] = error
        self._emit(run, "agent.invocation-completed", completed)
        return decision

    def _tool_call(self, inv: _Invocation, tool: str, args: Any) -> ToolResult:
        run, agent_id = inv.run, inv.agent_id
        call_id = self.minter.uuid_like()
        profile = self.profile
        content_free = agent_id in profile.content_free_agents
        # None for inputs that are no JSON: whoever needs the form then computes it, and
        # fails as it would have.
        key = canonical_or_none(args)
        if content_free:
            called = {"agentId": agent_id, "toolName": tool, "callId": call_id,
                      "argsHash": sha256_hex(args) if key is None else sha256_text(key)}
        else:
            called = {"agentId": agent_id, "toolName": tool, "callId": call_id,
                      "inputs": args}
        sequence = self._emit(run, "agent.tool-called", called).sequence
        result = inv.port.call(tool, args, key)
        status = result.status
        returned: dict[str, Any] = {"agentId": agent_id, "toolName": tool, "callId": call_id,
                                    "status": status}
        if not content_free:
            if status != "ok":
                returned["error"] = result.error
            else:
                returned["outcome"] = result.outcome
        if status == "ok" or status == "error":
            returned["durationMs"] = 0
        self._emit(run, "agent.tool-returned", returned)
        if agent_id in profile.unheld_agents:
            run.unheld_agents.add(agent_id)
        else:
            run.held_calls.append(HeldCall(sequence, agent_id, inv.invocation_id, tool,
                                           call_id, args, status, result.outcome,
                                           result.error, inv.root_agent, key))
        return result

    # -- forks, seams

    def fork(self, caller: Owner, rid: RunId, command: Fork) -> Created | Refusal:
        with gc_paused():
            return self._fork(caller, rid, command)

    def _fork(self, caller: Owner, rid: RunId, command: Fork) -> Created | Refusal:
        found = self.visible_run(caller, rid)
        if isinstance(found, Refusal):
            return not_found() if found.code == TENANT_MISMATCH else found
        source = found
        if not source.terminal:
            return state_conflict("only a terminal run can be forked", source.status)
        from_seq = command.from_seq
        if from_seq > source.last_sequence:
            return Refusal("fork_point_invalid", "fromSeq is past the run's last event")
        mode = command.mode
        if mode == "replay" and command.has_overlay:
            return validation("a replay fork takes no runOptionsOverlay",
                              field="runOptionsOverlay")
        if mode == "branch" and from_seq != 0:
            return Refusal("fork_point_invalid", "this host branches a run only from sequence 0")
        copies: dict[str, tuple[FixtureEntry, ...]] = {}
        if source.eval is not None and source.eval.fixture_runs:
            found_copies = self.components.forks.copies(self, source)
            if found_copies is None:
                return Refusal(self.profile.gone_copy_code,
                               "the recorded fixtures this eval run used are gone; "
                               "it cannot be replayed")
            copies = found_copies
        # A fork copies the owner verbatim (runs.md), whoever of that tenant asked.
        run = self._new_run(source.owner, source.workflow_id, source.request)
        run.parent = source.run_id
        run.content_from = set(source.content_from)
        if mode == "replay":
            self._replay_events(run, source)
            run.content_from.add(source.run_id)  # it re-emits the source's tool content
        elif source.eval is not None:
            ev = source.eval
            run.eval = attrs.evolve(ev, copy_origin=ev.copy_origin or source.run_id,
                                    summary=None)
            baseline = self.runs.get(ev.baseline) if ev.baseline else None
            self._execute_eval(run, ev.suite, copies, baseline)
        else:
            request = source.request
            self._emit(run, "run.started", self._run_started(run))
            if (isinstance(request, CreateWorkflow) and request.agent_id is not None
                    and source.workflow_id != "conformance-noop"):
                self._invoke(run, request.agent_id, {"script": list(request.script)},
                             _Port(self, caller.tenant, None, "live"), 0)
            self._finish(run, "completed")
        return Created(run)

    def _replay_events(self, run: RunRecord, source: RunRecord) -> None:
        """A replay re-reads the recorded events; it executes nothing and holds no calls."""
        for event in source.events:
            self._emit(run, event.type, event.payload)
        run.status = source.status
        run.completed_at = self.clock.now()
        run.holds_calls = False
        run.invoked_agents = set(source.invoked_agents)
        if source.eval is not None:
            ev = source.eval
            run.eval = attrs.evolve(ev, copy_origin=ev.copy_origin or source.run_id)

    def erase(self, caller: Owner, rid: RunId) -> Erasure | Refusal:
        """Purge a run's tool content and every copy derived from it (Security, RFC 0252).

        That reaches the derived entries stored under it and every run that was served
        them (and so holds the same content), transitively."""
        found = self.visible_run(caller, rid)
        if isinstance(found, Refusal):
            return found
        reached = [found, *(r for r in self.runs.values() if rid in r.content_from)]
        copies = 0
        for run in reached:
            run.calls_erased = True
            run.held_calls = []
            run.events = [_redacted(e) for e in run.events]
            copies += self.copies.erase_source(run.run_id)
            copies += self.copies.erase_eval_run(run.run_id)
        return Erasure(rid, copies, len(reached))

    def resolve(self, caller: Owner, rid: RunId) -> RunRecord | Refusal:
        found = self.visible_run(caller, rid)
        if isinstance(found, Refusal):
            return found
        if found.status != "waiting-input":
            return state_conflict("the run is not waiting for input", found.status)
        self._finish(found, "completed")
        return found

    def cancel(self, caller: Owner, rid: RunId) -> RunRecord | Refusal:
        found = self.visible_run(caller, rid)
        if isinstance(found, Refusal):
            return found
        if found.terminal:
            return Refusal("run_terminal", "the run is already terminal")
        self._emit(found, "run.cancelled", {})
        found.status = "cancelled"
        found.completed_at = self.clock.now()
        return found

    # -- plumbing

    def _new_run(self, caller: Owner, workflow_id: str, request: CreateRun) -> RunRecord:
        rid = self.minter.run_id(caller.tenant)
        run = RunRecord(rid, caller, workflow_id, "running", request, self.clock.now())
        self.runs[rid] = run
        return run

    def _run_started(self, run: RunRecord) -> dict[str, Any]:
        return {"owner": run.owner.to_json(), "transport": "rest",
                "workflowId": run.workflow_id}

    def _emit(self, run: RunRecord, type_: str, payload: dict[str, Any]) -> Event:
        event = Event("ev-" + self.minter.opaque(24), run.bound, type_, payload,
                      self.clock.tick(), len(run.events))
        run.events.append(event)
        return event

    def _finish(self, run: RunRecord, status: str) -> None:
        self._emit(run, f"run.{status}", {"status": status})
        run.status = status
        run.completed_at = self.clock.now()


def _serves_too_much(core: HostCore, suite: Suite,
                     derived: dict[str, tuple[FixtureEntry, ...]], sources: dict[str, RunId],
                     agent_id: str) -> Refusal | None:
    """The run's fixture responses, at most: each task's calls x trials x its largest entry
    (derived, else the suite's own), refused past MAX_RUN_SERVED_BYTES before anything is
    minted."""
    total = 0
    for task in suite.tasks:
        entries = derived.get(task.task_id)
        key: Any
        anchor: Any
        if entries is not None:
            key, anchor = (sources[task.task_id], agent_id), core.runs[sources[task.task_id]]
        elif task.fixtures is not None:
            entries, key, anchor = task.fixtures.entries, id(task.fixtures), task.fixtures
        calls = script_calls(task.input.get("script") if isinstance(task.input, dict) else None)
        if not entries or not calls:
            continue
        known = core.response_bytes.get(key)
        if known is None or known[0] is not anchor:
            known = (anchor, max(len(canonical_or_none(e.response) or "") for e in entries))
            core.response_bytes[key] = known
        total += calls * suite.trials * known[1]
    if total <= MAX_RUN_SERVED_BYTES:
        return None
    return validation(f"this run could serve {total} bytes of fixture responses (calls x "
                      f"trials x the largest response); the limit is {MAX_RUN_SERVED_BYTES}")
