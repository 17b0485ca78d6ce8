"""`check --base-url` side by side: rows that do not depend on each other run at once, each
in a lane of its own tenants, so a check against a distant host takes about as long as its
longest chain of requests, not the sum of them all.

What keeps the rows apart is the host's own tenant scoping: every run, listing, suite and
live counter a row reads is its tenant's (the counter seam reads "the caller's tenant and
key K"). So each lane gets fresh tenants, minted through refsim's conformance seam
`tenants`; a host that does not advertise it is checked one row after another, as before,
and the check says why. The latency leg has the host to itself while it times: it waits
for the rows running to finish, and no row starts until it has.

Verdicts do not depend on the lanes: a row reads only what its own tenants made, and each
lane's tenants are new, where one after another they would have shared the caller's. A
fault that reaches across tenants can still show in a row another lane disturbed: every
red row is judged again alone, on the caller's tenants (`runner._again_alone`), and only
that judgement stands."""

from __future__ import annotations

import contextlib
import contextvars
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from refsim.check.findings import Row
from refsim.check.observe import (
    SEAM_TENANTS,
    TENANT_A,
    TENANT_B,
    Session,
    keys_refused,
    nonce,
)
from refsim.wire.client import HostClient

if TYPE_CHECKING:  # concurrent.futures is imported where lanes run: not for `refsim check`
    from concurrent.futures import Future
    from queue import Queue

# Lanes `check --base-url` uses unless told (`--lanes`): a check sends about 1,500
# requests, and its longest row-chain (the conformance scenario) about 280; eight lanes
# bring the rest under that chain. Each lane mints two tenants and tries their keys (a
# few requests a lane, in parallel).
DEFAULT_LANES = 8
MAX_LANES = 32


class Floor:
    """The host, as the lanes share it: any number of rows at once, or one leg alone (a
    leg asking to be alone waits for the rows running to end, and holds back new ones)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = 0
        self._alone = False
        self._waiting = 0
        self._held = threading.local()  # whether this thread is inside `shared`

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._alone and not self._waiting)
            self._busy += 1
        self._held.inside = True
        try:
            yield
        finally:
            self._held.inside = False
            with self._cond:
                self._busy -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        """Within `shared`: the host to this thread alone for the block."""
        if not getattr(self._held, "inside", False):
            raise RuntimeError("Floor.alone is asked from inside Floor.shared, once")
        self._held.inside = False  # not again inside this block
        with self._cond:
            self._busy -= 1
            self._waiting += 1
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._busy == 0 and not self._alone)
            self._waiting -= 1
            self._alone = True
        try:
            yield
        finally:
            with self._cond:
                self._alone = False
                self._busy += 1
                self._cond.notify_all()
            self._held.inside = True


# Per client: the keys its lanes minted, by a label naming each (`minted`).
_MINTED: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()


def minted(client: HostClient) -> dict[str, str]:
    """The keys lanes minted on `client`'s host, by label (`lane_0_acme`): redacted from
    the evidence and the HAR files as the caller's keys are."""
    try:
        return dict(_MINTED.get(client, {}))
    except TypeError:  # a client that cannot be weakly referred to kept none
        return {}


def remember_minted(client: HostClient, label: str, key: str) -> None:
    """A key the checker minted on `client`'s host, redacted as `$OPENWOP_KEY_<LABEL>`."""
    with contextlib.suppress(TypeError):  # a client that cannot be weakly referred to
        _MINTED.setdefault(client, {})[label] = key


def mint(client: HostClient, api_key: str, count: int, with_b: bool
         ) -> list[dict[str, str]] | str:
    """`count` lanes of fresh tenants (A, and B where `with_b`), minted through the seam
    `tenants` by the caller's key, in parallel; or why there are none (one line)."""
    session = Session(client, api_key)
    if not session.surface.offers(SEAM_TENANTS):
        return ("the host does not advertise the conformance seam tenants, through which "
                "each lane gets tenants of its own")
    run = nonce()
    labels = (TENANT_A, TENANT_B) if with_b else (TENANT_A,)

    def one(index: int) -> dict[str, str] | str:
        keys: dict[str, str] = {}
        for label in labels:
            name = f"refsim-lane-{run}-{index}-{label}"
            key = f"hk_lane_{run}_{index}_{label}"
            remember_minted(client, f"lane_{index}_{label}", key)
            r = session.add_tenant(name, key)
            if not 200 <= r.status < 300:  # as the machine takes the seam's answer
                return (f"minting a lane's tenant through the seam tenants answered "
                        f"{r.status}")
            keys[label] = key
        # Keys the host minted but will not honour, or two tenants that read each other's
        # runs, would turn every row of the lane into a failure that is no breach.
        refused = keys_refused(client, keys[TENANT_A], keys.get(TENANT_B))
        return keys if refused is None else f"a lane's minted tenants cannot drive a row: {refused}"

    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=count, thread_name_prefix="refsim-mint") as pool:
        made = [f.result() for f in [pool.submit(_in_context(one), index)
                                     for index in range(count)]]
    refused = next((m for m in made if isinstance(m, str)), None)
    return refused if refused is not None else [m for m in made if isinstance(m, dict)]


def _in_context(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, to run once on another thread in a copy of this thread's context, taken now
    (the trace that keeps every exchange, for a failed row's evidence, and its segment)."""
    context = contextvars.copy_context()

    def run(*args: Any) -> Any:
        return context.run(fn, *args)
    return run


Unit = Callable[[Mapping[str, str]], list[Row]]


class Lanes:
    """Units of rows run side by side, each in a free lane (its tenants' keys) and on the
    shared floor; results come back in the order the units were given."""

    def __init__(self, lanes: Sequence[Mapping[str, str]]) -> None:
        self.floor = Floor()
        from queue import Queue
        self._free: Queue[Mapping[str, str]] = Queue()
        for keys in lanes:
            self._free.put(keys)
        from concurrent.futures import ThreadPoolExecutor
        self._pool = ThreadPoolExecutor(max_workers=len(lanes),
                                        thread_name_prefix="refsim-lane")

    def __enter__(self) -> Lanes:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        # Stopped (Ctrl-C) or failed: what has not started is dropped, and the rows running
        # are not waited for here (they end at their row's end, as the process does).
        self._pool.shutdown(wait=kind is None, cancel_futures=True)

    def submit(self, unit: Unit) -> Future[list[Row]]:
        def run() -> list[Row]:
            keys = self._free.get()
            try:
                with self.floor.shared():
                    return unit(keys)
            finally:
                self._free.put(keys)
        return self._pool.submit(_in_context(run))

    @staticmethod
    def gather(futures: Sequence[Future[list[Row]]]) -> list[Row]:
        return [row for f in futures for row in f.result()]
