"""The HTTP face against the routes it serves: the same answers as in process, framed."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from refsim import SimHost
from refsim import __version__ as refsim_version
from refsim.cli.http import main as serve_main
from refsim.cli.http import parse_tenant
from refsim.domain.ids import project
from refsim.wire.asgi import parse_sse
from refsim.wire.httpclient import HostUnreachable, HttpClient
from refsim.wire.server import WireServer, background

KEY_A, KEY_B = "hk_test_acme", "hk_test_globex"
RECORDER = "conformance.eval:recorder"
SOURCE = "conformance-eval-recorded-source"
REPLAY = "conformance-eval-recorded-replay"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def served() -> Iterator[tuple[SimHost, WireServer, HttpClient]]:
    host = SimHost(seed=0)
    with background(host) as server:
        yield host, server, HttpClient(server.url)
    assert server.handler_errors == []


def eval_body(suite: str, fixture_runs: dict[str, str] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"mode": "eval", "evalSuiteRef": suite, "agentId": RECORDER}
    if fixture_runs is not None:
        body["fixtureRuns"] = fixture_runs
    return body


def create(client: HttpClient, body: dict[str, Any], key: str = KEY_A) -> str:
    r = client.request("POST", "/runs", api_key=key, json=body)
    assert r.status == 201, r.body
    return str(r.json["runId"])


def poll(client: HttpClient, run_id: str, key: str = KEY_A) -> dict[str, Any]:
    r = client.request("GET", f"/runs/{project(run_id)}/events/poll", api_key=key)
    assert r.status == 200, r.body
    doc: dict[str, Any] = r.json
    return doc


# -- discovery and headers

def test_discovery_etag_and_304_carry_the_protocol_version(served: Any) -> None:
    _, _, client = served
    first = client.request("GET", "/.well-known/openwop")
    assert first.status == 200
    assert first.header("OpenWOP-Version") == "2.0"
    assert first.header("Content-Type") == "application/json"
    etag = first.header("ETag")
    assert etag and etag.startswith('"')
    assert first.json["agents"]["evalSuite"]["recordedFixtures"] is True
    again = client.request("GET", "/.well-known/openwop", headers={"If-None-Match": etag})
    assert again.status == 304
    assert again.header("OpenWOP-Version") == "2.0"
    assert again.header("ETag") == etag
    assert again.body == b""
    stale = client.request("GET", "/.well-known/openwop", headers={"If-None-Match": '"x"'})
    assert stale.status == 200 and stale.json == first.json


def test_server_header_names_refsim(served: Any) -> None:
    _, _, client = served
    assert (client.request("GET", "/.well-known/openwop").header("Server") ==
        f"refsim/{refsim_version}")


def test_unsupported_major_version_is_406(served: Any) -> None:
    _, _, client = served
    r = client.request("GET", "/.well-known/openwop", headers={"OpenWOP-Version": "3.0"})
    assert r.status == 406
    assert r.json["error"] == "protocol_version_unsupported"
    assert r.header("OpenWOP-Version") == "2.0"


def test_head_is_get_without_the_body(served: Any) -> None:
    _, server, client = served
    get = client.request("GET", "/.well-known/openwop")
    conn = http.client.HTTPConnection(server.address[0], server.address[1], timeout=5)
    try:
        conn.request("HEAD", "/.well-known/openwop")
        r = conn.getresponse()
        assert r.status == 200 and r.read() == b""
        assert r.getheader("OpenWOP-Version") == "2.0"
        assert r.getheader("ETag") == get.header("ETag")
        assert r.getheader("Content-Length") == str(len(get.body))
        conn.request("HEAD", "/runs/acme~2Frun-0000000000000000")
        r = conn.getresponse()
        assert r.status == 401 and r.read() == b""
        # keep-alive still works after a HEAD: the next answer is framed correctly
        conn.request("GET", "/.well-known/openwop")
        r2 = conn.getresponse()
        assert r2.status == 200 and json.loads(r2.read())["preferredVersion"] == "2.0"
    finally:
        conn.close()


# -- runs

def test_create_run_and_read_it_in_both_path_forms(served: Any) -> None:
    host, _, client = served
    r = client.request("POST", "/runs", api_key=KEY_A, json={"workflowId": "conformance-noop"})
    assert r.status == 201
    run_id = r.json["runId"]
    assert r.header("Location") == r.json["statusUrl"] == "/runs/" + project(run_id)
    assert r.header("OpenWOP-Version") == "2.0"
    tilde = client.request("GET", "/runs/" + project(run_id), api_key=KEY_A)
    percent = client.request("GET", "/runs/" + run_id.replace("/", "%2F"), api_key=KEY_A)
    assert tilde.status == percent.status == 200
    assert tilde.json == percent.json
    assert tilde.json["runId"] == run_id and tilde.json["status"] == "completed"
    in_process = host.request("GET", "/runs/" + project(run_id), api_key=KEY_A)
    assert tilde.body == in_process.body
    etag = tilde.header("ETag")
    cached = client.request("GET", "/runs/" + project(run_id), api_key=KEY_A,
                            headers={"If-None-Match": etag})
    assert cached.status == 304 and cached.header("OpenWOP-Version") == "2.0"


def test_events_poll_matches_the_host(served: Any) -> None:
    host, _, client = served
    run_id = create(client, eval_body(SOURCE))
    page = poll(client, run_id)
    assert page["isTerminal"] is True and page["status"] == "completed"
    seqs = [e["sequence"] for e in page["events"]]
    assert seqs == list(range(len(seqs))) and page["lastSequence"] == seqs[-1]
    run = next(r for r in host.core.runs.values() if r.run_id.bound == run_id)
    assert page["events"] == [e.to_json() for e in run.events]
    after = client.request("GET", f"/runs/{project(run_id)}/events/poll?afterSequence=3",
                           api_key=KEY_A).json
    assert [e["sequence"] for e in after["events"]] == seqs[4:]


def test_sse_frames_and_last_event_id_resume(served: Any) -> None:
    _, _, client = served
    run_id = create(client, eval_body(SOURCE))
    events = poll(client, run_id)["events"]
    r = client.request("GET", f"/runs/{project(run_id)}/events", api_key=KEY_A)
    assert r.status == 200
    assert r.header("Content-Type") == "text/event-stream"
    assert r.header("Connection") == "close"
    assert r.header("OpenWOP-Version") == "2.0"
    frames = parse_sse(r.text)
    assert [f.id for f in frames] == [e["eventId"] for e in events]
    assert [f.event for f in frames] == [e["type"] for e in events]
    assert [f.json() for f in frames] == events
    assert frames[0].event == "run.started" and frames[-1].event == "run.completed"
    assert "eval.started" in [f.event for f in frames]
    k = 3
    resumed = client.request("GET", f"/runs/{project(run_id)}/events", api_key=KEY_A,
                             headers={"Last-Event-ID": events[k]["eventId"]})
    assert [f.json() for f in parse_sse(resumed.text)] == events[k + 1:]
    by_seq = client.request("GET", f"/runs/{project(run_id)}/events", api_key=KEY_A,
                            headers={"Last-Event-ID": str(k)})
    assert [f.json() for f in parse_sse(by_seq.text)] == events[k + 1:]
    bad = client.request("GET", f"/runs/{project(run_id)}/events", api_key=KEY_A,
                         headers={"Last-Event-ID": "no-such-event"})
    assert bad.status == 400 and bad.json["error"] == "validation_error"


def _open_stream(server: WireServer, run_id: str, headers: dict[str, str] | None = None
                 ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    conn = http.client.HTTPConnection(server.address[0], server.address[1], timeout=10)
    conn.request("GET", f"/runs/{project(run_id)}/events", headers={
        "Accept": "text/event-stream", "Authorization": f"Bearer {KEY_A}", **(headers or {})})
    response = conn.getresponse()
    assert response.status == 200
    return conn, response


def _read_frames_until(response: http.client.HTTPResponse, stop: str | None
                       ) -> list[dict[str, Any]]:
    """Read frames until one of type `stop` (or end of stream when stop is None)."""
    out: list[dict[str, Any]] = []
    block: list[str] = []
    while True:
        line = response.readline()
        if not line:
            return out
        text = line.decode("utf-8").rstrip("\r\n")
        if text:
            block.append(text)
            continue
        for frame in parse_sse("\n".join(block)):
            out.append(frame.json())
        block = []
        if stop is not None and out and out[-1]["type"] == stop:
            return out


def test_live_sse_follows_a_waiting_run_until_it_is_cancelled(served: Any) -> None:
    _, server, client = served
    run_id = create(client, {"workflowId": "conformance-wait-input"})
    conn, response = _open_stream(server, run_id)
    try:
        assert response.getheader("Connection") == "close"
        first = _read_frames_until(response, "run.started")
        assert [e["type"] for e in first] == ["run.started"]
        started = time.monotonic()
        threading.Timer(0.3, lambda: client.request(
            "POST", f"/runs/{project(run_id)}/cancel", api_key=KEY_A)).start()
        rest = _read_frames_until(response, None)  # the server ends the stream when terminal
        assert [e["type"] for e in rest] == ["run.cancelled"]
        assert rest[0]["sequence"] == first[-1]["sequence"] + 1
        assert time.monotonic() - started < 5
    finally:
        conn.close()


def test_live_sse_resumes_after_last_event_id_and_sees_the_seam_resolve(served: Any) -> None:
    _, server, client = served
    run_id = create(client, {"workflowId": "conformance-wait-input"})
    events = poll(client, run_id)["events"]
    conn, response = _open_stream(server, run_id, {"Last-Event-ID": events[-1]["eventId"]})
    try:
        threading.Timer(0.2, lambda: client.request(
            "POST", f"/conformance/seams/runs/{project(run_id)}:resolve", api_key=KEY_A)).start()
        rest = _read_frames_until(response, None)
        assert [e["type"] for e in rest] == ["run.completed"]
    finally:
        conn.close()


def test_live_sse_is_bounded() -> None:
    host = SimHost(seed=0)
    with background(host, sse_max_seconds=0.5) as server:
        client = HttpClient(server.url)
        run_id = create(client, {"workflowId": "conformance-wait-input"})
        conn, response = _open_stream(server, run_id)
        try:
            started = time.monotonic()
            frames = _read_frames_until(response, None)
            assert [e["type"] for e in frames] == ["run.started"]
            assert 0.4 < time.monotonic() - started < 5
        finally:
            conn.close()
        # the server is fine afterwards, and the run still waits
        assert poll(client, run_id)["status"] == "waiting-input"


def test_a_client_that_hangs_up_ends_its_live_stream(served: Any) -> None:
    _, server, client = served
    run_id = create(client, {"workflowId": "conformance-wait-input"})
    conn, response = _open_stream(server, run_id)
    _read_frames_until(response, "run.started")
    assert server.open_streams == 1 and server.open_connections >= 1
    conn.close()
    response.close()
    deadline = time.monotonic() + 5
    while server.open_streams and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.open_streams == 0  # well before the 30 s bound


def test_client_without_event_stream_accept_gets_the_events_so_far(served: Any) -> None:
    _, _, client = served
    run_id = create(client, {"workflowId": "conformance-wait-input"})
    started = time.monotonic()
    r = client.request("GET", f"/runs/{project(run_id)}/events", api_key=KEY_A)
    assert time.monotonic() - started < 2
    assert [f.event for f in parse_sse(r.text)] == ["run.started"]


def test_shutdown_ends_a_live_stream() -> None:
    host = SimHost(seed=0)
    with background(host) as server:
        client = HttpClient(server.url)
        run_id = create(client, {"workflowId": "conformance-wait-input"})
        conn, response = _open_stream(server, run_id)
        _read_frames_until(response, "run.started")
        started = time.monotonic()
    try:
        assert _read_frames_until(response, None) == []
        assert time.monotonic() - started < 5
    finally:
        conn.close()


def test_eval_summary_replay_and_fork(served: Any) -> None:
    host, _, client = served
    source = create(client, eval_body(SOURCE))
    replay = create(client, eval_body(REPLAY, {"record": source}))
    summary = client.request("GET", f"/runs/{project(replay)}/eval-summary", api_key=KEY_A)
    assert summary.status == 200
    assert summary.json["passed"] is True
    assert summary.json["tasks"][0]["fixtureMissCount"] == 0
    assert summary.body == host.request("GET", f"/runs/{project(replay)}/eval-summary",
                                        api_key=KEY_A).body
    started = [e for e in poll(client, replay)["events"] if e["type"] == "eval.started"]
    assert started[0]["payload"]["fixtureRuns"] == {"record": source}
    for mode in ("replay", "branch"):
        fork = client.request("POST", f"/runs/{project(replay)}:fork", api_key=KEY_A,
                              json={"mode": mode})
        assert fork.status == 201, fork.body
        assert fork.json["sourceRunId"] == replay and fork.json["mode"] == mode
        assert poll(client, fork.json["runId"])["isTerminal"] is True
    not_eval = create(client, {"workflowId": "conformance-noop"})
    r = client.request("GET", f"/runs/{project(not_eval)}/eval-summary", api_key=KEY_A)
    assert r.status == 404 and r.json["error"] == "not_found"


def test_cancel_then_cancel_again_is_run_terminal(served: Any) -> None:
    _, _, client = served
    run_id = create(client, {"workflowId": "conformance-wait-input"})
    assert poll(client, run_id)["status"] == "waiting-input"
    first = client.request("POST", f"/runs/{project(run_id)}/cancel", api_key=KEY_A, json={})
    assert first.status == 200 and first.json == {"runId": run_id, "status": "cancelled"}
    again = client.request("POST", f"/runs/{project(run_id)}/cancel", api_key=KEY_A)
    assert again.status == 409 and again.json["error"] == "run_terminal"
    assert poll(client, run_id)["events"][-1]["type"] == "run.cancelled"


def test_conformance_seams(served: Any) -> None:
    _, _, client = served
    counter = "/conformance/seams/eval-counter?key=recorded-fixtures"
    assert client.request("GET", counter, api_key=KEY_A).json["count"] == 0
    source = create(client, eval_body(SOURCE))
    assert client.request("GET", counter, api_key=KEY_A).json["count"] == 1
    assert client.request("GET", counter, api_key=KEY_B).json["count"] == 0  # per tenant
    # tenants seam, then the new tenant can call
    r = client.request("POST", "/conformance/seams/tenants", api_key=KEY_A, json={
        "name": "initech", "apiKey": "hk_test_initech"})
    assert r.status == 201
    assert client.request("GET", counter, api_key="hk_test_initech").status == 200
    # eval-suites seam: a tenant's own suite, then an eval run on it
    suite = json.loads((ROOT / "specs/fixtures/refsim-eval-two-tasks.json").read_text())
    suite["suiteId"] = "acme.sim.evals.http-copy"
    r = client.request("POST", "/conformance/seams/eval-suites", api_key=KEY_A,
                       json={"suite": suite})
    assert r.status == 201, r.body
    run = create(client, {"mode": "eval", "evalSuiteRef": "acme.sim.evals.http-copy",
                          "agentId": RECORDER})
    assert poll(client, run)["isTerminal"] is True
    # resolve seam on a waiting run
    waiting = create(client, {"workflowId": "conformance-wait-input"})
    r = client.request("POST", f"/conformance/seams/runs/{project(waiting)}:resolve",
                       api_key=KEY_A)
    assert r.status == 200 and r.json["status"] == "completed"
    # erase seam: the source is no longer usable afterwards
    r = client.request("POST", f"/conformance/seams/runs/{project(source)}:erase",
                       api_key=KEY_A)
    assert r.status == 200 and r.json["erased"] is True
    refused = client.request("POST", "/runs", api_key=KEY_A,
                             json=eval_body(REPLAY, {"record": source}))
    assert refused.status == 400 and refused.json["error"] == "validation_error"


def test_idempotency_key_replays_the_same_run(served: Any) -> None:
    host, _, client = served
    body = {"workflowId": "conformance-noop"}
    first = client.request("POST", "/runs", api_key=KEY_A, json=body,
                           headers={"Idempotency-Key": "k-0252"})
    again = client.request("POST", "/runs", api_key=KEY_A, json=body,
                           headers={"Idempotency-Key": "k-0252"})
    assert first.status == again.status == 201
    assert again.json["runId"] == first.json["runId"]
    assert again.header("OpenWOP-Idempotent-Replay") == "true"
    assert first.header("OpenWOP-Idempotent-Replay") is None
    assert len(host.core.runs) == 1
    other = client.request("POST", "/runs", api_key=KEY_A, json={"workflowId": "conformance-noop",
                                                                   "tags": ["x"]},
                           headers={"Idempotency-Key": "k-0252"})
    assert other.status == 409 and other.json["error"] == "idempotency_key_mismatch"


# -- the client's own contract

def test_http_client_name_and_unreachable_host() -> None:
    host = SimHost()
    with background(host) as server:
        url = server.url
        assert HttpClient(url).name == url
    with pytest.raises(HostUnreachable) as caught:
        HttpClient(url, timeout=2).request("GET", "/.well-known/openwop")
    message = str(caught.value)
    assert url in message and "\n" not in message
    assert isinstance(caught.value, ValueError)
    with pytest.raises(ValueError):
        HttpClient("ftp://example.invalid")


# -- refsim serve

def test_parse_tenant() -> None:
    assert parse_tenant("initech:hk_test_initech").name == "initech"
    assert parse_tenant("anon:guest:k1").name == "anon:guest"
    assert parse_tenant("a:b:c").api_key == "b:c"
    for bad in ("initech", "initech:", ":key", "bad/name:key", "ok:has space"):
        with pytest.raises(ValueError):
            parse_tenant(bad)


def test_serve_rejects_a_malformed_tenant(capsys: pytest.CaptureFixture[str]) -> None:
    assert serve_main(["serve", "--port", "0", "--tenant", "no-colon"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("refsim: --tenant") and "\n" not in err
    assert serve_main(["serve", "--port", "0", "--tenant", "evil:hk_test_acme"]) == 2
    assert "already belongs" in capsys.readouterr().err


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_serve_command_runs_until_interrupted() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "refsim.cli.http", "serve", "--port", "0",
         "--tenant", "initech:hk_test_initech", "--profile", "no-counter-seam", "--seed", "7"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        assert "refsim:no-counter-seam" in banner
        url = banner.split(" at ")[1].strip()
        tenants = [proc.stdout.readline() for _ in range(3)]
        assert any("initech" in t and "hk_test_initech" in t for t in tenants)
        client = HttpClient(url)
        r = client.request("GET", "/conformance/seams/eval-counter?key=k",
                           api_key="hk_test_initech")
        assert r.status == 404  # the profile has no counter seam
        assert client.request("POST", "/runs", api_key="hk_test_initech",
                              json={"workflowId": "conformance-noop"}).status == 201
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert err == ""
    assert out.strip().splitlines()[-1] == "refsim: stopped serving"


def test_serve_refuses_a_mutant_not_in_the_zoo(capsys: pytest.CaptureFixture[str]) -> None:
    from refsim.zoo.faulty import ZOO

    assert serve_main(["serve", "--port", "0", "--mutant", "no-such-mutant"]) == 2
    err = capsys.readouterr().err
    assert "no-such-mutant" in err and ZOO[0].name in err  # the choices, read at run time


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGTERM")
def _serve_mutant(name: str) -> subprocess.Popen[str]:
    """`refsim serve --port 0 --mutant NAME` in a process of its own, unbuffered."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "refsim.cli.http", "serve", "--port", "0", "--mutant", name],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def test_serve_a_mutant_says_it_is_known_bad_and_serves_it() -> None:
    from refsim.zoo.faulty import mutant

    known_bad = mutant("echoes-id")
    proc = _serve_mutant(known_bad.name)
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        assert f"(mutant {known_bad.name})" in banner
        url = banner.split(" at ")[1].strip()
        warning = proc.stdout.readline()
        assert "known-bad host" in warning and known_bad.breaks in warning
        client = HttpClient(url)
        ghost = "acme/run-nosuchnosuchnosuch0"
        r = client.request("POST", "/runs", api_key=KEY_A,
                           json=eval_body(REPLAY, {"record": ghost}))
        assert r.status == 400
        assert ghost in (r.text or "")  # the mutant echoes the id, as its banner warned
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert out.strip().splitlines()[-1] == "refsim: stopped serving"


def test_serve_rejects_a_header_timeout_out_of_range(capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    with pytest.raises(SystemExit) as exited:
        serve_main(["serve", "--port", "0", "--header-timeout", "11"])
    assert exited.value.code == 2
    assert "at most 10" in capsys.readouterr().err


def test_a_shutdown_from_another_thread_does_not_wait_for_uvicorns_tick(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn notices `should_exit` at its next tick; `shutdown()` wakes the loop instead.
    With the tick made endless, only the wake can end the serving thread."""
    import asyncio

    import uvicorn

    async def endless_ticks(self: uvicorn.Server) -> None:
        await asyncio.Event().wait()

    monkeypatch.setattr(uvicorn.Server, "main_loop", endless_ticks)
    host = SimHost(seed=0)
    with background(host) as server:
        assert HttpClient(server.url).request("GET", "/.well-known/openwop").status == 200
        thread = next(t for t in threading.enumerate()
                      if t.name == f"refsim-http-{server.address[1]}")
    thread.join(timeout=10)
    assert not thread.is_alive()
    server.server.wake()  # after the loop has closed: nothing to wake, no error


def test_the_serving_loop_raises_uvicorns_error_and_leaves_no_task_behind(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The race between uvicorn's ticks and `wake()`: an error of the tick loop comes out;
    cancelled from outside, neither helper task outlives it."""
    import asyncio

    import uvicorn

    from refsim.wire.asgi import WireApp
    from refsim.wire.server import _Uvicorn

    async def broken(self: uvicorn.Server) -> None:
        raise RuntimeError("tick failed")

    async def endless(self: uvicorn.Server) -> None:
        await asyncio.Event().wait()

    def server() -> _Uvicorn:
        app = WireApp(SimHost(seed=0))
        return _Uvicorn(uvicorn.Config(app), app)

    monkeypatch.setattr(uvicorn.Server, "main_loop", broken)
    with pytest.raises(RuntimeError, match="tick failed"):
        asyncio.run(server().main_loop())

    monkeypatch.setattr(uvicorn.Server, "main_loop", endless)

    async def cancelled() -> set[asyncio.Task[Any]]:
        serving = asyncio.ensure_future(server().main_loop())
        await asyncio.sleep(0.01)
        serving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await serving
        await asyncio.sleep(0)  # the helpers' cancellations are delivered
        return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()
                and not t.done()}

    assert asyncio.run(cancelled()) == set()


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_parse_sse_reads_every_line_ending_a_bom_and_comments(end: str) -> None:
    """As the WHATWG event-stream parser: CRLF, LF or a lone CR ends a line; one leading BOM
    and comment lines are not part of any event; data lines join with a newline."""
    text = end.join(["\ufeffretry: 3000", ": ping", "id: 7", "event: eval.started",
                     'data: {"a":', "data: 1}", "", "data: two", "", ""])
    frames = parse_sse(text)
    assert [(f.id, f.event, f.data) for f in frames] == [
        ("7", "eval.started", '{"a":\n1}'), (None, "message", "two")]


def test_serve_a_mutant_whose_fault_is_invisible_over_http_says_so() -> None:
    """check --base-url passes such a host: the banner says why, before anyone is misled."""
    from refsim.zoo.faulty import ZOO
    hidden = next(m for m in ZOO if m.inside_only is not None)
    proc = _serve_mutant(hidden.name)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=15)
    assert "invisible over HTTP" in lines[2] and str(hidden.inside_only) in lines[2]


def test_a_shutdown_waits_for_no_tick_of_uvicorns_with_a_kept_alive_connection_open(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn's shutdown sleeps a tenth of a second after asking its connections to close,
    then a tenth at a time until they have: every served host a matrix column or a test
    ends paid that. refsim's polls every SHUTDOWN_POLL_SECONDS instead. The sleeps the
    serving loop asks for once shutdown has begun are recorded (the client's kept-alive
    connection still open): none is uvicorn's tenth, and the client's answer came whole."""
    import asyncio

    from refsim.wire import server as server_module

    asked: list[float] = []
    real_sleep = asyncio.sleep
    stopping: list[Any] = []

    async def recorded(delay: float, *args: Any, **kwargs: Any) -> Any:
        if stopping and stopping[0].is_set():
            asked.append(delay)
        return await real_sleep(delay, *args, **kwargs)

    monkeypatch.setattr(asyncio, "sleep", recorded)
    with background(SimHost(seed=0)) as server:
        stopping.append(server.app.stopping)
        client = HttpClient(server.url)
        answer = client.request("GET", "/.well-known/openwop")
        assert answer.status == 200 and answer.json is not None
        assert server.open_connections == 1  # kept alive through the shutdown
    assert asked, "the shutdown polled for its connections"
    assert max(asked) <= server_module.SHUTDOWN_POLL_SECONDS
    client.close()
