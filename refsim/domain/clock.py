"""A logical clock: each tick is one millisecond after a fixed epoch, so logs are reproducible."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
_MILLIS = tuple(f"{m:03d}Z" for m in range(1000))


@attrs.define
class LogicalClock:
    ticks: int = 0
    # The formatted second of the last tick: a thousand ticks share it, so `strftime`
    # runs once a second of logical time rather than on every tick.
    _second: int = attrs.field(init=False, default=-1)
    _prefix: str = attrs.field(init=False, default="")

    def now(self) -> str:
        self.ticks += 1
        second, millis = divmod(self.ticks, 1000)
        if second != self._second:
            moment = EPOCH + timedelta(seconds=second)
            self._prefix = moment.strftime("%Y-%m-%dT%H:%M:%S.")
            self._second = second
        return self._prefix + _MILLIS[millis]
