"""A logical clock: each tick is one millisecond after a fixed epoch, so logs are reproducible."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
_MILLIS = tuple(f"{m:03d}Z" for m in range(1000))
# The formatted second of each tick's second: a thousand ticks share one, so `strftime`
# runs once a second of logical time rather than on every stamp (bounded).
_SECONDS: dict[int, str] = {}
_SECONDS_MAX = 4096


def stamp(ticks: int) -> str:
    """The RFC 3339 time of a tick, to the millisecond."""
    second, millis = divmod(ticks, 1000)
    prefix = _SECONDS.get(second)
    if prefix is None:
        if len(_SECONDS) >= _SECONDS_MAX:
            _SECONDS.clear()
        prefix = (EPOCH + timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%S.")
        _SECONDS[second] = prefix
    return prefix + _MILLIS[millis]


@attrs.define
class LogicalClock:
    ticks: int = 0

    def tick(self) -> int:
        """The next tick: what an event keeps, as its time is read far less often than made."""
        self.ticks += 1
        return self.ticks

    def now(self) -> str:
        return stamp(self.tick())
