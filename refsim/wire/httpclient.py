"""`HttpClient`: a `HostClient` for any v2 host over HTTP, on httpx (pooled keep-alive)."""

from __future__ import annotations

import json as _json
import threading
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote, urlsplit

import httpx

from refsim._version import __version__
from refsim.wire.asgi import header_dict
from refsim.wire.client import NO_BODY
from refsim.wire.response import Response

if TYPE_CHECKING:
    from refsim.wire.client import HostClient

# Characters a request target cannot carry as they are (controls, space, non-ASCII) are
# percent-encoded; everything else, existing `%XX` and `~XX` escapes included, is sent as is.
_TARGET_SAFE = "!#$%&'()*+,/:;=?@[]~"
MAX_CONNECTIONS = 32


class HostUnreachable(ValueError):
    """The HTTP host could not be reached: connect, send or read failed."""


def _is_json(content_type: str | None) -> bool:
    media = (content_type or "").split(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _get(headers: dict[str, str], name: str) -> str | None:
    lower = name.lower()
    return next((v for k, v in headers.items() if k.lower() == lower), None)


class HttpClient:
    """A `HostClient` over HTTP: 4xx/5xx are answers, never exceptions; 3xx are not followed.

    JSON bodies are decoded into `json` and also kept verbatim in `text`, so
    `Response.body` is the exact bytes received (what a byte-identity check needs).
    Connections are pooled and kept alive; the environment's proxies are never used.
    """

    # Requests sent by every HttpClient of this process (what `refsim fuzz` reports as
    # sent over HTTP: the machine's own, and its seam reads, polls and discovery).
    sent: ClassVar[int] = 0
    _sent_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, base_url: str, timeout: float = 10.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) base URL: {base_url!r}")
        self._base = base_url.rstrip("/")
        self.timeout = timeout
        self._local = threading.local()
        self._clients: list[httpx.Client] = []
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._base

    def __repr__(self) -> str:
        return f"HttpClient({self._base!r}, timeout={self.timeout!r})"

    def _client(self) -> httpx.Client:
        client: httpx.Client | None = getattr(self._local, "client", None)
        if client is None:
            client = httpx.Client(
                timeout=httpx.Timeout(self.timeout), follow_redirects=False, trust_env=False,
                limits=httpx.Limits(max_connections=MAX_CONNECTIONS,
                                    max_keepalive_connections=MAX_CONNECTIONS),
                headers={"User-Agent": f"refsim/{__version__}", "Accept-Encoding": "identity"})
            self._local.client = client
            with self._lock:
                self._clients.append(client)
        return client

    def close(self) -> None:
        """Close the pooled connections (they also close when the client is collected)."""
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()
        self._local = threading.local()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, *, api_key: str | None = None,
                json: Any = NO_BODY, headers: dict[str, str] | None = None) -> Response:
        if not path.startswith("/"):
            raise ValueError(f"a request path starts with '/': {path!r}")
        with HttpClient._sent_lock:
            HttpClient.sent += 1
        # Whitespace around a field value is not part of it (RFC 9110 §5.5), and h11
        # refuses to send it.
        all_headers = {k: v.strip(" \t") for k, v in (headers or {}).items()}
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
        target = quote(path, safe=_TARGET_SAFE)
        url = self._base + target
        client = self._client()
        try:
            # httpx normalises `.` and `..` segments; the host must see the path as asked,
            # so the request target goes to httpcore as is.
            raw_target = (urlsplit(self._base).path.rstrip("/") + target).encode("ascii")
            request = client.build_request(method, url, content=data, headers=all_headers,
                                           extensions={"target": raw_target})
            try:
                answer = client.send(request)
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                # A pooled connection the host closed as idle just as it was reused: a
                # GET or HEAD is asked once more, on a new connection.
                if method.upper() not in ("GET", "HEAD"):
                    raise
                answer = client.send(request)
        except (httpx.TransportError, httpx.InvalidURL, httpx.UnsupportedProtocol,
                OSError) as exc:
            raise _unreachable(url, exc) from exc
        return _response(answer.status_code, header_dict(answer.headers.multi_items()),
                         answer.content)


def _unreachable(url: str, exc: BaseException) -> HostUnreachable:
    reason = exc.__cause__ or exc.__context__ or exc if not str(exc) else exc
    text = " ".join(f"{type(reason).__name__}: {reason}".split()) if str(reason) \
        else type(reason).__name__
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
