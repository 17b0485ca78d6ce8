"""Recorded facts cannot change after the fact: an agent that edits its own arguments and
results, or the task input it was handed, rewrites nothing the host recorded, and one host's
edits never reach another host (issue 10)."""

from __future__ import annotations

from typing import Any

from refsim import SimHost
from refsim.check.observe import KEY_A, SOURCE, Session, eval_body
from refsim.domain.agents import AgentContext

SCRIPT = [("inc", "k"), ("read", "k")]


class EditingAgent:
    """Calls the counter, then scribbles over what it passed and what it got back."""

    def run(self, ctx: AgentContext, task_input: Any) -> Any:
        for op, key in SCRIPT:
            args: dict[str, Any] = {"op": op, "key": key}
            result = ctx.call("conformance.eval:counter", args)
            args["key"] = "edited"
            args["extra"] = [1, 2, 3]
            if isinstance(result.outcome, dict):
                result.outcome["count"] = 1001
        if isinstance(task_input, dict):
            task_input.clear()
        return "ok"


class PlainAgent:
    def run(self, ctx: AgentContext, task_input: Any) -> Any:
        for op, key in SCRIPT:
            ctx.call("conformance.eval:counter", {"op": op, "key": key})
        return "ok"


SUITE: dict[str, Any] = {
    "suiteId": "refsim.tests.evals.editing", "version": "1.0.0", "modes": ["golden"],
    "tasks": [{"taskId": "t", "input": {"note": "kept"},
                    "expected": {"kind": "golden", "match": {"strategy": "exact",
                                                             "value": "ok"}}}]}


def _story(agent: Any) -> dict[str, Any]:
    """Record a source with the agent, replay it, fork the replay both ways."""
    host = SimHost(seed=0)
    host.register_agent("refsim.tests:agent", agent)
    a = Session(host, KEY_A)
    assert a.register_suite(SUITE).status == 201
    source = a.agent_run([], agent_id="refsim.tests:agent")
    assert source.completed
    replay = a.eval(str(SUITE["suiteId"]), {"t": source.run_id}, agent_id="refsim.tests:agent")
    assert replay.run_id is not None
    forks = {mode: a.forked(replay.run_id, mode) for mode in ("replay", "branch")}

    def calls(events: list[dict[str, Any]]) -> list[Any]:
        return [(e["type"], e["payload"].get("inputs"), e["payload"].get("outcome"))
                for e in events if e["type"].startswith("agent.tool-")]
    return {"source": calls(source.events), "replay": calls(replay.events),
            "misses": [s["fixtureMissCount"] for s in replay.summary["tasks"]],
            **{mode: (calls(f.events), f.summary["tasks"][0]["fixtureMissCount"])
               for mode, f in forks.items()},
            "held": [(c.inputs, c.outcome) for c in host.core.runs[
                next(r for r in host.core.runs if r.bound == source.run_id)].held_calls]}


def test_an_agent_that_edits_its_objects_records_replays_and_forks_as_one_that_does_not(
        ) -> None:
    edited, plain = _story(EditingAgent()), _story(PlainAgent())
    assert edited == plain
    assert edited["misses"] == [0]
    assert edited["source"][1][2] == {"key": "k", "count": 1}  # not 1001


def test_one_hosts_edits_never_reach_another_host() -> None:
    first = SimHost(seed=0)
    first.register_agent("conformance.eval:recorder", EditingAgent())  # clears its input
    a = Session(first, KEY_A)
    assert a.observe(a.create(eval_body(SOURCE))).completed
    second = SimHost(seed=0)
    b = Session(second, KEY_A)
    source = b.observe(b.create(eval_body(SOURCE)))
    called = [e for e in source.events if e["type"] == "agent.tool-called"]
    assert len(called) == 2, "the built-in suite's script was edited through another host"
