"""Long work as a user watches it: a progress bar on a terminal (tqdm: done, out of how
much, the rate and the time left), nothing when the output is not a terminal or with
`--quiet`, and Ctrl-C as a clean stop that keeps what was already found.

`run_all` spreads calls over processes (or runs them in this one) and returns what
finished, in order, with whether the user stopped it: worker processes ignore SIGINT (the
terminal sends it to every process of the group) and are terminated by the parent, so a
Ctrl-C prints no traceback from any of them."""

from __future__ import annotations

import queue
import signal
import sys
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, TextIO, TypeVar

T = TypeVar("T")

# The exit status of a run the user stopped with Ctrl-C (128 + SIGINT, as shells report).
EXIT_INTERRUPTED = 130


class Stopped(Exception):
    """Ctrl-C stopped long work; `partial` is what it had found by then."""

    def __init__(self, partial: Any, done: int, total: int) -> None:
        super().__init__(f"stopped after {done} of {total}")
        self.partial, self.done, self.total = partial, done, total


def on_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream: no terminal
        return False


# Where no bar is drawn and the report goes to a file or a CI log: a progress line at most
# this often, so that a long command shows it is alive without flooding the log.
LOG_EVERY_SECONDS = 2.0


class Progress:
    """A bar on `stream` (stderr by default) when it is a terminal and not `quiet`. Where
    neither `stream` nor stdout is a terminal (a file, a CI log) and not `quiet`: a line on
    stdout, flushed, as units finish, at most one every LOG_EVERY_SECONDS (none for work
    shorter than that). `total` None counts without a total (no time left)."""

    def __init__(self, total: float | None, what: str, *, unit: str = "it",
                 quiet: bool = False, stream: TextIO | None = None) -> None:
        stream = stream if stream is not None else sys.stderr
        self.shown = not quiet and on_terminal(stream)
        from tqdm import tqdm  # here: a command that draws no bar does not import it
        self._bar = tqdm(total=total, desc=what, unit=unit, file=stream, leave=False,
                         dynamic_ncols=True, disable=not self.shown)
        self.done = 0.0
        self._logged = not quiet and not self.shown and not on_terminal(sys.stdout)
        self._total, self._what = total, what
        self._last = time.monotonic()

    def advance(self, amount: float = 1, note: str | None = None) -> None:
        self.done += amount
        self._bar.update(amount)
        if note is not None:
            self._bar.set_postfix_str(note, refresh=False)
        if self._logged and amount and time.monotonic() - self._last >= LOG_EVERY_SECONDS:
            self._last = time.monotonic()
            # Past its total (fuzz's explicit programs come before the examples it
            # counts), a count says what was done, not "63 of 20".
            of = (f" of {self._total:g}" if self._total is not None
                  and self.done <= self._total else "")
            done = f"{self.done:g}" if float(self.done).is_integer() else f"{self.done:.1f}"
            print(f"progress: {done}{of} {self._what}" + (f" ({note})" if note else ""),
                  flush=True)

    def say(self, text: str, out: TextIO | None = None) -> None:
        """A line of the report while the bar is drawn: above the bar, not through it."""
        out = out if out is not None else sys.stdout
        if self.shown:
            self._bar.write(text, file=out)
        else:
            print(text, file=out, flush=True)

    def to(self, done: float, note: str | None = None) -> None:
        """Set what is done (a time-based bar: seconds elapsed of a duration)."""
        self.advance(max(0.0, done - self.done), note)

    def close(self) -> None:
        self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def ignore_interrupts() -> None:
    """In a worker process: the parent decides what a Ctrl-C stops."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


WAKE_SECONDS = 0.1  # how soon a waiting `run_all` notices Ctrl-C

Finished = tuple[int, Any, BaseException | None]


def _reports(into: queue.SimpleQueue[Finished], index: int
             ) -> tuple[Callable[[Any], None], Callable[[BaseException], None]]:
    """A pool's callbacks for call `index`: its result, or what it raised, into `into`."""
    def ok(result: Any) -> None:
        into.put((index, result, None))

    def failed(error: BaseException) -> None:
        into.put((index, None, error))
    return ok, failed


def run_all(fn: Callable[..., T], calls: Sequence[tuple[Any, ...]], *, jobs: int,
            progress: Progress | None = None,
            label: Callable[[tuple[Any, ...]], str] | None = None,
            waits: Callable[[tuple[Any, ...]], bool] | None = None,
            long: Callable[[tuple[Any, ...]], bool] | None = None
            ) -> tuple[list[T], bool]:
    """`fn(*args)` for each of `calls`, over `jobs` processes (in this one when jobs <= 1),
    advancing `progress` as each finishes. Returns the results of the calls that finished,
    in the order of `calls`, and whether Ctrl-C stopped the run before all did.

    Calls that `waits` names spend most of their time waiting, not computing (a host whose
    answers sleep by design): they run one after another in one more process, beside the
    `jobs` that take the rest, so that their waits leave no core idle. A pool of `jobs`
    alone would hold a core for each of them while it sleeps. Calls that `long` names start
    first: one of them started last would leave the other processes idle while it ends."""
    done: dict[int, T] = {}
    interrupted = False
    if jobs <= 1 or len(calls) <= 1:
        try:
            for index, args in enumerate(calls):
                done[index] = fn(*args)
                if progress is not None:
                    progress.advance(1, label(args) if label else None)
        except KeyboardInterrupt:
            interrupted = True
        return [done[i] for i in sorted(done)], interrupted
    import multiprocessing
    import multiprocessing.pool
    apart = [i for i, args in enumerate(calls) if waits is not None and waits(args)]
    rest = sorted(set(range(len(calls))) - set(apart),
                  key=lambda i: (long is None or not long(calls[i]), i))
    if not rest:  # nothing to wait beside: the waiting calls share the pool
        apart, rest = [], apart
    finished: queue.SimpleQueue[Finished] = queue.SimpleQueue()
    pools: list[multiprocessing.pool.Pool] = []
    try:  # the pools made inside: a Ctrl-C between the two still ends the first
        for indices, size in ((rest, min(jobs, len(rest))), (apart, 1)):
            if not indices:
                continue
            pools.append(pool := multiprocessing.Pool(processes=size,
                                                      initializer=ignore_interrupts))
            for index in indices:
                ok, failed = _reports(finished, index)
                pool.apply_async(fn, calls[index], callback=ok, error_callback=failed)
        while len(done) < len(calls):
            # Waited for a little at a time: Ctrl-C may reach another thread of this
            # process (tqdm's monitor, say), and a wait without a timeout would notice it
            # only when the next call finishes.
            try:
                index, result, error = finished.get(timeout=WAKE_SECONDS)
            except queue.Empty:
                continue
            if error is not None:
                raise error
            done[index] = result
            if progress is not None:
                progress.advance(1, label(calls[index]) if label else None)
    except KeyboardInterrupt:
        interrupted = True
        for pool in pools:
            pool.terminate()
    except BaseException:
        for pool in pools:
            pool.terminate()
            pool.join()
        raise
    else:
        for pool in pools:
            pool.close()
    for pool in pools:
        pool.join()
    return [done[i] for i in sorted(done)], interrupted
