"""The agent boundary has no back doors: agents that keep their contexts, mutate what they
returned and what they were handed, and return values the wire cannot carry change no
recorded fact, reach no tool after their invocation ended, and never make a route answer
5xx; every run reaches a terminal state (issue 24)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refsim import SimHost
from refsim.check.observe import KEY_A, Session, run_path
from refsim.domain.agents import AgentContext

COUNTER = "conformance.eval:counter"
PARENT, CHILD = "refsim.tests:hoarder", "refsim.tests:child"
ODD_KINDS = ("nan", "inf", "-inf", "set", "tuple", "bytes", "object", "cycle", "int-key")


def odd(kind: str) -> Any:
    """A value the wire cannot carry as JSON."""
    if kind == "cycle":
        loop: list[Any] = [1]
        loop.append(loop)
        return {"a": loop}
    return {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"),
            "set": {1, 2}, "tuple": (1, "x"), "bytes": b"\x00", "object": object(),
            "int-key": {1: "one"}}[kind]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                               max_size=3),
    max_leaves=6)
VALUE = st.one_of(JSON, st.sampled_from(ODD_KINDS).map(lambda k: ("odd", k)))


def realise(value: Any) -> Any:
    return odd(value[1]) if isinstance(value, tuple) and value[:1] == ("odd",) else value


def mutate(value: Any) -> None:
    """Scribble over a kept value in place, whatever it is."""
    if isinstance(value, dict):
        value["scribbled"] = [1, 2, 3]
        for k in list(value)[:2]:
            value[k] = "rewritten"
    elif isinstance(value, list):
        value.append("appended")
        if value:
            value[0] = "rewritten"


class Child:
    def __init__(self) -> None:
        self.decision: Any = None
        self.kept: list[Any] = []

    def run(self, ctx: AgentContext, task_input: Any) -> Any:
        self.kept.append(task_input)
        decision = realise(self.decision)
        self.kept.append(decision)
        return decision


class Hoarder:
    """Keeps every context and every value it touches; each invocation first tries the old
    contexts and scribbles over the old values, then does what its step says."""

    def __init__(self, child: Child) -> None:
        self.child = child
        self.step: dict[str, Any] = {}
        self.contexts: list[AgentContext] = []
        self.kept: list[Any] = []

    def run(self, ctx: AgentContext, task_input: Any) -> Any:
        for old in self.contexts:  # a dead context must raise, and change nothing
            for use in ("call", "delegate"):
                try:
                    if use == "call":
                        old.call(COUNTER, {"op": "inc", "key": "stale"})
                    else:
                        old.delegate(CHILD, {"from": "stale"})
                except RuntimeError:
                    pass
                else:
                    raise AssertionError("an ended invocation's context still works")
        for value in self.kept + self.child.kept:
            mutate(value)
        self.contexts.append(ctx)
        step = self.step
        args = {"op": "inc", "key": "own"} if step["args"] is None else realise(step["args"])
        result = ctx.call(COUNTER, args)
        self.kept += [args, result.outcome, result.error]
        if step["delegate"]:
            self.child.decision = step["child"]
            answer = ctx.delegate(CHILD, {"task": "help"})
            self.kept.append(answer)
        decision = realise(step["decision"])
        self.kept.append(decision)
        return decision


STEPS = st.lists(st.fixed_dictionaries({
    "decision": VALUE, "child": VALUE, "delegate": st.booleans(),
    "args": st.none() | VALUE}), min_size=1, max_size=4)


def _strict(body: bytes) -> Any:
    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} on the wire")
    return json.loads(body, parse_constant=no_constant)


def _recorded(host: SimHost, run_id: str) -> tuple[bytes, list[Any]]:
    """What the host holds of a run: its events as the wire carries them, and its held
    calls."""
    r = host.request("GET", run_path(run_id, "/events/poll?afterSequence=-1&limit=1000"),
                     api_key=KEY_A)
    assert r.status == 200, r.body
    _strict(r.body)
    record = next(run for rid, run in host.core.runs.items() if rid.bound == run_id)
    return r.body, [(c.tool, c.inputs, c.outcome) for c in record.held_calls]


def _walk(steps: list[dict[str, Any]]) -> None:
    host = SimHost(seed=0)
    child = Child()
    hoarder = Hoarder(child)
    host.register_agent(PARENT, hoarder)
    host.register_agent(CHILD, child)
    a = Session(host, KEY_A)
    recorded: dict[str, tuple[bytes, list[Any]]] = {}
    for step in steps:
        hoarder.step = step
        made = a.workflow("conformance-agent-call", {"agentId": PARENT, "script": []})
        assert made.status == 201, made.body
        run_id = str(made.json["runId"])
        snapshot = host.request("GET", run_path(run_id), api_key=KEY_A)
        assert snapshot.status == 200 and snapshot.json["status"] in (
            "completed", "failed"), snapshot.body
        for path in ("/events", f"/events/poll?afterSequence={-1}"):
            r = host.request("GET", run_path(run_id, path), api_key=KEY_A)
            assert r.status < 500, (path, r.status, r.body[:200])
        recorded[run_id] = _recorded(host, run_id)
        # A source replayed in an eval, and forked: no 5xx either.
        for mode in ("replay", "branch"):
            fork = a.fork(run_id, mode)
            assert fork.status < 500, fork.body
    for run_id, before in recorded.items():  # nothing the agents did later changed these
        assert _recorded(host, run_id) == before, run_id
    assert host.core.gateway.counter_value("acme", "stale") == 0
    host.event_log()  # the determinism log encodes every event


EXAMPLES = int(os.environ.get("REFSIM_BOUNDARY_EXAMPLES", "60"))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(STEPS)
def test_agents_that_hoard_scribble_and_return_odd_values_change_no_recorded_fact(
        steps: list[dict[str, Any]]) -> None:
    _walk(steps)


@pytest.mark.slow  # the acceptance bar: a thousand examples
@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(STEPS)
def test_the_agent_boundary_holds_over_a_thousand_examples(
        steps: list[dict[str, Any]]) -> None:
    _walk(steps)


@pytest.mark.parametrize("kind", ODD_KINDS)
def test_a_decision_the_wire_cannot_carry_fails_the_invocation_with_a_registered_code(
        kind: str) -> None:
    _walk([{"decision": ("odd", kind), "child": None, "delegate": False, "args": None}])
    host = SimHost(seed=0)
    child = Child()
    hoarder = Hoarder(child)
    hoarder.step = {"decision": ("odd", kind), "child": None, "delegate": False, "args": None}
    host.register_agent(PARENT, hoarder)
    a = Session(host, KEY_A)
    made = a.observe(a.workflow("conformance-agent-call", {"agentId": PARENT, "script": []}))
    completed = [e["payload"] for e in made.events
                 if e["type"] == "agent.invocation-completed"]
    assert completed[-1]["outcome"] == "failed"
    assert completed[-1]["x-refsim-error"]["code"] == "payload_unprojectable"
    from refsim.data.registry_codes import registry
    assert "payload_unprojectable" in registry()
