"""Whatever arrives on the socket, the answer is a registered-code envelope and the server
stays up."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from refsim import SimHost
from refsim.wire import schemas
from refsim.wire.client import NO_BODY
from refsim.wire.errors import is_registered
from refsim.wire.httpclient import HttpClient
from refsim.wire.limits import MAX_BODY_BYTES
from refsim.wire.response import Response
from refsim.wire.server import WireServer, background

KEY_A = "hk_test_acme"


@pytest.fixture(scope="module")
def _server() -> Iterator[WireServer]:
    with background(SimHost(seed=0)) as server:
        yield server


@pytest.fixture
def served(_server: WireServer) -> Iterator[tuple[WireServer, HttpClient]]:
    """The module's server (no test here needs a fresh host, and a shutdown costs 0.2 s) and
    a new client; after each test it still serves, and no request failed in the handler."""
    before = len(_server.handler_errors)
    yield _server, HttpClient(_server.url)
    assert_still_serving(_server)
    assert _server.handler_errors[before:] == []


def assert_envelope(status: int, headers: dict[str, str] | Any, doc: Any,
                    expected: tuple[int, str] | None = None) -> None:
    assert schemas.is_valid("error-envelope.schema.json", doc), doc
    assert is_registered(doc["error"], status), (status, doc)
    version = {k.lower(): v for k, v in dict(headers).items()}.get("openwop-version")
    assert version == "2.0"
    if expected is not None:
        assert (status, doc["error"]) == expected


def assert_response(r: Response, expected: tuple[int, str]) -> None:
    assert_envelope(r.status, r.headers, r.json, expected)


def assert_still_serving(server: WireServer) -> None:
    r = HttpClient(server.url).request("GET", "/.well-known/openwop")
    assert r.status == 200 and r.json["preferredVersion"] == "2.0"


def raw(server: WireServer, data: bytes, *, half_close: bool = False
        ) -> tuple[int, dict[str, str], Any] | None:
    """Send bytes on a fresh socket; the parsed answer, or None when the server said nothing."""
    sock = socket.create_connection(server.address, timeout=10)
    try:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        response = http.client.HTTPResponse(sock)
        try:
            response.begin()
        except (http.client.RemoteDisconnected, ConnectionResetError):
            return None
        body = response.read()
        return response.status, dict(response.getheaders()), json.loads(body)
    finally:
        sock.close()


def post_bytes(server: WireServer, body: bytes, content_type: str | None,
               path: str = "/runs") -> tuple[int, dict[str, str], Any]:
    headers = {"Authorization": f"Bearer {KEY_A}"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    conn = http.client.HTTPConnection(server.address[0], server.address[1], timeout=10)
    try:
        conn.request("POST", path, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), json.loads(r.read())
    finally:
        conn.close()


# -- bodies

@pytest.mark.parametrize("body", [b"{not json", b"\xff\xfe", b"[1, 2]", b"null", b'"x"',
                                  b"[" * 100_000 + b"]" * 100_000])
def test_malformed_json_is_validation_error(served: Any, body: bytes) -> None:
    server, _ = served
    status, headers, doc = post_bytes(server, body, "application/json")
    assert_envelope(status, headers, doc, (400, "validation_error"))


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "application/jsonx"])
def test_wrong_content_type_is_415(served: Any, content_type: str) -> None:
    server, _ = served
    status, headers, doc = post_bytes(server, b'{"workflowId": "conformance-noop"}',
                                      content_type)
    assert_envelope(status, headers, doc, (415, "unsupported_media_type"))


def test_json_with_charset_is_accepted(served: Any) -> None:
    server, _ = served
    status, _, doc = post_bytes(server, b'{"workflowId": "conformance-noop"}',
                                "application/json; charset=utf-8")
    assert status == 201, doc


def test_oversized_body_is_413_and_the_server_keeps_serving(served: Any) -> None:
    server, client = served
    big = b'{"workflowId": "' + b"x" * (2 * MAX_BODY_BYTES) + b'"}'
    started = time.monotonic()
    r = client.request("POST", "/runs", api_key=KEY_A,
                       json={"workflowId": "x" * (2 * MAX_BODY_BYTES)})
    assert_response(r, (413, "payload_too_large"))
    assert r.header("Connection") == "close"
    status, headers, doc = post_bytes(server, big, "application/json")
    assert_envelope(status, headers, doc, (413, "payload_too_large"))
    assert time.monotonic() - started < 10
    assert_still_serving(server)
    # exactly at the limit is read and judged on its content, not refused for size
    at_limit = b"{" + b" " * (MAX_BODY_BYTES - 2) + b"}"
    status, headers, doc = post_bytes(server, at_limit, "application/json")
    assert_envelope(status, headers, doc, (400, "validation_error"))


def test_huge_declared_length_is_refused_without_reading(served: Any) -> None:
    server, _ = served
    started = time.monotonic()
    answer = raw(server, b"POST /runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Authorization: Bearer hk_test_acme\r\n"
                         b"Content-Length: 999999999999\r\n\r\n{")
    assert answer is not None
    assert_envelope(*answer, expected=(413, "payload_too_large"))
    assert time.monotonic() - started < 5


def test_expect_100_continue_for_an_oversized_body_is_answered_at_once(served: Any) -> None:
    server, _ = served
    answer = raw(server, b"POST /runs HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                         b"Content-Type: application/json\r\n"
                         b"Content-Length: 5000000\r\n\r\n")
    assert answer is not None
    assert_envelope(*answer, expected=(413, "payload_too_large"))


def test_an_oversized_body_is_refused_from_its_header_alone_whatever_the_client_does(
        served: Any) -> None:
    """413 before a byte of the body is read, with or without Expect: 100-continue; a client
    that gives up waiting and sends the body anyway gets no second answer (no 400 for the
    body read as the next request): the connection closes after the 413."""
    server, _ = served
    for expect in (b"Expect: 100-continue\r\n", b""):
        sock = socket.create_connection(server.address, timeout=10)
        try:
            sock.sendall(b"POST /runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Authorization: Bearer " + KEY_A.encode() + b"\r\n" + expect
                         + b"Content-Length: 5000000\r\n\r\n")
            started = time.monotonic()
            response = http.client.HTTPResponse(sock)
            response.begin()
            assert (response.status, json.loads(response.read())["error"]) == (
                413, "payload_too_large")
            assert time.monotonic() - started < 2  # not after a wait for the body
            assert response.getheader("Connection") == "close"
            with contextlib.suppress(OSError):  # the client sends the body anyway
                sock.sendall(b"x" * 65536)
            rest = b""
            with contextlib.suppress(OSError):
                while chunk := sock.recv(65536):
                    rest += chunk
            assert b"HTTP/1.1" not in rest, rest[:200]
        finally:
            sock.close()


@pytest.mark.parametrize("framing", [
    b"Content-Length: abc\r\n",
    b"Content-Length: -1\r\n",
    b"Content-Length: 5\r\nContent-Length: 6\r\n",
    b"Transfer-Encoding: chunked\r\n",
])
def test_unusable_body_framing_is_400(served: Any, framing: bytes) -> None:
    server, _ = served
    answer = raw(server, b"POST /runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + framing + b"\r\n" + b"5\r\nhello\r\n0\r\n\r\n")
    assert answer is not None
    assert_envelope(*answer, expected=(400, "validation_error"))


def test_body_shorter_than_content_length_is_400(served: Any) -> None:
    server, _ = served
    answer = raw(server, b"POST /runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Authorization: Bearer hk_test_acme\r\n"
                         b"Content-Length: 100\r\n\r\n{}", half_close=True)
    assert answer is not None
    assert_envelope(*answer, expected=(400, "validation_error"))


# -- paths, methods, auth

@pytest.mark.parametrize("method,path", [
    ("GET", "/no/such/path"), ("GET", "/"), ("PATCH", "/runs"),
    ("BREW", "/"), ("DELETE", "/runs/acme~2Frun-0000000000000000"), ("PUT", "/.well-known/openwop"),
    ("OPTIONS", "/runs"), ("GET", "/.well-known/openwop/extra"),
])
def test_unknown_path_or_method_is_404(served: Any, method: str, path: str) -> None:
    _, client = served
    assert_response(client.request(method, path, api_key=KEY_A), (404, "not_found"))


@pytest.mark.parametrize("authorization", [None, "Bearer hk_test_nobody", "Bearer ",
                                           "Basic aGtfdGVzdF9hY21lOg==", "hk_test_acme"])
def test_missing_or_wrong_auth_is_401(served: Any, authorization: str | None) -> None:
    _, client = served
    headers = {} if authorization is None else {"Authorization": authorization}
    for method, path in (("POST", "/runs"), ("GET", "/runs/acme~2Frun-0000000000000000"),
                         ("GET", "/conformance/seams/eval-counter?key=k")):
        r = client.request(method, path, headers=headers,
                           json={"workflowId": "conformance-noop"} if method == "POST" else NO_BODY)
        assert_response(r, (401, "unauthenticated"))


def test_bad_protocol_version_header_is_an_envelope(served: Any) -> None:
    _, client = served
    assert_response(client.request("GET", "/.well-known/openwop",
                                   headers={"OpenWOP-Version": "two"}), (400, "validation_error"))
    assert_response(client.request("GET", "/.well-known/openwop",
                                   headers={"OpenWOP-Version": "1.0"}),
                    (406, "protocol_version_unsupported"))


def test_dangling_escape_and_other_tenants_ids(served: Any) -> None:
    _, client = served
    assert_response(client.request("GET", "/runs/acme~2", api_key=KEY_A),
                    (400, "validation_error"))
    assert_response(client.request("GET", "/runs/globex~2Frun-0000000000000000", api_key=KEY_A),
                    (403, "id_tenant_mismatch"))
    assert_response(client.request("GET", "/runs/acme~2Frun-0000000000000000", api_key=KEY_A),
                    (404, "not_found"))


def test_absolute_form_target_is_routed(served: Any) -> None:
    server, _ = served
    conn = http.client.HTTPConnection(server.address[0], server.address[1], timeout=10)
    try:
        conn.putrequest("GET", f"{server.url}/.well-known/openwop", skip_host=True)
        conn.putheader("Host", "example")
        conn.endheaders()
        assert conn.getresponse().status == 200
    finally:
        conn.close()


# -- garbage on the socket

GARBAGE = [
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(256)) + b"\r\n\r\n",
    b"HELLO\r\n\r\n",
    b"GET / HTTP/1.1 extra words\r\n\r\n",
    b"GET / HTTP/9.9\r\n\r\n",
    b"GET / HTTP/2.0\r\n\r\n",
    b"GET / FTP/1.0\r\n\r\n",
    b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(150)) + b"\r\n",
    b"GET / HTTP/1.1\r\nX-Long: " + b"y" * 70_000 + b"\r\n\r\n",
    b"GET / HTTP/1.1\r\nno colon here\r\n\r\n",
]


@pytest.mark.parametrize("data", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage_gets_an_envelope_and_does_not_kill_the_server(served: Any, data: bytes
                                                                ) -> None:
    server, _ = served
    answer = raw(server, data)
    assert answer is not None
    status, headers, doc = answer
    assert_envelope(status, headers, doc)
    assert_still_serving(server)


def test_silent_and_half_open_connections_do_not_kill_the_server(served: Any) -> None:
    server, _ = served
    for data in (b"", b"GET /.well-known/openwop HTTP/1.1\r\nHost:", b"POST /runs HTTP/1.1\r\n"
                 b"Content-Length: 10\r\n\r\n{"):
        sock = socket.create_connection(server.address, timeout=5)
        sock.sendall(data)
        sock.close()
    sock = socket.create_connection(server.address, timeout=5)
    sock.sendall(b"\r\n\r\n")  # blank lines: no request line, so 400 (or nothing)
    sock.shutdown(socket.SHUT_WR)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    sock.close()
    assert data == b"" or data.startswith(b"HTTP/1.1 400 ")
    assert_still_serving(server)


def test_http_0_9_request_is_refused_400(served: Any) -> None:
    """h11 speaks HTTP/1.0 and 1.1 only: a request line without a version is malformed."""
    server, _ = served
    answer = raw(server, b"GET /.well-known/openwop\r\n\r\n")
    assert answer is not None
    assert_envelope(*answer, expected=(400, "validation_error"))


def test_keep_alive_connection_survives_a_refusal(served: Any) -> None:
    server, _ = served
    conn = http.client.HTTPConnection(server.address[0], server.address[1], timeout=10)
    try:
        conn.request("POST", "/runs", body=b"{", headers={"Content-Type": "application/json",
                                                           "Authorization": f"Bearer {KEY_A}"})
        first = conn.getresponse()
        first.read()
        assert first.status == 400
        conn.request("GET", "/.well-known/openwop")
        second = conn.getresponse()
        assert second.status == 200 and second.read()
    finally:
        conn.close()


def test_a_failing_handler_is_a_500_envelope_and_is_noted() -> None:
    host = SimHost()
    with background(host) as server:
        def broken(*args: Any, **kwargs: Any) -> Response:
            raise RuntimeError("boom")

        host.request_raw = broken  # type: ignore[method-assign]
        r = HttpClient(server.url).request("GET", "/.well-known/openwop")
        assert_response(r, (500, "internal_error"))
        assert len(server.handler_errors) == 1 and "boom" in server.handler_errors[0]


@pytest.mark.parametrize("value", ["a\r\nInjected: 1", "日本"])
def test_a_request_the_client_cannot_send_leaves_the_next_one_as_asked(value: str) -> None:
    """A header value that cannot go on the wire (a line break, a character outside
    Latin-1) fails that request alone: nothing of it is sent ahead of the next request on
    the same client, which is answered as it would have been."""
    from refsim.wire.httpclient import HostUnreachable
    with background(SimHost(seed=0)) as server:
        client = HttpClient(server.url)
        with pytest.raises(HostUnreachable):
            client.request("GET", "/.well-known/openwop", headers={"X-Odd": value})
        after = client.request("GET", "/.well-known/openwop")
        assert after.status == 200 and isinstance(after.json, dict)
