"""The checker's HTTP client against hosts that answer in ways HTTP/1.1 allows and
`http.client` alone does not read: interim 1xx answers, idle connections closed by the
host, more header fields than it takes."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from refsim.wire.httpclient import HostUnreachable, HttpClient

OK = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
      b'{"ok":true}')


def _read_request(conn: socket.socket, buffer: bytearray) -> bool:
    """One request off `conn` (headers, then a Content-Length body); False at EOF."""
    while b"\r\n\r\n" not in buffer:
        chunk = conn.recv(65536)
        if not chunk:
            return False
        buffer += chunk
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return False
        rest += chunk
    buffer[:] = rest[length:]
    return True


class Scripted:
    """A raw HTTP/1.1 server: each request on a connection is answered with `answer`;
    with `idle_close`, a connection left idle that long after an answer is closed."""

    def __init__(self, answer: bytes, idle_close: float | None = None) -> None:
        self.answer, self.idle_close = answer, idle_close
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buffer = bytearray()
        with conn:
            while True:
                conn.settimeout(self.idle_close)
                try:
                    if not _read_request(conn, buffer):
                        return
                except TimeoutError:
                    return  # idle too long: closed without a word (RFC 9112 §9.5)
                conn.sendall(self.answer)


@pytest.fixture
def scripted() -> Iterator[Callable[..., Scripted]]:
    made: list[Scripted] = []

    def make(answer: bytes, idle_close: float | None = None) -> Scripted:
        made.append(Scripted(answer, idle_close))
        return made[-1]
    yield make
    for server in made:
        server.sock.close()


def test_interim_answers_before_the_final_one_are_passed_over(
        scripted: Callable[..., Scripted]) -> None:
    """103 Early Hints (and 102) before every answer: the client reads the final 200, and
    the kept-alive connection stays in step for the next request."""
    hints = (b"HTTP/1.1 102 Processing\r\n\r\n"
             b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
    server = scripted(hints + OK)
    with HttpClient(server.url) as client:
        for method in ("GET", "POST", "GET"):
            r = client.request(method, "/runs", json={} if method == "POST" else None)
            assert (r.status, r.json) == (200, {"ok": True})
    assert server.connections == 1


def test_a_connection_the_host_closed_while_idle_is_not_reused_for_a_post(
        scripted: Callable[..., Scripted]) -> None:
    """A host may close an idle connection at any time, and a POST is not sent twice: the
    client sees the close before it sends, and opens a new connection."""
    server = scripted(OK, idle_close=0.02)
    with HttpClient(server.url) as client:
        for _ in range(3):
            assert client.request("POST", "/runs", json={"workflowId": "x"}).status == 200
            time.sleep(0.1)
    assert server.connections == 3


def test_an_answer_the_client_cannot_read_is_not_called_unreachable(
        scripted: Callable[..., Scripted]) -> None:
    headers = b"".join(b"X-Debug-%03d: %d\r\n" % (i, i) for i in range(150))
    server = scripted(b"HTTP/1.1 200 OK\r\n" + headers + b"Content-Length: 0\r\n\r\n")
    with HttpClient(server.url) as client, pytest.raises(HostUnreachable) as caught:
        client.request("GET", "/runs")
    assert "could not be read" in str(caught.value) and "more than 100" in str(caught.value)
    assert "cannot reach" not in str(caught.value)


def test_a_host_nothing_listens_at_is_unreachable() -> None:
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with HttpClient(f"http://127.0.0.1:{port}") as client, pytest.raises(HostUnreachable) as e:
        client.request("GET", "/runs")
    assert "cannot reach" in str(e.value)
