"""Every exchange a client sends, kept while a `Trace` is recording: the request as sent
(method, URL, headers, body) and its answer, with when it started and how long it took.

`HttpClient` and `SimHost` file each request in the recording trace of the current context
(`recording`), under the current segment label (`segment`: a row's check id, a machine
step). With no trace recording, a request costs one context-variable read more. A trace
keeps at most `MAX_KEPT` exchanges, the oldest going first.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import attrs

from refsim.wire.response import Response

MAX_KEPT = 20_000
# Characters a request target cannot carry as they are (controls, space, non-ASCII) are
# percent-encoded; everything else, existing `%XX` and `~XX` escapes included, is sent as is.
_TARGET_SAFE = "!#$%&'()*+,/:;=?@[]~"
# Where an in-process host's exchanges are said to go: a name that resolves nowhere.
IN_PROCESS_BASE = "http://refsim.invalid"


@attrs.frozen
class Exchange:
    seq: int
    segment: str
    started: float  # seconds since the epoch
    elapsed: float  # seconds
    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    body: bytes | None
    response: Response

    def plain(self) -> tuple[Any, ...]:
        """The exchange as builtins alone (cheap to send to another process), the answer's
        bytes as they came."""
        r = self.response
        return (self.seq, self.segment, self.started, self.elapsed, self.method, self.url,
                self.headers, self.body, r.status, r.headers, r.json, r.text, r.body)

    @staticmethod
    def of_plain(plain: Sequence[Any]) -> Exchange:
        (seq, label, started, elapsed, method, url, headers, body, status, response_headers,
         document, text, sent) = plain
        response = Response(status, response_headers, document, text)
        object.__setattr__(response, "_body", sent)  # the bytes it came as, not re-encoded
        return Exchange(seq, label, started, elapsed, method, url, headers, body, response)

    def request_json(self) -> Any:
        if self.body is None:
            return None
        try:
            return json.loads(self.body)
        except ValueError:
            return None


class Trace:
    def __init__(self, limit: int = MAX_KEPT) -> None:
        self.exchanges: deque[Exchange] = deque(maxlen=limit)
        self._seq = 0
        # The answers kept, by identity: which exchange a judge's observation quotes.
        self._answers: dict[int, int] = {}
        self._lock = threading.Lock()  # rows in lanes add from several threads

    def add(self, started: float, elapsed: float, method: str, url: str,
            headers: Mapping[str, str], body: bytes | None, response: Response) -> None:
        with self._lock:
            self._seq += 1
            if len(self.exchanges) == self.exchanges.maxlen:
                self._answers.pop(id(self.exchanges[0].response), None)
            self.exchanges.append(Exchange(self._seq, _SEGMENT.get(), started, elapsed,
                                           method, url, tuple(headers.items()), body,
                                           response))
            self._answers[id(response)] = self._seq

    def seq_of(self, response: Response) -> int | None:
        """The exchange that got `response`, where this trace kept it."""
        return self._answers.get(id(response))

    def snapshot(self) -> list[Exchange]:
        """The exchanges kept, in the order they were sent, as of now (rows in lanes may
        still be adding)."""
        with self._lock:
            return list(self.exchanges)

    def of(self, label: str) -> list[Exchange]:
        """The exchanges filed under `label`, in the order they were sent."""
        return [e for e in self.snapshot() if e.segment == label]

    def drop(self, labels: set[str]) -> None:
        """Forget the exchanges filed under `labels` (a row judged again replaces them)."""
        with self._lock:
            kept = [e for e in self.exchanges if e.segment not in labels]
            for e in self.exchanges:
                if e.segment in labels:
                    self._answers.pop(id(e.response), None)
            self.exchanges.clear()
            self.exchanges.extend(kept)

    def splice(self, base: int, inserted: Sequence[Exchange], after: int | None = None,
               numbered: int | None = None) -> int:
        """Put `inserted` (exchanges numbered from `base` + 1, recorded in another process
        that began from this trace's exchange `base`) right after exchange `after` (`base`
        when not given, never before it); they are numbered on from `after`, and those this
        trace numbered after it move up by as many: the numbering one process would have
        given them all, sending `inserted` then. Returns that shift: `numbered`, how many
        exchanges the other process numbered (more than `inserted` where its trace let
        the oldest go), else as many as `inserted`."""
        at = base if after is None else max(after, base)
        with self._lock:
            shift, moved = len(inserted) if numbered is None else numbered, at - base
            earlier = [e for e in self.exchanges if e.seq <= at]
            later = [attrs.evolve(e, seq=e.seq + shift) for e in self.exchanges
                     if e.seq > at]
            put = [attrs.evolve(e, seq=e.seq + moved) if moved else e for e in inserted]
            self.exchanges.clear()
            self.exchanges.extend([*earlier, *put, *later])
            self._seq += shift
            self._answers = {id(e.response): e.seq for e in self.exchanges}
            return shift

    @property
    def last(self) -> int:
        """The number the latest exchange got (0 before any)."""
        return self._seq

    def clear(self) -> None:
        self.exchanges.clear()
        self._answers.clear()


_TRACE: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("refsim_trace",
                                                                      default=None)
_SEGMENT: contextvars.ContextVar[str] = contextvars.ContextVar("refsim_segment", default="")


def current() -> Trace | None:
    return _TRACE.get()


def quoted(response: Response) -> int | None:
    """The exchange of the recording trace that got `response` (None when no trace is
    recording, or it did not keep it): what a judge's observation names as its source."""
    trace = _TRACE.get()
    return None if trace is None else trace.seq_of(response)


@contextlib.contextmanager
def recording(trace: Trace) -> Iterator[Trace]:
    """Every request sent inside is kept in `trace`."""
    token = _TRACE.set(trace)
    try:
        yield trace
    finally:
        _TRACE.reset(token)


@contextlib.contextmanager
def segment(label: str) -> Iterator[None]:
    """Every exchange sent inside is filed under `label`."""
    token = _SEGMENT.set(label)
    try:
        yield
    finally:
        _SEGMENT.reset(token)


def mark(label: str) -> None:
    """File the exchanges from here on under `label` (until the next mark, or the end of
    the enclosing `segment`)."""
    _SEGMENT.set(label)


def request_target(path: str) -> str:
    """A path as the request target sends it (percent-encoded where it must be). Here, not
    in the HTTP client, so that an in-process host files its exchanges without importing
    http.client and ssl (most of a local check's start-up)."""
    return quote(path, safe=_TARGET_SAFE)


def clock() -> tuple[float, float]:
    return time.time(), time.perf_counter()


def since(started: tuple[float, float]) -> float:
    return time.perf_counter() - started[1]


__all__ = ["IN_PROCESS_BASE", "Exchange", "Trace", "clock", "current", "mark", "quoted",
           "recording", "request_target", "segment", "since"]
