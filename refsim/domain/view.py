"""What the §C/§D strategies may read of a host: a narrow view, not the core itself, so
`refsim.domain.recorded` needs nothing from `refsim.domain.core` (no back-arrow)."""

from __future__ import annotations

from typing import Any, Protocol

from refsim.domain.ids import RunId
from refsim.domain.owners import Tenant
from refsim.domain.profile import HostProfile
from refsim.domain.runs import RunRecord
from refsim.domain.tools import ToolGateway


class HostView(Protocol):
    """The host state a source policy, deriver or faulty twin of one may read."""

    runs: dict[RunId, RunRecord]
    # How often each source id was resolved: a fork must never add to it (§E).
    resolutions: dict[RunId, int]
    # How often the host derived entries from each source run (§E: a fork never does).
    derivations: dict[RunId, int]
    profile: HostProfile
    tenants: dict[str, Tenant]
    gateway: ToolGateway
    copies: Any  # a refsim.domain.recorded.CopyStore
    components: Any  # the host's refsim.domain.core.Components
