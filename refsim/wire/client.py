"""The `HostClient` protocol: what the checker and the machine need from any host."""

from __future__ import annotations

from typing import Any, Protocol

from refsim.wire.response import Response

NO_BODY: Any = object()


class HostUnreachable(ValueError):
    """The HTTP host could not be reached (connect, send or read failed), or its answer
    could not be read as HTTP/1.1. (Here, not beside the HTTP client, so that catching it
    does not import ssl and asyncio.)"""


class HostClient(Protocol):
    """Anything that answers v2 requests: `SimHost` in process, or an HTTP client."""

    @property
    def name(self) -> str:
        """A short label for reports: the profile, or the base URL."""
        ...

    def request(self, method: str, path: str, *, api_key: str | None = None,
                json: Any = NO_BODY, headers: dict[str, str] | None = None) -> Response: ...
