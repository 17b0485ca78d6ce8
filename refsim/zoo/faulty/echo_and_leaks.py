"""Faulty hosts that get wrong what the wire shows of a replay: the echo of fixtureRuns on
eval.started (RFC 0252 §E: there, and verbatim, on every channel), and the derived entries
that must never be on the wire (§D) but show up in the snapshot, on eval.started, on the SSE
stream or in a comment line of it, in a header (base64, hex, percent-encoded, compressed),
in a JSON string or under a vendor member. A new host whose fault is in the echo, or that
lets recorded content out by another channel or spelling, goes here.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import attrs

from refsim.domain.core import Echo, HostCore
from refsim.domain.ids import parse_bound, project
from refsim.host import Edge, SimHost
from refsim.wire.response import Response
from refsim.zoo.faulty.base import Mutant, _run_id_of, _stream_only, _swap


class OmitsEcho(Echo):
    def eval_started(self, payload: dict[str, Any], fixture_runs: dict[str, Any] | None) -> None:
        return None


def _derived_in_snapshot(host: SimHost, method: str, target: str, headers: dict[str, str],
                         body: bytes | None, response: Response) -> Response:
    """GET /runs/{id} of an eval run also shows the copy it was served, as `provenance`."""
    if (method not in ("GET", "HEAD") or response.status != 200
            or not isinstance(response.json, dict) or "runId" not in response.json
            or "/events" in target or target.endswith("/eval-summary")):
        return response
    rid = parse_bound(response.json["runId"])
    kept = [{"task": task, "from": source.bound, "calls": [e.to_json() for e in entries]}
            for source, run, task, entries in host.core.copies.all_entries() if run == rid]
    if not kept:
        return response
    return attrs.evolve(response, json={**response.json, "provenance": kept})


class _LeaksEntries(Echo):
    """Puts the derived entries of the named sources into eval.started."""

    core: HostCore | None = None

    def eval_started(self, payload: dict[str, Any], fixture_runs: dict[str, Any] | None) -> None:
        super().eval_started(payload, fixture_runs)
        assert self.core is not None
        named = set((fixture_runs or {}).values())
        payload["toolResponses"] = [e.to_json() for source, _, _, entries
                                    in self.core.copies.all_entries()
                                    if source.bound in named for e in entries]


def _wire_echo(host: SimHost) -> None:
    echo = host.core.components.echo
    assert isinstance(echo, _LeaksEntries)
    echo.core = host.core


class _ProjectsEcho(Echo):
    def eval_started(self, payload: dict[str, Any], fixture_runs: dict[str, Any] | None) -> None:
        if fixture_runs is not None:
            payload["fixtureRuns"] = {k: project(v) for k, v in fixture_runs.items()}


def _entries_when_served_whole(host: SimHost, method: str, target: str,
                               headers: dict[str, str], body: bytes | None,
                               response: Response) -> Response:
    """GET /runs/{id} of an eval run that missed nothing shows the entries it was served,
    under names of its own (no `tool`, `args` or `toolResponses` key)."""
    if (method != "GET" or response.status != 200 or not isinstance(response.json, dict)
            or "runId" not in response.json or "/events" in target
            or target.endswith("/eval-summary")):
        return response
    rid = parse_bound(response.json["runId"])
    run = host.core.runs.get(rid) if rid is not None else None
    if (run is None or run.eval is None or run.eval.summary is None
            or any(t.get("fixtureMissCount") for t in run.eval.summary.get("tasks", []))):
        return response
    kept = [{"name": e.tool, "in": e.args, "out": e.response}
            for _, served, _, entries in host.core.copies.all_entries() if served == rid
            for e in entries]
    if not kept:
        return response
    return attrs.evolve(response, json={**response.json, "provenance": kept})


def _projected_echo(host: SimHost, event: dict[str, Any]) -> dict[str, Any]:
    payload = event.get("payload") or {}
    if event.get("type") == "eval.started" and isinstance(payload.get("fixtureRuns"), dict):
        runs = {k: project(v) for k, v in payload["fixtureRuns"].items()}
        return {**event, "payload": {**payload, "fixtureRuns": runs}}
    return event


def _entries_in_stream(host: SimHost, event: dict[str, Any]) -> dict[str, Any]:
    if event.get("type") != "eval.started":
        return event
    rid = parse_bound(str(event.get("runId")))
    entries = [e.to_json() for _, run, _, kept in host.core.copies.all_entries() if run == rid
               for e in kept]
    return {**event, "payload": {**(event.get("payload") or {}), "x-served": entries}}


def _eval_entries(host: SimHost, run_id: Any) -> list[dict[str, Any]]:
    rid = parse_bound(run_id) if isinstance(run_id, str) else None
    return [e.to_json() for _, run, _, kept in host.core.copies.all_entries() if run == rid
            for e in kept]


def _entries_in_header(host: SimHost, method: str, target: str, headers: dict[str, str],
                       body: bytes | None, response: Response) -> Response:
    """GET /runs/{id} of an eval run carries its entries, base64 JSON, in a header."""
    if (method != "GET" or response.status != 200 or not isinstance(response.json, dict)
            or "runId" not in response.json or "/events" in target):
        return response
    entries = _eval_entries(host, response.json.get("runId"))
    if not entries:
        return response
    packed = base64.b64encode(json.dumps(entries).encode()).decode()
    return attrs.evolve(response, headers={**response.headers, "X-Refsim-Debug": packed})


def _entries_in_string(host: SimHost, method: str, target: str, headers: dict[str, str],
                       body: bytes | None, response: Response) -> Response:
    """GET /runs/{id} of an eval run carries its entries as a JSON string in metadata."""
    if (method != "GET" or response.status != 200 or not isinstance(response.json, dict)
            or "runId" not in response.json or "/events" in target
            or target.endswith("/eval-summary")):
        return response
    entries = _eval_entries(host, response.json.get("runId"))
    if not entries:
        return response
    return attrs.evolve(response, json={**response.json,
                                        "metadata": {"debug": json.dumps(entries)}})


class _EntriesInVendorMember(Echo):
    """eval.started carries the entries served under a vendor member (x-...), which the
    payload's vendor hatch admits."""

    core: HostCore | None = None

    def eval_started(self, payload: dict[str, Any], fixture_runs: dict[str, Any] | None) -> None:
        super().eval_started(payload, fixture_runs)
        assert self.core is not None
        named = set((fixture_runs or {}).values())
        kept = [[e.args, e.response] for source, _, _, entries
                in self.core.copies.all_entries() if source.bound in named for e in entries]
        if kept:
            payload["x-replayed"] = kept


def _wire_vendor_echo(host: SimHost) -> None:
    echo = host.core.components.echo
    assert isinstance(echo, _EntriesInVendorMember)
    echo.core = host.core


def _entries_packed(pack: Callable[[bytes], str]) -> Edge:
    """GET /runs/{id} of an eval run carries its entries, packed, in a header."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        if (method != "GET" or response.status != 200 or not isinstance(response.json, dict)
                or "runId" not in response.json or "/events" in target):
            return response
        entries = _eval_entries(host, response.json.get("runId"))
        if not entries:
            return response
        packed = pack(json.dumps(entries).encode())
        return attrs.evolve(response, headers={**response.headers, "X-Trace": packed})
    return edge


def _entries_in_stream_comment(host: SimHost, method: str, target: str,
                               headers: dict[str, str], body: bytes | None,
                               response: Response) -> Response:
    """The SSE stream of an eval run served recorded fixtures opens with a comment line
    that carries its derived entries (no client's event parser sees a comment)."""
    if (method != "GET" or not target.split("?", 1)[0].endswith("/events")
            or response.status != 200 or response.text is None):
        return response
    run_id = _run_id_of(target)
    entries = _eval_entries(host, run_id) if run_id is not None else []
    if not entries:
        return response
    return attrs.evolve(response, text=f": served {json.dumps(entries)}\n\n" + response.text)


# This family's hosts (the package puts them in the zoo's order, its `ORDER`).
HOSTS: tuple[Mutant, ...] = (
    Mutant("omits-echo", "§E: eval.started MUST carry fixtureRuns when the request did",
           _swap(echo=OmitsEcho)),
    Mutant("derived-in-snapshot", "§D: derived entries are never on the wire (here under "
           "another member name of GET /runs/{id})", edge=_derived_in_snapshot),
    Mutant("leaks-entries-in-eval-started", "§D: derived entries are never on the wire",
           _swap(echo=_LeaksEntries), wire=_wire_echo),
    Mutant("projects-echo", "§E: the echo is the accepted map verbatim (bound ids, not "
           "projected)", _swap(echo=_ProjectsEcho)),
    Mutant("entries-in-snapshot-when-served-whole", "§D: derived entries are never on the "
           "wire (here renamed, in GET /runs/{id} of eval runs that missed nothing)",
           edge=_entries_when_served_whole),
    Mutant("stream-projects-echo", "§E: eval.started.fixtureRuns is the accepted map "
           "verbatim on every channel (here projected on the SSE stream)",
           edge=_stream_only(_projected_echo)),
    Mutant("stream-leaks-entries", "§D: derived entries are never on the wire (here on the "
           "SSE stream only)", edge=_stream_only(_entries_in_stream)),
    Mutant("entries-in-header", "§D: derived entries are never on the wire (here base64 in "
           "a header of GET /runs/{id})", edge=_entries_in_header),
    Mutant("entries-in-string", "§D: derived entries are never on the wire (here a JSON "
           "string in the snapshot's metadata)", edge=_entries_in_string),
    Mutant("entries-in-vendor-member", "§D: derived entries are never on the wire (here "
           "under a vendor member of eval.started)", _swap(echo=_EntriesInVendorMember),
           wire=_wire_vendor_echo),
    Mutant("entries-in-hex-header", "§D: derived entries are never on the wire (here hex in "
           "a header)", edge=_entries_packed(lambda b: b.hex())),
    Mutant("entries-percent-encoded-in-header", "§D: derived entries are never on the wire "
           "(here percent-encoded JSON in a header)",
           edge=_entries_packed(lambda b: quote(b.decode(), safe=""))),
    Mutant("entries-compressed-in-header", "§D: derived entries are never on the wire (here "
           "zlib, then base64, in a header)",
           edge=_entries_packed(lambda b: base64.b64encode(zlib.compress(b)).decode())),
    Mutant("entries-in-stream-comment", "§D: derived entries are never on the wire (here in "
           "an SSE comment line)", edge=_entries_in_stream_comment),
)
