"""refsim: an in-memory reference simulator and spec checker for OpenWOP RFC 0252."""

from __future__ import annotations

__version__ = "0.1.0"

from refsim.domain.profile import HostProfile
from refsim.host import SimHost
from refsim.wire.client import HostClient
from refsim.wire.response import Response

__all__ = ["HostClient", "HostProfile", "Response", "SimHost", "__version__"]
