"""The wire never breaks: arbitrary and near-miss input always gets a registered-code
envelope, never a 500 and never an exception. Plus plain tests of the wire's fixed rules
(auth, versions, sizes, media types, id projection, tenant mismatch, ETags, idempotency).

The `test_regression_*` tests pin host bugs this file once found (each answered 500 or
raised); they are fixed, and the property tests no longer step around any input.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from refsim import Response, SimHost
from refsim.data import paths
from refsim.domain.ids import BOUND_RE, project
from refsim.wire import schemas
from refsim.wire.errors import is_registered
from refsim.wire.limits import MAX_BODY_BYTES

from .conftest import KEY_A, KEY_B, RECORDER

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])
COUNTER = "conformance.eval:counter"
SCRIPT = [{"call": COUNTER, "args": {"op": "inc", "key": "wire"}}, {"decide": "done"}]

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=16)


def assert_envelope(r: Response) -> None:
    """Never a 500; any error is a closed envelope with a code registered at its status."""
    assert r.status < 500, (r.status, r.body)
    assert 100 <= r.status
    if r.status >= 400:
        assert schemas.is_valid("error-envelope.schema.json", r.json), r.body
        assert is_registered(r.json["error"], r.status), (r.json["error"], r.status)
        assert r.header("OpenWOP-Version") == "2.0"
    body = r.body  # the bytes a client receives are always producible, and strict JSON
    if r.header("Content-Type") == "application/json" and body:
        json.loads(body, parse_constant=_no_constants)


def _no_constants(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


class World:
    """One host with a run of each kind, shared by the examples of a property test."""

    def __init__(self) -> None:
        self.host = SimHost(seed=0)
        self.source = self.create({"mode": "eval", "agentId": RECORDER,
                                   "evalSuiteRef": "conformance-eval-recorded-source"})
        self.eval_run = self.create({"mode": "eval", "agentId": RECORDER,
                                     "evalSuiteRef": "conformance-eval-recorded-replay",
                                     "fixtureRuns": {"record": self.source}})
        self.waiting = self.create({"workflowId": "conformance-wait-input",
                                    "inputs": {"agentId": RECORDER, "script": SCRIPT}})
        self.theirs = self.create({"workflowId": "conformance-noop"}, KEY_B)

    def create(self, body: dict[str, Any], key: str = KEY_A) -> str:
        r = self.host.request("POST", "/runs", api_key=key, json=body)
        assert r.status == 201, r.body
        return str(r.json["runId"])

    def paths(self) -> list[tuple[str, str]]:
        """Every body-taking route, with a real run where one is needed."""
        runs = [self.source, self.eval_run, self.waiting, self.theirs]
        out = [("POST", "/runs"), ("POST", "/conformance/seams/eval-suites"),
               ("POST", "/conformance/seams/tenants"),
               ("GET", "/conformance/seams/eval-counter?key=wire")]
        for run in runs:
            p = project(run)
            out += [("POST", f"/runs/{p}:fork"), ("POST", f"/runs/{p}/cancel"),
                    ("POST", f"/conformance/seams/runs/{p}:erase"),
                    ("POST", f"/conformance/seams/runs/{p}:resolve")]
        return out


WORLD = World()  # kept pristine: near-miss, fork and plain tests read it
ROUTES_WORLD = World()  # (a) may erase or resolve its runs
RAW_WORLD = World()  # (c) may do anything a raw request can


# ----------------------------------------------------------------------------- (a) any JSON


@SETTINGS
@given(JSON, st.sampled_from(ROUTES_WORLD.paths()))
def test_any_json_body_on_any_route_gets_an_envelope(body: Any, route: tuple[str, str]) -> None:
    method, path = route
    assert_envelope(ROUTES_WORLD.host.request(method, path, api_key=KEY_A, json=body))


@SETTINGS
@given(st.dictionaries(st.sampled_from(
    ["workflowId", "inputs", "tenantId", "scopeId", "callbackUrl", "mode", "evalSuiteRef",
     "agentId", "evalModes", "baselineRunId", "fixtureRuns", "configurable", "tags",
     "metadata"]), JSON, max_size=6))
@pytest.mark.slow  # hundreds of Hypothesis examples
def test_any_values_under_create_run_keys_get_an_envelope(body: dict[str, Any]) -> None:
    host = ROUTES_WORLD.host
    runs = len(host.core.runs)
    r = host.request("POST", "/runs", api_key=KEY_A, json=body)
    assert_envelope(r)
    assert len(host.core.runs) == runs + (1 if r.status == 201 else 0)


# ----------------------------------------------------------------------------- (b) near misses

VALID_BODIES: dict[str, dict[str, Any]] = {
    "workflow": {"workflowId": "conformance-agent-call",
                 "inputs": {"agentId": RECORDER, "script": SCRIPT},
                 "tags": ["t"], "metadata": {"m": 1}, "configurable": {"version": 1}},
    "eval": {"mode": "eval", "evalSuiteRef": "conformance-eval-recorded-replay",
             "agentId": RECORDER, "fixtureRuns": {"record": WORLD.source}},
    "eval-baseline": {"mode": "eval", "evalSuiteRef": "refsim-eval-two-tasks",
                      "agentId": RECORDER, "evalModes": ["golden", "regression"],
                      "baselineRunId": "acme/run-placeholderplaceholder"},
}
BASELINE = WORLD.create({"mode": "eval", "evalSuiteRef": "refsim-eval-two-tasks",
                         "agentId": RECORDER, "evalModes": ["golden"]})
VALID_BODIES["eval-baseline"]["baselineRunId"] = BASELINE

KNOWN_KEYS = frozenset(json.loads((paths.SCHEMAS / "create-run.schema.json").read_text(
    encoding="utf-8"))["properties"])
REQUIRED = {"workflow": [("workflowId",)], "eval": [("mode",), ("evalSuiteRef",), ("agentId",)],
            "eval-baseline": [("evalSuiteRef",), ("agentId",)]}
# For each typed field: values of a wrong type (or outside the enum / grammar).
WRONG: dict[tuple[str, ...], st.SearchStrategy[Any]] = {
    ("workflowId",): st.one_of(st.integers(), st.none(), st.just(""), st.lists(st.text())),
    ("inputs",): st.one_of(st.text(), st.integers(), st.lists(st.integers())),
    ("inputs", "agentId"): st.one_of(st.integers(), st.booleans(), st.none(), st.floats(),
                                     st.text(max_size=5)),
    ("inputs", "script"): st.one_of(st.text(), st.integers(),
                                    st.lists(st.integers(), min_size=1),
                                    st.just([{"call": "no tool"}])),
    ("tags",): st.one_of(st.text(), st.lists(st.integers(), min_size=1),
                         st.lists(st.text(min_size=257, max_size=260), min_size=1, max_size=1)),
    ("configurable",): st.one_of(st.just({}), st.just({"version": 2}),
                                 st.just({"version": 1, "other": {}})),
    ("metadata",): st.one_of(st.text(), st.integers(), st.lists(st.none())),
    ("mode",): st.one_of(st.sampled_from(["Eval", "workflow", "golden", ""]), st.integers()),
    ("evalSuiteRef",): st.one_of(st.just(""), st.integers(), st.sampled_from(["nope", "x" * 600])),
    ("agentId",): st.one_of(st.just(""), st.just("has space"), st.integers(), st.just("x" * 200),
                            st.just("nobody:agent")),
    ("fixtureRuns",): st.one_of(st.just({}), st.just([]), st.text(), st.integers()),
    ("fixtureRuns", "record"): st.one_of(st.none(), st.integers(), st.text(max_size=20),
                                         st.just("acme/short"), st.just("globex/" + "q" * 20)),
    ("evalModes",): st.one_of(st.just([]), st.just(["golden", "golden"]), st.just(["nope"]),
                              st.just(["rubric"]), st.text()),
    ("baselineRunId",): st.one_of(st.integers(), st.just("not an id"), st.just(""),
                                  st.just("acme/run-nosuchnosuchnosuch")),
}


def _get(doc: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(doc, dict) or part not in doc:
            return None
        doc = doc[part]
    return doc


def _set(doc: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        doc = doc[part]
    doc[path[-1]] = value


def _drop(doc: dict[str, Any], path: tuple[str, ...]) -> None:
    for part in path[:-1]:
        doc = doc[part]
    del doc[path[-1]]


@st.composite
def near_miss(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    kind = draw(st.sampled_from(sorted(VALID_BODIES)))
    body = copy.deepcopy(VALID_BODIES[kind])
    how = draw(st.sampled_from(["drop", "wrong", "extra", "extra-nested"]))
    if how == "drop":
        _drop(body, draw(st.sampled_from(REQUIRED[kind])))
    elif how == "wrong":
        fields = [p for p in WRONG if _get(body, p) is not None]
        path = draw(st.sampled_from(fields))
        _set(body, path, draw(WRONG[path]))
    elif how == "extra":
        value = draw(JSON)  # drawn first, as an assignment evaluates its value first
        body[draw(st.text(min_size=1, max_size=10).filter(lambda k: k not in KNOWN_KEYS))] = value
    else:  # an unknown member of a closed nested object, or of the fixtureRuns map
        if kind == "workflow":
            body["configurable"]["z" + draw(st.text(max_size=5))] = draw(JSON)
        elif kind == "eval":
            key = draw(st.text(max_size=8).filter(lambda k: k != "record"))
            body["fixtureRuns"][key] = WORLD.source
        else:
            body["evalModes"] = [*body["evalModes"], draw(st.sampled_from(["x", "live"]))]
    return kind, how, body


@SETTINGS
@given(near_miss())
@example(("workflow", "wrong", {**VALID_BODIES["workflow"], "inputs": {"agentId": 5}}))
@example(("eval", "wrong", {**VALID_BODIES["eval"], "fixtureRuns": {"record": ""}}))
def test_near_miss_create_run_bodies_are_refused_4xx(case: tuple[str, str, dict[str, Any]]
                                                    ) -> None:
    kind, how, body = case
    runs = len(WORLD.host.core.runs)
    r = WORLD.host.request("POST", "/runs", api_key=KEY_A, json=body)
    assert_envelope(r)
    assert 400 <= r.status < 500, (kind, how, body, r.body)
    assert len(WORLD.host.core.runs) == runs
    if "fixtureRuns" in body and isinstance(body["fixtureRuns"], dict):
        for value in body["fixtureRuns"].values():
            if isinstance(value, str) and "/" in value and len(value) >= 8:  # id-shaped
                assert value.encode() not in r.body


def test_valid_bodies_are_accepted() -> None:
    """The near-miss test starts from bodies that really are valid."""
    for body in VALID_BODIES.values():
        r = WORLD.host.request("POST", "/runs", api_key=KEY_A, json=body)
        assert r.status == 201, r.body


@SETTINGS
@given(st.one_of(
    st.fixed_dictionaries({"mode": st.sampled_from(["replay", "branch"])},
                          optional={"fromSeq": st.integers(-2, 40),
                                    "runOptionsOverlay": st.one_of(st.just({}), JSON)}),
    st.fixed_dictionaries({"mode": JSON}),
    st.fixed_dictionaries({"mode": st.just("replay"), "extra": JSON})),
    st.sampled_from(["source", "eval_run", "waiting", "theirs"]))
def test_near_miss_fork_bodies_get_an_envelope(body: dict[str, Any], which: str) -> None:
    run = getattr(WORLD, which)
    r = WORLD.host.request("POST", f"/runs/{project(run)}:fork", api_key=KEY_A, json=body)
    assert_envelope(r)
    if which in ("waiting", "theirs"):
        assert r.status >= 400  # not terminal / not visible


# ----------------------------------------------------------------------------- (c) raw wire

PRINTABLE = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40)
RUN_PREFIXES = ["/runs/" + project(RAW_WORLD.source), "/runs/" + project(RAW_WORLD.eval_run),
                "/runs/" + project(RAW_WORLD.theirs), "/runs/" + project(RAW_WORLD.waiting),
                "/conformance/seams/runs/", "/conformance/seams/eval-counter",
                "/.well-known/openwop", "/runs"]
PATHS = st.one_of(PRINTABLE.map(lambda s: "/" + s),
                  st.tuples(st.sampled_from(RUN_PREFIXES), PRINTABLE).map("".join),
                  st.tuples(st.sampled_from(RUN_PREFIXES),
                            st.sampled_from(["/events/poll?afterSequence=", "/events/poll?timeout=",
                                             "?key=", ":fork", "/cancel", "/events"]),
                            st.text(max_size=6)).map("".join))
HEADER_VALUES = st.one_of(st.text(max_size=30), st.sampled_from(
    ["Bearer " + KEY_A, "Bearer " + KEY_B, "Bearer", "Bearer  ", "Basic abc", "bearer " + KEY_A,
     "2", "2.0", "2.1", "3.0", "1.0", "two", "2.0.0", "", "application/json", "text/plain",
     "application/json; charset=utf-8", '"x"', "*", "0", "-1", "999999999999999"]))
HEADERS = st.dictionaries(st.sampled_from(
    ["Authorization", "OpenWOP-Version", "Content-Type", "Idempotency-Key", "If-None-Match",
     "Last-Event-ID", "X-Anything"]), HEADER_VALUES, max_size=5)
METHODS = st.one_of(st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "get", "HEAD"]),
                    st.text(max_size=6))
FINITE_JSON = st.recursive(
    st.none() | st.booleans() | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=16)


@SETTINGS
@given(METHODS, PATHS, HEADERS, st.one_of(st.none(), st.binary(max_size=64),
                                          FINITE_JSON.map(lambda v: json.dumps(v).encode())))
def test_any_method_path_headers_and_bytes_get_an_envelope(
        method: str, path: str, headers: dict[str, str], body: bytes | None) -> None:
    host = RAW_WORLD.host
    runs = len(host.core.runs)
    r = host.request_raw(method, path, headers=headers, body=body)
    assert_envelope(r)
    if r.status != 201:
        assert len(host.core.runs) == runs


@SETTINGS
@given(st.binary(max_size=200))
def test_any_bytes_as_a_create_run_body_get_an_envelope(body: bytes) -> None:
    r = RAW_WORLD.host.request_raw("POST", "/runs",
                                   headers={"Authorization": "Bearer " + KEY_A,
                                            "Content-Type": "application/json"}, body=body)
    assert_envelope(r)


# ----------------------------------------------------------------------------- (d) not JSON


@pytest.mark.parametrize("value", [float("nan"), float("inf"), {1, 2}, b"bytes", object(),
                                   {"a": float("nan")}, {(1, 2): 3}, [float("-inf")],
                                   {"workflowId": {"conformance-noop"}}])
def test_values_that_are_not_json_still_get_an_envelope(value: Any) -> None:
    host = SimHost(seed=0)
    for method, path in World.paths(WORLD)[:4]:
        r = host.request(method, path, api_key=KEY_A, json=value)
        assert_envelope(r)
    r = host.request("POST", "/runs", api_key=KEY_A, json=value)
    assert r.status == 400 and r.json["error"] == "validation_error"
    assert not host.core.runs


# ----------------------------------------------------------------------------- known bugs

@pytest.mark.parametrize("agent", [[], {}, [RECORDER], {"id": RECORDER}])
def test_regression_unhashable_inputs_agent_id_is_refused_cleanly(agent: Any) -> None:
    host = SimHost(seed=0)
    r = host.request("POST", "/runs", api_key=KEY_A, json={
        "workflowId": "conformance-agent-call", "inputs": {"agentId": agent, "script": []}})
    assert r.status == 400, r.body


@pytest.mark.parametrize("path", ["//[x", "//[", "//a]b/runs"])
def test_regression_authority_like_path_is_refused_cleanly(path: str) -> None:
    r = SimHost(seed=0).request_raw("GET", path, headers={}, body=None)
    assert r.status == 404, r.body


@pytest.mark.parametrize("version", ["\u00b2", "\u00b2.0", "\u2460"])
def test_regression_non_ascii_digit_version_is_refused_cleanly(version: str) -> None:
    r = SimHost(seed=0).request("GET", "/.well-known/openwop",
                                headers={"OpenWOP-Version": version})
    assert r.status in (400, 406), r.body


@pytest.mark.parametrize("query", ["afterSequence=--5", "afterSequence=\u00b2", "timeout=--1",
                                   "afterSequence=-\u00b3"])
def test_regression_malformed_integer_query_is_refused_cleanly(query: str) -> None:
    path = f"/runs/{project(WORLD.source)}/events/poll?{query}"
    r = WORLD.host.request("GET", path, api_key=KEY_A)
    assert r.status == 400, r.body


@pytest.mark.parametrize("last", ["--3", "\u00b2"])
def test_regression_malformed_last_event_id_is_refused_cleanly(last: str) -> None:
    r = WORLD.host.request("GET", f"/runs/{project(WORLD.source)}/events", api_key=KEY_A,
                           headers={"Last-Event-ID": last})
    assert r.status == 400, r.body


def test_regression_lone_surrogate_in_run_path_is_refused_cleanly() -> None:
    r = WORLD.host.request("GET", "/runs/\ud800", api_key=KEY_A)
    assert r.status in (400, 404), r.body


@pytest.mark.parametrize("token", [b"NaN", b"Infinity", b"-Infinity"])
def test_regression_nan_and_infinity_tokens_are_accepted_in_bodies(token: bytes) -> None:
    host = SimHost(seed=0)
    auth = {"Authorization": "Bearer " + KEY_A}
    body = b'{"workflowId":"conformance-noop","metadata":{"x":' + token + b"}}"
    r = host.request_raw("POST", "/runs", headers=auth, body=body)
    if r.status == 201:
        assert_envelope(host.request("GET", r.json["statusUrl"], api_key=KEY_A))
    else:
        assert_envelope(r)
    keyed = host.request_raw("POST", "/runs", headers={**auth, "Idempotency-Key": "k"},
                             body=body)
    assert_envelope(keyed)
    assert keyed.status == 400


def test_regression_deeply_nested_json_argument_raises() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    r = SimHost(seed=0).request("POST", "/runs", api_key=KEY_A, json=deep)
    assert r.status == 400


def test_regression_deep_body_near_the_parser_limit_is_refused_cleanly() -> None:
    host = SimHost(seed=0)
    statuses = set()
    for depth in range(800, 1200, 2):
        body = (b'{"workflowId":"conformance-noop","metadata":' + b'{"a":' * depth + b"1"
                + b"}" * depth + b"}")
        r = host.request_raw("POST", "/runs", headers={"Authorization": "Bearer " + KEY_A},
                             body=body)
        statuses.add(r.status)
    assert 500 not in statuses, statuses


def test_regression_tenant_seam_accepts_a_trailing_newline() -> None:
    host = SimHost(seed=0)
    r = host.request("POST", "/conformance/seams/tenants", api_key=KEY_A,
                     json={"name": "evil\n", "apiKey": "hk_test_evil"})
    if r.status == 201:
        run = host.request("POST", "/runs", api_key="hk_test_evil",
                           json={"workflowId": "conformance-noop"})
        assert (schemas.is_valid("ids.schema.json#/$defs/runId", run.json["runId"]) and
            BOUND_RE.match(run.json["runId"]) and "\n" not in run.json["runId"])
        assert host.request("GET", run.json["eventsUrl"] + "/poll",
                            api_key="hk_test_evil").status == 200
    assert r.status == 400, r.body


def test_regression_golden_task_without_match_is_a_500_and_leaks_a_run() -> None:
    host = SimHost(seed=0)
    suite = {"suiteId": "acme.evals.nomatch", "version": "1.0.0", "modes": ["golden"],
             "tasks": [{"taskId": "t", "input": {"script": []}, "expected": {"kind": "golden"}}]}
    registered = host.request("POST", "/conformance/seams/eval-suites", api_key=KEY_A,
                              json={"suite": suite})
    r = host.request("POST", "/runs", api_key=KEY_A, json={
        "mode": "eval", "evalSuiteRef": "acme.evals.nomatch", "agentId": RECORDER})
    assert registered.status == 400 or r.status in (201, 400), r.body
    assert all(run.terminal for run in host.core.runs.values())


def test_regression_suite_seam_accepts_duplicate_task_ids() -> None:
    host = SimHost(seed=0)
    task = {"taskId": "t", "input": {"script": []},
            "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "done"}}}
    suite = {"suiteId": "acme.evals.dupes", "version": "1.0.0", "modes": ["golden"],
             "tasks": [task, task]}
    r = host.request("POST", "/conformance/seams/eval-suites", api_key=KEY_A,
                     json={"suite": suite})
    assert r.status == 400, r.body


def test_regression_malformed_task_script_puts_schema_invalid_events_on_the_wire() -> None:
    host = SimHost(seed=0)
    suite = {"suiteId": "acme.evals.badcall", "version": "1.0.0", "modes": ["golden"],
             "tasks": [{"taskId": "t", "input": {"script": [{"call": 5}, {"decide": "d"}]},
                        "expected": {"kind": "golden",
                                     "match": {"strategy": "exact", "value": "d"}}}]}
    host.request("POST", "/conformance/seams/eval-suites", api_key=KEY_A, json={"suite": suite})
    r = host.request("POST", "/runs", api_key=KEY_A, json={
        "mode": "eval", "evalSuiteRef": "acme.evals.badcall", "agentId": RECORDER})
    if r.status == 201:
        evs = host.request("GET", r.json["eventsUrl"] + "/poll", api_key=KEY_A).json["events"]
        for e in evs:
            if e["type"] in EVENT_DEFS:
                assert schemas.is_valid(f"eval-events.schema.json#/$defs/{EVENT_DEFS[e['type']]}",
                                        e["payload"]), e


# ----------------------------------------------------------------------------- events

EVENT_DEFS = {"eval.started": "evalStarted", "eval.scored": "evalScored",
              "eval.completed": "evalCompleted", "agent.tool-called": "agentToolCalled",
              "agent.tool-returned": "agentToolReturned",
              "agent.invocation-started": "agentInvocationStarted",
              "agent.invocation-completed": "agentInvocationCompleted",
              "agent.decided": "agentDecided", "agent.handoff": "agentHandoff"}


def test_every_event_on_the_wire_validates() -> None:
    host = SimHost(seed=0)

    def create(body: dict[str, Any]) -> str:
        r = host.request("POST", "/runs", api_key=KEY_A, json=body)
        assert r.status == 201, r.body
        return str(r.json["runId"])

    source = create({"mode": "eval", "agentId": RECORDER,
                     "evalSuiteRef": "conformance-eval-recorded-source"})
    runs = [source, create({"workflowId": "conformance-agent-call", "inputs": {
        "agentId": RECORDER, "script": [
            {"call": "refsim.tools:flaky", "args": {"mode": "rate_limited"}},
            {"call": "refsim.tools:vault", "args": {"query": "q"}},
            {"delegate": "refsim.agents:helper", "script": [
                {"call": COUNTER, "args": {"op": "read", "key": "x"}}]},
            {"decide": {"any": ["json"]}}]}})]
    for suite in ("conformance-eval-recorded-replay", "conformance-eval-recorded-drift",
                  "refsim-eval-trials"):
        runs.append(create({"mode": "eval", "agentId": RECORDER, "evalSuiteRef": suite,
                            "fixtureRuns": {"record": source}}))
    checked = 0
    for run in runs:
        r = host.request("GET", f"/runs/{project(run)}/events/poll", api_key=KEY_A)
        assert [e["sequence"] for e in r.json["events"]] == list(range(len(r.json["events"])))
        for e in r.json["events"]:
            assert schemas.is_valid("run-event.schema.json", e), e
            if e["type"] in EVENT_DEFS:
                ref = f"eval-events.schema.json#/$defs/{EVENT_DEFS[e['type']]}"
                assert schemas.is_valid(ref, e["payload"]), e
                checked += 1
    assert checked > 40


# ----------------------------------------------------------------------------- plain rules


def test_401_without_or_with_a_wrong_key() -> None:
    host = SimHost(seed=0)
    body = {"workflowId": "conformance-noop"}
    for headers in ({}, {"Authorization": "Bearer hk_wrong"}, {"Authorization": "Basic abc"},
                    {"Authorization": "Bearer"}, {"Authorization": "Bearer  "},
                    {"Authorization": KEY_A}):
        r = host.request("POST", "/runs", json=body, headers=headers)
        assert r.status == 401, (headers, r.body)
        assert r.json["error"] == "unauthenticated"
        assert_envelope(r)
    for path in ("/runs/" + project(WORLD.source), "/conformance/seams/eval-counter?key=k"):
        assert host.request("GET", path).status == 401
    assert not host.core.runs
    assert host.request("GET", "/.well-known/openwop").status == 200  # discovery is open


def test_406_for_an_unsupported_major_version() -> None:
    host = SimHost(seed=0)
    for version in ("3.0", "1.0", "3"):
        r = host.request("POST", "/runs", api_key=KEY_A, json={"workflowId": "conformance-noop"},
                         headers={"OpenWOP-Version": version})
        assert r.status == 406, r.body
        assert r.json["error"] == "protocol_version_unsupported"
        assert_envelope(r)
    for version in ("2", "2.0"):
        assert host.request("GET", "/.well-known/openwop",
                            headers={"OpenWOP-Version": version}).status == 200
    for version in ("two", "2.0.0", "", "2.x"):
        r = host.request("GET", "/.well-known/openwop", headers={"OpenWOP-Version": version})
        assert r.status == 400 and r.json["error"] == "validation_error"
    assert not host.core.runs


def test_413_for_a_body_over_one_mebibyte() -> None:
    host = SimHost(seed=0)
    filler = "a" * MAX_BODY_BYTES
    r = host.request("POST", "/runs", api_key=KEY_A,
                     json={"workflowId": "conformance-noop", "metadata": {"x": filler}})
    assert r.status == 413 and r.json["error"] == "payload_too_large"
    assert_envelope(r)
    assert not host.core.runs
    small = host.request("POST", "/runs", api_key=KEY_A,
                         json={"workflowId": "conformance-noop", "metadata": {"x": "a" * 1000}})
    assert small.status == 201


def test_415_for_a_non_json_content_type() -> None:
    host = SimHost(seed=0)
    for ctype in ("text/plain", "application/xml", "multipart/form-data"):
        r = host.request("POST", "/runs", api_key=KEY_A, json={"workflowId": "conformance-noop"},
                         headers={"Content-Type": ctype})
        assert r.status == 415 and r.json["error"] == "unsupported_media_type"
        assert_envelope(r)
    assert not host.core.runs
    ok = host.request("POST", "/runs", api_key=KEY_A, json={"workflowId": "conformance-noop"},
                      headers={"Content-Type": "application/json; charset=utf-8"})
    assert ok.status == 201


def test_run_paths_accept_tilde_and_percent_projections_and_refuse_bad_escapes() -> None:
    host = WORLD.host
    tenant, _, opaque = WORLD.source.partition("/")
    for segment in (f"{tenant}~2F{opaque}", f"{tenant}%2F{opaque}", f"{tenant}%2f{opaque}",
                    project(WORLD.source), opaque):
        r = host.request("GET", "/runs/" + segment, api_key=KEY_A)
        assert r.status == 200, (segment, r.body)
        assert r.json["runId"] == WORLD.source
    for segment in (f"{tenant}~ZZ{opaque}", f"{tenant}~2", f"{tenant}~", "%", f"{tenant}%G2x",
                    f"{tenant}~2F{opaque}~"):
        for suffix in ("", "/events/poll", "/eval-summary"):
            r = host.request("GET", "/runs/" + segment + suffix, api_key=KEY_A)
            assert r.status == 400, (segment, r.body)
            assert r.json["error"] == "validation_error"
            assert_envelope(r)
    # links the host emits use the ~2F projection
    r = host.request("POST", "/runs", api_key=KEY_A, json={"workflowId": "conformance-noop"})
    assert r.json["statusUrl"] == "/runs/" + project(r.json["runId"])
    assert "~2F" in r.json["statusUrl"]


def test_other_tenants_id_is_403_whether_or_not_the_run_exists() -> None:
    host = WORLD.host
    ghost = "globex/run-nosuchrunnosuchrun1"
    for suffix in ("", "/events/poll", "/eval-summary", "/events"):
        real = host.request("GET", f"/runs/{project(WORLD.theirs)}{suffix}", api_key=KEY_A)
        fake = host.request("GET", f"/runs/{project(ghost)}{suffix}", api_key=KEY_A)
        assert real.status == fake.status == 403
        assert real.json["error"] == "id_tenant_mismatch"
        assert (real.headers, real.body) == (fake.headers, fake.body)
        assert b"globex" not in real.body
    # the owner reads it
    assert host.request("GET", f"/runs/{project(WORLD.theirs)}", api_key=KEY_B).status == 200


def test_discovery_etag_and_if_none_match_304() -> None:
    host = SimHost(seed=0)
    first = host.request("GET", "/.well-known/openwop")
    etag = first.header("ETag")
    assert first.status == 200 and etag
    again = host.request("GET", "/.well-known/openwop", headers={"If-None-Match": etag})
    assert again.status == 304
    assert again.body == b""
    assert again.header("ETag") == etag and again.header("OpenWOP-Version") == "2.0"
    other = host.request("GET", "/.well-known/openwop", headers={"If-None-Match": '"nope"'})
    assert other.status == 200 and other.body == first.body


def test_run_etag_and_if_none_match_304() -> None:
    host = WORLD.host
    path = "/runs/" + project(WORLD.source)
    first = host.request("GET", path, api_key=KEY_A)
    again = host.request("GET", path, api_key=KEY_A, headers={"If-None-Match":
                                                             first.header("ETag") or ""})
    assert again.status == 304 and again.body == b""


def test_idempotency_key_replays_and_mismatches() -> None:
    host = SimHost(seed=0)
    body = {"workflowId": "conformance-agent-call",
            "inputs": {"agentId": RECORDER, "script": SCRIPT}}
    first = host.request("POST", "/runs", api_key=KEY_A, json=body,
                         headers={"Idempotency-Key": "key-1"})
    assert first.status == 201
    assert first.header("OpenWOP-Idempotent-Replay") is None
    runs, live = len(host.core.runs), host.core.gateway.live_calls
    again = host.request("POST", "/runs", api_key=KEY_A, json=body,
                         headers={"Idempotency-Key": "key-1"})
    assert again.status == 201
    assert again.json["runId"] == first.json["runId"]
    assert again.header("OpenWOP-Idempotent-Replay") == "true"
    assert (len(host.core.runs), host.core.gateway.live_calls) == (runs, live)
    other = host.request("POST", "/runs", api_key=KEY_A, json={"workflowId": "conformance-noop"},
                         headers={"Idempotency-Key": "key-1"})
    assert other.status == 409 and other.json["error"] == "idempotency_key_mismatch"
    assert_envelope(other)
    assert len(host.core.runs) == runs
    for bad in ("", "k" * 256):
        r = host.request("POST", "/runs", api_key=KEY_A, json=body,
                         headers={"Idempotency-Key": bad})
        assert r.status == 400 and r.json["error"] == "idempotency_key_invalid"
    assert len(host.core.runs) == runs
    # the key is scoped to the tenant: globex's key-1 is a new run
    theirs = host.request("POST", "/runs", api_key=KEY_B, json=body,
                          headers={"Idempotency-Key": "key-1"})
    assert theirs.status == 201 and theirs.json["runId"] != first.json["runId"]


def test_refusals_never_grow_the_run_table() -> None:
    host = SimHost(seed=0)
    refusals = [
        ("POST", "/runs", {}, {"workflowId": "nope"}),
        ("POST", "/runs", {}, {"mode": "eval"}),
        ("POST", "/runs", {}, {"workflowId": "conformance-noop", "x": 1}),
        ("POST", "/runs", {"OpenWOP-Version": "9"}, {"workflowId": "conformance-noop"}),
        ("POST", "/runs", {"Content-Type": "text/plain"}, {"workflowId": "conformance-noop"}),
        ("POST", "/runs", {}, {"workflowId": "conformance-noop", "tenantId": "globex"}),
        ("POST", "/runs/acme~2Frun-nosuchnosuchnosuch:fork", {}, {"mode": "replay"}),
        ("POST", "/runs/globex~2Frun-nosuchnosuchnosuch:fork", {}, {"mode": "branch"}),
        ("POST", "/conformance/seams/runs/acme~2Frun-nosuchnosuchnosuch:erase", {}, {}),
    ]
    for method, path, headers, body in refusals:
        r = host.request(method, path, api_key=KEY_A, json=body, headers=headers)
        assert r.status >= 400, (path, body, r.body)
        assert_envelope(r)
        assert not host.core.runs


@pytest.mark.parametrize("raw", [
    b'{"workflowId": "conformance-noop", "metadata": {"x": 1e400}}',
    b'{"workflowId": "conformance-noop", "metadata": {"x": -1e999}}',
    b'{"workflowId": "conformance-noop", "workflowId": "conformance-agent-call"}',
])
def test_regression_bodies_must_be_i_json(raw: bytes) -> None:
    host = SimHost(seed=0)
    r = host.request_raw("POST", "/runs", headers={"Authorization": "Bearer " + KEY_A,
                                                   "Content-Type": "application/json"}, body=raw)
    assert r.status == 400 and r.json["error"] == "validation_error"
    assert "I-JSON" in r.json["message"]
    assert not host.core.runs


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="/abcAZ09._~%:@!$&'()*+,;=-?#[] \t\n\x00é", max_size=20)
       .map(lambda s: "/" + s))
def test_a_target_read_as_a_plain_path_is_what_urlsplit_makes_of_it(target: str) -> None:
    """The router skips urlsplit for a plain path: only where urlsplit would give the path
    back unchanged, with no query, fragment or authority."""
    from urllib.parse import parse_qs, urlsplit

    from refsim.wire.router import _PLAIN_PATH
    if _PLAIN_PATH.fullmatch(target):
        parts = urlsplit(target)
        assert (parts.path, parts.netloc, parse_qs(parts.query), parts.fragment) == (
            target, "", {}, "")
