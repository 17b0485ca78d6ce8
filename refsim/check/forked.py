"""Work of `check` in process done in a forked child while this process does the rest.

`check` on the built-in host is bounded and short (about 1,800 requests), and its parts
are independent where it matters: each unit (a conformance leg, an example row, an
invariant's check, a sampled class) runs on fresh hosts of its own, and a seeded host gives
the same answers whichever process asks it. So most of the example table (about half the
work) can run in a child on the second core while this process runs the table's first
rows, the invariants' checks and the sampled classes (`refsim.check.runner._in_two`; the
conformance legs run first, alone, for the latency leg times the host). The child sends
its rows and the exchanges it recorded back through a pipe; those exchanges are put where
one process would have sent them (`Trace.splice`, after the table's first rows), and the
answers every row quotes move with them (`shifted`), so a report and its evidence read as
one process's.

Used only where fork is safe and pays: Linux, no other thread running (a thread holding a
lock at the fork would leave it held in the child), and two CPUs to run on. Anywhere else,
and whenever the child does not answer whole, the work runs here, one after another: the
rows are the same, and nothing is lost.
"""

from __future__ import annotations

import marshal
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

import attrs

from refsim.check.findings import Row
from refsim.wire.trace import Exchange, current

T = TypeVar("T")


def usable() -> bool:
    """Whether a forked child can take part of the work: see the module's note."""
    if sys.platform != "linux" or not hasattr(os, "fork"):
        return False
    if threading.active_count() != 1:
        return False
    try:
        return len(os.sched_getaffinity(0)) >= 2
    except (AttributeError, OSError):
        return (os.cpu_count() or 1) >= 2


@attrs.frozen
class Sent(Generic[T]):
    """What the child did: its result, and the exchanges it recorded (as plain tuples,
    packed by `pack`), numbered from `base` + 1."""

    result: T
    packed: bytes
    base: int
    numbered: int  # how many exchanges the child numbered (its trace may keep fewer)

    @property
    def exchanges(self) -> tuple[tuple[Any, ...], ...]:
        return unpack(self.packed)


def pack(plain: tuple[tuple[Any, ...], ...]) -> bytes:
    """Exchanges as plain tuples, as bytes: by `marshal` (builtins only, and twice as quick
    both ways as pickle here: about 6 ms each way for a check's 700 exchanges), by pickle
    where a value is no builtin marshal writes."""
    try:
        return b"m" + marshal.dumps(plain)
    except ValueError:
        return b"p" + pickle.dumps(plain, protocol=pickle.HIGHEST_PROTOCOL)


def unpack(packed: bytes) -> tuple[tuple[Any, ...], ...]:
    body = memoryview(packed)[1:]
    found: tuple[tuple[Any, ...], ...] = (marshal.loads(body) if packed[:1] == b"m"
                                          else pickle.loads(body))
    return found


class Child(Generic[T]):
    """`work` started in a forked child (`start`); `wait` gives its result, or None where
    the child could not give it (the caller then does the work itself)."""

    def __init__(self, work: Callable[[], T]) -> None:
        self._work = work
        self._pid: int | None = None
        self._read: int | None = None
        self._base = 0

    def start(self) -> None:
        """Fork the child, which does the work from here (the exchanges it records are
        numbered on from the trace's latest). Ctrl-C is held back across the fork, so that
        the child never runs the parent's code and the parent always knows its child."""
        trace = current()
        self._base = trace.last if trace is not None else 0
        read, write = os.pipe()
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            pid = os.fork()
        except OSError:  # no child: `wait` says so, and the caller does the work
            os.close(read)
            os.close(write)
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            return
        if pid == 0:  # pragma: no cover - the child (coverage does not follow a fork)
            os.close(read)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            self._run_child(write)
        os.close(write)
        self._pid, self._read = pid, read
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a Ctrl-C held back lands here

    def _run_child(self, write: int) -> None:  # pragma: no cover - runs in the child
        """Do the work, send it, and leave without running anything of the parent's
        (no atexit hook, no flush of a buffer it inherited)."""
        code = 1
        try:
            result = self._work()
            trace = current()
            mine = tuple(e.plain() for e in (trace.snapshot() if trace is not None else ())
                         if e.seq > self._base)
            numbered = trace.last - self._base if trace is not None else 0
            data = pickle.dumps(Sent(result, pack(mine), self._base, numbered),
                                protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(write, "wb") as pipe:
                pipe.write(data)
            code = 0
        finally:
            os._exit(code)

    def wait(self) -> Sent[T] | None:
        """The child's result and exchanges; None when it gave none (it failed, or there
        was no child), and the work is for the caller to do. Interrupted (Ctrl-C), it ends
        the child before it lets the interruption on."""
        if self._pid is None or self._read is None:
            return None
        try:
            with os.fdopen(self._read, "rb") as pipe:
                self._read = None
                data = pipe.read()
        except BaseException:
            self.stop()
            raise
        self._reap()
        try:
            sent = pickle.loads(data) if data else None
        except Exception:  # a child that died mid-write: the work is done here instead
            return None
        return sent if isinstance(sent, Sent) else None

    def stop(self) -> None:
        """End the child (the parent was interrupted or failed)."""
        if self._pid is not None:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except OSError:
                pass
        if self._read is not None:
            os.close(self._read)
            self._read = None
        self._reap()

    def _reap(self) -> None:
        if self._pid is not None:
            try:
                os.waitpid(self._pid, 0)
            except ChildProcessError:
                pass
            self._pid = None


def adopt(sent: Sent[Any], after: int | None = None) -> int:
    """The child's exchanges put into this process's recording trace right after exchange
    `after` (the one it forked at when not given: where one process would have sent them,
    after what this process sent first in its stead); returns how far this process's later
    exchanges moved (what the answers their rows quote must move by: `shifted`). The
    child's own rows move by `after` less the exchange it forked at."""
    trace = current()
    if trace is None:
        return 0
    return trace.splice(sent.base, [Exchange.of_plain(e) for e in sent.exchanges], after,
                        sent.numbered)


def shifted(row: Row, by: int) -> Row:
    """`row` with the exchanges its findings quote moved up `by`."""
    if by == 0:
        return row
    return attrs.evolve(row, findings=tuple(
        attrs.evolve(f, observation=_moved(f.observation, by)) for f in row.findings))


def shifted_all(rows: Mapping[str, Row], by: int) -> dict[str, Row]:
    return {key: shifted(row, by) for key, row in rows.items()}


def _moved(value: Any, by: int) -> Any:
    """An observation with each quoted answer's exchange number moved up `by` (an answer's
    body is the host's, never walked)."""
    if isinstance(value, dict):
        if "status" in value and "body" in value:
            number = value.get("exchange")
            return ({**value, "exchange": number + by} if isinstance(number, int)
                    else value)
        return {k: _moved(v, by) for k, v in value.items()}
    if isinstance(value, list):
        return [_moved(v, by) for v in value]
    if isinstance(value, tuple):
        return tuple(_moved(v, by) for v in value)
    return value

