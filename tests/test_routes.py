"""Routes as data: the table is the router (a row makes a route, a missing row is a 404),
handlers' refusals leave through one edge, and the domain names codes, never statuses."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import attrs
import pytest

import refsim
from refsim import Response, SimHost
from refsim.check.observe import SEAMS
from refsim.data.registry_codes import registry
from refsim.domain.ids import project
from refsim.domain.profile import PROFILES, HostProfile
from refsim.domain.refusals import Refusal, not_found, validation
from refsim.wire import router as router_module
from refsim.wire.router import ROUTES, Call, Handler, Router, refusal_response
from refsim.wire.routes import JSON, Body, Refused, Route, RouteTable, unwrap

from .conftest import KEY_A

AUTH = {"Authorization": "Bearer " + KEY_A}
METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD")
UNKNOWN_RUN = project("acme/run-nosuchnosuchnosuch")


def _no_route(method: str) -> dict[str, str]:
    return {"error": "not_found", "message": f"no route for {method} on this path"}


def _concrete(pattern: str, run: str = UNKNOWN_RUN) -> str:
    """A path the pattern matches, with `run` in its hole."""
    return "/".join(run + seg.split("}", 1)[1] if seg.startswith("{") else seg
                    for seg in pattern.split("/"))


# ----------------------------------------------------------------------------- the domain


def test_no_domain_module_imports_the_error_registry() -> None:
    """The domain names a code; which status it leaves at is the wire's business."""
    files = sorted((Path(refsim.__file__).parent / "domain").glob("*.py"))
    assert len(files) > 10
    for file in files:
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            names: set[str] = set()
            if isinstance(node, ast.Import):
                names = {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                names = {node.module or ""} | {f"{node.module}.{a.name}" for a in node.names}
            assert "refsim.data.registry_codes" not in names, file.name


def test_a_refusal_carries_a_code_and_no_status() -> None:
    assert [f.name for f in attrs.fields(Refusal)] == ["code", "message", "details"]
    assert validation("m", field="f") == Refusal("validation_error", "m", {"field": "f"})


def test_the_wire_answers_each_code_at_its_registered_status() -> None:
    for code, status in registry().items():
        r = refusal_response(Refusal(code, "m"))
        assert (r.status, r.json["error"]) == (status, code)


@pytest.mark.parametrize("code", ["eval_recorded_fixtures_gone", "acme.vendor_code", "x"])
def test_a_code_the_registry_lacks_leaves_as_an_internal_error(code: str) -> None:
    """A vendor code too: this host answers with registered codes only, and has no status
    for any other."""
    r = refusal_response(Refusal(code, "m"))
    assert (r.status, r.json["error"]) == (500, "internal_error")


# ----------------------------------------------------------------------------- the table


def test_every_handler_has_exactly_one_row() -> None:
    """A handler is a Router method taking a Call; each is reachable through one row."""
    handlers = {fn for _, fn in inspect.getmembers(Router, inspect.isfunction)
                if list(inspect.signature(fn).parameters) == ["self", "call"]}
    rows = [route.handler for route in ROUTES.rows]
    assert len(rows) == len(set(rows))
    assert set(rows) == handlers


def _overlap(a: Route[Handler], b: Route[Handler]) -> bool:
    """Whether some request matches both rows (on a host that has both)."""
    if a.method != b.method or a.size != b.size:
        return False
    for x, y in zip(a.pattern.split("/"), b.pattern.split("/"), strict=True):
        x_hole, y_hole = x.startswith("{"), y.startswith("{")
        x_fix, y_fix = x.split("}", 1)[-1], y.split("}", 1)[-1]
        if not x_hole and not y_hole and x != y:
            return False
        if x_hole and not y_hole and not y.endswith(x_fix):
            return False
        if y_hole and not x_hole and not x.endswith(y_fix):
            return False
        if x_hole and y_hole and not (x_fix.endswith(y_fix) or y_fix.endswith(x_fix)):
            return False
    return True


def test_no_two_rows_match_one_request() -> None:
    """So the rows' order decides nothing but the order discovery lists the seams in."""
    rows = ROUTES.rows
    assert _overlap(Route("GET", "/runs/{run}", Router._poll),  # the check works
                    Route("GET", "/runs/{run?}:fork", Router._poll))
    clashes = [(a.pattern, b.pattern) for i, a in enumerate(rows) for b in rows[i + 1:]
               if _overlap(a, b)]
    assert clashes == []


def test_discovery_advertises_exactly_the_seam_rows_the_host_has() -> None:
    seam_rows = [r for r in ROUTES.rows if r.seam is not None]
    assert {r.seam for r in seam_rows} == set(SEAMS)  # the seams the checker knows
    assert all(r.pattern.startswith("/conformance/seams/") for r in seam_rows)
    assert all(r.seam is not None for r in ROUTES.rows
               if r.pattern.startswith("/conformance/seams/"))
    for profile in (HostProfile(), PROFILES["no-counter-seam"]):
        host = SimHost(seed=0, profile=profile)
        advertised = host.request("GET", "/.well-known/openwop").json["conformance"]["seams"]
        assert advertised == [r.seam for r in seam_rows if r.exists(profile)]
        for route in seam_rows:
            r = host.request_raw(route.method, _concrete(route.pattern), headers=AUTH)
            assert (r.json == _no_route(route.method)) == (route.seam not in advertised)
    assert "eval-counter" not in SimHost(seed=0, profile=PROFILES["no-counter-seam"]).request(
        "GET", "/.well-known/openwop").json["conformance"]["seams"]


@pytest.mark.parametrize("path", ["/nope", "/", "/ping/a", "/runs/x/y/z/w/v", "/conformance/seams",
                                  "/conformance/seams/runs/x", "/runs//events",
                                  "/.well-known/openwop/"])
def test_an_unknown_path_is_404_not_found_before_authentication(path: str) -> None:
    host = SimHost(seed=0)
    for headers in ({}, AUTH):
        r = host.request_raw("GET", path, headers=headers)
        assert (r.status, r.json) == (404, _no_route("GET"))


def test_a_wrong_method_on_a_known_path_is_no_route() -> None:
    """Another method on a row's path is a 404 like an unknown path (no 405), unless
    another row takes it (GET on a fork's path reads the run `x:fork`)."""
    host = SimHost(seed=0)
    taken = 0
    for route in ROUTES.rows:
        path = _concrete(route.pattern)
        for method in METHODS:
            if method == route.method:
                continue
            r = host.request_raw(method, path, headers=AUTH, body=b"{}")
            if ROUTES.find(host.profile, method, path.split("/")[1:]) is None:
                assert (r.status, r.json) == (404, _no_route(method)), (method, path)
            else:
                taken += 1
                assert r.json != _no_route(method)
    assert taken == 3  # GET on the fork's path, POST and GET on /runs


def test_a_method_is_matched_case_sensitively() -> None:
    """RFC 9110 §9.1: the method token is case-sensitive, so `post` creates no run."""
    host = SimHost(seed=0)
    assert host.request_raw("GET", "/.well-known/openwop").status == 200
    assert host.request_raw("get", "/.well-known/openwop").status == 404
    created = host.request_raw("post", "/runs", headers=AUTH,
                               body=b'{"workflowId":"conformance-noop"}')
    assert created.status == 404 and created.json["error"] == "not_found"
    assert host.request("GET", "/runs", api_key=KEY_A).json["runs"] == []


@pytest.mark.parametrize(("pattern", "segment", "value"), [
    ("/runs/{run}", "abc", "abc"),
    ("/runs/{run}", "", None),
    ("/runs/{run?}", "", ""),
    ("/runs/{run?}:fork", ":fork", ""),
    ("/runs/{run}:fork", ":fork", None),
    ("/runs/{run?}:fork", "a:fork:fork", "a:fork"),
    ("/runs/{run?}:fork", "a:forks", None),
])
def test_a_hole_takes_a_segment_less_its_suffix(pattern: str, segment: str,
                                                value: str | None) -> None:
    route = Route("POST", pattern, "handler")
    found = route.match("POST", ["runs", segment])
    assert found == (None if value is None else [value])
    assert route.match("GET", ["runs", segment]) is None
    assert route.match("POST", ["runs", segment, "x"]) is None


def test_a_pattern_starts_with_a_slash() -> None:
    with pytest.raises(ValueError, match="starts with '/'"):
        Route("GET", "runs", "handler")


def test_an_empty_run_id_is_no_route_or_no_run_as_the_pattern_says() -> None:
    host = SimHost(seed=0)
    assert host.request_raw("GET", "/runs//events", headers=AUTH).json == _no_route("GET")
    r = host.request_raw("GET", "/runs//events/poll")
    assert (r.status, r.json["error"]) == (401, "unauthenticated")  # a route: auth first
    r = host.request_raw("GET", "/runs//events/poll", headers=AUTH)
    assert (r.status, r.json) == (404, not_found().to_json())


# ----------------------------------------------------------------------------- adding a row


def _ping(router: Router, call: Call) -> Response | Refusal:
    name = call.args[0]
    if name == "refused":
        return validation("a refusal returned by the handler")
    if name == "raised":
        unwrap(router.core.visible_run(call.owner, router._parse_run_segment(call.owner,
                                                                             UNKNOWN_RUN)))
    if name == "bug":
        raise RuntimeError("a bug")
    body = call.valid_json() if call.request.method == "POST" else None
    return router_module._json_response(200, {"name": name, "body": body})


@pytest.fixture
def with_ping(monkeypatch: pytest.MonkeyPatch) -> SimHost:
    def caps(body: dict[str, Any]) -> Refusal | None:
        return validation("too big") if len(body) > 2 else None

    rows: tuple[Route[Handler], ...] = (
        *ROUTES.rows, Route("GET", "/ping/{name}", _ping),
        Route("POST", "/ping/{name}", _ping,
              body=Body("fork-run.schema.json", caps=caps)))
    monkeypatch.setattr(router_module, "ROUTES", RouteTable(rows))
    return SimHost(seed=0)


def test_a_new_row_makes_a_route_reachable(with_ping: SimHost) -> None:
    r = with_ping.request("GET", "/ping/a", api_key=KEY_A)
    assert (r.status, r.json) == (200, {"name": "a", "body": None})
    assert with_ping.request("GET", "/ping/a").status == 401  # the row needs a caller
    assert with_ping.request("PUT", "/ping/a", api_key=KEY_A).json == _no_route("PUT")
    assert with_ping.request("GET", "/ping/", api_key=KEY_A).json == _no_route("GET")


def test_a_new_rows_body_is_checked_as_the_row_says(with_ping: SimHost) -> None:
    ok = with_ping.request("POST", "/ping/a", api_key=KEY_A, json={"mode": "replay"})
    assert (ok.status, ok.json) == (200, {"name": "a", "body": {"mode": "replay"}})
    # authentication first, then the caps, then the schema
    assert with_ping.request("POST", "/ping/a", json={"mode": 1}).status == 401
    capped = with_ping.request("POST", "/ping/a", api_key=KEY_A, json={"a": 1, "b": 2, "c": 3})
    assert capped.json == {"error": "validation_error", "message": "too big"}
    bad = with_ping.request("POST", "/ping/a", api_key=KEY_A, json={"mode": 1})
    assert bad.json["message"] == "the request body does not match the schema"
    assert with_ping.request("POST", "/ping/a", api_key=KEY_A,
                             json=[1]).json["message"] == "the request body must be a JSON object"


def test_a_refusal_returned_or_raised_leaves_through_the_edge(with_ping: SimHost) -> None:
    returned = with_ping.request("GET", "/ping/refused", api_key=KEY_A)
    assert (returned.status, returned.json) == (
        400, {"error": "validation_error", "message": "a refusal returned by the handler"})
    raised = with_ping.request("GET", "/ping/raised", api_key=KEY_A)  # unwrapped, raised
    assert (raised.status, raised.json) == (404, not_found().to_json())
    bug = with_ping.request("GET", "/ping/bug", api_key=KEY_A)
    assert (bug.status, bug.json["error"]) == (500, "internal_error")


def test_unwrap_passes_a_value_and_raises_a_refusal() -> None:
    assert unwrap(5) == 5
    with pytest.raises(Refused) as caught:
        unwrap(not_found())
    assert caught.value.refusal == not_found()


def test_json_rows_parse_without_a_schema() -> None:
    assert JSON == Body()
    host = SimHost(seed=0)
    run = host.request("POST", "/runs", api_key=KEY_A, json={"workflowId": "conformance-noop"})
    cancel = f"/runs/{project(str(run.json['runId']))}/cancel"
    r = host.request_raw("POST", cancel, headers={**AUTH, "Content-Type": "application/json"},
                         body=b"[1]")
    assert r.json["message"] == "the request body must be a JSON object"
    # no schema: any object will do (the run is terminal, so the state refuses it)
    r = host.request("POST", cancel, api_key=KEY_A, json={"anything": [1]})
    assert r.json["error"] == "run_terminal"
