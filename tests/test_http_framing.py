"""Strict framing, deadlines and the server's contract, on raw sockets (issue 11).

Each class of malformed request gets a 400 envelope and the connection closes, so what
follows it on the socket is never run as a request; no malformed target is a 5xx; a
header that does not arrive in time, and an idle keep-alive connection, are closed.
Times here are generous upper bounds on waits the server controls, never speed figures.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refsim import SimHost
from refsim.domain.ids import project
from refsim.wire import schemas
from refsim.wire.errors import is_registered
from refsim.wire.httpclient import HttpClient
from refsim.wire.response import Response
from refsim.wire.server import WireServer, background
from refsim.wire.server import background as background_with

KEY_A = "hk_test_acme"


@pytest.fixture(scope="module")
def _server() -> Iterator[WireServer]:
    with background(SimHost(seed=0)) as server:
        yield server


@pytest.fixture
def served(_server: WireServer) -> Iterator[WireServer]:
    """The module's server (no test here needs a fresh host, and a shutdown costs 0.2 s);
    after each test, no request failed in the handler."""
    before = len(_server.handler_errors)
    yield _server
    assert _server.handler_errors[before:] == []


def exchange(server: WireServer, data: bytes, timeout: float = 10.0) -> tuple[bytes, bool]:
    """Send bytes, read until the server closes; (everything read, whether it closed)."""
    sock = socket.create_connection(server.address, timeout=timeout)
    try:
        sock.sendall(data)
        received = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                return received, False
            except ConnectionResetError:
                return received, True
            if not chunk:
                return received, True
            received += chunk
    finally:
        sock.close()


def responses(data: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """Split what a server sent into (status, headers, body) by Content-Length."""
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in
                   (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length", "0"))
        out.append((status, headers, rest[:length]))
        data = rest[length:]
    return out


def assert_one_400_then_closed(server: WireServer, data: bytes) -> None:
    received, closed = exchange(server, data)
    answers = responses(received)
    assert closed, "the connection must close after a framing error"
    assert len(answers) == 1, answers  # the rest was never run as a request
    status, headers, body = answers[0]
    assert status == 400, (status, body)
    doc = json.loads(body)
    assert schemas.is_valid("error-envelope.schema.json", doc)
    assert doc["error"] == "validation_error" and is_registered(doc["error"], 400)
    assert headers.get("openwop-version") == "2.0"
    assert headers.get("connection") == "close"


FOLLOWER = b"GET /.well-known/openwop HTTP/1.1\r\nHost: x\r\n\r\n"
FRAMING = {
    "space before colon": b"GET /.well-known/openwop HTTP/1.1\r\nHost: x\r\nX : y\r\n\r\n",
    "space before colon in Content-Length":
        b"POST /runs HTTP/1.1\r\nHost: x\r\nContent-Length : 46\r\n\r\n" + FOLLOWER,
    "tab before colon": b"GET / HTTP/1.1\r\nHost: x\r\nX\t: y\r\n\r\n",
    "field line without colon": b"GET / HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
    "bare CR in a value": b"GET / HTTP/1.1\r\nHost: x\r\nX: a\rContent-Length: 46\r\n\r\n",
    "bare CR ending a line": b"GET / HTTP/1.1\rHost: x\r\n\r\n",
    "no Host on HTTP/1.1": b"GET /.well-known/openwop HTTP/1.1\r\n\r\n",
    "two Host fields": b"GET /.well-known/openwop HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    "conflicting Content-Length": b"POST /runs HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                                  b"Content-Length: 6\r\n\r\nhello!",
    "Content-Length list that disagrees": b"POST /runs HTTP/1.1\r\nHost: x\r\n"
                                          b"Content-Length: 5, 6\r\n\r\nhello!",
    "Content-Length with Transfer-Encoding":
        b"POST /runs HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + FOLLOWER,
    "Transfer-Encoding alone": b"POST /runs HTTP/1.1\r\nHost: x\r\n"
                               b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "HTTP/2.0 on the request line": b"GET / HTTP/2.0\r\nHost: x\r\n\r\n",
    "header block over the limit": b"GET / HTTP/1.1\r\nHost: x\r\nX: " + b"y" * 20_000
                                   + b"\r\n\r\n",
}


@pytest.mark.parametrize("data", list(FRAMING.values()), ids=list(FRAMING))
def test_each_framing_error_is_400_and_the_connection_closes(served: WireServer,
                                                             data: bytes) -> None:
    assert_one_400_then_closed(served, data + FOLLOWER)
    r = HttpClient(served.url).request("GET", "/.well-known/openwop")
    assert r.status == 200  # the server is unharmed


def test_the_framing_controls_are_answered_normally(served: WireServer) -> None:
    """The same requests, well formed, get real answers on one connection."""
    good = (b"GET /.well-known/openwop HTTP/1.1\r\nHost: x\r\nX: y\r\n\r\n"
            b"GET /.well-known/openwop HTTP/1.0\r\n\r\n")
    received, closed = exchange(served, good)
    assert closed  # HTTP/1.0 without keep-alive closes after its answer
    assert [status for status, _, _ in responses(received)] == [200, 200]


@pytest.mark.parametrize("target", ["http://[", "http://[::1", "http://[zzz]/runs",
                                    "https://a]/", "http://[::1]]/", "http://a[b]/",
                                    "http://@/", "http:///", "https://"])
def test_malformed_absolute_targets_are_400_not_5xx(served: WireServer, target: str) -> None:
    received, _ = exchange(served, f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    (status, _, body), = responses(received)
    assert status == 400, (target, body)
    assert json.loads(body)["error"] == "validation_error"


@pytest.mark.parametrize("target", ["http://[::1]/.well-known/openwop",
                                    "http://127.0.0.1:1/.well-known/openwop",
                                    "HTTPS://example/.well-known/openwop?x=1"])
def test_well_formed_absolute_targets_are_routed(served: WireServer, target: str) -> None:
    received, _ = exchange(served, f"GET {target} HTTP/1.1\r\nHost: x\r\n"
                                   "Connection: close\r\n\r\n".encode())
    (status, _, body), = responses(received)
    assert status == 200 and json.loads(body)["preferredVersion"] == "2.0"


ODD_TARGETS = ["*", "/%", "/%zz", "/runs/%2", "/runs/acme~2F%00", "//", "/?", "/#x",
               "/runs/" + "a" * 8000, "/runs/acme~2Frun-x/events/poll?limit=-5",
               "/runs/acme~2Frun-x/events/poll?afterSequence=1e9", "/\x7f", "http://a/%"]


@pytest.mark.parametrize("target", ODD_TARGETS)
def test_no_odd_target_is_a_5xx(served: WireServer, target: str) -> None:
    received, _ = exchange(served, f"GET {target} HTTP/1.1\r\nHost: x\r\n"
                                   f"Authorization: Bearer {KEY_A}\r\n"
                                   "Connection: close\r\n\r\n".encode("latin-1"))
    answers = responses(received)
    assert answers and all(status < 500 for status, _, _ in answers), answers


# -- deadlines


@pytest.mark.slow  # waits out a deadline
def test_a_trickled_header_is_closed_at_the_deadline() -> None:
    with background(SimHost(seed=0), header_timeout=0.5) as server:
        sock = socket.create_connection(server.address, timeout=10)
        started = time.monotonic()
        closed = False
        try:
            for byte in b"GET /.well-known/openwop HTTP/1.1\r\nHost: x\r\n":
                try:
                    sock.sendall(bytes([byte]))
                except OSError:
                    closed = True
                    break
                sock.settimeout(0.2)
                try:
                    if sock.recv(1) == b"":
                        closed = True
                        break
                except TimeoutError:
                    pass
        finally:
            sock.close()
        assert closed, "a header trickled past the deadline must be closed"
        assert time.monotonic() - started < 9  # it never reached the end of its header
        assert HttpClient(server.url).request("GET", "/.well-known/openwop").status == 200


@pytest.mark.slow  # waits out a deadline
def test_a_silent_connection_is_closed_at_the_header_deadline() -> None:
    with background(SimHost(seed=0), header_timeout=0.5) as server:
        received, closed = exchange(server, b"", timeout=10)
        assert closed and received == b""


@pytest.mark.slow  # waits out a deadline
def test_an_idle_keep_alive_connection_closes() -> None:
    with background(SimHost(seed=0), keep_alive=1) as server:
        sock = socket.create_connection(server.address, timeout=10)
        try:
            sock.sendall(FOLLOWER)
            data = b""
            while b"\r\n\r\n" not in data or not data.endswith(b"}"):
                data += sock.recv(65536)
            assert data.startswith(b"HTTP/1.1 200 ")
            assert sock.recv(1) == b""  # closed by the server while idle (after ~1 s)
        finally:
            sock.close()


@pytest.mark.slow  # waits out a deadline
def test_a_body_that_does_not_arrive_in_time_is_400() -> None:
    with background_with(SimHost(seed=0), body_timeout=1.0) as server:
        received, closed = exchange(server, b"POST /runs HTTP/1.1\r\nHost: x\r\n"
                                            b"Content-Type: application/json\r\n"
                                            b"Content-Length: 50\r\n\r\n{\"workflowId\"")
        (status, _, body), = responses(received)
        assert status == 400 and closed
        assert "did not arrive within 1 s" in json.loads(body)["message"]


def test_a_slow_client_does_not_block_another() -> None:
    with background(SimHost(seed=0)) as server:
        slow = socket.create_connection(server.address, timeout=10)
        try:
            slow.sendall(b"POST /runs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
            stalled = socket.create_connection(server.address, timeout=10)
            stalled.sendall(b"GET /.well-known/op")  # half a request line, then nothing
            client = HttpClient(server.url, timeout=5)
            for _ in range(5):
                assert client.request("GET", "/.well-known/openwop").status == 200
            stalled.close()
        finally:
            slow.close()


# -- the server takes any raw-request handler


class Redirecting:
    """A handler that is not SimHost at all: one fixed answer."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, bytes | None]] = []

    def request_raw(self, method: str, path: str, *, headers: dict[str, str] | None = None,
                    body: bytes | None = None) -> Response:
        self.seen.append((method, path, body))
        return Response(302, {"Location": "/elsewhere", "Content-Type": "application/json"},
                        {"moved": True})


def test_any_raw_handler_is_served_and_the_client_follows_no_redirect() -> None:
    handler = Redirecting()
    with background(handler) as server:
        client = HttpClient(server.url)
        r = client.request("POST", "/a/b", json={"x": 1})
        assert r.status == 302 and r.header("Location") == "/elsewhere"
        assert r.json == {"moved": True} and r.text == '{"moved":true}'
        assert handler.seen == [("POST", "/a/b", b'{"x": 1}')]
        client.request("GET", "/c")
        assert server.open_connections == 1  # the second request reused the connection


def test_the_client_keeps_dot_segments_and_escapes_as_asked() -> None:
    handler = Redirecting()
    with background(handler) as server:
        HttpClient(server.url).request("GET", "/runs/../x/./y?a=%2F&b=~2F")
    assert handler.seen[0][1] == "/runs/../x/./y?a=%2F&b=~2F"


def test_a_handler_that_raises_is_a_500_envelope_and_the_connection_closes() -> None:
    class Broken:
        def request_raw(self, method: str, path: str, *, headers: dict[str, str] | None = None,
                        body: bytes | None = None) -> Response:
            raise RuntimeError("boom")

    with background(Broken()) as server:
        received, closed = exchange(server, FOLLOWER)
        (status, _, body), = responses(received)
        assert status == 500 and json.loads(body)["error"] == "internal_error" and closed
        assert len(server.handler_errors) == 1 and "boom" in server.handler_errors[0]


def test_no_wire_module_imports_the_host() -> None:
    import ast
    from pathlib import Path

    wire = Path(__file__).resolve().parents[1] / "refsim" / "wire"
    for file in sorted(wire.glob("*.py")):
        tree = ast.parse(file.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "refsim.host" or n.startswith("refsim.host.")
                           for n in names), file.name


# -- in process, through httpx's ASGI transport


def test_httpx_asgi_transport_drives_the_app_in_process() -> None:
    import asyncio

    import httpx

    from refsim.wire.asgi import WireApp

    host = SimHost(seed=0)

    async def go() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=WireApp(host))
        async with httpx.AsyncClient(transport=transport, base_url="http://refsim") as client:
            discovery = await client.get("/.well-known/openwop")
            created = await client.post("/runs", json={"workflowId": "conformance-noop"},
                                        headers={"Authorization": f"Bearer {KEY_A}"})
            run = await client.get(created.headers["location"],
                                   headers={"Authorization": f"Bearer {KEY_A}"})
            return [discovery, created, run]

    discovery, created, run = asyncio.run(go())
    assert discovery.status_code == 200 and discovery.headers["openwop-version"] == "2.0"
    assert discovery.content == host.request("GET", "/.well-known/openwop").body
    assert created.status_code == 201
    assert run.status_code == 200 and run.json()["status"] == "completed"


# -- long poll


def _create_waiting(client: HttpClient) -> tuple[str, int]:
    r = client.request("POST", "/runs", api_key=KEY_A,
                       json={"workflowId": "conformance-wait-input"})
    assert r.status == 201
    run_id = str(r.json["runId"])
    page = client.request("GET", f"/runs/{project(run_id)}/events/poll", api_key=KEY_A).json
    return run_id, int(page["lastSequence"])


def test_long_poll_waits_for_the_next_event(served: WireServer) -> None:
    client = HttpClient(served.url, timeout=40)
    run_id, last = _create_waiting(client)
    timer = threading.Timer(0.3, lambda: HttpClient(served.url).request(
        "POST", f"/conformance/seams/runs/{project(run_id)}:resolve", api_key=KEY_A))
    timer.start()
    try:
        page = client.request("GET", f"/runs/{project(run_id)}/events/poll?afterSequence="
                              f"{last}&timeout=20", api_key=KEY_A).json
    finally:
        timer.join()
    assert [e["type"] for e in page["events"]] == ["run.completed"]
    assert page["isTerminal"] is True


@pytest.mark.slow  # waits out a long poll
def test_long_poll_returns_empty_when_nothing_happens(served: WireServer) -> None:
    client = HttpClient(served.url)
    run_id, last = _create_waiting(client)
    started = time.monotonic()
    page = client.request("GET", f"/runs/{project(run_id)}/events/poll?afterSequence={last}"
                          "&timeout=1", api_key=KEY_A).json
    assert time.monotonic() - started >= 0.9  # it waited (a lower bound, never flaky)
    assert page["events"] == [] and page["status"] == "waiting-input"
    assert page["isTerminal"] is False


def test_long_poll_timeout_has_a_documented_cap(served: WireServer) -> None:
    client = HttpClient(served.url)
    run_id, _ = _create_waiting(client)
    r = client.request("GET", f"/runs/{project(run_id)}/events/poll?timeout=31", api_key=KEY_A)
    assert r.status == 400 and "at most 30 seconds" in r.json["message"]


def test_a_long_poll_reads_the_query_the_router_reads(served: WireServer) -> None:
    """A fragment is no part of the query: a timeout after it neither waits nor, in a
    digit no int() takes ('²'), answers 500."""
    client = HttpClient(served.url)
    run_id, last = _create_waiting(client)
    path = f"/runs/{project(run_id)}/events/poll?afterSequence={last}"
    for target in (path + "&timeout=1#&timeout=%C2%B2", path + "#&timeout=2",
                   path + "&timeout=%C2%B2"):
        started = time.monotonic()
        data = (f"GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY_A}\r\n"
                "Connection: close\r\n\r\n").encode()
        answered = responses(exchange(served, data)[0])
        status = answered[0][0] if answered else 0  # no answer read at all: not a pass
        assert answered, target
        assert status < 500 and time.monotonic() - started < 1.8, (target, status)


def test_in_process_poll_with_a_timeout_does_not_wait() -> None:
    host = SimHost(seed=0)
    r = host.request("POST", "/runs", api_key=KEY_A, json={"workflowId": "conformance-wait-input"})
    last = host.request("GET", f"/runs/{project(r.json['runId'])}/events/poll",
                        api_key=KEY_A).json["lastSequence"]
    page = host.request("GET", f"/runs/{project(r.json['runId'])}/events/poll?afterSequence="
                        f"{last}&timeout=30", api_key=KEY_A)
    assert page.status == 200 and page.json["events"] == []


def test_shutdown_ends_a_long_poll() -> None:
    host = SimHost(seed=0)
    result: list[Any] = []
    with background(host) as server:
        client = HttpClient(server.url, timeout=40)
        run_id, last = _create_waiting(client)

        def wait() -> None:
            result.append(client.request("GET", f"/runs/{project(run_id)}/events/poll?"
                                         f"afterSequence={last}&timeout=30", api_key=KEY_A))

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.3)
    waiter.join(timeout=20)
    assert not waiter.is_alive()
    assert result and result[0].status == 200 and result[0].json["events"] == []


# -- a small campaign: request lines, targets and header lines from hostile pieces


PIECES = st.sampled_from([
    b"GET", b"POST", b"HEAD", b"PUT", b"G\x00T", b"", b" ", b"\t", b"\r", b"\n", b"\r\n",
    b":", b" :", b"Host", b"Host: x", b"Content-Length", b"Content-Length: 5",
    b"Content-Length: -1", b"Content-Length: 99999999999999999999", b"Transfer-Encoding: x",
    b"HTTP/1.1", b"HTTP/1.0", b"HTTP/1.2", b"HTTP/0.9", b"http://[", b"https://a]/", b"/",
    b"/runs", b"/.well-known/openwop", b"?", b"#", b"%", b"~2F", b"\xff", b"\x7f", b"{",
    b"Authorization: Bearer hk_test_acme", b"Expect: 100-continue", b"Connection: close",
    b"Last-Event-ID: \x01", b"Accept: text/event-stream", b"x" * 300])
CAMPAIGN_WORLD: dict[str, WireServer] = {}


@pytest.fixture(scope="module")
def _campaign_server() -> Iterator[None]:
    with background(SimHost(seed=0), header_timeout=2.0, sse_max_seconds=1.0) as server:
        CAMPAIGN_WORLD["server"] = server
        yield
        assert server.handler_errors == []
        assert HttpClient(server.url).request("GET", "/.well-known/openwop").status == 200


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(PIECES, min_size=1, max_size=14))
@pytest.mark.usefixtures("_campaign_server")
def test_hostile_bytes_never_get_a_5xx(pieces: list[bytes]) -> None:
    server = CAMPAIGN_WORLD["server"]
    data = b"".join(pieces) + b"\r\n\r\n"
    received, _ = exchange(server, data, timeout=3)
    for line in received.split(b"\r\n"):
        if line.startswith(b"HTTP/1.1 "):
            assert not line[9:10] == b"5", (data, received[:300])
