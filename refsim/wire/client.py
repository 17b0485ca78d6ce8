"""The `HostClient` protocol: what the checker and the machine need from any host."""

from __future__ import annotations

from typing import Any, Protocol

from refsim.wire.response import Response

NO_BODY: Any = object()


class HostClient(Protocol):
    """Anything that answers v2 requests: `SimHost` in process, or an HTTP client."""

    @property
    def name(self) -> str:
        """A short label for reports: the profile, or the base URL."""
        ...

    def request(self, method: str, path: str, *, api_key: str | None = None,
                json: Any = NO_BODY, headers: dict[str, str] | None = None) -> Response: ...
