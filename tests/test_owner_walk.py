"""One owner rule: every route that takes a run id answers a caller who does not own the run
exactly as it answers an id that never existed, and changes nothing. Outsiders are another
workspace of the same tenant and another tenant; the runs are tenant-wide and in a
workspace. RFC 0252 §C (another tenant's run looks exactly like no run at all) and the
owner triple of runs.md."""

from __future__ import annotations

from typing import Any

import pytest

from refsim import Response, SimHost
from refsim.domain.ids import project

from .conftest import KEY_A, KEY_B, RECORDER

WS1, WS2 = "hk_test_acme_ws1", "hk_test_acme_ws2"
SOURCE = "conformance-eval-recorded-source"
REPLAY = "conformance-eval-recorded-replay"

# Each route that names a run: (label, method, path under /runs/{id} or a seam, body).
RUN_ROUTES: list[tuple[str, str, str, Any]] = [
    ("get run", "GET", "/runs/{id}", None),
    ("events", "GET", "/runs/{id}/events", None),
    ("poll", "GET", "/runs/{id}/events/poll?afterSequence=0", None),
    ("eval summary", "GET", "/runs/{id}/eval-summary", None),
    ("fork", "POST", "/runs/{id}:fork", {"mode": "replay"}),
    ("cancel", "POST", "/runs/{id}/cancel", {}),
    ("erase seam", "POST", "/conformance/seams/runs/{id}:erase", {}),
    ("resolve seam", "POST", "/conformance/seams/runs/{id}:resolve", {}),
    ("as a source", "POST", "/runs", "source"),
]


def _never_existed(run_id: str) -> str:
    """An id of the same tenant and shape that no host minted."""
    tenant, _, opaque = run_id.rpartition("/")
    head, _, tail = opaque.rpartition("-")
    flipped = "".join("z" if c != "z" else "y" for c in tail)
    return f"{tenant}/{head}-{flipped}" if head else f"{tenant}/{flipped}"


def _ask(host: SimHost, key: str, route: tuple[str, str, str, Any], run_id: str) -> Response:
    _, method, path, body = route
    if body == "source":
        body = {"mode": "eval", "evalSuiteRef": REPLAY, "agentId": RECORDER,
                "fixtureRuns": {"record": run_id}}
        return host.request(method, path, api_key=key, json=body)
    target = path.replace("{id}", project(run_id))
    if method == "GET":
        return host.request(method, target, api_key=key)
    return host.request(method, target, api_key=key, json=body)


def _world() -> tuple[SimHost, dict[str, str]]:
    host = SimHost(seed=0)
    for key, workspace in ((WS1, "ws1"), (WS2, "ws2")):
        made = host.request("POST", "/conformance/seams/tenants", api_key=KEY_A,
                            json={"name": "acme", "apiKey": key, "workspace": workspace})
        assert made.status == 201, made.body

    def run(key: str, body: dict[str, Any]) -> str:
        r = host.request("POST", "/runs", api_key=key, json=body)
        assert r.status == 201, r.body
        return str(r.json["runId"])
    source = {"mode": "eval", "evalSuiteRef": SOURCE, "agentId": RECORDER}
    runs = {"tenant-wide source": run(KEY_A, source), "ws1 source": run(WS1, source)}
    runs["tenant-wide eval"] = run(KEY_A, {**source, "evalSuiteRef": REPLAY,
                                           "fixtureRuns": {"record": runs["tenant-wide source"]}})
    runs["tenant-wide waiting"] = run(KEY_A, {"workflowId": "conformance-wait-input"})
    return host, runs


# Who may not see which run: another workspace of the tenant, and another tenant.
OUTSIDERS = [("ws1 caller", WS1, "tenant-wide source"), ("ws1 caller", WS1, "tenant-wide eval"),
             ("ws1 caller", WS1, "tenant-wide waiting"), ("ws2 caller", WS2, "ws1 source"),
             ("globex", KEY_B, "tenant-wide source"), ("globex", KEY_B, "tenant-wide eval"),
             ("globex", KEY_B, "tenant-wide waiting"), ("globex", KEY_B, "ws1 source")]


def _snapshot(host: SimHost, runs: dict[str, str]) -> dict[str, Any]:
    """What the owners see of their runs: status, events and how often each was resolved."""
    out: dict[str, Any] = {}
    for label, run_id in runs.items():
        key = WS1 if label.startswith("ws1") else KEY_A
        out[label] = (host.request("GET", "/runs/" + project(run_id), api_key=key).body,
                      host.request("GET", f"/runs/{project(run_id)}/events",
                                   api_key=key).body)
    return out


@pytest.mark.parametrize("route", RUN_ROUTES, ids=[r[0] for r in RUN_ROUTES])
def test_an_outsider_is_answered_as_for_an_id_that_never_existed(
        route: tuple[str, str, str, Any]) -> None:
    host, runs = _world()
    before = _snapshot(host, runs)
    runs_before = len(host.core.runs)
    for who, key, label in OUTSIDERS:
        run_id = runs[label]
        seen = _ask(host, key, route, run_id)
        nothing = _ask(host, key, route, _never_existed(run_id))
        assert seen.status < 500, (who, label, seen.status)
        assert (seen.status, seen.body) == (nothing.status, nothing.body), (
            f"{route[0]}: {who} asking for the {label} run is told apart from an id that "
            f"never existed: {seen.status} {seen.body[:160]!r} vs {nothing.status} "
            f"{nothing.body[:160]!r}")
        assert run_id.encode() not in seen.body and project(run_id).encode() not in seen.body
    assert _snapshot(host, runs) == before  # nothing cancelled, erased or appended
    assert len(host.core.runs) == runs_before  # no fork, no eval run made for an outsider


def test_the_owner_is_answered_so_the_walk_can_fail() -> None:
    """Positive control: the owner of each run gets answers no never-existing id gets."""
    host, runs = _world()
    for route in RUN_ROUTES[:4]:
        for label in ("tenant-wide source", "tenant-wide eval"):
            seen = _ask(host, KEY_A, route, runs[label])
            nothing = _ask(host, KEY_A, route, _never_existed(runs[label]))
            assert (seen.status, seen.body) != (nothing.status, nothing.body), route[0]
    ws1 = _ask(host, WS1, RUN_ROUTES[0], runs["ws1 source"])
    assert ws1.status == 200


def test_a_listing_shows_no_outsiders_run() -> None:
    host, runs = _world()
    for _, key, label in OUTSIDERS:
        listed = host.request("GET", "/runs?limit=100", api_key=key)
        assert listed.status == 200
        assert runs[label].encode() not in listed.body


def test_an_idempotency_replay_never_crosses_owners() -> None:
    host, runs = _world()
    body = {"mode": "eval", "evalSuiteRef": REPLAY, "agentId": RECORDER,
            "fixtureRuns": {"record": runs["tenant-wide source"]}}
    key = {"Idempotency-Key": "walk"}
    first = host.request("POST", "/runs", api_key=KEY_A, json=body, headers=key)
    assert first.status == 201
    unknown = host.request("POST", "/runs", api_key=WS1, json={
        **body, "fixtureRuns": {"record": _never_existed(runs["tenant-wide source"])}})
    for who, outsider in (("ws1", WS1), ("globex", KEY_B)):
        r = host.request("POST", "/runs", api_key=outsider, json=body, headers=key)
        assert r.status == 400 and r.body == unknown.body, (who, r.status, r.body)
