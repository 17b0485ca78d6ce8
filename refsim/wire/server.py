"""uvicorn (its h11 protocol) serving `WireApp`: deadlines, limits and framing errors.

uvicorn and h11 frame the bytes; this module adds what they leave open: a deadline for a
request's header (uvicorn only times idle keep-alive connections), framing errors as
registered-code envelopes instead of plain text, and a half-closed client still getting
its answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TextIO

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from refsim.domain.refusals import validation
from refsim.wire.asgi import (
    SSE_MAX_SECONDS,
    SSE_POLL_SECONDS,
    RawHandler,
    WireApp,
)
from refsim.wire.limits import (
    BODY_TIMEOUT_SECONDS,
    HEADER_TIMEOUT_SECONDS,
    KEEP_ALIVE_SECONDS,
    MAX_HEADER_BYTES,
)
from refsim.wire.router import refusal_response

GRACEFUL_SHUTDOWN_SECONDS = 3
SHUTDOWN_POLL_SECONDS = 0.005  # how often a shutdown looks whether its connections are gone
BACKLOG = 2048


def _framing_error_body(message: str) -> tuple[list[tuple[bytes, bytes]], bytes]:
    response = refusal_response(validation(message))
    body = response.body
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers.items()]
    headers += [(b"Content-Length", str(len(body)).encode()), (b"Connection", b"close")]
    return headers, body


class RefsimH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline and envelopes for framing errors."""

    header_timeout: float = HEADER_TIMEOUT_SECONDS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # asyncio sets TCP_NODELAY only on sockets made with proto IPPROTO_TCP, which a
        # socket from socket.create_server is not; without it, h11's separate writes of
        # head and body wait ~40 ms for a delayed ACK on every keep-alive request.
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._arm_header_deadline()

    def _arm_header_deadline(self) -> None:
        self._disarm_header_deadline()
        self._header_timer = self.loop.call_later(self.header_timeout, self._header_expired)

    def _disarm_header_deadline(self) -> None:
        timer = getattr(self, "_header_timer", None)
        if timer is not None:
            timer.cancel()
            self._header_timer = None

    def _header_expired(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request is being served: its header arrived in time
        with contextlib.suppress(h11.LocalProtocolError):
            self.conn.send(h11.ConnectionClosed())
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not before:
            self._disarm_header_deadline()  # a new request's header is complete

    def data_received(self, data: bytes) -> None:
        # Between requests uvicorn's keep-alive timer ends an idle connection, and it
        # cancels that timer on the first byte; the header deadline starts there.
        if (getattr(self, "_header_timer", None) is None and
                (self.cycle is None or self.cycle.response_complete)):
            self._arm_header_deadline()
        super().data_received(data)

    def eof_received(self) -> bool | None:  # type: ignore[override]
        """A client that half-closes still gets its answer; a body cut short gets 400."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            return None  # idle: close
        if self.conn.their_state is h11.SEND_BODY:
            self.conn.receive_data(b"")
            self.handle_events()  # h11 refuses the short body; send_400_response answers
            return True
        if cycle.response_started:  # a live stream: the client has gone
            cycle.disconnected = True
            cycle.message_event.set()
            return None
        cycle.keep_alive = False  # answer, then close
        return True

    def send_400_response(self, msg: str) -> None:
        incomplete = (len(self.conn.trailing_data[0]) >=
            (self.config.h11_max_incomplete_event_size or MAX_HEADER_BYTES))
        message = (f"the request line and headers exceed {MAX_HEADER_BYTES} bytes" if incomplete
                   else "the request line or headers are not valid HTTP/1.1")
        headers, body = _framing_error_body(message)
        with contextlib.suppress(h11.LocalProtocolError):
            self.transport.write(self.conn.send(h11.Response(
                status_code=400, headers=headers, reason=b"Bad Request")))
            self.transport.write(self.conn.send(h11.Data(data=body)))
            self.transport.write(self.conn.send(h11.EndOfMessage()))
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.response_started = self.cycle.response_complete = True
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        self.transport.close()


def _protocol_class(header_timeout: float) -> type[RefsimH11Protocol]:
    return type("RefsimH11ProtocolT", (RefsimH11Protocol,), {"header_timeout": header_timeout})


class _Uvicorn(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, app: WireApp) -> None:
        super().__init__(config)
        self.app = app
        self._loop: asyncio.AbstractEventLoop | None = None
        self._woken: asyncio.Event | None = None
        self._wake_lock = threading.Lock()

    async def main_loop(self) -> None:
        """uvicorn's loop, which notices `should_exit` at its next tick (a tenth of a
        second), raced against `wake()`, so a shutdown asked from another thread starts
        at once. A signal still ends it at the tick, as in uvicorn."""
        with self._wake_lock:
            self._loop, self._woken = asyncio.get_running_loop(), asyncio.Event()
        ticking = asyncio.ensure_future(super().main_loop())
        woken = asyncio.ensure_future(self._woken.wait())
        try:
            await asyncio.wait({ticking, woken}, return_when=asyncio.FIRST_COMPLETED)
        finally:  # this task cancelled too: neither helper outlives it
            ticking.cancel()
            woken.cancel()
        # Their ends: a cancellation of theirs is the race's, not this task's (one of this
        # task's own propagates from the await); an error of uvicorn's loop is raised.
        for outcome in await asyncio.gather(ticking, woken, return_exceptions=True):
            if isinstance(outcome, Exception):
                raise outcome

    def wake(self) -> None:
        """Ask the serving loop to shut down now (`should_exit` first), from any thread."""
        self.should_exit = True
        with self._wake_lock:
            loop, woken = self._loop, self._woken
        if loop is not None and woken is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing to wake
                loop.call_soon_threadsafe(woken.set)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's graceful shutdown, polled every `SHUTDOWN_POLL_SECONDS` where uvicorn
        waits a tenth of a second after asking its connections to close and then a tenth
        at a time for them to go: a served host that closes when its client is done (a
        kill or pass matrix column, a test) ended 0.1 s later than it could, 200 times a
        `refsim mutants`. The same steps and bounds otherwise: stop accepting, ask every
        connection to finish, wait for them and the tasks within the graceful timeout,
        then cancel what is left."""
        self.app.stopping.set()  # live streams and long polls end first
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        try:
            async with asyncio.timeout(self.config.timeout_graceful_shutdown):
                while self.server_state.connections and not self.force_exit:
                    await asyncio.sleep(SHUTDOWN_POLL_SECONDS)
                while self.server_state.tasks and not self.force_exit:
                    await asyncio.sleep(SHUTDOWN_POLL_SECONDS)
                for server in self.servers:
                    await server.wait_closed()
        except TimeoutError:
            for task in self.server_state.tasks:
                task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
        if not self.force_exit:
            await self.lifespan.shutdown()


class WireServer:
    """A bound socket and the uvicorn server that will serve `WireApp` on it."""

    def __init__(self, handler: RawHandler, address: str = "127.0.0.1", port: int = 0, *,
                 sse_max_seconds: float = SSE_MAX_SECONDS,
                 sse_poll_seconds: float = SSE_POLL_SECONDS,
                 header_timeout: float = HEADER_TIMEOUT_SECONDS,
                 keep_alive: int = KEEP_ALIVE_SECONDS,
                 body_timeout: float = BODY_TIMEOUT_SECONDS,
                 app: Any = None, wrap_app: Any = None) -> None:
        self.app = WireApp(handler, sse_max_seconds=sse_max_seconds,
                           sse_poll_seconds=sse_poll_seconds, body_timeout=body_timeout)
        if wrap_app is not None:  # ASGI middleware around the app (framing variants)
            app = wrap_app(self.app)
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self.socket = socket.create_server((address, port), family=family, backlog=BACKLOG)
        self.socket.setblocking(False)
        config = uvicorn.Config(
            app if app is not None else self.app, http=_protocol_class(header_timeout),
            lifespan="off", log_config=None, log_level="critical", access_log=False,
            server_header=False, timeout_keep_alive=keep_alive,
            h11_max_incomplete_event_size=MAX_HEADER_BYTES, backlog=BACKLOG,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS, ws="none")
        self.server = _Uvicorn(config, self.app)

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) where the server listens."""
        name = self.socket.getsockname()
        return str(name[0]), int(name[1])

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    @property
    def handler_errors(self) -> list[str]:
        return self.app.handler_errors

    @property
    def open_connections(self) -> int:
        """Client connections open now, idle keep-alive ones included."""
        return len(self.server.server_state.connections)

    @property
    def open_streams(self) -> int:
        """Live event streams the server is following now."""
        return self.app.open_streams

    def serve_forever(self) -> None:
        """Serve until `shutdown()` (or SIGINT/SIGTERM in the main thread)."""
        logging.getLogger("uvicorn.error").propagate = False
        self.server.run(sockets=[self.socket])

    def shutdown(self) -> None:
        self.app.stopping.set()
        self.server.wake()

    def server_close(self) -> None:
        with contextlib.suppress(OSError):
            self.socket.close()


def make_server(handler: RawHandler, address: str = "127.0.0.1", port: int = 0,
                **options: Any) -> WireServer:
    """Bind (not yet serve) an HTTP server for `handler`; port 0 picks a free port."""
    return WireServer(handler, address, port, **options)


def delayed(seconds: float) -> Callable[[Any], Any]:
    """An ASGI middleware (for `wrap_app`) under which every answer waits `seconds` first,
    as a host that far away would, without holding up the others in the meantime."""
    def wrap(app: Any) -> Any:
        async def later(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                await asyncio.sleep(seconds)
            await app(scope, receive, send)
        return later
    return wrap


@contextlib.contextmanager
def background(handler: RawHandler, address: str = "127.0.0.1", port: int = 0,
               **options: Any) -> Iterator[WireServer]:
    """Serve `handler` on a daemon thread for the `with` block; shut down cleanly after."""
    server = make_server(handler, address, port, **options)
    thread = threading.Thread(target=server.serve_forever, daemon=True,
                              name=f"refsim-http-{server.address[1]}")
    thread.start()
    deadline = time.monotonic() + 10
    while not server.server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.005)
    try:
        yield server
    finally:
        server.shutdown()
        thread.join(timeout=15)
        server.server_close()


def serve_forever(handler: RawHandler, address: str = "127.0.0.1", port: int = 8252, *,
                  name: str = "refsim", lines: Sequence[str] = (),
                  out: TextIO | None = None,
                  on_ready: Callable[[WireServer], None] | None = None,
                  **options: Any) -> int:
    """Serve until Ctrl-C or SIGTERM; print where, then `lines` (say, each tenant's key)."""
    out = out if out is not None else sys.stdout
    server = make_server(handler, address, port, **options)
    print(f"refsim: serving {name} at {server.url}", file=out)
    for line in lines:
        print(line, file=out)
    print("Press Ctrl-C to stop.", file=out, flush=True)
    if on_ready is not None:
        on_ready(server)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    print("refsim: stopped serving", file=out, flush=True)
    return 0
