"""The demo's log: every request, its answer, and the events the host emitted because of it.

A `RecordingClient` stands between the demo and the in-process host. It is the only way
the demo reaches the host, so the log cannot miss a request.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from refsim.domain.ids import RunId
from refsim.host import SimHost
from refsim.wire.client import NO_BODY
from refsim.wire.response import Response


@attrs.define
class Exchange:
    """One request and its answer, with the events the host emitted while answering it."""

    seq: int
    chapter: str
    tenant: str | None
    method: str
    path: str
    body: Any
    status: int
    headers: dict[str, str]
    response: Any
    events: list[dict[str, Any]]
    # The answer's bytes as the client received them (report.html hashes refusal bodies);
    # history.jsonl keeps the parsed `response` instead.
    raw: bytes = b""

    def to_lines(self) -> list[dict[str, Any]]:
        """The history.jsonl lines: the exchange, then one line per event it caused."""
        request: dict[str, Any] = {"method": self.method, "path": self.path,
                                   "tenant": self.tenant}
        if self.body is not NO_BODY:
            request["body"] = self.body
        lines: list[dict[str, Any]] = [{
            "seq": self.seq, "chapter": self.chapter, "kind": "exchange", "request": request,
            "response": {"status": self.status, "headers": self.headers,
                         "body": self.response}}]
        lines += [{"seq": self.seq, "chapter": self.chapter, "kind": "event", "event": e}
                  for e in self.events]
        return lines


@attrs.define
class RecordingClient:
    """A `HostClient` over a `SimHost` that logs everything it sends and receives.

    `tenants` maps API keys to the tenant names the log shows instead of the keys.
    """

    host: SimHost
    tenants: dict[str, str]
    chapter: str = "setup"
    exchanges: list[Exchange] = attrs.Factory(list)
    _seen: dict[RunId, int] = attrs.Factory(dict)

    @property
    def name(self) -> str:
        return self.host.name

    def request(self, method: str, path: str, *, api_key: str | None = None,
                json: Any = NO_BODY, headers: dict[str, str] | None = None) -> Response:
        r = self.host.request(method, path, api_key=api_key, json=json, headers=headers)
        body: Any = r.json if r.json is not None else r.text
        self.exchanges.append(Exchange(
            seq=len(self.exchanges) + 1, chapter=self.chapter,
            tenant=None if api_key is None else self.tenants.get(api_key, "unknown key"),
            method=method, path=path, body=json, status=r.status,
            headers=dict(r.headers), response=body, events=self._new_events(), raw=r.body))
        return r

    def _new_events(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for run_id, run in self.host.core.runs.items():
            seen = self._seen.get(run_id, 0)
            out += [e.to_json() for e in run.events[seen:]]
            self._seen[run_id] = len(run.events)
        return out

    def history_jsonl(self) -> bytes:
        lines = [json.dumps(line, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                 for x in self.exchanges for line in x.to_lines()]
        return ("\n".join(lines) + "\n").encode("utf-8")
