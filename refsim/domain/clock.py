"""A logical clock: each tick is one millisecond after a fixed epoch, so logs are reproducible."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


@attrs.define
class LogicalClock:
    ticks: int = 0

    def now(self) -> str:
        self.ticks += 1
        moment = EPOCH + timedelta(milliseconds=self.ticks)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
