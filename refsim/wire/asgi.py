"""The host's wire as an ASGI application: any ASGI server (uvicorn by default) can serve it.

The app only frames: every answer, refusals included, comes from a raw-request handler
(anything with `request_raw`, such as `SimHost`). Framing the server leaves to the app
(Transfer-Encoding, absolute-form targets, body size and deadline) is refused here.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from refsim._version import __version__
from refsim.domain.refusals import Refusal, validation
from refsim.wire.limits import (
    BODY_TIMEOUT_SECONDS,
    LONG_POLL_MAX_SECONDS,
    MAX_BODY_BYTES,
    MAX_HEADER_BYTES,
)
from refsim.wire.response import Response
from refsim.wire.response import header_dict as header_dict  # where it was
from refsim.wire.router import PROTOCOL_VERSION, refusal_response
from refsim.wire.sse import SseFrame as SseFrame  # where it was
from refsim.wire.sse import parse_sse as parse_sse

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

SERVER_HEADER = f"refsim/{__version__}"
SSE_MAX_SECONDS = 30.0
SSE_POLL_SECONDS = 0.05
SSE_KEEPALIVE_SECONDS = 5.0
LONG_POLL_TICK_SECONDS = 0.05
# What a client still sends of a refused body is read and thrown away before the
# connection closes, so it reads the answer instead of a reset; past these bounds the
# connection just closes.
DRAIN_MAX_BYTES = 16 * MAX_BODY_BYTES
DRAIN_SECONDS = 2.0
INLINE_BODY_BYTES = 65_536  # larger bodies are handled on a worker thread
_FRAMING = frozenset({"content-length", "connection", "transfer-encoding", "keep-alive",
                      "server", "date"})
_NO_BODY_STATUS = frozenset({204, 304})
# An absolute-form target's authority: a reg-name or IPv4 address, or an IPv6 literal in
# brackets, with an optional port (RFC 3986 §3.2); an http(s) host is never empty (RFC
# 9110 §4.2.1); anything else in it is malformed.
_AUTHORITY_RE = re.compile(
    r"(?:[^\[\]/?#@]*@)?(?:\[[0-9A-Fa-f:.]+\]|\[v[0-9A-Fa-f]+\.[^\[\]/?#]+\]|[^\[\]/?#:@]+)"
    r"(?::[0-9]*)?", re.ASCII)
_FIELD_NAME_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", re.ASCII)


@functools.lru_cache(maxsize=256)
def _header_name_ok(name: str) -> bool:
    return _FIELD_NAME_RE.fullmatch(name) is not None


class RawHandler(Protocol):
    """What the app serves: one method that answers a request given its bytes."""

    def request_raw(self, method: str, path: str, *, headers: dict[str, str] | None = None,
                    body: bytes | None = None) -> Response: ...


def _get(headers: Mapping[str, str], name: str) -> str | None:
    lower = name.lower()
    return next((v for k, v in headers.items() if k.lower() == lower), None)


def accepts_event_stream(headers: Mapping[str, str]) -> bool:
    """Whether the client asked for an event stream by name (`Accept: text/event-stream`)."""
    for part in (_get(headers, "accept") or "").split(","):
        media, *params = (p.strip().lower() for p in part.split(";"))
        if media == "text/event-stream" and "q=0" not in params and "q=0.0" not in params:
            return True
    return False


def origin_form(target: str) -> str | None:
    """An absolute-form target (`http://host/path?q`) as its origin form; None if malformed.

    Parsed by hand: `urlsplit` raises on an unbalanced `[`, which once answered 500.
    """
    lower = target[:8].lower()
    for scheme in ("http://", "https://"):
        if lower.startswith(scheme):
            rest = target[len(scheme):]
            end = len(rest)
            for mark in "/?#":
                found = rest.find(mark)
                if found != -1:
                    end = min(end, found)
            authority, tail = rest[:end], rest[end:]
            if not authority or not _AUTHORITY_RE.fullmatch(authority):
                return None
            if tail.startswith("?"):
                return "/" + tail
            return tail or "/"
    return target


def _advance(cursor: str | None, last_seq: int, text: str) -> tuple[str | None, int]:
    for frame in parse_sse(text):
        if frame.id is not None:
            cursor = frame.id
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            seq = frame.json().get("sequence")
            if isinstance(seq, int) and not isinstance(seq, bool):
                last_seq = max(last_seq, seq)
    return cursor, last_seq


class _Disconnected(Exception):
    """The client went away before its request was read."""


class WireApp:
    """ASGI 3 application over one raw-request handler.

    `stopping` (set by the server at shutdown) ends live streams and long polls;
    `handler_errors` keeps handler failures (bugs, not client misbehaviour) for tests.
    """

    def __init__(self, handler: RawHandler, *, sse_max_seconds: float = SSE_MAX_SECONDS,
                 sse_poll_seconds: float = SSE_POLL_SECONDS,
                 body_timeout: float = BODY_TIMEOUT_SECONDS) -> None:
        self.handler = handler
        self.sse_max_seconds = sse_max_seconds
        self.sse_poll_seconds = sse_poll_seconds
        self.body_timeout = body_timeout
        self.stopping = threading.Event()
        self.handler_errors: list[str] = []
        self.host_seconds = 0.0  # time spent inside the handler, all requests together
        self.host_seconds_max = 0.0  # the most one call to the handler took
        self.open_streams = 0  # live event streams being followed right now

    # -- ASGI entry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # websockets and the like: not served (the server closes them)
        await self._http(scope, receive, send)

    @staticmethod
    async def _lifespan(receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    # -- one request

    def call(self, method: str, target: str, headers: dict[str, str],
             body: bytes | None) -> Response:
        """The handler, timed; a failure is a 500 envelope and is noted."""
        started = time.perf_counter()
        try:
            return self.handler.request_raw(method, target, headers=headers, body=body)
        except Exception as exc:  # a bug in the handler, not bad input
            self.handler_errors.append(f"{method} {target[:100]}: {exc!r}"[:500])
            return refusal_response(Refusal("internal_error",
                                            "the host failed while handling the request"))
        finally:
            spent = time.perf_counter() - started
            self.host_seconds += spent
            self.host_seconds_max = max(self.host_seconds_max, spent)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        head = scope["method"] == "HEAD"
        if scope.get("http_version") not in ("1.0", "1.1"):
            await self._refuse(send, validation("this host speaks HTTP/1.0 and HTTP/1.1 only"),
                               head=head)
            return
        raw_target = (scope.get("raw_path") or scope["path"].encode("utf-8")).decode("latin-1")
        query = scope.get("query_string") or b""
        # h11 bounds a header block only while it is incomplete: one that arrives whole in
        # a single read can be larger, so the bound is checked here too.
        size = len(raw_target) + len(query) + sum(len(k) + len(v) + 4
                                                  for k, v in scope["headers"])
        if size > MAX_HEADER_BYTES:
            await self._refuse(send, validation(
                f"the request line and headers exceed {MAX_HEADER_BYTES} bytes"), head=head)
            return
        items = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        headers = header_dict(items)
        target = origin_form(raw_target + ("?" + query.decode("latin-1") if query else ""))
        if target is None:
            await self._refuse(send, validation("the request target is not a valid URI"),
                               head=head, receive=receive)
            return
        lengths = [v for k, v in items if k.lower() == "content-length"]
        if any(k.lower() == "transfer-encoding" for k, _ in items):
            message = ("Content-Length together with Transfer-Encoding is refused" if lengths
                       else "request bodies must be sent with Content-Length "
                       "(Transfer-Encoding is not accepted)")
            await self._refuse(send, validation(message), head=head)
            return
        declared = (int(lengths[0]) if lengths and lengths[0].strip().isascii()
                    and lengths[0].strip().isdigit() else 0)
        linger: Receive | None = None
        if declared > MAX_BODY_BYTES:
            expect = (_get(headers, "expect") or "").lower() == "100-continue"
            if not expect and declared <= DRAIN_MAX_BYTES:
                # The answer goes out from the header alone; the body the client sends
                # anyway is read and discarded after it (a lingering close), so that the
                # client reads the 413, not a reset.
                linger = receive
            # Stands in for the unread body: the handler refuses on size (413) after its
            # earlier checks (the protocol version) hold.
            body: bytes | None = bytes(MAX_BODY_BYTES + 1)
        else:
            try:
                body = await self._read_body(receive, declared)
            except _Disconnected:
                return
            except TimeoutError:
                await self._refuse(send, validation(
                    f"the request body did not arrive within {self.body_timeout:g} s"),
                    head=head)
                return
        # HEAD is GET without the body (RFC 9110 §9.3.2); the server leaves the body out.
        method = "GET" if head else scope["method"]
        if body is not None and len(body) > INLINE_BODY_BYTES:
            # Parsing a large body takes a while and needs no lock: on a worker thread,
            # the event loop keeps serving other connections meanwhile.
            response = await asyncio.to_thread(self.call, method, target, headers, body)
        else:
            response = self.call(method, target, headers, body)
        close = (body is not None and len(body) > MAX_BODY_BYTES) or response.status >= 500
        if method == "GET" and response.status == 200:
            content_type = response.header("content-type") or ""
            if content_type.startswith("text/event-stream"):
                await self._stream(scope, receive, send, target, headers, response)
                return
            if _is_long_poll(target, response):
                response = await self._long_poll(receive, target, headers, response)
        await self._write(send, response, close=close, head=head, linger=linger)

    async def _read_body(self, receive: Receive, declared: int) -> bytes | None:
        if declared == 0:
            return None
        chunks: list[bytes] = []
        size = 0
        deadline = time.monotonic() + self.body_timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            message = await asyncio.wait_for(receive(), left)
            if message["type"] == "http.disconnect":
                raise _Disconnected
            chunk = message.get("body", b"")
            size += len(chunk)
            chunks.append(chunk)
            if not message.get("more_body", False) or size > MAX_BODY_BYTES:
                break
        return b"".join(chunks)

    @staticmethod
    async def _drain(receive: Receive) -> None:
        """Read and discard the rest of a body, within bounds (discarding is not buffering)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DRAIN_SECONDS):
                left = DRAIN_MAX_BYTES
                while left > 0:
                    message = await receive()
                    if message["type"] != "http.request":
                        return
                    left -= len(message.get("body", b""))
                    if not message.get("more_body", False):
                        return

    async def _refuse(self, send: Send, refusal: Refusal, *, head: bool,
                      receive: Receive | None = None) -> None:
        if receive is not None:
            await self._drain(receive)
        await self._write(send, refusal_response(refusal), close=True, head=head)

    # -- the answer

    @staticmethod
    def _head(response: Response, *, close: bool, length: int | None
              ) -> list[tuple[bytes, bytes]]:
        out: list[tuple[bytes, bytes]] = []
        names = set()
        for name, value in response.headers.items():
            lower = name.lower()
            if (lower in _FRAMING or not _header_name_ok(name) or
                    not (value.isascii() and value.isprintable())):
                continue  # h11 would refuse it, and the answer would be lost
            names.add(lower)
            out.append((name.encode("latin-1"), value.encode("latin-1")))
        if "openwop-version" not in names:
            out.append((b"OpenWOP-Version", PROTOCOL_VERSION.encode()))
        out.append((b"Server", SERVER_HEADER.encode()))
        if length is not None:
            out.append((b"Content-Length", str(length).encode()))
        if close:
            out.append((b"Connection", b"close"))
        return out

    async def _write(self, send: Send, response: Response, *, close: bool = False,
                     head: bool = False, linger: Receive | None = None) -> None:
        """Send the answer. With `linger`, the whole answer is sent first (the client has
        it all, by its Content-Length) and the connection stays open while what the client
        still sends is drained, within DRAIN_SECONDS and DRAIN_MAX_BYTES."""
        status = response.status
        body = b"" if status in _NO_BODY_STATUS or status < 200 else response.body
        length = None if status in _NO_BODY_STATUS else len(body)
        await send({"type": "http.response.start", "status": status,
                    "headers": self._head(response, close=close, length=length)})
        await send({"type": "http.response.body", "body": b"" if head else body,
                    "more_body": linger is not None})
        if linger is not None:
            await self._drain(linger)
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    # -- long poll

    async def _long_poll(self, receive: Receive, target: str, headers: dict[str, str],
                         first: Response) -> Response:
        """Ask again until an event arrives, the run ends, the wait is over or the client
        leaves; the host is not held while waiting."""
        timeout = _query_int(target, "timeout")
        if timeout is None or timeout <= 0:
            return first
        deadline = time.monotonic() + min(timeout, LONG_POLL_MAX_SECONDS)
        gone = asyncio.ensure_future(_wait_disconnect(receive))
        try:
            response = first
            while _is_long_poll(target, response) and not self.stopping.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                await asyncio.wait([gone], timeout=min(LONG_POLL_TICK_SECONDS, left))
                if gone.done():
                    break
                response = self.call("GET", target, headers, None)
            return response
        finally:
            gone.cancel()

    # -- server-sent events

    async def _stream(self, scope: Scope, receive: Receive, send: Send, target: str,
                      headers: dict[str, str], first: Response) -> None:
        """Send what the handler has; for an SSE client, follow a live run until it ends."""
        await send({"type": "http.response.start", "status": 200,
                    "headers": self._head(first, close=True, length=None)})
        text = first.text or ""
        head = scope["method"] == "HEAD"
        if head or not accepts_event_stream(headers):
            await send({"type": "http.response.body", "body": b"" if head else text.encode(),
                        "more_body": False})
            return  # not an event-stream client: the events so far, then close
        self.open_streams += 1
        gone = asyncio.ensure_future(_wait_disconnect(receive))
        try:
            await send({"type": "http.response.body", "body": text.encode(), "more_body": True})
            await self._follow(send, target, headers, text, gone)
        finally:
            self.open_streams -= 1
            gone.cancel()

    async def _follow(self, send: Send, target: str, headers: dict[str, str], text: str,
                      gone: asyncio.Future[None]) -> None:
        auth = {k: v for k, v in headers.items()
                if k.lower() in ("authorization", "openwop-version")}
        path = target.split("?", 1)[0]
        segment = path.split("/")[2]
        cursor = _get(headers, "last-event-id")
        cursor, last_seq = _advance(cursor, -1, text)
        started = time.monotonic()
        quiet_since = started
        while not self.stopping.is_set() and not gone.done():
            # Status first, then events: a run terminal here has all its events.
            poll = self.call("GET", f"/runs/{segment}/events/poll?afterSequence={last_seq}"
                             "&limit=1", auth, None)
            if poll.status != 200 or not isinstance(poll.json, dict):
                break
            more = self.call("GET", target, {
                **auth, **({"Last-Event-ID": cursor} if cursor is not None else {})}, None)
            if more.status != 200 or more.text is None:
                break
            if more.text:
                await send({"type": "http.response.body", "body": more.text.encode(),
                            "more_body": True})
                cursor, last_seq = _advance(cursor, last_seq, more.text)
                quiet_since = time.monotonic()
            now = time.monotonic()
            if (poll.json.get("status") in _TERMINAL or
                    now - started >= self.sse_max_seconds):
                break
            if now - quiet_since >= SSE_KEEPALIVE_SECONDS:
                await send({"type": "http.response.body", "body": b": keep-alive\n\n",
                            "more_body": True})
                quiet_since = now
            await asyncio.wait([gone], timeout=self.sse_poll_seconds)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


_TERMINAL = frozenset({"completed", "failed", "cancelled"})


async def _wait_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _query_int(target: str, name: str) -> int | None:
    """A query parameter of ASCII digits, read as the router reads the query (a fragment
    is no part of it); None otherwise."""
    values = parse_qs(urlsplit(target).query).get(name)
    if not values or not (values[-1].isascii() and values[-1].isdigit()):
        return None
    return int(values[-1])


def _is_long_poll(target: str, response: Response) -> bool:
    """An events poll with nothing after the cursor, on a run that is not over."""
    path = target.split("?", 1)[0]
    if not path.startswith("/runs/") or not path.endswith("/events/poll"):
        return False
    doc = response.json
    return (response.status == 200 and isinstance(doc, dict) and doc.get("events") == []
        and doc.get("status") not in _TERMINAL)
