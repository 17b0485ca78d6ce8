"""Replay fidelity (RFC 0252 §D, legs 0252.source-replayed and 0252.drift-fails-closed),
trials, repeated calls, and the determinism of a seeded host.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from refsim import Response, SimHost
from refsim.domain.ids import project

from .conftest import KEY_A, RECORDER

COUNTER = "conformance.eval:counter"
VAULT = "refsim.tools:vault"
FLAKY = "refsim.tools:flaky"
SOURCE_SUITE = "conformance-eval-recorded-source"
REPLAY_SUITE = "conformance-eval-recorded-replay"
DRIFT_SUITE = "conformance-eval-recorded-drift"


def create(host: SimHost, body: dict[str, Any]) -> Response:
    r = host.request("POST", "/runs", api_key=KEY_A, json=body)
    assert r.status == 201, r.body
    return r


def eval_run(host: SimHost, suite: str, fixture_runs: dict[str, str] | None = None) -> str:
    body: dict[str, Any] = {"mode": "eval", "evalSuiteRef": suite, "agentId": RECORDER}
    if fixture_runs is not None:
        body["fixtureRuns"] = fixture_runs
    return str(create(host, body).json["runId"])


def poll(host: SimHost, run_id: str) -> Response:
    r = host.request("GET", f"/runs/{project(run_id)}/events/poll", api_key=KEY_A)
    assert r.status == 200, r.body
    return r


def payloads(host: SimHost, run_id: str, type_: str) -> list[dict[str, Any]]:
    return [e["payload"] for e in poll(host, run_id).json["events"] if e["type"] == type_]


def returned(host: SimHost, run_id: str) -> list[tuple[Any, Any]]:
    """What each call gave the agent: (outcome, error)."""
    return [(p.get("outcome"), p.get("error"))
            for p in payloads(host, run_id, "agent.tool-returned")]


def summary(host: SimHost, run_id: str) -> dict[str, Any]:
    r = host.request("GET", f"/runs/{project(run_id)}/eval-summary", api_key=KEY_A)
    assert r.status == 200, r.body
    return dict(r.json)


def counter(host: SimHost, key: str = "recorded-fixtures") -> int:
    r = host.request("GET", f"/conformance/seams/eval-counter?key={key}", api_key=KEY_A)
    assert r.status == 200, r.body
    return int(r.json["count"])


def register(host: SimHost, suite_id: str, script: list[Any]) -> str:
    suite = {"suiteId": suite_id, "version": "1.0.0", "modes": ["golden"],
             "tasks": [{"taskId": "record", "input": {"script": script},
                        "expected": {"kind": "golden",
                                     "match": {"strategy": "exact", "value": "done"}}}]}
    r = host.request("POST", "/conformance/seams/eval-suites", api_key=KEY_A,
                     json={"suite": suite})
    assert r.status == 201, r.body
    return str(r.json["evalSuiteRef"])


def workflow_source(host: SimHost, script: list[Any]) -> str:
    return str(create(host, {"workflowId": "conformance-agent-call",
                             "inputs": {"agentId": RECORDER, "script": script}}).json["runId"])


# ----------------------------------------------------------------------------- the legs


def test_source_replayed_serves_recorded_outcomes_and_moves_no_counter(host: SimHost) -> None:
    source = eval_run(host, SOURCE_SUITE)
    assert counter(host) == 1  # both scripted calls reached the live counter
    before = counter(host)
    replay = eval_run(host, REPLAY_SUITE, {"record": source})
    assert counter(host) == before
    assert payloads(host, replay, "eval.started")[0]["fixtureRuns"] == {"record": source}
    source_outcomes = [p["outcome"] for p in payloads(host, source, "agent.tool-returned")]
    replay_outcomes = [p["outcome"] for p in payloads(host, replay, "agent.tool-returned")]
    assert replay_outcomes == source_outcomes == [{"key": "recorded-fixtures", "count": 1}] * 2
    scored = payloads(host, replay, "eval.scored")[0]
    assert (scored["fixtureMissCount"], scored["passed"]) == (0, True)
    task = summary(host, replay)["tasks"][0]
    assert (task["fixtureMissCount"], task["passed"]) == (0, True)


def test_without_fixture_runs_the_replay_suite_moves_the_counter(host: SimHost) -> None:
    """The falsifiability control: a host that ignored fixtureRuns would look like this."""
    source = eval_run(host, SOURCE_SUITE)
    before = counter(host)
    live = eval_run(host, REPLAY_SUITE)
    assert counter(host) == before + 1
    assert returned(host, live) != returned(host, source)


def test_drift_fails_closed_and_moves_no_counter(host: SimHost) -> None:
    source = eval_run(host, SOURCE_SUITE)
    before = (counter(host), counter(host, "recorded-fixtures-drift"))
    drift = eval_run(host, DRIFT_SUITE, {"record": source})
    assert (counter(host), counter(host, "recorded-fixtures-drift")) == before
    scored = payloads(host, drift, "eval.scored")[0]
    assert (scored["fixtureMissCount"], scored["passed"]) == (1, False)
    s = summary(host, drift)
    assert ((s["tasks"][0]["fixtureMissCount"], s["tasks"][0]["passed"], s["passed"]) ==
        (1, False, False))
    completed = payloads(host, drift, "eval.completed")[0]
    assert completed["passed"] is False
    # the drifted inc missed; the unchanged read was still served its recorded answer
    (inc_out, inc_err), (read_out, _) = returned(host, drift)
    assert inc_out is None and inc_err is not None
    assert read_out == {"key": "recorded-fixtures", "count": 1}


def test_trials_reset_consumption_so_no_trial_misses(host: SimHost) -> None:
    source = eval_run(host, SOURCE_SUITE)
    before = counter(host)
    run = eval_run(host, "refsim-eval-trials", {"record": source})
    assert counter(host) == before
    assert len(payloads(host, run, "agent.invocation-started")) == 3
    outcomes = [o for o, _ in returned(host, run)]
    assert outcomes == [{"key": "recorded-fixtures", "count": 1}] * 6
    scored = payloads(host, run, "eval.scored")[0]
    assert scored["fixtureMissCount"] == 0
    assert (scored["trials"], scored["passedTrials"], scored["passed"]) == (3, 3, True)


def test_repeated_calls_are_served_in_recorded_order(host: SimHost) -> None:
    script = [{"call": COUNTER, "args": {"op": "inc", "key": "k"}},
              {"call": COUNTER, "args": {"op": "read", "key": "k"}},
              {"call": COUNTER, "args": {"op": "inc", "key": "k"}},
              {"call": COUNTER, "args": {"op": "read", "key": "k"}},
              {"call": COUNTER, "args": {"op": "inc", "key": "k"}},
              {"decide": "done"}]
    source = workflow_source(host, script)
    assert [o["count"] for o, _ in returned(host, source)] == [1, 1, 2, 2, 3]
    ref = register(host, "acme.evals.repeat", script)
    replay = eval_run(host, ref, {"record": source})
    assert returned(host, replay) == returned(host, source)
    assert counter(host, "k") == 3
    # one call more than recorded: the fourth inc finds nothing left and misses
    longer = register(host, "acme.evals.repeat-longer",
                      [*script[:-1], {"call": COUNTER, "args": {"op": "inc", "key": "k"}},
                       {"decide": "done"}])
    extra = eval_run(host, longer, {"record": source})
    assert summary(host, extra)["tasks"][0]["fixtureMissCount"] == 1
    assert counter(host, "k") == 3


def test_replay_of_a_replay_is_still_faithful(host: SimHost) -> None:
    source = eval_run(host, SOURCE_SUITE)
    first = eval_run(host, REPLAY_SUITE, {"record": source})
    second = eval_run(host, REPLAY_SUITE, {"record": first})
    assert returned(host, second) == returned(host, first) == returned(host, source)
    assert counter(host) == 1


# ----------------------------------------------------------------------------- properties

KEYS = st.sampled_from(["a", "b"])
CALL = st.one_of(
    st.builds(lambda op, k: {"call": COUNTER, "args": {"op": op, "key": k}},
              st.sampled_from(["inc", "read"]), KEYS),
    st.builds(lambda q: {"call": VAULT, "args": {"query": q}}, st.sampled_from(["x", "y"])),
    st.builds(lambda m: {"call": FLAKY, "args": {"mode": m, "value": 1}},
              st.sampled_from(["ok", "error", "forbidden", "rate_limited"])),
)
SCRIPTS = st.lists(CALL, min_size=1, max_size=8)


@settings(max_examples=120, deadline=None)
@given(SCRIPTS)
def test_property_same_script_replays_exactly(script: list[dict[str, Any]]) -> None:
    host = SimHost(seed=0)
    full = [*script, {"decide": "done"}]
    source = workflow_source(host, full)
    ref = register(host, "acme.evals.prop", full)
    live, egress = host.core.gateway.live_calls, len(host.core.gateway.egress)
    replay = eval_run(host, ref, {"record": source})
    assert returned(host, replay) == returned(host, source)
    assert host.core.gateway.live_calls == live
    assert len(host.core.gateway.egress) == egress
    task = summary(host, replay)["tasks"][0]
    assert (task["fixtureMissCount"], task["passed"]) == (0, True)


def _model(recorded: list[tuple[dict[str, Any], tuple[Any, Any]]],
           calls: list[dict[str, Any]]) -> tuple[list[tuple[Any, Any] | None], int]:
    """A naive RFC 0244 §D model: the first unconsumed exact match, in list order."""
    used = [False] * len(recorded)
    served: list[tuple[Any, Any] | None] = []
    misses = 0
    for call in calls:
        want = (call["call"], json.dumps(call["args"], sort_keys=True))
        for i, (step, answer) in enumerate(recorded):
            if not used[i] and (step["call"], json.dumps(step["args"], sort_keys=True)) == want:
                used[i] = True
                served.append(answer)
                break
        else:
            served.append(None)
            misses += 1
    return served, misses


@settings(max_examples=120, deadline=None)
@given(SCRIPTS, SCRIPTS)
def test_property_changed_script_matches_the_consuming_model(
        source_script: list[dict[str, Any]], replay_script: list[dict[str, Any]]) -> None:
    host = SimHost(seed=0)
    source = workflow_source(host, [*source_script, {"decide": "done"}])
    ref = register(host, "acme.evals.prop", [*replay_script, {"decide": "done"}])
    live = host.core.gateway.live_calls
    replay = eval_run(host, ref, {"record": source})
    assert host.core.gateway.live_calls == live  # misses never reach a live tool
    expected, misses = _model(list(zip(source_script, returned(host, source), strict=True)),
                              replay_script)
    got = returned(host, replay)
    for want, have in zip(expected, got, strict=True):
        if want is not None:
            assert have == want
        else:
            assert have[0] is None and have[1] is not None
    task = summary(host, replay)["tasks"][0]
    assert task["fixtureMissCount"] == misses
    assert task["passed"] is (misses == 0)


# ----------------------------------------------------------------------------- determinism


def _session(seed: int) -> tuple[SimHost, list[bytes]]:
    host = SimHost(seed=seed)
    bodies: list[bytes] = []
    source = eval_run(host, SOURCE_SUITE)
    runs = [source, eval_run(host, REPLAY_SUITE, {"record": source}),
            eval_run(host, DRIFT_SUITE, {"record": source}),
            eval_run(host, "refsim-eval-trials", {"record": source}),
            workflow_source(host, [{"call": VAULT, "args": {"query": "q"}},
                                   {"delegate": "refsim.agents:helper",
                                    "script": [{"call": COUNTER,
                                                "args": {"op": "inc", "key": "d"}}]}])]
    fork = host.request("POST", f"/runs/{project(runs[1])}:fork", api_key=KEY_A,
                        json={"mode": "branch"})
    assert fork.status == 201
    runs.append(str(fork.json["runId"]))
    for run in runs:
        bodies.append(poll(host, run).body)
        bodies.append(host.request("GET", f"/runs/{project(run)}", api_key=KEY_A).body)
    return host, bodies


def test_same_seed_same_requests_give_byte_identical_logs() -> None:
    a, a_bodies = _session(11)
    b, b_bodies = _session(11)
    assert a.event_log() == b.event_log()
    assert a_bodies == b_bodies
    assert len(a.event_log()) > 1000


def test_different_seeds_give_different_logs() -> None:
    a, a_bodies = _session(11)
    b, b_bodies = _session(12)
    assert a.event_log() != b.event_log()
    assert a_bodies != b_bodies
