"""Values the domain returns, for the wire to render as documents."""

from __future__ import annotations

import attrs

from refsim.domain.ids import RunId


@attrs.frozen
class Erasure:
    """What erasing a run's tool content reached (Security, RFC 0252)."""

    run_id: RunId
    copies_erased: int
    runs_reached: int
