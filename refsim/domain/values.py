"""Values the domain returns where a wire document used to be built inside it."""

from __future__ import annotations

import attrs

from refsim.domain.ids import RunId


@attrs.frozen
class Erasure:
    """What erasing a run's tool content reached (Security, RFC 0252)."""

    run_id: RunId
    copies_erased: int
    runs_reached: int
