"""Faulty hosts whose refusal of an unusable source echoes the supplied id, which RFC 0252 §C
forbids: in the message, most of it, or disguised in a header or cookie (upper-cased,
reversed, base64, hex or base32, after a random salt). A new host that carries a supplied
fixtureRuns value back on a refusal, in any spelling, goes here.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from typing import Any

import attrs

from refsim.domain.core import RequestRules
from refsim.domain.refusals import Refusal, validation
from refsim.host import Edge, SimHost
from refsim.wire.response import Response
from refsim.zoo.faulty.base import Mutant, _caller_and_body, _is_unusable, _swap, _with_header


class _EchoesId(RequestRules):
    def unusable_source(self, value: Any, kind: str) -> Refusal:
        return validation(f"fixtureRuns names a source run that cannot be used: {value}")


class _PartialEcho(RequestRules):
    def unusable_source(self, value: Any, kind: str) -> Refusal:
        text = str(value)
        return validation("fixtureRuns names a source run that cannot be used: "
                          f"{text[:max(0, len(text) - 3)]}...")


def _id_in_request_id(pack: Callable[[str], str]) -> Edge:
    """A refusal's X-Request-Id is random, and carries the supplied ids, packed."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        if method != "POST" or target != "/runs" or not _is_unusable(response):
            return response
        _, doc = _caller_and_body(host, headers, body)
        values = list((doc.get("fixtureRuns") or {}).values()) if isinstance(doc, dict) else []
        tag = ".".join(pack(str(v)) for v in values)
        return attrs.evolve(response, headers={
            **response.headers, "X-Request-Id": f"{uuid.uuid4().hex[:12]}-{tag}"})
    return edge


def _id_in_cookie(host: SimHost, method: str, target: str, headers: dict[str, str],
                  body: bytes | None, response: Response) -> Response:
    """A refusal sets a session cookie: a random salt and the supplied ids, in base32,
    padded to one length (it reads as a token, different every time)."""
    if method != "POST" or target != "/runs" or not _is_unusable(response):
        return response
    _, doc = _caller_and_body(host, headers, body)
    values = list((doc.get("fixtureRuns") or {}).values()) if isinstance(doc, dict) else []
    packed = base64.b32encode(uuid.uuid4().bytes[:7] + "|".join(map(str, values)).encode())
    token = packed.decode().rstrip("=").ljust(120, "A")[:120]
    return attrs.evolve(response, headers={**response.headers,
                                           "Set-Cookie": f"sid={token}; Path=/; HttpOnly"})


def _echo_disguised(disguise: Callable[[str], str]) -> Edge:
    """Every unusable-source refusal carries each supplied fixtureRuns value, disguised,
    after a fresh salt, in an X-Trace header of fixed length."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        if method != "POST" or target != "/runs" or not _is_unusable(response):
            return response
        _, doc = _caller_and_body(host, headers, body)
        runs = doc.get("fixtureRuns") if isinstance(doc, dict) else None
        values = [v for v in runs.values() if isinstance(v, str)] if isinstance(runs,
                                                                               dict) else []
        if not values:
            return response
        trace = (uuid.uuid4().hex[:8] + "." + ".".join(disguise(v) for v in values))
        return _with_header(response, "X-Trace", trace[:96].ljust(96, "0"))
    return edge


# This family's hosts (the package puts them in the zoo's order, its `ORDER`).
HOSTS: tuple[Mutant, ...] = (
    Mutant("echoes-id", "§C: the refusal MUST NOT echo the supplied id",
           _swap(rules=_EchoesId)),
    Mutant("partial-echo", "§C: the refusal MUST NOT echo the supplied id, not even most of "
           "it", _swap(rules=_PartialEcho)),
    Mutant("echo-upper-cased", "§C: the refusal MUST NOT echo the supplied id (here "
           "upper-cased, after a salt, in a header)", edge=_echo_disguised(str.upper)),
    Mutant("echo-reversed", "§C: the refusal MUST NOT echo the supplied id (here reversed, "
           "after a salt, in a header)", edge=_echo_disguised(lambda v: v[::-1])),
    Mutant("echoes-id-base64-in-header", "§C: the refusal MUST NOT echo the supplied id "
           "(here base64 in a random request id)", edge=_id_in_request_id(
               lambda v: base64.urlsafe_b64encode(v.encode()).decode().rstrip("="))),
    Mutant("echoes-id-hex-in-header", "§C: the refusal MUST NOT echo the supplied id (here "
           "hex in a random request id)", edge=_id_in_request_id(lambda v: v.encode().hex())),
    Mutant("echoes-id-base32-in-cookie", "§C: the refusal MUST NOT echo the supplied id "
           "(here base32, after a random salt, in a cookie of one length)",
           edge=_id_in_cookie),
)
