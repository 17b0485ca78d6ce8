"""What a request returns, in process or over HTTP."""

from __future__ import annotations

import json as _json
from collections.abc import Iterable
from typing import Any

import attrs

from refsim.domain.canonical import encoder

# A JSON document's text on the wire: compact, UTF-8 kept (the encoder built once).
compact = encoder(compact=True, ensure_ascii=False)


def encode(value: Any) -> bytes:
    """A JSON document's bytes on the wire: compact, UTF-8."""
    return compact(value).encode("utf-8")


@attrs.frozen
class Response:
    status: int
    headers: dict[str, str]
    json: Any = None
    text: str | None = None
    # The body's bytes, made on first use (a judge reads them several times per answer).
    # Not an argument, so `attrs.evolve` starts a changed answer without them.
    _body: bytes | None = attrs.field(init=False, default=None, eq=False, repr=False)

    @property
    def body(self) -> bytes:
        """The exact bytes a client receives."""
        body = self._body
        if body is None:
            if self.text is not None:
                body = self.text.encode("utf-8")
            elif self.json is None:
                body = b""
            else:
                body = encode(self.json)
            object.__setattr__(self, "_body", body)
        return body

    @staticmethod
    def of_bytes(status: int, headers: dict[str, str], body: bytes) -> Response:
        """A JSON answer from the bytes it is sent as: its document is parsed from them, so
        it shares nothing with whoever encoded them."""
        made = Response(status, headers, _json.loads(body))
        object.__setattr__(made, "_body", body)
        return made

    def header(self, name: str) -> str | None:
        lower = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == lower), None)


def header_dict(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers as a dict; a repeated header is joined with ", " (RFC 9110 §5.3)."""
    out: dict[str, str] = {}
    first_spelling: dict[str, str] = {}
    for name, value in items:
        key = name.lower()
        if key in first_spelling:
            out[first_spelling[key]] += ", " + str(value)
        else:
            first_spelling[key] = name
            out[name] = str(value)
    return out
