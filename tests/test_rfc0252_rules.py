"""One test (or a few) per RFC 0252 rule, named after its section, all through `host.request`.

§A facet, §B request rules, §C source usability, §D derivation, §E echo and forks, the
Security section's erasure of derived copies, and the RFC 0251 rules 0252 leans on.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from refsim import HostProfile, Response, SimHost
from refsim.domain.agents import CONTENT_FREE, UNHELD
from refsim.domain.ids import parse_bound, project
from refsim.domain.profile import PROFILES
from refsim.domain.tools import vault_credential
from refsim.wire import schemas
from refsim.wire.errors import is_registered

from .conftest import KEY_A, KEY_B, RECORDER

HELPER = "refsim.agents:helper"
COUNTER = "conformance.eval:counter"
FLAKY = "refsim.tools:flaky"
VAULT = "refsim.tools:vault"
SOURCE_SUITE = "conformance-eval-recorded-source"
REPLAY_SUITE = "conformance-eval-recorded-replay"
DRIFT_SUITE = "conformance-eval-recorded-drift"
UNKNOWN_ID = "acme/run-zzzzzzzzzzzzzzzzzzzz"


# ----------------------------------------------------------------------------- helpers


def create(host: SimHost, body: dict[str, Any], key: str = KEY_A) -> Response:
    return host.request("POST", "/runs", api_key=key, json=body)


def eval_body(suite: str, fixture_runs: dict[str, Any] | None = None,
              **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"mode": "eval", "evalSuiteRef": suite, "agentId": RECORDER}
    if fixture_runs is not None:
        body["fixtureRuns"] = fixture_runs
    body.update(extra)
    return body


def ok(r: Response) -> Response:
    assert r.status == 201, r.body
    return r


def record_source(host: SimHost, key: str = KEY_A) -> str:
    """Run the conformance source fixture (both calls live) and return its runId."""
    return str(ok(create(host, eval_body(SOURCE_SUITE), key)).json["runId"])


def workflow_source(host: SimHost, script: list[Any], key: str = KEY_A,
                    agent: str = RECORDER, workflow: str = "conformance-agent-call") -> str:
    r = ok(create(host, {"workflowId": workflow,
                         "inputs": {"agentId": agent, "script": script}}, key))
    return str(r.json["runId"])


def run_path(run_id: str) -> str:
    return "/runs/" + project(run_id)


def events(host: SimHost, run_id: str, key: str = KEY_A) -> list[dict[str, Any]]:
    r = host.request("GET", run_path(run_id) + "/events/poll", api_key=key)
    assert r.status == 200, r.body
    return list(r.json["events"])


def of_type(evs: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [e["payload"] for e in evs if e["type"] == type_]


def summary(host: SimHost, run_id: str, key: str = KEY_A) -> dict[str, Any]:
    r = host.request("GET", run_path(run_id) + "/eval-summary", api_key=key)
    assert r.status == 200, r.body
    assert schemas.is_valid("eval-summary.schema.json", r.json)
    return dict(r.json)


def counter(host: SimHost, name: str = "recorded-fixtures", key: str = KEY_A) -> int:
    r = host.request("GET", f"/conformance/seams/eval-counter?key={name}", api_key=key)
    assert r.status == 200, r.body
    return int(r.json["count"])


def erase(host: SimHost, run_id: str, key: str = KEY_A) -> Response:
    r = host.request("POST", f"/conformance/seams/runs/{project(run_id)}:erase", api_key=key)
    assert r.status == 200, r.body
    return r


def fork(host: SimHost, run_id: str, mode: str, key: str = KEY_A) -> Response:
    return host.request("POST", run_path(run_id) + ":fork", api_key=key, json={"mode": mode})


def register_suite(host: SimHost, suite: dict[str, Any], key: str = KEY_A) -> str:
    r = host.request("POST", "/conformance/seams/eval-suites", api_key=key, json={"suite": suite})
    assert r.status == 201, r.body
    return str(r.json["evalSuiteRef"])


def one_task_suite(suite_id: str, script: list[Any], *, task_id: str = "record",
                   fixtures: dict[str, Any] | None = None, modes: list[str] | None = None,
                   trials: int | None = None, decide: str = "done") -> dict[str, Any]:
    task: dict[str, Any] = {"taskId": task_id, "input": {"script": script},
                            "expected": {"kind": "golden",
                                         "match": {"strategy": "exact", "value": decide}}}
    if fixtures is not None:
        task["fixtures"] = fixtures
    doc: dict[str, Any] = {"suiteId": suite_id, "version": "1.0.0",
                           "modes": modes or ["golden"], "tasks": [task]}
    if trials is not None:
        doc["trials"] = trials
    return doc


def assert_refused_400(r: Response) -> None:
    assert r.status == 400, r.body
    assert r.json["error"] == "validation_error"
    assert schemas.is_valid("error-envelope.schema.json", r.json)
    assert is_registered(r.json["error"], r.status)


def assert_uniform(r: Response, reference: Response) -> None:
    """The §C refusal: the same status, headers and bytes as the reference refusal."""
    assert_refused_400(r)
    assert r.status == reference.status
    assert r.headers == reference.headers
    assert r.body == reference.body


def unknown_refusal(host: SimHost) -> Response:
    r = create(host, eval_body(REPLAY_SUITE, {"record": UNKNOWN_ID}))
    assert_refused_400(r)
    return r


def id_forms(run_id: str) -> list[str]:
    """Every form an id could leak in: bound, ~2F projection, %2F form, opaque alone."""
    opaque = run_id.rpartition("/")[2]
    return [run_id, project(run_id), quote(run_id, safe=""), run_id.replace("/", "%2f"),
            opaque]


def assert_no_id(r: Response, run_id: str) -> None:
    blob = r.body + repr(sorted(r.headers.items())).encode("utf-8")
    for form in id_forms(run_id):
        assert form.encode("utf-8") not in blob, (form, r.body)


INC_READ = [{"call": COUNTER, "args": {"op": "inc", "key": "recorded-fixtures"}},
            {"call": COUNTER, "args": {"op": "read", "key": "recorded-fixtures"}},
            {"decide": "recorded"}]


# ----------------------------------------------------------------------------- §A


def test_A_facet_advertises_recorded_fixtures_with_fixture_matching(host: SimHost) -> None:
    r = host.request("GET", "/.well-known/openwop")
    assert r.status == 200
    assert schemas.is_valid("capabilities.schema.json", r.json)
    facet = r.json["agents"]["evalSuite"]
    assert facet["recordedFixtures"] is True
    assert facet["fixtureMatching"] is True
    # the scenario also gates on the three fixtures being listed in discovery
    for fixture in (SOURCE_SUITE, REPLAY_SUITE, DRIFT_SUITE):
        assert fixture in r.json["fixtures"]


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_A_every_profile_that_advertises_recorded_fixtures_advertises_fixture_matching(
        name: str) -> None:
    host = SimHost(seed=0, profile=PROFILES[name])
    doc = host.request("GET", "/.well-known/openwop").json
    assert schemas.is_valid("capabilities.schema.json", doc), name
    facet = doc.get("agents", {}).get("evalSuite", {})
    if facet.get("recordedFixtures"):
        assert facet.get("fixtureMatching") is True


def test_A_host_cannot_be_configured_to_advertise_recorded_fixtures_alone() -> None:
    host = SimHost(seed=0, profile=HostProfile(name="no-matching", fixture_matching=False))
    doc = host.request("GET", "/.well-known/openwop").json
    facet = doc["agents"]["evalSuite"]
    assert not facet.get("recordedFixtures") or facet.get("fixtureMatching") is True
    assert schemas.is_valid("capabilities.schema.json", doc)


@pytest.mark.parametrize("profile", [PROFILES["no-recorded-fixtures"],
                                     HostProfile(name="custom", recorded_fixtures=False)])
def test_A_host_without_recorded_fixtures_refuses_fixture_runs_400(profile: HostProfile
                                                                    ) -> None:
    host = SimHost(seed=0, profile=profile)
    facet = host.request("GET", "/.well-known/openwop").json["agents"]["evalSuite"]
    assert "recordedFixtures" not in facet
    source = record_source(host)  # a source that would be usable elsewhere
    before = len(host.core.runs), counter(host)
    r = create(host, eval_body(REPLAY_SUITE, {"record": source}))
    assert_refused_400(r)
    assert_no_id(r, source)
    assert (len(host.core.runs), counter(host)) == before
    # positive control: the same host still runs the eval without fixtureRuns
    ok(create(host, eval_body(REPLAY_SUITE)))


# ----------------------------------------------------------------------------- §B


def test_B_fixture_runs_without_mode_eval_refused(host: SimHost) -> None:
    source = record_source(host)
    before = len(host.core.runs)
    for body in ({"workflowId": "conformance-noop", "fixtureRuns": {"record": source}},
                 {"workflowId": "conformance-agent-call",
                  "inputs": {"agentId": RECORDER, "script": INC_READ},
                  "fixtureRuns": {"record": source}},
                 {"fixtureRuns": {"record": source}}):
        r = create(host, body)
        assert_refused_400(r)
        assert_no_id(r, source)
    assert len(host.core.runs) == before


def test_B_empty_fixture_runs_refused(host: SimHost) -> None:
    before = len(host.core.runs)
    assert_refused_400(create(host, eval_body(REPLAY_SUITE, {})))
    assert_refused_400(create(host, {"workflowId": "conformance-noop", "fixtureRuns": {}}))
    assert len(host.core.runs) == before


def test_B_key_not_a_task_refused(host: SimHost) -> None:
    source = record_source(host)
    before = len(host.core.runs)
    for key in ("nope", "Record", "record ", "alpha", ""):
        r = create(host, eval_body(REPLAY_SUITE, {key: source}))
        assert_refused_400(r)
        assert_no_id(r, source)
    # one good key and one bad key is still refused
    assert_refused_400(create(host, eval_body(REPLAY_SUITE, {"record": source, "x": source})))
    assert len(host.core.runs) == before
    ok(create(host, eval_body(REPLAY_SUITE, {"record": source})))  # control


def test_B_task_with_suite_tool_responses_refused(host: SimHost) -> None:
    source = record_source(host)
    before = len(host.core.runs)
    # the suite's `canned` task carries toolResponses + onMiss
    assert_refused_400(create(host, eval_body("refsim-eval-with-suite-fixtures",
                                              {"canned": source})))
    # the source fixture itself as the target: toolResponses [] and onMiss live
    assert_refused_400(create(host, eval_body(SOURCE_SUITE, {"record": source})))
    assert len(host.core.runs) == before
    # control: the suite's other task has no fixtures and may take the source
    ok(create(host, eval_body("refsim-eval-with-suite-fixtures", {"plain": source})))


@pytest.mark.parametrize(("fixtures", "refused"), [
    ({"onMiss": "fail"}, True),
    ({"onMiss": "live"}, True),
    ({"toolResponses": []}, True),
    ({"toolResponses": [{"tool": COUNTER, "response": 1}]}, True),
    ({"memorySeed": [{"k": "v"}]}, False),
    ({}, False),
])
def test_B_task_with_tool_responses_or_on_miss_refused(host: SimHost, fixtures: dict[str, Any],
                                                       refused: bool) -> None:
    ref = register_suite(host, one_task_suite("acme.evals.fx", INC_READ, fixtures=fixtures,
                                              decide="recorded"))
    source = record_source(host)
    r = create(host, eval_body(ref, {"record": source}))
    if refused:
        assert_refused_400(r)
    else:
        ok(r)


@pytest.mark.parametrize("modes", [["golden", "live-shadow"], ["live-shadow"], None])
def test_B_live_shadow_refused(host: SimHost, modes: list[str] | None) -> None:
    # refsim-eval-two-tasks declares golden, regression and live-shadow; without evalModes
    # the run's modes are the suite's, so live-shadow is among them.
    source = record_source(host)
    extra = {"evalModes": modes} if modes is not None else {}
    before = len(host.core.runs)
    r = create(host, eval_body("refsim-eval-two-tasks", {"alpha": source}, **extra))
    assert_refused_400(r)
    assert_no_id(r, source)
    assert len(host.core.runs) == before
    # control: the same request with golden only is accepted
    ok(create(host, eval_body("refsim-eval-two-tasks", {"alpha": source},
                              evalModes=["golden"])))


def test_B_refusal_happens_before_the_run_starts() -> None:
    """After each refusal no run is visible and no id is minted: the host that saw the
    refusals and a fresh host with the same seed mint the same next id and the same log."""
    def successes(h: SimHost) -> tuple[str, str, str, str]:
        return (record_source(h), record_source(h, KEY_B),
                workflow_source(h, [], workflow="conformance-noop"),
                workflow_source(h, INC_READ, workflow="conformance-wait-input"))

    host, fresh = SimHost(seed=7), SimHost(seed=7)
    src, other, noop, waiting = successes(host)
    assert successes(fresh) == (src, other, noop, waiting)
    counters_before = counter(host)
    refused = [
        {"workflowId": "conformance-noop", "fixtureRuns": {"record": src}},
        eval_body(REPLAY_SUITE, {}),
        eval_body(REPLAY_SUITE, {"nope": src}),
        eval_body(SOURCE_SUITE, {"record": src}),
        eval_body("refsim-eval-two-tasks", {"alpha": src}),
        eval_body(REPLAY_SUITE, {"record": UNKNOWN_ID}),
        eval_body(REPLAY_SUITE, {"record": "not an id"}),
        eval_body(REPLAY_SUITE, {"record": other}),
        eval_body(REPLAY_SUITE, {"record": noop}),
        eval_body(REPLAY_SUITE, {"record": waiting}),
        eval_body("refsim-eval-two-tasks", {"alpha": src, "beta": UNKNOWN_ID},
                  evalModes=["golden"]),
    ]
    for body in refused:
        n = len(host.core.runs)
        assert_refused_400(create(host, body))
        assert len(host.core.runs) == n
        assert host.request("GET", run_path(src), api_key=KEY_A).status == 200
    assert counter(host) == counters_before
    good = eval_body(REPLAY_SUITE, {"record": src})
    assert ok(create(host, good)).json["runId"] == ok(create(fresh, good)).json["runId"]
    assert host.event_log() == fresh.event_log()


# ----------------------------------------------------------------------------- §C


def test_C_usable_source_is_accepted(host: SimHost) -> None:
    source = record_source(host)
    r = ok(create(host, eval_body(REPLAY_SUITE, {"record": source})))
    assert summary(host, r.json["runId"])["tasks"][0]["fixtureMissCount"] == 0


def test_C_unknown_id_refused(host: SimHost) -> None:
    record_source(host)
    r = unknown_refusal(host)
    assert_no_id(r, UNKNOWN_ID)


@pytest.mark.parametrize("value", ["not an id", "acme/short", 42, "", None, [], {},
                                   "acme~2Frun-zzzzzzzzzzzzzzzzzzzz", "/run-zzzzzzzzzzzzzzzzzzzz",
                                   "run-zzzzzzzzzzzzzzzzzzzz"])
def test_C_id_that_does_not_decode_refused_like_unknown(host: SimHost, value: Any) -> None:
    reference = unknown_refusal(host)
    r = create(host, eval_body(REPLAY_SUITE, {"record": value}))
    assert_uniform(r, reference)
    if isinstance(value, str) and value:
        assert value.encode() not in r.body


def test_C_other_tenant_run_refused(host: SimHost) -> None:
    theirs = record_source(host, KEY_B)
    reference = unknown_refusal(host)
    r = create(host, eval_body(REPLAY_SUITE, {"record": theirs}))
    assert_uniform(r, reference)
    assert_no_id(r, theirs)
    # and the owner can use it: the refusal is about the caller, not the run
    ok(create(host, eval_body(REPLAY_SUITE, {"record": theirs}), KEY_B))


def test_C_non_terminal_run_refused_until_resolved(host: SimHost) -> None:
    waiting = workflow_source(host, INC_READ, workflow="conformance-wait-input")
    snap = host.request("GET", run_path(waiting), api_key=KEY_A).json
    assert snap["status"] == "waiting-input"
    assert of_type(events(host, waiting), "agent.tool-called")  # it did invoke the agent
    reference = unknown_refusal(host)
    assert_uniform(create(host, eval_body(REPLAY_SUITE, {"record": waiting})), reference)
    r = host.request("POST", f"/conformance/seams/runs/{project(waiting)}:resolve",
                     api_key=KEY_A)
    assert r.status == 200 and r.json["status"] == "completed"
    ok(create(host, eval_body(REPLAY_SUITE, {"record": waiting})))


def test_C_run_that_never_invoked_the_agent_refused(host: SimHost) -> None:
    reference = unknown_refusal(host)
    noop = workflow_source(host, INC_READ, workflow="conformance-noop")
    assert not of_type(events(host, noop), "agent.invocation-started")
    helper_only = workflow_source(host, INC_READ, agent=HELPER)
    assert of_type(events(host, helper_only), "agent.tool-called")  # calls, but not RECORDER's
    for source in (noop, helper_only):
        r = create(host, eval_body(REPLAY_SUITE, {"record": source}))
        assert_uniform(r, reference)
        assert_no_id(r, source)


def test_C_run_whose_calls_are_no_longer_held_refused(host: SimHost) -> None:
    source = record_source(host)
    reference = unknown_refusal(host)
    erase(host, source)
    assert_uniform(create(host, eval_body(REPLAY_SUITE, {"record": source})), reference)


def test_C_unheld_calls_profile_refuses_its_runs() -> None:
    host = SimHost(seed=0, profile=PROFILES["unheld-calls"])
    source = record_source(host)
    # the wire still shows the calls; only the host's store lacks them
    assert of_type(events(host, source), "agent.tool-called")
    reference = unknown_refusal(host)
    r = create(host, eval_body(REPLAY_SUITE, {"record": source}))
    assert_uniform(r, reference)
    assert_no_id(r, source)


def test_C_content_free_lane_source_is_usable_and_replays() -> None:
    host = SimHost(seed=0, profile=PROFILES["content-free-lane"])
    source = record_source(host)
    evs = events(host, source)
    called, returned = of_type(evs, "agent.tool-called"), of_type(evs, "agent.tool-returned")
    assert called and returned
    for payload in called:
        assert "inputs" not in payload
        assert len(payload["argsHash"]) == 64
    for payload in returned:
        assert "outcome" not in payload and "error" not in payload
    live = counter(host)
    r = ok(create(host, eval_body(REPLAY_SUITE, {"record": source})))
    task = summary(host, r.json["runId"])["tasks"][0]
    assert (task["fixtureMissCount"], task["passed"]) == (0, True)
    assert counter(host) == live
    drift = ok(create(host, eval_body(DRIFT_SUITE, {"record": source})))
    assert summary(host, drift.json["runId"])["tasks"][0]["fixtureMissCount"] == 1
    assert counter(host) == live and counter(host, "recorded-fixtures-drift") == 0
    # a replay fork of the replay re-reads its events and never resolves the source again
    resolved = dict(host.core.resolutions)
    assert fork(host, r.json["runId"], "replay").status == 201
    assert host.core.resolutions == resolved


def test_C_reference_host_lanes_content_free_usable_unheld_refused(host: SimHost) -> None:
    """The reference profile also runs a content-free recorder and an unheld one."""
    reference = unknown_refusal(host)
    for agent, usable in ((CONTENT_FREE, True), (UNHELD, False)):
        source = workflow_source(host, INC_READ, agent=agent)
        called = of_type(events(host, source), "agent.tool-called")
        assert called and all(p["agentId"] == agent for p in called)
        if agent == CONTENT_FREE:
            assert all("inputs" not in p and "argsHash" in p for p in called)
        r = create(host, {"mode": "eval", "evalSuiteRef": REPLAY_SUITE, "agentId": agent,
                          "fixtureRuns": {"record": source}})
        if usable:
            task = summary(host, ok(r).json["runId"])["tasks"][0]
            assert (task["fixtureMissCount"], task["passed"]) == (0, True)
        else:
            assert_uniform(r, reference)
            assert_no_id(r, source)


def test_C_refusal_never_echoes_the_id(host: SimHost) -> None:
    theirs = record_source(host, KEY_B)
    mine = record_source(host)
    erase(host, mine)
    noop = workflow_source(host, [], workflow="conformance-noop")
    waiting = workflow_source(host, INC_READ, workflow="conformance-wait-input")
    reference = unknown_refusal(host)
    for value in (UNKNOWN_ID, theirs, mine, noop, waiting):
        r = create(host, eval_body(REPLAY_SUITE, {"record": value}))
        assert_uniform(r, reference)
        assert_no_id(r, value)
        # also no tenant-specific text: the body is one fixed sentence
        assert set(r.json) == {"error", "message"}


@pytest.mark.parametrize("mode", ["error", "forbidden", "rate_limited"])
def test_C_failed_call_source_needs_fixture_errors(mode: str) -> None:
    script = [{"call": FLAKY, "args": {"mode": mode}}, {"decide": "done"}]
    reference_host = SimHost(seed=0)
    source = workflow_source(reference_host, script)
    returned = of_type(events(reference_host, source), "agent.tool-returned")
    assert returned[0]["status"] == mode
    assert "fixtureErrors" in reference_host.request(
        "GET", "/.well-known/openwop").json["agents"]["evalSuite"]
    ref = register_suite(reference_host, one_task_suite("acme.evals.flaky", script))
    ok(create(reference_host, eval_body(ref, {"record": source})))

    strict = SimHost(seed=0, profile=PROFILES["no-fixture-errors"])
    assert "fixtureErrors" not in strict.request(
        "GET", "/.well-known/openwop").json["agents"]["evalSuite"]
    source = workflow_source(strict, script)
    ref = register_suite(strict, one_task_suite("acme.evals.flaky", script))
    reference = unknown_refusal(strict)
    r = create(strict, eval_body(ref, {"record": source}))
    assert_uniform(r, reference)
    assert_no_id(r, source)
    # control: a source without a failed call is usable on the same host
    ok(create(strict, eval_body(REPLAY_SUITE, {"record": record_source(strict)})))


def test_C_failed_delegate_call_does_not_make_the_source_unusable() -> None:
    """Only the eval agent's calls are derived, so only their failures count."""
    strict = SimHost(seed=0, profile=PROFILES["no-fixture-errors"])
    script = [{"delegate": HELPER, "script": [{"call": FLAKY, "args": {"mode": "error"}}]},
              *INC_READ]
    source = workflow_source(strict, script)
    ok(create(strict, eval_body(REPLAY_SUITE, {"record": source})))


def test_C_an_eval_run_is_a_usable_source(host: SimHost) -> None:
    """UQ4: an eval run may be the source, fixture-served or live."""
    first = record_source(host)
    second = ok(create(host, eval_body(REPLAY_SUITE, {"record": first}))).json["runId"]
    live = counter(host)
    third = ok(create(host, eval_body(REPLAY_SUITE, {"record": second}))).json["runId"]
    assert summary(host, third)["tasks"][0]["fixtureMissCount"] == 0
    assert counter(host) == live


def test_C_workspace_caller_cannot_use_a_run_outside_its_workspace(host: SimHost) -> None:
    r = host.request("POST", "/conformance/seams/tenants", api_key=KEY_A,
                     json={"name": "acme", "apiKey": "hk_test_acme_ws1", "workspace": "ws1"})
    assert r.status == 201, r.body
    tenant_wide = record_source(host)
    reference = unknown_refusal(host)
    r = create(host, eval_body(REPLAY_SUITE, {"record": tenant_wide}), "hk_test_acme_ws1")
    assert_uniform(r, reference)
    own = record_source(host, "hk_test_acme_ws1")
    ok(create(host, eval_body(REPLAY_SUITE, {"record": own}), "hk_test_acme_ws1"))


def test_C_an_idempotency_key_replays_only_for_the_same_owner(host: SimHost) -> None:
    """A workspace caller repeating another caller's Idempotency-Key and body gets its own
    answer: the uniform refusal for a source it cannot read (not the other caller's run),
    and a different body under that key is no 409 (which would say the key was used)."""
    r = host.request("POST", "/conformance/seams/tenants", api_key=KEY_A,
                     json={"name": "acme", "apiKey": "hk_test_acme_ws2", "workspace": "ws2"})
    assert r.status == 201, r.body
    tenant_wide = record_source(host)
    reference = unknown_refusal(host)
    key = {"Idempotency-Key": "same-key"}
    body = eval_body(REPLAY_SUITE, {"record": tenant_wide})
    first = host.request("POST", "/runs", api_key=KEY_A, json=body, headers=key)
    assert first.status == 201, first.body
    again = host.request("POST", "/runs", api_key="hk_test_acme_ws2", json=body, headers=key)
    assert_uniform(again, reference)
    other = host.request("POST", "/runs", api_key="hk_test_acme_ws2", headers=key,
                         json=eval_body(REPLAY_SUITE, {"record": "acme/run-0000000000"}))
    assert_uniform(other, reference)
    own = host.request("POST", "/runs", api_key=KEY_A, json=body, headers=key)
    assert own.status == 201 and own.json["runId"] == first.json["runId"]


# ----------------------------------------------------------------------------- §D


def derived_for(host: SimHost, eval_run: str) -> list[dict[str, Any]]:
    rid = parse_bound(eval_run)
    found = [entries for _, run, _, entries in host.core.copies.all_entries() if run == rid]
    assert len(found) == 1
    return [e.to_json() for e in found[0]]


def test_D_entries_are_the_agents_calls_as_executed(host: SimHost) -> None:
    source = record_source(host)
    evs = events(host, source)
    r = ok(create(host, eval_body(REPLAY_SUITE, {"record": source})))
    entries = derived_for(host, r.json["runId"])
    called, returned = of_type(evs, "agent.tool-called"), of_type(evs, "agent.tool-returned")
    assert entries == [{"tool": c["toolName"], "args": c["inputs"], "argsMatch": "exact",
                        "response": ret["outcome"]} for c, ret in zip(called, returned,
                                                                      strict=True)]


def test_D_delegate_calls_excluded(host: SimHost) -> None:
    script = [{"call": COUNTER, "args": {"op": "inc", "key": "mine"}},
              {"delegate": HELPER, "script": [
                  {"call": COUNTER, "args": {"op": "inc", "key": "delegate"}},
                  {"call": VAULT, "args": {"query": "delegate"}}]},
              {"call": COUNTER, "args": {"op": "read", "key": "mine"}},
              {"decide": "done"}]
    source = workflow_source(host, script)
    helper_calls = [p for p in of_type(events(host, source), "agent.tool-called")
                    if p["agentId"] == HELPER]
    assert len(helper_calls) == 2
    without_delegate = [script[0], script[2], script[3]]
    ref = register_suite(host, one_task_suite("acme.evals.nodelegate", without_delegate))
    r = ok(create(host, eval_body(ref, {"record": source})))
    entries = derived_for(host, r.json["runId"])
    assert [e["args"] for e in entries] == [{"op": "inc", "key": "mine"},
                                            {"op": "read", "key": "mine"}]
    task = summary(host, r.json["runId"])["tasks"][0]
    assert (task["fixtureMissCount"], task["passed"]) == (0, True)
    # the delegate's own call would find no entry: with the same script it misses, fail-closed
    live = host.core.gateway.live_calls
    ref2 = register_suite(host, one_task_suite("acme.evals.withdelegate", script))
    r2 = ok(create(host, eval_body(ref2, {"record": source})))
    assert summary(host, r2.json["runId"])["tasks"][0]["fixtureMissCount"] >= 1
    assert host.core.gateway.live_calls == live
    assert counter(host, "delegate") == 1


def test_D_entries_follow_event_sequence_order_across_invocations(host: SimHost) -> None:
    # refsim-eval-trials runs its task three times live: three invocations of the agent
    source = ok(create(host, eval_body("refsim-eval-trials"))).json["runId"]
    assert len(of_type(events(host, source), "agent.invocation-started")) == 3
    r = ok(create(host, eval_body(REPLAY_SUITE, {"record": source})))
    entries = derived_for(host, r.json["runId"])
    assert [(e["args"]["op"], e["response"]["count"]) for e in entries] == [
        ("inc", 1), ("read", 1), ("inc", 2), ("read", 2), ("inc", 3), ("read", 3)]
    served = [p["outcome"]["count"] for p in of_type(events(host, r.json["runId"]),
                                                     "agent.tool-returned")]
    assert served == [1, 1]  # the first unconsumed match in order


def test_D_repeated_calls_are_served_in_order(host: SimHost) -> None:
    script = [{"call": COUNTER, "args": {"op": "inc", "key": "rep"}},
              {"call": COUNTER, "args": {"op": "inc", "key": "rep"}},
              {"call": COUNTER, "args": {"op": "read", "key": "rep"}},
              {"call": COUNTER, "args": {"op": "inc", "key": "rep"}},
              {"decide": "done"}]
    source = workflow_source(host, script)
    recorded = [p["outcome"] for p in of_type(events(host, source), "agent.tool-returned")]
    assert [o["count"] for o in recorded] == [1, 2, 2, 3]
    ref = register_suite(host, one_task_suite("acme.evals.rep", script))
    r = ok(create(host, eval_body(ref, {"record": source})))
    served = [p["outcome"] for p in of_type(events(host, r.json["runId"]),
                                            "agent.tool-returned")]
    assert served == recorded
    assert counter(host, "rep") == 3


@pytest.mark.parametrize(("replay_args", "hit"), [
    ({"query": "q1", "limit": 2}, True),
    ({"limit": 2, "query": "q1"}, True),       # key order does not matter
    ({"query": "q1", "limit": 3}, False),      # another value misses
    ({"query": "q1"}, False),                  # a missing key misses
    ({"query": "q1", "limit": 2, "x": None}, False),  # an extra key misses
    ({"query": "Q1", "limit": 2}, False),
])
def test_D_args_match_exactly(host: SimHost, replay_args: dict[str, Any], hit: bool) -> None:
    source = workflow_source(host, [{"call": VAULT, "args": {"query": "q1", "limit": 2}}])
    ref = register_suite(host, one_task_suite(
        "acme.evals.args", [{"call": VAULT, "args": replay_args}, {"decide": "done"}]))
    egress = len(host.core.gateway.egress)
    r = ok(create(host, eval_body(ref, {"record": source})))
    task = summary(host, r.json["runId"])["tasks"][0]
    assert task["fixtureMissCount"] == (0 if hit else 1)
    assert task["passed"] is hit
    assert len(host.core.gateway.egress) == egress  # never a live call
    returned = of_type(events(host, r.json["runId"]), "agent.tool-returned")[0]
    if hit:
        assert returned["outcome"] == {"query": "q1", "answer": "vault:q1"}
    else:
        assert "outcome" not in returned and returned["status"] == "error"


def test_D_error_entries_served_as_tool_errors(host: SimHost) -> None:
    script = [{"call": FLAKY, "args": {"mode": "error"}},
              {"call": FLAKY, "args": {"mode": "forbidden"}},
              {"call": FLAKY, "args": {"mode": "rate_limited"}},
              {"call": FLAKY, "args": {"mode": "ok", "value": 7}},
              {"decide": "done"}]
    source = workflow_source(host, script)
    recorded = of_type(events(host, source), "agent.tool-returned")
    assert [p["status"] for p in recorded] == ["error", "forbidden", "rate_limited", "ok"]
    ref = register_suite(host, one_task_suite("acme.evals.errors", script))
    live = host.core.gateway.live_calls
    r = ok(create(host, eval_body(ref, {"record": source})))
    entries = derived_for(host, r.json["runId"])
    assert [e.get("isError", False) for e in entries] == [True, True, True, False]
    assert [e["response"] for e in entries[:3]] == [p["error"] for p in recorded[:3]]
    served = of_type(events(host, r.json["runId"]), "agent.tool-returned")
    for got, want in zip(served[:3], recorded[:3], strict=True):
        assert got["error"] == want["error"] and "outcome" not in got
        assert got["status"] != "ok"
    assert served[3]["outcome"] == {"value": 7}
    task = summary(host, r.json["runId"])["tasks"][0]
    assert (task["fixtureMissCount"], task["passed"]) == (0, True)
    assert host.core.gateway.live_calls == live


def test_D_miss_fails_closed(host: SimHost) -> None:
    source = record_source(host)
    live, egress = host.core.gateway.live_calls, len(host.core.gateway.egress)
    r = ok(create(host, eval_body(DRIFT_SUITE, {"record": source})))
    scored = of_type(events(host, r.json["runId"]), "eval.scored")[0]
    assert (scored["fixtureMissCount"], scored["passed"]) == (1, False)
    assert host.core.gateway.live_calls == live
    assert len(host.core.gateway.egress) == egress
    assert counter(host, "recorded-fixtures-drift") == 0


def test_D_vault_credential_never_enters_a_derived_entry(host: SimHost) -> None:
    secret = vault_credential("acme")
    script = [{"call": VAULT, "args": {"query": "balance"}}, {"decide": "done"}]
    responses = [host.request("POST", "/runs", api_key=KEY_A, json={
        "workflowId": "conformance-agent-call",
        "inputs": {"agentId": RECORDER, "script": script}})]
    source = responses[0].json["runId"]
    assert any(secret in str(rec.headers) for rec in host.core.gateway.egress)
    ref = register_suite(host, one_task_suite("acme.evals.vault", script))
    r = ok(create(host, eval_body(ref, {"record": source})))
    responses.append(r)
    for path in (run_path(source) + "/events/poll", run_path(r.json["runId"]) + "/events/poll",
                 run_path(r.json["runId"]) + "/events", run_path(r.json["runId"]),
                 run_path(r.json["runId"]) + "/eval-summary", "/.well-known/openwop"):
        responses.append(host.request("GET", path, api_key=KEY_A))
    entries = list(host.core.copies.all_entries())
    assert entries
    for _, _, _, derived in entries:
        for entry in derived:
            assert secret not in repr(entry.to_json())
    for resp in responses:
        assert secret.encode() not in resp.body
        assert secret not in repr(resp.headers)


def test_D_derived_entries_never_on_the_wire(host: SimHost) -> None:
    source = record_source(host)
    r = ok(create(host, eval_body(REPLAY_SUITE, {"record": source})))
    rid = r.json["runId"]
    seen = [r]
    for path in ("", "/events/poll", "/events", "/eval-summary"):
        seen.append(host.request("GET", run_path(rid) + path, api_key=KEY_A))
    seen.append(fork(host, rid, "replay"))
    seen.append(fork(host, rid, "branch"))
    for f in seen[-2:]:
        seen.append(host.request("GET", run_path(f.json["runId"]) + "/events/poll",
                                 api_key=KEY_A))
    for resp in seen:
        assert resp.status in (200, 201), resp.body
        assert b"toolResponses" not in resp.body
        assert b"argsMatch" not in resp.body
        assert b"isError" not in resp.body
    # the summary stays content-free: closed schema, no counter values in it
    assert b"count" not in host.request("GET", run_path(rid) + "/eval-summary",
                                        api_key=KEY_A).body


# ----------------------------------------------------------------------------- §E


def test_E_eval_started_echoes_fixture_runs_verbatim(host: SimHost) -> None:
    a, b = record_source(host), record_source(host)
    requested = {"beta": b, "alpha": a}
    r = ok(create(host, eval_body("refsim-eval-two-tasks", requested, evalModes=["golden"])))
    started = of_type(events(host, r.json["runId"]), "eval.started")
    assert len(started) == 1
    assert started[0]["fixtureRuns"] == requested
    assert list(started[0]["fixtureRuns"]) == list(requested)  # verbatim, order kept
    assert schemas.is_valid("eval-events.schema.json#/$defs/evalStarted", started[0])


def test_E_eval_started_has_no_fixture_runs_when_not_requested(host: SimHost) -> None:
    r = ok(create(host, eval_body(REPLAY_SUITE)))
    started = of_type(events(host, r.json["runId"]), "eval.started")[0]
    assert "fixtureRuns" not in started


@pytest.mark.parametrize("mode", ["replay", "branch"])
def test_E_fork_does_not_resolve_the_source_again(host: SimHost, mode: str) -> None:
    source = record_source(host)
    r = ok(create(host, eval_body(REPLAY_SUITE, {"record": source})))
    rid = r.json["runId"]
    resolved, live = dict(host.core.resolutions), counter(host)
    calls = host.core.gateway.live_calls
    f = fork(host, rid, mode)
    assert f.status == 201, f.body
    assert f.json["sourceRunId"] == rid and f.json["mode"] == mode
    assert host.core.resolutions == resolved
    assert (counter(host), host.core.gateway.live_calls) == (live, calls)
    original = of_type(events(host, rid), "agent.tool-returned")
    forked = of_type(events(host, f.json["runId"]), "agent.tool-returned")
    assert [p.get("outcome") for p in forked] == [p.get("outcome") for p in original]
    assert (of_type(events(host, f.json["runId"]), "eval.started")[0]["fixtureRuns"] ==
        {"record": source})
    # a fork of the fork still reads the stored copy
    again = fork(host, f.json["runId"], mode)
    assert again.status == 201
    assert host.core.resolutions == resolved


def test_E_replay_fork_rereads_the_recorded_events(host: SimHost) -> None:
    source = record_source(host)
    rid = ok(create(host, eval_body(REPLAY_SUITE, {"record": source}))).json["runId"]
    f = fork(host, rid, "replay")
    assert f.status == 201
    original, replayed = events(host, rid), events(host, f.json["runId"])
    assert ([(e["type"], e["payload"]) for e in replayed] ==
        [(e["type"], e["payload"]) for e in original])


@pytest.mark.parametrize("mode", ["replay", "branch"])
def test_E_fork_after_source_erasure_refused_and_runs_nothing(host: SimHost, mode: str) -> None:
    source = record_source(host)
    rid = ok(create(host, eval_body(REPLAY_SUITE, {"record": source}))).json["runId"]
    branch = fork(host, rid, "branch")
    assert branch.status == 201
    erase(host, source)
    resolved, live = dict(host.core.resolutions), counter(host)
    calls, runs = host.core.gateway.live_calls, len(host.core.runs)
    for target in (rid, branch.json["runId"]):
        r = fork(host, target, mode)
        assert r.status == 404, r.body
        assert r.json["error"] == "replay_source_missing"
        assert is_registered(r.json["error"], 404)
        assert schemas.is_valid("error-envelope.schema.json", r.json)
    assert host.core.resolutions == resolved
    assert ((counter(host), host.core.gateway.live_calls, len(host.core.runs)) ==
        (live, calls, runs))


def test_E_fork_of_an_eval_without_fixture_runs_is_unaffected_by_erasure(host: SimHost
                                                                          ) -> None:
    source = record_source(host)
    erase(host, source)
    r = fork(host, source, "replay")
    assert r.status == 201


# ----------------------------------------------------------------------------- Security


def test_security_erasure_reaches_derived_copies(host: SimHost) -> None:
    source = record_source(host)
    keep = record_source(host)
    e1 = ok(create(host, eval_body(REPLAY_SUITE, {"record": source}))).json["runId"]
    e2 = ok(create(host, eval_body(DRIFT_SUITE, {"record": source}))).json["runId"]
    e3 = ok(create(host, eval_body(REPLAY_SUITE, {"record": keep}))).json["runId"]
    src_id, keep_id = parse_bound(source), parse_bound(keep)
    assert src_id is not None and keep_id is not None
    assert host.core.copies.count_for(src_id) == 2
    r = erase(host, source)
    assert r.json["derivedCopiesErased"] == 2
    assert host.core.copies.count_for(src_id) == 0
    assert all(s != src_id for s, _, _, _ in host.core.copies.all_entries())
    assert host.core.copies.count_for(keep_id) == 1  # only the erased source's copies go
    reference = unknown_refusal(host)
    assert_uniform(create(host, eval_body(REPLAY_SUITE, {"record": source})), reference)
    for rid in (e1, e2):
        assert fork(host, rid, "replay").status == 404
    assert fork(host, e3, "replay").status == 201


def test_security_erasure_reaches_runs_that_hold_the_copy(host: SimHost) -> None:
    """An eval run that was served a copy holds the source's content as its own calls: erasing
    the source must reach it too, or it could be named as a source and derive it again."""
    source = record_source(host)
    e1 = ok(create(host, eval_body(REPLAY_SUITE, {"record": source}))).json["runId"]
    e2 = ok(create(host, eval_body(REPLAY_SUITE, {"record": e1}))).json["runId"]
    branch = fork(host, e2, "branch").json["runId"]
    erase(host, source)
    reference = unknown_refusal(host)
    for run in (e1, e2, branch):
        assert_uniform(create(host, eval_body(REPLAY_SUITE, {"record": run})), reference)
        for payload in of_type(events(host, run), "agent.tool-returned"):
            assert "outcome" not in payload  # the content left the wire as well
        assert fork(host, run, "replay").status == 404


def test_security_erasure_reaches_replay_forks_of_the_source(host: SimHost) -> None:
    source = record_source(host)
    copy = fork(host, source, "replay")
    assert copy.status == 201
    assert of_type(events(host, copy.json["runId"]), "agent.tool-returned")[0].get("outcome")
    erase(host, source)
    for payload in of_type(events(host, source), "agent.tool-returned"):
        assert "outcome" not in payload
    for payload in of_type(events(host, copy.json["runId"]), "agent.tool-returned"):
        assert "outcome" not in payload


# ----------------------------------------------------------------------------- RFC 0251


def test_0251_eval_modes_must_be_a_subset_of_the_suites_modes(host: SimHost) -> None:
    # refsim-eval-two-tasks declares golden, regression, live-shadow; rubric is not declared
    assert_refused_400(create(host, eval_body("refsim-eval-two-tasks",
                                              evalModes=["golden", "rubric"])))
    assert_refused_400(create(host, eval_body(REPLAY_SUITE, evalModes=["regression"])))
    ok(create(host, eval_body("refsim-eval-two-tasks", evalModes=["golden", "regression"])))


def test_0251_eval_modes_must_be_a_subset_of_the_hosts_modes(host: SimHost) -> None:
    modes = host.request("GET", "/.well-known/openwop").json["agents"]["evalSuite"]["modes"]
    assert "adversarial" not in modes
    ref = register_suite(host, one_task_suite("acme.evals.adv", [{"decide": "done"}],
                                              modes=["golden", "adversarial"]))
    assert_refused_400(create(host, eval_body(ref, evalModes=["adversarial"])))
    ok(create(host, eval_body(ref, evalModes=["golden"])))
    # the rubric-only built-in suite declares a mode this host does not implement
    assert_refused_400(create(host, eval_body("refsim-eval-rubric")))


def test_0251_host_without_baseline_selection_refuses_eval_modes() -> None:
    host = SimHost(seed=0, profile=PROFILES["no-baseline-selection"])
    assert_refused_400(create(host, eval_body("refsim-eval-two-tasks", evalModes=["golden"])))


def test_0251_baseline_needs_regression(host: SimHost) -> None:
    base = ok(create(host, eval_body("refsim-eval-two-tasks",
                                     evalModes=["golden"]))).json["runId"]
    assert_refused_400(create(host, eval_body("refsim-eval-two-tasks", evalModes=["golden"],
                                              baselineRunId=base)))
    r = ok(create(host, eval_body("refsim-eval-two-tasks", evalModes=["golden", "regression"],
                                  baselineRunId=base)))
    started = of_type(events(host, r.json["runId"]), "eval.started")[0]
    assert started["baselineRunId"] == base
    assert summary(host, r.json["runId"])["regression"]["baselineRunId"] == base


def test_0251_baseline_only_with_mode_eval(host: SimHost) -> None:
    base = ok(create(host, eval_body("refsim-eval-two-tasks",
                                     evalModes=["golden"]))).json["runId"]
    assert_refused_400(create(host, {"workflowId": "conformance-noop", "baselineRunId": base}))
    assert_refused_400(create(host, {"workflowId": "conformance-noop",
                                     "evalModes": ["golden"]}))


def test_0251_unusable_baseline_one_body_distinct_from_fixture_runs(host: SimHost) -> None:
    suite, modes = "refsim-eval-two-tasks", ["golden", "regression"]
    ok(create(host, eval_body(suite, evalModes=["golden"])))  # a usable baseline exists
    theirs = ok(create(host, eval_body(suite, evalModes=["golden"]), KEY_B)).json["runId"]
    workflow = workflow_source(host, INC_READ)
    other_suite = record_source(host)
    bodies = []
    for value in (UNKNOWN_ID, theirs, workflow, other_suite):
        r = create(host, eval_body(suite, evalModes=modes, baselineRunId=value))
        assert_refused_400(r)
        assert_no_id(r, value)
        bodies.append((r.status, r.headers, r.body))
    assert len(set((s, tuple(sorted(h.items())), b) for s, h, b in bodies)) == 1
    assert bodies[0][2] != unknown_refusal(host).body


def test_erasing_only_an_eval_run_erases_the_copies_it_was_served() -> None:
    """assumptions.yaml (gone-copy-code, erasure-scope) and the code agree: the eval run's
    forks are refused 404 replay_source_missing; another eval run of the same source keeps
    its copy and forks; the source itself stays usable."""
    import yaml

    from refsim.data import paths
    rows = {r["id"]: r for r in yaml.safe_load(
        (paths.SPECS / "assumptions.yaml").read_text(encoding="utf-8"))["assumptions"]}
    assert "forks are refused 404 replay_source_missing" in " ".join(
        rows["erasure-scope"]["reading"].split())
    from refsim.check import observe as o
    host = SimHost(seed=0)
    a = o.Session(host, KEY_A)
    source = str(a.create(o.eval_body(o.SOURCE)).json["runId"])
    first = str(a.create(o.eval_body(o.REPLAY, {"record": source})).json["runId"])
    second = str(a.create(o.eval_body(o.REPLAY, {"record": source})).json["runId"])
    assert a.erase(first).status == 200
    gone = a.fork(first, "branch")
    assert (gone.status, gone.json["error"]) == (404, "replay_source_missing")
    assert a.fork(second, "branch").status == 201
    assert a.create(o.eval_body(o.REPLAY, {"record": source})).status == 201
