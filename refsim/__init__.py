"""refsim: an in-memory reference simulator and spec checker for OpenWOP RFC 0252."""

from __future__ import annotations

from refsim._version import __version__
from refsim.domain.profile import HostProfile
from refsim.host import SimHost
from refsim.wire.client import HostClient
from refsim.wire.response import Response

__all__ = ["HostClient", "HostProfile", "Response", "SimHost", "__version__"]
