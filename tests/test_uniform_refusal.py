"""RFC 0252 §C acceptance: every unusable source gets one byte-identical refusal, no id in it.

Positive controls come first: a usable eval source and a usable workflow source are accepted
on the same host before any refusal is judged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from refsim import Response, SimHost
from refsim.domain.ids import project
from refsim.domain.profile import PROFILES
from refsim.wire import schemas
from refsim.wire.errors import is_registered

from .conftest import KEY_A, KEY_B, RECORDER

COUNTER = "conformance.eval:counter"
REPLAY_SUITE = "conformance-eval-recorded-replay"
COUNTER_SCRIPT = [{"call": COUNTER, "args": {"op": "inc", "key": "recorded-fixtures"}},
                  {"call": COUNTER, "args": {"op": "read", "key": "recorded-fixtures"}},
                  {"decide": "recorded"}]


def create(host: SimHost, body: dict[str, Any], key: str = KEY_A) -> Response:
    return host.request("POST", "/runs", api_key=key, json=body)


def replay_with(host: SimHost, value: Any, key: str = KEY_A) -> Response:
    return create(host, {"mode": "eval", "evalSuiteRef": REPLAY_SUITE, "agentId": RECORDER,
                         "fixtureRuns": {"record": value}}, key)


def eval_source(host: SimHost, key: str = KEY_A) -> str:
    r = create(host, {"mode": "eval", "evalSuiteRef": "conformance-eval-recorded-source",
                      "agentId": RECORDER}, key)
    assert r.status == 201, r.body
    return str(r.json["runId"])


def workflow_run(host: SimHost, workflow: str, script: list[Any], key: str = KEY_A) -> str:
    r = create(host, {"workflowId": workflow, "inputs": {"agentId": RECORDER, "script": script}},
               key)
    assert r.status == 201, r.body
    return str(r.json["runId"])


def assert_positive_controls(host: SimHost) -> None:
    """A usable eval source and a usable workflow source are both accepted (201)."""
    for source in (eval_source(host),
                   workflow_run(host, "conformance-agent-call", COUNTER_SCRIPT)):
        r = replay_with(host, source)
        assert r.status == 201, r.body
        scored = host.request("GET", f"/runs/{project(r.json['runId'])}/eval-summary",
                              api_key=KEY_A).json["tasks"][0]
        assert scored["fixtureMissCount"] == 0


def id_forms(value: Any) -> list[bytes]:
    if not isinstance(value, str) or not value:
        return []
    forms = {value, project(value), value.replace("/", "%2F"), value.replace("/", "%2f")}
    if "/" in value:
        forms.add(value.rpartition("/")[2])
    return [f.encode("utf-8") for f in forms if len(f) >= 4]


# Each case builds a host and returns the value to put in fixtureRuns.
Case = Callable[[], tuple[SimHost, Any]]


def _ref_host() -> SimHost:
    host = SimHost(seed=3)
    assert_positive_controls(host)
    return host


def case_unknown() -> tuple[SimHost, Any]:
    return _ref_host(), "acme/run-nosuchrunnosuchrun0"


def case_undecodable(value: Any) -> Case:
    return lambda: (_ref_host(), value)


def case_other_tenant() -> tuple[SimHost, Any]:
    host = _ref_host()
    return host, eval_source(host, KEY_B)


def case_non_terminal() -> tuple[SimHost, Any]:
    host = _ref_host()
    run = workflow_run(host, "conformance-wait-input", COUNTER_SCRIPT)
    snap = host.request("GET", f"/runs/{project(run)}", api_key=KEY_A).json
    assert snap["status"] == "waiting-input"
    return host, run


def case_never_invoked() -> tuple[SimHost, Any]:
    host = _ref_host()
    return host, workflow_run(host, "conformance-noop", COUNTER_SCRIPT)


def case_erased() -> tuple[SimHost, Any]:
    host = _ref_host()
    run = eval_source(host)
    r = host.request("POST", f"/conformance/seams/runs/{project(run)}:erase", api_key=KEY_A)
    assert r.status == 200, r.body
    return host, run


def case_unheld_profile() -> tuple[SimHost, Any]:
    host = SimHost(seed=3, profile=PROFILES["unheld-calls"])
    return host, eval_source(host)


def case_failed_call_without_fixture_errors() -> tuple[SimHost, Any]:
    host = SimHost(seed=3, profile=PROFILES["no-fixture-errors"])
    assert_positive_controls(host)
    return host, workflow_run(host, "conformance-agent-call",
                              [{"call": "refsim.tools:flaky", "args": {"mode": "error"}},
                               *COUNTER_SCRIPT])


CASES: dict[str, Case] = {
    "unknown-id": case_unknown,
    "undecodable-text": case_undecodable("not an id"),
    "undecodable-short-opaque": case_undecodable("acme/short"),
    "undecodable-number": case_undecodable(42),
    # "" fails the runId pattern like any other undecodable value; the router sends every
    # fixtureRuns value failure to the uniform refusal, so "" is no generic schema error.
    "undecodable-empty": case_undecodable(""),
    "undecodable-null": case_undecodable(None),
    "undecodable-projected": case_undecodable("acme~2Frun-nosuchrunnosuchrun0"),
    "other-tenant": case_other_tenant,
    "non-terminal": case_non_terminal,
    "never-invoked-agent": case_never_invoked,
    "calls-erased": case_erased,
    "calls-unheld-profile": case_unheld_profile,
    "failed-call-no-fixture-errors": case_failed_call_without_fixture_errors,
}


@pytest.fixture(scope="module")
def reference() -> Response:
    host = _ref_host()
    r = replay_with(host, "acme/run-nosuchrunnosuchrun0")
    assert r.status == 400
    return r


def test_reference_refusal_is_the_documented_envelope(reference: Response) -> None:
    assert reference.status == 400
    assert set(reference.json) == {"error", "message"}  # no details to vary
    assert reference.json["error"] == "validation_error"
    assert is_registered("validation_error", 400)
    assert schemas.is_valid("error-envelope.schema.json", reference.json)


@pytest.mark.parametrize("name", sorted(CASES))
def test_unusable_source_refused_byte_identically(name: str, reference: Response) -> None:
    host, value = CASES[name]()
    runs = len(host.core.runs)
    r = replay_with(host, value)
    assert r.status == reference.status
    assert r.headers == reference.headers
    assert r.body == reference.body
    assert len(host.core.runs) == runs
    blob = r.body + repr(sorted(r.headers.items())).encode()
    for form in id_forms(value):
        assert form not in blob, (name, form)


def test_all_cases_give_one_answer(reference: Response) -> None:
    answers = set()
    for build in CASES.values():
        host, value = build()
        r = replay_with(host, value)
        answers.add((r.status, tuple(sorted(r.headers.items())), r.body))
    assert answers == {(reference.status, tuple(sorted(reference.headers.items())),
                        reference.body)}


def test_non_terminal_source_becomes_usable_once_resolved() -> None:
    host, run = case_non_terminal()
    assert replay_with(host, run).status == 400
    r = host.request("POST", f"/conformance/seams/runs/{project(run)}:resolve", api_key=KEY_A)
    assert r.status == 200 and r.json["status"] == "completed"
    accepted = replay_with(host, run)
    assert accepted.status == 201, accepted.body


def test_other_tenants_run_is_usable_by_its_owner() -> None:
    host, run = case_other_tenant()
    assert replay_with(host, run).status == 400
    assert replay_with(host, run, KEY_B).status == 201


def test_refusal_does_not_depend_on_the_caller() -> None:
    """globex asking about acme's run reads exactly like acme asking about globex's."""
    host = _ref_host()
    mine, theirs = eval_source(host), eval_source(host, KEY_B)
    a, b = replay_with(host, theirs), replay_with(host, mine, KEY_B)
    assert (a.status, a.headers, a.body) == (b.status, b.headers, b.body)


def test_uniform_refusal_is_distinct_from_request_rule_refusals(reference: Response) -> None:
    """The §C body is specific to sources: a key naming no task reads differently, so a
    client cannot confuse "bad source" with "bad request" (both 400 validation_error)."""
    host = _ref_host()
    r = create(host, {"mode": "eval", "evalSuiteRef": REPLAY_SUITE, "agentId": RECORDER,
                      "fixtureRuns": {"nope": eval_source(host)}})
    assert r.status == 400 and r.json["error"] == "validation_error"
    assert r.body != reference.body
