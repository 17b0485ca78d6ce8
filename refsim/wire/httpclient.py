"""`HttpClient`: a `HostClient` for any v2 host over HTTP, on the standard library's
`http.client` (one kept-alive connection per thread)."""

from __future__ import annotations

import http.client
import json as _json
import select
import ssl
import threading
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from refsim._version import __version__
from refsim.wire.client import NO_BODY
from refsim.wire.client import HostUnreachable as HostUnreachable  # where it was
from refsim.wire.response import Response, header_dict
from refsim.wire.trace import clock, current, request_target, since

if TYPE_CHECKING:
    from refsim.wire.client import HostClient

# Failures of a kept-alive connection the host closed as idle just as it was reused: a GET
# or HEAD is asked once more, on a new connection.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
          ConnectionAbortedError)


class _FinalResponse(http.client.HTTPResponse):
    """Passes over every interim (1xx) answer before the final one, not only 100 Continue
    (all `http.client` skips): a client must parse 1xx answers it did not ask for (RFC 9110
    §15.2), such as 103 Early Hints."""

    def _read_status(self) -> tuple[str, int, str]:
        version, status, reason = super()._read_status()  # type: ignore[misc]
        if 100 < status < 200 and status != 101:  # 101 switches protocols: never asked for
            return version, http.client.CONTINUE, reason
        return version, status, reason


def _closed_by_peer(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle kept-alive connection is readable: the host closed it (a server may
    close one at any time, RFC 9112 §9.5) or sent what no request asked for. Either way it
    is not reused: a POST sent on it could not safely be sent again."""
    sock = conn.sock
    if sock is None:
        return False
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _is_json(content_type: str | None) -> bool:
    media = (content_type or "").split(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _get(headers: dict[str, str], name: str) -> str | None:
    lower = name.lower()
    return next((v for k, v in headers.items() if k.lower() == lower), None)


class HttpClient:
    """A `HostClient` over HTTP: 4xx/5xx are answers, never exceptions; 3xx are not followed.

    JSON bodies are decoded into `json` and also kept verbatim in `text`, so
    `Response.body` is the exact bytes received (what a byte-identity check needs). The
    request target is sent as asked (no `.` or `..` segment is resolved). Each thread keeps
    one connection alive; the environment's proxies are never used; `timeout` bounds each
    connect, send and read.

    On `http.client`, not httpx: the fuzzer sends thousands of requests a minute, and
    httpx spent about 1 ms of the client's CPU on each of them here, `http.client` 0.3 ms
    (its framing, keep-alive, chunked bodies and TLS are the standard library's own).
    """

    # Requests sent by every HttpClient of this process (what `refsim fuzz` reports as
    # sent over HTTP: the machine's own, and its seam reads, polls and discovery).
    sent: ClassVar[int] = 0
    _sent_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, base_url: str, timeout: float = 10.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) base URL: {base_url!r}")
        try:
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"not an http(s) base URL: {base_url!r} ({exc})") from None
        self._base = base_url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host: str = parts.hostname
        self._port = port
        self._prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self._local = threading.local()
        self._connections: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._base

    def __repr__(self) -> str:
        return f"HttpClient({self._base!r}, timeout={self.timeout!r})"

    def _connection(self, fresh: bool = False) -> http.client.HTTPConnection:
        """This thread's connection; `fresh`: a new one, the old closed and dropped (a
        request that failed half-way leaves header lines buffered in its connection, which
        `close()` keeps and the next request would send first)."""
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None and (fresh or _closed_by_peer(conn)):
            conn.close()
            with self._lock:
                self._connections.remove(conn)
            conn = None
        if conn is None:
            conn = (http.client.HTTPSConnection(
                self._host, self._port, timeout=self.timeout,
                context=ssl.create_default_context()) if self._https else
                http.client.HTTPConnection(self._host, self._port, timeout=self.timeout))
            conn.response_class = _FinalResponse
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def close(self) -> None:
        """Close the kept-alive connections (they also close when the client is collected)."""
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
        self._local = threading.local()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        return self._base

    def request(self, method: str, path: str, *, api_key: str | None = None,
                json: Any = NO_BODY, headers: dict[str, str] | None = None) -> Response:
        if not path.startswith("/"):
            raise ValueError(f"a request path starts with '/': {path!r}")
        with HttpClient._sent_lock:
            HttpClient.sent += 1
        # Whitespace around a field value is not part of it (RFC 9110 §5.5).
        all_headers = {"User-Agent": f"refsim/{__version__}", "Accept-Encoding": "identity"}
        for name, value in (headers or {}).items():
            for known in [k for k in all_headers if k.lower() == name.lower()]:
                del all_headers[known]
            all_headers[name] = value.strip(" \t")
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
        target = request_target(path)
        url = self._base + target
        trace = current()
        started = clock() if trace is not None else (0.0, 0.0)
        try:
            try:
                answer = self._exchange(method, self._prefix + target, data, all_headers)
            except _STALE:
                if method.upper() not in ("GET", "HEAD"):
                    raise
                answer = self._exchange(method, self._prefix + target, data, all_headers,
                                        fresh=True)
        except (http.client.HTTPException, OSError, ValueError) as exc:
            self._connection(fresh=True)  # whatever was half-read is not read again
            raise _unreachable(url, exc) from exc
        if trace is not None:
            trace.add(started[0], since(started), method, url, all_headers, data, answer)
        return answer

    def _exchange(self, method: str, target: str, data: bytes | None,
                  headers: dict[str, str], fresh: bool = False) -> Response:
        conn = self._connection(fresh)
        conn.request(method, target, body=data, headers=headers)
        answer = conn.getresponse()
        body = answer.read()
        return _response(answer.status, header_dict(answer.getheaders()), body)


def _unreachable(url: str, exc: BaseException) -> HostUnreachable:
    reason = exc.__cause__ or exc.__context__ or exc if not str(exc) else exc
    text = (" ".join(f"{type(reason).__name__}: {reason}".split()) if str(reason)
        else type(reason).__name__)
    lost = (http.client.RemoteDisconnected, http.client.ImproperConnectionState)
    if isinstance(exc, http.client.HTTPException) and not isinstance(exc, lost):
        # It answered, but not in a form read here (http.client's limits: 100 header
        # fields, 65,536 bytes a line).
        return HostUnreachable(f"the answer from {url} could not be read: {text}")
    return HostUnreachable(f"cannot reach {url}: {text}")


def _response(status: int, headers: dict[str, str], raw: bytes) -> Response:
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
