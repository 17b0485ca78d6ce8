"""The HTTP face: a stdlib server in front of `SimHost`, and `HttpClient` for any v2 host.

The server only frames bytes; every answer, refusals included, comes from the router.
"""

from __future__ import annotations

import contextlib
import http.client
import json as _json
import socket
import socketserver
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import quote, urlsplit

import attrs

from refsim import __version__
from refsim.domain.refusals import Refusal, validation
from refsim.host import SimHost
from refsim.wire.client import NO_BODY
from refsim.wire.response import Response
from refsim.wire.router import MAX_BODY_BYTES, PROTOCOL_VERSION, refusal_response

if TYPE_CHECKING:
    from refsim.wire.client import HostClient

SSE_MAX_SECONDS = 30.0
SSE_POLL_SECONDS = 0.05
SSE_KEEPALIVE_SECONDS = 5.0
IDLE_TIMEOUT_SECONDS = 30.0
# Before a connection closes, what the client still sends (the rest of a refused body) is
# read and thrown away, so it reads the answer instead of a reset; past these bounds the
# connection just closes.
LINGER_MAX_BYTES = 64 * MAX_BODY_BYTES
LINGER_SECONDS = 2.0
_FRAMING = frozenset({"content-length", "connection", "transfer-encoding", "keep-alive"})
_NO_BODY_STATUS = frozenset({204, 304})
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})

# Errors the stdlib parser raises before a request reaches the router, as registered
# codes at their registered status. The stdlib messages quote the caller's bytes; these
# fixed sentences do not.
_FRAMING_REFUSALS: dict[int, Refusal] = {
    400: validation("the request line or headers are not valid HTTP/1.1"),
    413: Refusal(413, "payload_too_large",
                 f"request bodies are limited to {MAX_BODY_BYTES} bytes"),
    414: validation("the request line is longer than 65536 bytes"),
    431: validation("the request headers are too many or too long"),
    500: Refusal(500, "internal_error", "the host failed while handling the request"),
    505: validation("this host speaks HTTP/1.0 and HTTP/1.1 only"),
}


# -- shared helpers

def _header_dict(message: Message | Mapping[str, str]) -> dict[str, str]:
    """Headers as a dict; a repeated header is joined with ", " (RFC 9110 §5.3)."""
    out: dict[str, str] = {}
    first_spelling: dict[str, str] = {}
    for name, value in message.items():
        key = name.lower()
        if key in first_spelling:
            out[first_spelling[key]] += ", " + str(value)
        else:
            first_spelling[key] = name
            out[name] = str(value)
    return out


def _get(headers: Mapping[str, str], name: str) -> str | None:
    lower = name.lower()
    return next((v for k, v in headers.items() if k.lower() == lower), None)


@attrs.frozen
class SseFrame:
    """One server-sent event: its `id:`, `event:` and the joined `data:` lines."""

    id: str | None
    event: str
    data: str

    def json(self) -> Any:
        return _json.loads(self.data)


def parse_sse(text: str) -> list[SseFrame]:
    """Split a `text/event-stream` body into frames; comments and empty frames drop out."""
    frames: list[SseFrame] = []
    event_id: str | None = None
    event, data = "message", list[str]()
    for line in [*text.replace("\r\n", "\n").split("\n"), ""]:
        if line == "":
            if data:
                frames.append(SseFrame(event_id, event, "\n".join(data)))
            event_id, event, data = None, "message", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "id":
            event_id = value
        elif name == "event":
            event = value
        elif name == "data":
            data.append(value)
    return frames


def _accepts_event_stream(headers: Mapping[str, str]) -> bool:
    """Whether the client asked for an event stream by name (`Accept: text/event-stream`)."""
    for part in (_get(headers, "accept") or "").split(","):
        media, *params = (p.strip().lower() for p in part.split(";"))
        if media == "text/event-stream" and "q=0" not in params and "q=0.0" not in params:
            return True
    return False


def _origin_form(target: str) -> str:
    """An absolute-form request target (`http://host/path?q`) as its origin form."""
    if target.lower().startswith(("http://", "https://")):
        parts = urlsplit(target)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return target


# -- the server

class RefsimHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server whose every answer comes from one `SimHost`."""

    daemon_threads = True
    # socketserver's default backlog of 5 resets a burst of simultaneous clients.
    request_queue_size = socket.SOMAXCONN

    def __init__(self, address: tuple[str, int], host: SimHost, *,
                 sse_max_seconds: float = SSE_MAX_SECONDS,
                 sse_poll_seconds: float = SSE_POLL_SECONDS) -> None:
        self.sim = host
        self.sse_max_seconds = sse_max_seconds
        self.sse_poll_seconds = sse_poll_seconds
        self.stopping = threading.Event()
        # Handler failures that are bugs (not client misbehaviour), kept for tests.
        self.handler_errors: list[str] = []
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the FQDN of the address, which can stall on
        # hosts without reverse DNS; the name is only used in a CGI variable.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.address

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) where the server listens, typed for connection helpers."""
        return str(self.server_address[0]), int(self.server_address[1])

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    @property
    def open_connections(self) -> int:
        """Client connections a handler thread is still serving."""
        with self._connections_lock:
            return len(self._connections)

    def track(self, connection: socket.socket, open_: bool) -> None:
        with self._connections_lock:
            if open_:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Per-request noise stays off stderr; a real bug is kept where tests can see it.
        self.handler_errors.append(f"{client_address}: {sys.exc_info()[1]!r}"[:500])

    def server_close(self) -> None:
        """Stop live streams, end idle keep-alive connections, then join the handlers."""
        self.stopping.set()
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        super().server_close()


class _RefsimHTTPServer6(RefsimHTTPServer):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: RefsimHTTPServer
    protocol_version = "HTTP/1.1"
    server_version = f"refsim/{__version__}"
    sys_version = ""
    timeout = IDLE_TIMEOUT_SECONDS
    _answered = False  # whether a status line went out for the current request

    def setup(self) -> None:
        super().setup()
        self.server.track(self.connection, True)

    def finish(self) -> None:
        self._linger()
        self.server.track(self.connection, False)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Nothing per request on stderr."""

    def version_string(self) -> str:
        return self.server_version

    def send_response(self, code: int, message: str | None = None) -> None:
        self._answered = True
        super().send_response(code, message)

    # -- one request

    def handle_one_request(self) -> None:
        """As the stdlib does, except that every method reaches the router."""
        self._answered = False
        try:
            self.raw_requestline = self.rfile.readline(65537)
            if len(self.raw_requestline) > 65536:
                self.requestline, self.request_version, self.command = "", "", ""
                self.send_error(414)
                return
            if not self.raw_requestline:
                self.close_connection = True
                return
            if not self.parse_request():
                return
            self._serve()
            self.wfile.flush()
        except OSError:  # reset, broken pipe, timeout: the connection is over
            self.close_connection = True
        except Exception:  # a bug here, not bad input: still an envelope, and noted
            self.close_connection = True
            self.server.handle_error(self.request, self.client_address)
            if not self._answered:
                with contextlib.suppress(Exception):
                    self.send_error(500)

    def handle_expect_100(self) -> bool:
        length = self._declared_length()
        if isinstance(length, Refusal) or length > MAX_BODY_BYTES:
            return True  # answer finally, without inviting the body
        return super().handle_expect_100()

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """Parser-level errors, as registered-code envelopes (never the stdlib's HTML)."""
        refusal = _FRAMING_REFUSALS.get(int(code), _FRAMING_REFUSALS[400])
        if self.request_version in ("HTTP/0.9", ""):
            # An unparseable line is not an HTTP/0.9 request: answer with a status line.
            self.request_version = "HTTP/1.0"
        self._write(refusal_response(refusal), close=True)

    def _serve(self) -> None:
        headers = _header_dict(self.headers)
        target = _origin_form(self.path)
        body = self._read_body()
        if isinstance(body, Refusal):
            self._write(refusal_response(body), close=True)
            return
        # HEAD is GET without the body (RFC 9110 §9.3.2); `_write` leaves the body out.
        method = "GET" if self.command.upper() == "HEAD" else self.command
        response = self.server.sim.request_raw(method, target, headers=headers, body=body)
        if body is not None and len(body) > MAX_BODY_BYTES:
            self._write(response, close=True)
            return
        if self.command.upper() == "GET" and response.status == 200 and \
                (_get(response.headers, "content-type") or "").startswith("text/event-stream"):
            self._stream(target, headers, response)
            return
        self._write(response)

    # -- the body

    def _declared_length(self) -> int | Refusal:
        if self.headers.get("Transfer-Encoding") is not None:
            return validation("request bodies must be sent with Content-Length "
                              "(Transfer-Encoding is not accepted)")
        values = self.headers.get_all("Content-Length") or []
        found = {v.strip() for value in values for v in str(value).split(",")}
        if not found:
            return 0
        if len(found) != 1:
            return validation("Content-Length must be one non-negative integer")
        text = found.pop()
        if not text.isdigit() or not text.isascii() or len(text) > 18:
            return validation("Content-Length must be one non-negative integer")
        return int(text)

    def _read_body(self) -> bytes | Refusal | None:
        """The body; one longer than MAX_BODY_BYTES is not read at all (see `_linger`)."""
        length = self._declared_length()
        if isinstance(length, Refusal) or length == 0:
            return length if isinstance(length, Refusal) else None
        if length > MAX_BODY_BYTES:
            # Stands in for the unread body: the router refuses on size (413) before it
            # looks at any content, and its order of checks (version first) still holds.
            self.close_connection = True
            return bytes(MAX_BODY_BYTES + 1)
        body = self.rfile.read(length)
        if len(body) < length:
            return validation("the request body ended before Content-Length bytes")
        return body

    def _linger(self) -> None:
        """Half-close, then read and discard what the client still sends, within bounds.

        Closing a socket with unread input makes the kernel send a reset, and the client
        may then never read the answer (a 413 above all); discarding is not buffering.
        """
        with contextlib.suppress(OSError, ValueError):
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + LINGER_SECONDS
            left = LINGER_MAX_BYTES
            while left > 0 and not self.server.stopping.is_set():
                wait = deadline - time.monotonic()
                if wait <= 0:
                    break
                self.connection.settimeout(min(wait, 0.25))
                try:
                    chunk = self.connection.recv(65536)
                except TimeoutError:
                    continue
                if not chunk:
                    break
                left -= len(chunk)

    # -- the answer

    def _write(self, response: Response, *, close: bool = False) -> None:
        status = response.status
        body = b"" if status in _NO_BODY_STATUS or status < 200 else response.body
        self.send_response(status)
        names = set()
        for name, value in response.headers.items():
            if name.lower() in _FRAMING or any(c in name + value for c in "\r\n"):
                continue
            names.add(name.lower())
            self.send_header(name, value)
        if "openwop-version" not in names:
            self.send_header("OpenWOP-Version", PROTOCOL_VERSION)
        if status not in _NO_BODY_STATUS:
            self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        if body and (self.command or "").upper() != "HEAD":
            self.wfile.write(body)

    # -- server-sent events

    def _stream(self, target: str, headers: dict[str, str], first: Response) -> None:
        """Send what the router has; for an SSE client, follow a live run until it ends."""
        self.close_connection = True
        self.send_response(200)
        for name, value in first.headers.items():
            if name.lower() not in _FRAMING:
                self.send_header(name, value)
        self.send_header("Connection", "close")
        self.end_headers()
        text = first.text or ""
        self.wfile.write(text.encode("utf-8"))
        if not _accepts_event_stream(headers):
            return  # not an event-stream client: the events so far, then close
        auth = {k: v for k, v in headers.items()
                if k.lower() in ("authorization", "openwop-version")}
        segment = urlsplit(target).path.split("/")[2]
        cursor = _get(headers, "last-event-id")
        cursor, last_seq = _advance(cursor, -1, text)
        started = time.monotonic()
        quiet_since = started
        server, sim = self.server, self.server.sim
        while not server.stopping.is_set():
            # Status first, then events: a run that is terminal here has all its events.
            poll = sim.request_raw("GET", f"/runs/{segment}/events/poll?afterSequence="
                                   f"{last_seq}", headers=auth)
            if poll.status != 200 or not isinstance(poll.json, dict):
                return
            more = sim.request_raw("GET", target, headers={
                **auth, **({"Last-Event-ID": cursor} if cursor is not None else {})})
            if more.status != 200 or more.text is None:
                return
            if more.text:
                self.wfile.write(more.text.encode("utf-8"))
                cursor, last_seq = _advance(cursor, last_seq, more.text)
                quiet_since = time.monotonic()
            now = time.monotonic()
            if poll.json.get("isTerminal") is True or now - started >= server.sse_max_seconds \
                    or self._peer_gone():
                return
            if now - quiet_since >= SSE_KEEPALIVE_SECONDS:
                self.wfile.write(b": keep-alive\n\n")
                quiet_since = now
            server.stopping.wait(server.sse_poll_seconds)

    def _peer_gone(self) -> bool:
        """Whether the client has closed its end: a non-blocking peek reads end of file."""
        connection = self.connection
        try:
            connection.settimeout(0.0)
            try:
                peeked: bytes = connection.recv(1, socket.MSG_PEEK)
                return peeked == b""
            finally:
                connection.settimeout(self.timeout)
        except (BlockingIOError, InterruptedError):
            return False  # nothing to read: still there
        except OSError:
            return True


def _advance(cursor: str | None, last_seq: int, text: str) -> tuple[str | None, int]:
    for frame in parse_sse(text):
        if frame.id is not None:
            cursor = frame.id
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            seq = frame.json().get("sequence")
            if isinstance(seq, int) and not isinstance(seq, bool):
                last_seq = max(last_seq, seq)
    return cursor, last_seq


def make_server(host: SimHost, address: str = "127.0.0.1", port: int = 0, *,
                sse_max_seconds: float = SSE_MAX_SECONDS,
                sse_poll_seconds: float = SSE_POLL_SECONDS) -> RefsimHTTPServer:
    """Bind (not yet serve) an HTTP server for `host`; port 0 picks a free port."""
    cls = _RefsimHTTPServer6 if ":" in address else RefsimHTTPServer
    return cls((address, port), host, sse_max_seconds=sse_max_seconds,
               sse_poll_seconds=sse_poll_seconds)


@contextlib.contextmanager
def background(host: SimHost, address: str = "127.0.0.1", port: int = 0, *,
               sse_max_seconds: float = SSE_MAX_SECONDS) -> Iterator[RefsimHTTPServer]:
    """Serve `host` on a daemon thread for the `with` block; shut down cleanly after."""
    server = make_server(host, address, port, sse_max_seconds=sse_max_seconds)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              name=f"refsim-http-{server.server_address[1]}", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def serve_forever(host: SimHost, address: str = "127.0.0.1", port: int = 8252,
                  out: TextIO | None = None) -> int:
    """Serve until Ctrl-C (KeyboardInterrupt); print where, and each tenant's key."""
    out = out if out is not None else sys.stdout
    server = make_server(host, address, port)
    print(f"refsim: serving {host.name} at {server.url}", file=out)
    for tenant in host.core.tenants.values():
        where = f" (workspace {tenant.workspace})" if tenant.workspace else ""
        print(f"  tenant {tenant.name}{where}: Authorization: Bearer {tenant.api_key}", file=out)
    print("Press Ctrl-C to stop.", file=out, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    print("refsim: stopped serving", file=out, flush=True)
    return 0


# -- the client

class HostUnreachable(ValueError):
    """The HTTP host could not be reached: connect, send or read failed."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx is an answer to report, not a hop to take."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str,
                         headers: Any, newurl: str) -> None:
        return None


def _is_json(content_type: str | None) -> bool:
    media = (content_type or "").split(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


# Characters http.client refuses in a request target (controls, space, non-ASCII) are
# percent-encoded; everything else, existing `%XX` and `~XX` escapes included, is sent as is.
_TARGET_SAFE = "!#$%&'()*+,/:;=?@[]~"


class HttpClient:
    """A `HostClient` over HTTP (stdlib `urllib`): 4xx/5xx are answers, never exceptions.

    JSON bodies are decoded into `json` and also kept verbatim in `text`, so
    `Response.body` is the exact bytes received (what a byte-identity check needs).
    """

    def __init__(self, base_url: str, timeout: float = 10.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) base URL: {base_url!r}")
        self._base = base_url.rstrip("/")
        self.timeout = timeout
        handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
        if parts.hostname in _LOOPBACK:
            handlers.append(urllib.request.ProxyHandler({}))  # never proxy the loopback
        self._opener = urllib.request.build_opener(*handlers)

    @property
    def name(self) -> str:
        return self._base

    def __repr__(self) -> str:
        return f"HttpClient({self._base!r}, timeout={self.timeout!r})"

    def request(self, method: str, path: str, *, api_key: str | None = None,
                json: Any = NO_BODY, headers: dict[str, str] | None = None) -> Response:
        if not path.startswith("/"):
            raise ValueError(f"a request path starts with '/': {path!r}")
        all_headers = dict(headers or {})
        if api_key is not None:
            all_headers["Authorization"] = f"Bearer {api_key}"
        data: bytes | None = None
        if json is not NO_BODY:  # encoded exactly as SimHost.request does
            try:
                data = _json.dumps(json, allow_nan=False).encode("utf-8")
            except (TypeError, ValueError, RecursionError):
                data = repr(json).encode("utf-8", "replace")
            if _get(all_headers, "content-type") is None:
                all_headers["Content-Type"] = "application/json"
        url = self._base + quote(path, safe=_TARGET_SAFE)
        request = urllib.request.Request(url, data=data, headers=all_headers, method=method)
        try:
            with self._opener.open(request, timeout=self.timeout) as answer:
                return _response(answer.status, answer.headers, answer.read())
        except urllib.error.HTTPError as error:
            try:
                raw = error.read()
            except (OSError, http.client.HTTPException) as exc:
                raise _unreachable(url, exc) from exc
            finally:
                error.close()
            return _response(error.code, error.headers, raw)
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise _unreachable(url, exc) from exc


def _unreachable(url: str, exc: BaseException) -> HostUnreachable:
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    text = " ".join(f"{type(reason).__name__}: {reason}".split()) if str(reason) \
        else type(reason).__name__
    return HostUnreachable(f"cannot reach {url}: {text}")


def _response(status: int, message: Message | None, raw: bytes) -> Response:
    headers = _header_dict(message) if message is not None else {}
    text = raw.decode("utf-8", "replace") if raw else None
    if text is not None and _is_json(_get(headers, "content-type")):
        try:
            return Response(status, headers, _json.loads(text), text)
        except ValueError:
            pass
    return Response(status, headers, None, text)


if TYPE_CHECKING:
    def _is_host_client(client: HttpClient) -> HostClient:
        return client
