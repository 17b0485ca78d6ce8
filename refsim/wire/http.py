"""The HTTP face: the wire's ASGI app served by uvicorn, and `HttpClient` for any v2 host.

The pieces live in `asgi` (the app), `server` (uvicorn, deadlines, framing errors) and
`httpclient` (http.client); this module keeps the names the rest of refsim imports.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from refsim.wire.asgi import (
    SSE_MAX_SECONDS,
    SSE_POLL_SECONDS,
    RawHandler,
    SseFrame,
    WireApp,
    parse_sse,
)
from refsim.wire.httpclient import HostUnreachable, HttpClient
from refsim.wire.limits import HEADER_TIMEOUT_SECONDS, KEEP_ALIVE_SECONDS
from refsim.wire.server import (
    WireServer,
    make_server,
    serve_forever,
)
from refsim.wire.server import background as _background

RefsimHTTPServer = WireServer  # the name tests and older callers use

__all__ = [
    "HEADER_TIMEOUT_SECONDS",
    "KEEP_ALIVE_SECONDS",
    "SSE_MAX_SECONDS",
    "SSE_POLL_SECONDS",
    "HostUnreachable",
    "HttpClient",
    "RawHandler",
    "RefsimHTTPServer",
    "SseFrame",
    "WireApp",
    "WireServer",
    "background",
    "make_server",
    "parse_sse",
    "serve_forever",
]


@contextlib.contextmanager
def background(host: RawHandler, address: str = "127.0.0.1", port: int = 0, *,
               sse_max_seconds: float = SSE_MAX_SECONDS,
               header_timeout: float = HEADER_TIMEOUT_SECONDS,
               keep_alive: int = KEEP_ALIVE_SECONDS) -> Iterator[WireServer]:
    """Serve `host` (anything with `request_raw`) on a daemon thread for the `with` block."""
    with _background(host, address, port, sse_max_seconds=sse_max_seconds,
                     header_timeout=header_timeout, keep_alive=keep_alive) as server:
        yield server
