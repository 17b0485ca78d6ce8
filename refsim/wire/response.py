"""What a request returns, in process or over HTTP."""

from __future__ import annotations

import json as _json
from typing import Any

import attrs


@attrs.frozen
class Response:
    status: int
    headers: dict[str, str]
    json: Any = None
    text: str | None = None

    @property
    def body(self) -> bytes:
        """The exact bytes a client receives."""
        if self.text is not None:
            return self.text.encode("utf-8")
        if self.json is None:
            return b""
        return _json.dumps(self.json, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    def header(self, name: str) -> str | None:
        lower = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == lower), None)
