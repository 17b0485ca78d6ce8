"""Many clients at once over HTTP: no lost or reordered events, no live call, refusals alike."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from refsim import SimHost
from refsim.domain.ids import parse_bound, project
from refsim.wire.asgi import parse_sse
from refsim.wire.httpclient import HttpClient
from refsim.wire.response import Response
from refsim.wire.server import WireServer, background

KEY_A, KEY_B = "hk_test_acme", "hk_test_globex"
RECORDER = "conformance.eval:recorder"
SOURCE = "conformance-eval-recorded-source"
REPLAY = "conformance-eval-recorded-replay"
THREADS = 24
ROUNDS = 3
COUNTER = "/conformance/seams/eval-counter?key=recorded-fixtures"


@pytest.fixture
def served() -> Iterator[tuple[SimHost, WireServer]]:
    host = SimHost(seed=0)
    with background(host) as server:
        yield host, server
    assert server.handler_errors == []


def body(fixture_runs: dict[str, str] | None = None, suite: str = REPLAY) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": "eval", "evalSuiteRef": suite, "agentId": RECORDER}
    if fixture_runs is not None:
        out["fixtureRuns"] = fixture_runs
    return out


def all_at_once(n: int, work: Callable[[int], None]) -> None:
    """Run `work(i)` on n threads released together; re-raise the first failure."""
    barrier = threading.Barrier(n)
    failures: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            work(i)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    if failures:
        raise failures[0]


@pytest.mark.slow  # threads against a served host for a second
def test_concurrent_replays_and_refusals(served: Any) -> None:
    host, server = served
    client = HttpClient(server.url, timeout=30)
    sources = {}
    for key in (KEY_A, KEY_B):
        r = client.request("POST", "/runs", api_key=key, json=body(suite=SOURCE))
        assert r.status == 201
        sources[key] = r.json["runId"]
    counters = {k: client.request("GET", COUNTER, api_key=k).json["count"] for k in sources}
    assert counters == {KEY_A: 1, KEY_B: 1}
    runs_before = len(host.core.runs)

    created: list[tuple[str, str]] = []  # (api key, run id)
    refusals: list[Response] = []
    streamed: dict[str, list[dict[str, Any]]] = {}
    lock = threading.Lock()

    def work(i: int) -> None:
        key = KEY_A if i % 2 == 0 else KEY_B
        other = KEY_B if key == KEY_A else KEY_A
        tenant = sources[key].split("/")[0]
        mine = HttpClient(server.url, timeout=30)
        for round_ in range(ROUNDS):
            r = mine.request("POST", "/runs", api_key=key, json=body({"record": sources[key]}))
            assert r.status == 201, r.body
            run_id = r.json["runId"]
            unknown = f"{tenant}/run-0252unknown{i:04d}{round_:04d}xx"
            refused = [mine.request("POST", "/runs", api_key=key, json=body({"record": unknown})),
                       mine.request("POST", "/runs", api_key=key,
                                    json=body({"record": sources[other]}))]
            sse = mine.request("GET", f"/runs/{project(run_id)}/events", api_key=key)
            with lock:
                created.append((key, run_id))
                refusals.extend(refused)
                streamed[run_id] = [f.json() for f in parse_sse(sse.text or "")]

    all_at_once(THREADS, work)

    # nothing lost: every replay was created, and nothing else
    assert len(created) == THREADS * ROUNDS
    assert len(host.core.runs) == runs_before + THREADS * ROUNDS
    # no live call: the counter seam did not move for either tenant
    assert ({k: client.request("GET", COUNTER, api_key=k).json["count"] for k in sources} ==
        counters)
    # every refusal is the same bytes, and the same as in process
    in_process = host.request("POST", "/runs", api_key=KEY_A,
                              json=body({"record": sources[KEY_B]}))
    assert len(refusals) == 2 * THREADS * ROUNDS
    assert {(r.status, r.body) for r in refusals} == {(400, in_process.body)}
    assert in_process.json["error"] == "validation_error"
    # no lost or reordered events; HTTP equals the host's own record
    for key, run_id in created:
        page = client.request("GET", f"/runs/{project(run_id)}/events/poll", api_key=key).json
        events = page["events"]
        assert [e["sequence"] for e in events] == list(range(len(events)))
        rid = parse_bound(run_id)
        assert rid is not None
        assert events == [e.to_json() for e in host.core.runs[rid].events]
        assert streamed[run_id] == events
        assert {e["runId"] for e in events} == {run_id}
        started = [e for e in events if e["type"] == "eval.started"]
        assert started[0]["payload"]["fixtureRuns"] == {"record": sources[key]}
        assert events[-1]["type"] == "run.completed"
        summary = client.request("GET", f"/runs/{project(run_id)}/eval-summary", api_key=key)
        assert summary.json["passed"] is True
        assert summary.json["tasks"][0]["fixtureMissCount"] == 0


def test_concurrent_idempotent_creates_make_one_run(served: Any) -> None:
    host, server = served
    answers: list[Response] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        r = HttpClient(server.url, timeout=30).request(
            "POST", "/runs", api_key=KEY_A, json={"workflowId": "conformance-noop"},
            headers={"Idempotency-Key": "same-key"})
        with lock:
            answers.append(r)

    all_at_once(THREADS, work)
    assert len(host.core.runs) == 1
    assert {r.status for r in answers} == {201}
    assert len({r.json["runId"] for r in answers}) == 1
    replays = [r for r in answers if r.header("OpenWOP-Idempotent-Replay") == "true"]
    assert len(replays) == THREADS - 1


def test_concurrent_live_streams_all_see_the_end(served: Any) -> None:
    _, server = served
    client = HttpClient(server.url)
    waiting = [client.request("POST", "/runs", api_key=KEY_A,
                              json={"workflowId": "conformance-wait-input"}).json["runId"]
               for _ in range(4)]
    seen: dict[int, list[str]] = {}
    lock = threading.Lock()

    def work(i: int) -> None:
        if i >= 16:  # four threads end the runs while sixteen watch them
            run_id = waiting[i - 16]
            threading.Event().wait(0.2)
            r = HttpClient(server.url).request(
                "POST", f"/runs/{project(run_id)}/cancel", api_key=KEY_A)
            assert r.status == 200
            return
        run_id = waiting[i % 4]
        conn = http.client.HTTPConnection(server.address[0], server.address[1], timeout=10)
        try:
            conn.request("GET", f"/runs/{project(run_id)}/events",
                         headers={"Accept": "text/event-stream",
                                  "Authorization": f"Bearer {KEY_A}"})
            text = conn.getresponse().read().decode("utf-8")  # ends when the run does
        finally:
            conn.close()
        with lock:
            seen[i] = [f.event for f in parse_sse(text)]

    all_at_once(20, work)
    assert len(seen) == 16
    assert all(types == ["run.started", "run.cancelled"] for types in seen.values()), seen
