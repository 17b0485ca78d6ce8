"""Faulty hosts whose Idempotency-Key cache answers a retry it should not (§C, Security): one
that compares bodies without their fixtureRuns, and ones keyed on the key alone or on the
tenant instead of the owner triple, so another tenant or workspace gets the owner's run. A
new host whose fault is in the retry cache of creates goes here.
"""

from __future__ import annotations

import json
import weakref
from typing import Any

from refsim.domain.canonical import canonical
from refsim.domain.owners import Owner
from refsim.host import SimHost
from refsim.wire.response import Response
from refsim.zoo.faulty.base import Mutant


def _idempotency_key(headers: dict[str, str]) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == "idempotency-key"), None)


class _RetryCacheWithoutSources:
    """An edge in front of the host's Idempotency-Key cache that compares bodies without
    their fixtureRuns: a retry under the key whose body differs only there is sent on as the
    first body, so the host answers it with the first create's 201 and run."""

    def __init__(self) -> None:
        self.first: weakref.WeakKeyDictionary[SimHost, dict[tuple[str, str],
                                                             tuple[str, bytes]]] = (
            weakref.WeakKeyDictionary())

    def before(self, host: SimHost, method: str, target: str, headers: dict[str, str],
               body: bytes | None) -> bytes | None:
        key = _idempotency_key(headers)
        if method != "POST" or target.split("?", 1)[0] != "/runs" or not key or not body:
            return body
        try:
            doc = json.loads(body)
        except ValueError:
            return body
        if not isinstance(doc, dict):
            return body
        auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
        seen = self.first.setdefault(host, {})
        stripped = canonical({k: v for k, v in doc.items() if k != "fixtureRuns"})
        found = seen.get((auth, key))
        if found is None:
            seen[(auth, key)] = (stripped, body)
            return body
        return found[1] if found[0] == stripped else body

    def __call__(self, host: SimHost, method: str, path: str, headers: dict[str, str],
                 body: bytes | None, response: Response) -> Response:
        return response


class _SharedRetryCache(dict[Any, Any]):
    """The router's Idempotency-Key cache keyed on the key alone, whoever asks: another
    tenant that sends the owner's key and body is answered with the owner's run."""

    @staticmethod
    def _key(key: Any) -> Any:
        return key[1] if isinstance(key, tuple) and len(key) == 2 else key

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(self._key(key), default)

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(self._key(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(self._key(key), value)

    def __contains__(self, key: object) -> bool:
        return super().__contains__(self._key(key))


class _TenantRetryCache(_SharedRetryCache):
    """The router's Idempotency-Key cache keyed on the tenant and the key, not the owner
    triple: a key of the tenant scoped to another workspace, sending the owner's key and
    body, is answered with the owner's run."""

    @staticmethod
    def _key(key: Any) -> Any:
        if isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], Owner):
            return (key[0].tenant, key[1])
        return key


def _wire_tenant_cache(host: SimHost) -> None:
    host.router._idempotency = _TenantRetryCache()


def _wire_shared_cache(host: SimHost) -> None:
    host.router._idempotency = _SharedRetryCache()


# This family's hosts (the package puts them in the zoo's order, its `ORDER`).
HOSTS: tuple[Mutant, ...] = (
    Mutant("idempotency-ignores-fixture-runs", "§C/Security: a create naming an unusable "
           "source is refused (here an Idempotency-Key retry whose fixtureRuns differs is "
           "answered with the first create's run)", edge=_RetryCacheWithoutSources()),
    Mutant("idempotency-shared-across-owners", "Security/§C: another tenant's run reads as no "
           "run (here another tenant sending the owner's Idempotency-Key and body gets the "
           "owner's run)", wire=_wire_shared_cache),
    Mutant("idempotency-shared-across-workspaces", "§C/Security: a retry is the caller's own "
           "(here the Idempotency-Key cache is keyed by tenant, not the owner triple: a key of "
           "another workspace gets the owner's run)", wire=_wire_tenant_cache),
)
