"""The six rows of the RFC 0252 "Examples" table, each as its own test through `host.request`.

The host advertises `recordedFixtures` and `fixtureMatching`. Rows 1-3 use a registered
suite whose task is literally `refund-flow`, scripted for `conformance.eval:recorder`.
"""

from __future__ import annotations

from typing import Any

import pytest

from refsim import Response, SimHost
from refsim.domain.ids import project
from refsim.wire import schemas

from .conftest import KEY_A, KEY_B, RECORDER

COUNTER = "conformance.eval:counter"
VAULT = "refsim.tools:vault"
SUITE_ID = "acme.evals.refunds"
CHANGED_SUITE_ID = "acme.evals.refunds-changed"
REFUND_SCRIPT = [
    {"call": VAULT, "args": {"query": "order 1042"}},
    {"call": COUNTER, "args": {"op": "inc", "key": "refunds"}},
    {"call": COUNTER, "args": {"op": "read", "key": "refunds"}},
    {"decide": "refund"},
]
# The changed agent asks about another order: arguments the source never saw.
CHANGED_SCRIPT = [
    {"call": VAULT, "args": {"query": "order 9999"}},
    {"call": COUNTER, "args": {"op": "inc", "key": "refunds"}},
    {"call": COUNTER, "args": {"op": "read", "key": "refunds"}},
    {"decide": "refund"},
]


def refund_suite(suite_id: str, script: list[Any],
                 fixtures: dict[str, Any] | None = None) -> dict[str, Any]:
    task: dict[str, Any] = {"taskId": "refund-flow", "input": {"script": script},
                            "expected": {"kind": "golden",
                                         "match": {"strategy": "exact", "value": "refund"}}}
    if fixtures is not None:
        task["fixtures"] = fixtures
    return {"suiteId": suite_id, "version": "1.0.0", "modes": ["golden"], "tasks": [task]}


def register(host: SimHost, suite: dict[str, Any], key: str = KEY_A) -> str:
    r = host.request("POST", "/conformance/seams/eval-suites", api_key=key, json={"suite": suite})
    assert r.status == 201, r.body
    return str(r.json["evalSuiteRef"])


def completed_run_of_the_agent(host: SimHost, key: str = KEY_A) -> str:
    r = host.request("POST", "/runs", api_key=key, json={
        "workflowId": "conformance-agent-call",
        "inputs": {"agentId": RECORDER, "script": REFUND_SCRIPT}})
    assert r.status == 201, r.body
    assert r.json["status"] == "running"  # as accepted; it finished inside the POST
    snapshot = host.request("GET", r.json["statusUrl"], api_key=key)
    assert snapshot.json["status"] == "completed"
    return str(r.json["runId"])


def events(host: SimHost, run_id: str) -> list[dict[str, Any]]:
    r = host.request("GET", f"/runs/{project(run_id)}/events/poll", api_key=KEY_A)
    assert r.status == 200, r.body
    return list(r.json["events"])


def payloads(evs: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [e["payload"] for e in evs if e["type"] == type_]


def refunds(host: SimHost) -> int:
    r = host.request("GET", "/conformance/seams/eval-counter?key=refunds", api_key=KEY_A)
    return int(r.json["count"])


def create_eval(host: SimHost, ref: str, fixture_runs: dict[str, Any]) -> Response:
    return host.request("POST", "/runs", api_key=KEY_A, json={
        "mode": "eval", "evalSuiteRef": ref, "agentId": RECORDER, "fixtureRuns": fixture_runs})


def assert_400_validation_error(r: Response) -> None:
    assert r.status == 400, r.body
    assert r.json["error"] == "validation_error"
    assert schemas.is_valid("error-envelope.schema.json", r.json)


@pytest.fixture
def advertising_host(host: SimHost) -> SimHost:
    facet = host.request("GET", "/.well-known/openwop").json["agents"]["evalSuite"]
    assert facet["recordedFixtures"] is True and facet["fixtureMatching"] is True
    return host


def test_row1_completed_run_gives_201_echo_and_recorded_answers(advertising_host: SimHost
                                                                 ) -> None:
    host = advertising_host
    ref = register(host, refund_suite(SUITE_ID, REFUND_SCRIPT))
    source = completed_run_of_the_agent(host)
    recorded = [p["outcome"] for p in payloads(events(host, source), "agent.tool-returned")]
    live_refunds, egress = refunds(host), len(host.core.gateway.egress)

    r = create_eval(host, ref, {"refund-flow": source})
    assert r.status == 201, r.body
    evs = events(host, r.json["runId"])
    assert payloads(evs, "eval.started")[0]["fixtureRuns"] == {"refund-flow": source}
    served = [p["outcome"] for p in payloads(evs, "agent.tool-returned")]
    assert served == recorded  # the recorded answers, not live ones
    assert refunds(host) == live_refunds and len(host.core.gateway.egress) == egress
    scored = payloads(evs, "eval.scored")[0]
    assert ((scored["taskId"], scored["passed"], scored["fixtureMissCount"]) ==
        ("refund-flow", True, 0))


def test_row2_changed_agent_misses_fails_and_runs_no_live_tool(advertising_host: SimHost
                                                                ) -> None:
    host = advertising_host
    changed = register(host, refund_suite(CHANGED_SUITE_ID, CHANGED_SCRIPT))
    source = completed_run_of_the_agent(host)
    live_refunds, egress = refunds(host), len(host.core.gateway.egress)
    live_calls = host.core.gateway.live_calls

    r = create_eval(host, changed, {"refund-flow": source})
    assert r.status == 201, r.body
    evs = events(host, r.json["runId"])
    first = payloads(evs, "agent.tool-returned")[0]
    assert "outcome" not in first and first["status"] == "error"
    assert len(host.core.gateway.egress) == egress  # the vault was never reached
    assert host.core.gateway.live_calls == live_calls
    assert refunds(host) == live_refunds
    scored = payloads(evs, "eval.scored")[0]
    assert (scored["fixtureMissCount"], scored["passed"]) == (1, False)
    summary = host.request("GET", f"/runs/{project(r.json['runId'])}/eval-summary",
                           api_key=KEY_A).json
    assert summary["tasks"][0]["fixtureMissCount"] == 1
    assert summary["tasks"][0]["passed"] is False and summary["passed"] is False


def test_row3_unknown_foreign_or_agentless_source_refused_identically(
        advertising_host: SimHost) -> None:
    host = advertising_host
    ref = register(host, refund_suite(SUITE_ID, REFUND_SCRIPT))
    completed_run_of_the_agent(host)  # a usable source exists; the cases below are not it
    unknown = "acme/run-unknownunknownunknown"
    foreign = completed_run_of_the_agent(host, KEY_B)
    r = host.request("POST", "/runs", api_key=KEY_A, json={"workflowId": "conformance-noop"})
    agentless = r.json["runId"]
    runs = len(host.core.runs)
    answers = []
    for value in (unknown, foreign, agentless):
        refused = create_eval(host, ref, {"refund-flow": value})
        assert_400_validation_error(refused)
        for form in (value, project(value), value.replace("/", "%2F"),
                     value.rpartition("/")[2]):
            assert form.encode() not in refused.body
        answers.append((refused.status, tuple(sorted(refused.headers.items())), refused.body))
    assert len(set(answers)) == 1
    assert len(host.core.runs) == runs


def test_row4_key_naming_no_task_refused(advertising_host: SimHost) -> None:
    host = advertising_host
    ref = register(host, refund_suite(SUITE_ID, REFUND_SCRIPT))
    source = completed_run_of_the_agent(host)
    runs = len(host.core.runs)
    assert_400_validation_error(create_eval(host, ref, {"refund-flows": source}))
    assert len(host.core.runs) == runs


def test_row5_task_with_suite_tool_responses_refused(advertising_host: SimHost) -> None:
    host = advertising_host
    canned = {"toolResponses": [{"tool": VAULT, "args": {"query": "order 1042"},
                                 "argsMatch": "exact", "response": {"answer": "canned"}}]}
    ref = register(host, refund_suite(SUITE_ID, REFUND_SCRIPT, fixtures=canned))
    source = completed_run_of_the_agent(host)
    runs = len(host.core.runs)
    assert_400_validation_error(create_eval(host, ref, {"refund-flow": source}))
    assert len(host.core.runs) == runs


def test_row6_fixture_runs_on_a_workflow_run_refused(advertising_host: SimHost) -> None:
    host = advertising_host
    source = completed_run_of_the_agent(host)
    runs = len(host.core.runs)
    r = host.request("POST", "/runs", api_key=KEY_A, json={
        "workflowId": "conformance-agent-call",
        "inputs": {"agentId": RECORDER, "script": REFUND_SCRIPT},
        "fixtureRuns": {"refund-flow": source}})
    assert_400_validation_error(r)
    assert len(host.core.runs) == runs
