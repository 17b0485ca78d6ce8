"""`SimHost`: the reference host, in process. `request()` is the whole v2 wire."""

from __future__ import annotations

import json as _json
from collections.abc import Callable
from typing import Any

import attrs

from refsim.domain.agents import Agent
from refsim.domain.canonical import encoder
from refsim.domain.core import Components, HostCore
from refsim.domain.owners import Tenant
from refsim.domain.profile import HostProfile
from refsim.wire.client import NO_BODY
from refsim.wire.response import Response
from refsim.wire.router import Router
from refsim.wire.suite_docs import load_builtin
from refsim.wire.trace import IN_PROCESS_BASE, clock, current, request_target, since

# What `json.dumps(body, allow_nan=False)` writes, with the encoder built once.
_REQUEST_BODY = encoder(allow_nan=False)

# (host, method, target, headers, body, answer) -> the answer a faulty host gives instead.
Edge = Callable[["SimHost", str, str, dict[str, str], "bytes | None", Response], Response]


class SimHost:
    """A deterministic, in-memory OpenWOP v2 host for the RFC 0252 eval surface.

    `SimHost(seed=0, profile=None)`; `components` swaps parts (the faulty-host zoo).
    """

    def __init__(self, seed: int = 0, profile: HostProfile | None = None,
                 components: Components | None = None, edge: Edge | None = None) -> None:
        self.core = HostCore(seed=seed, profile=profile or HostProfile(),
                             components=components or Components(),
                             builtin_suites=load_builtin())
        self.router = Router(self.core)
        # A faulty host of the zoo may rewrite answers at the wire's edge (a header, a
        # member of a document); the reference host has none.
        self.edge = edge

    @property
    def name(self) -> str:
        return f"refsim:{self.core.profile.name}"

    @property
    def profile(self) -> HostProfile:
        return self.core.profile

    def add_tenant(self, name: str, api_key: str, workspace: str | None = None) -> None:
        self.core.add_tenant(Tenant(name, api_key, workspace))

    def register_agent(self, agent_id: str, agent: Agent) -> None:
        """Add a scripted agent; see `refsim.domain.agents.ScriptedAgent`."""
        self.core.agents[agent_id] = agent

    def request(self, method: str, path: str, *, api_key: str | None = None,
                json: Any = NO_BODY, headers: dict[str, str] | None = None) -> Response:
        """Answer one request. Never raises: bad input is a registered-code envelope."""
        all_headers = dict(headers or {})
        if api_key is not None:
            all_headers["Authorization"] = f"Bearer {api_key}"
        body: bytes | None = None
        if json is not NO_BODY:
            try:
                body = _REQUEST_BODY(json).encode("utf-8")
            except (TypeError, ValueError, RecursionError):
                # Not JSON at all (NaN, a set, a cycle, too deep): send bytes no JSON
                # parser accepts, as a client that failed to encode would have.
                body = b"\x00not JSON"
            if not any(k.lower() == "content-type" for k in all_headers):
                all_headers["Content-Type"] = "application/json"
        trace = current()
        if trace is None:
            return self.request_raw(method, path, headers=all_headers, body=body)
        started = clock()
        answer = self.request_raw(method, path, headers=all_headers, body=body)
        trace.add(started[0], since(started), method, IN_PROCESS_BASE + request_target(path),
                  all_headers, body, answer)
        return answer

    def request_raw(self, method: str, path: str, *, headers: dict[str, str] | None = None,
                    body: bytes | None = None) -> Response:
        """The byte-level entry the HTTP server uses. The answer is a copy: a caller that
        edits it changes nothing inside the host."""
        before = getattr(self.edge, "before", None)
        if before is not None:  # an edge that decides what reaches the host
            body = before(self, method, path, headers or {}, body)
        response = self.router.handle(method, path, headers, body)
        if self.edge is not None:
            response = self.edge(self, method, path, headers or {}, body, response)
        if response.json is None:
            return response
        if response.text is not None:  # a document beside a text body of its own
            return attrs.evolve(response, json=_copy_json(response.json),
                                headers=dict(response.headers))
        # The copy is parsed from the bytes a client would get: one encoding makes both.
        return Response.of_bytes(response.status, dict(response.headers), response.body)

    def event_log(self) -> bytes:
        """Every run's events, in creation order: the bytes a determinism check compares."""
        lines = [_json.dumps(e.to_json(), sort_keys=True, separators=(",", ":"))
                 for run in self.core.runs.values() for e in run.events]
        return ("\n".join(lines) + "\n").encode("utf-8")


def _copy_json(value: Any) -> Any:
    """A deep copy of a JSON value, at C speed: `copy.deepcopy` cost the HTTP face more
    than the rest of a discovery request."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return _json.loads(_json.dumps(value))
