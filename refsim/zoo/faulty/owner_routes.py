"""Faulty hosts where another tenant (or another workspace of the run's tenant) reaches an
eval run through one of its routes (Security, §C): fork, summary, events on the stream or
the poll, erasure, snapshot and cancellation answered as to the owner, or a route that skips
the owner check for a percent-encoded id, a poll continuation, an If-None-Match, a bare
opaque segment or a filtered listing. It also holds the helpers that answer a request as
the run's owner would (`_as_key`, `_owner_key`, `_run_in_path`). A new host whose fault is
a route that forgets whose run it serves goes here.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

from refsim.domain.ids import OPAQUE_RE, ProjectionError, parse_bound, unproject
from refsim.domain.runs import RunRecord
from refsim.host import Edge, SimHost
from refsim.wire.response import Response
from refsim.zoo.faulty.base import Mutant, _caller_and_body, _run_id_of


def _as_key(host: SimHost, key: str, method: str, target: str, headers: dict[str, str],
            body: bytes | None) -> Response:
    """The same request, under another key of the host's (how a faulty route skips the
    caller's owner: it answers as the run's owner would)."""
    kept = {k: v for k, v in headers.items() if k.lower() != "authorization"}
    return host.router.handle(method, target, {**kept, "Authorization": f"Bearer {key}"}, body)


def _owner_key(host: SimHost, run: RunRecord) -> str | None:
    """A key whose triple reads the run: its tenant's, tenant-wide or of its workspace."""
    return next((k for k, t in host.core.tenants.items() if t.name == run.owner.tenant
                 and t.workspace in (None, run.owner.workspace)), None)


def _segment_in_path(path: str) -> str | None:
    """The run id segment of a run's route (`/runs/{id}...`, a seam's included)."""
    if "/runs/" not in path:
        return None
    return path.split("/runs/", 1)[1].split("/", 1)[0].split(":", 1)[0]


def _run_in_path(host: SimHost, path: str) -> RunRecord | None:
    segment = _segment_in_path(path)
    if segment is None:
        return None
    try:
        rid = parse_bound(unproject(segment))
    except ProjectionError:
        return None
    return host.core.runs.get(rid) if rid is not None else None


def _as_owner(*kinds: str) -> Edge:
    """Another tenant's request about an eval run (the kinds named: fork, summary, poll,
    stream, erase, snapshot, cancel) is answered as if its owner had asked."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        if response.status not in (403, 404):
            return response
        path = target.split("?", 1)[0]
        kind = ("erase" if path.startswith("/conformance/seams/runs/") and ":erase" in path
                else "fork" if ":fork" in path else "summary" if path.endswith("/eval-summary")
                else "cancel" if path.endswith("/cancel")
                else "poll" if path.endswith("/events/poll") else "stream"
                if path.endswith("/events") else "snapshot" if path.count("/") == 2
                else None)
        run = _run_in_path(host, path) if kind in kinds else None
        key = _owner_key(host, run) if run is not None and run.eval is not None else None
        return response if key is None else _as_key(host, key, method, target, headers,
                                                        body)
    return edge


def _percent_path_skips_owner(host: SimHost, method: str, target: str,
                              headers: dict[str, str], body: bytes | None,
                              response: Response) -> Response:
    """A run read with its id's slash percent-encoded skips the owner check: another
    tenant is answered as the owner would be."""
    path = target.split("?", 1)[0]
    if method != "GET" or "%2f" not in path.lower() or response.status not in (403, 404):
        return response
    run_id = _run_id_of(target)
    rid = parse_bound(run_id) if run_id is not None else None
    owner_key = next((key for key, tenant in host.core.tenants.items()
                      if rid is not None and tenant.owner().tenant == rid.tenant), None)
    if owner_key is None:
        return response
    return _as_key(host, owner_key, method, target, headers, body)


def _as_its_owner(when: Callable[[str, str, dict[str, str]], bool], *,
                  same_tenant: bool = False) -> Edge:
    """A refusal of a run's route, answered as the run's owner is where `when(method,
    target, headers)` holds: the one route that forgot to check the owner (`same_tenant`:
    that forgot the workspace, for a caller of the run's tenant scoped to one)."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        if response.status not in (403, 404) or not when(method, target, headers):
            return response
        run = _run_in_path(host, urlsplit(target).path)
        if same_tenant and run is not None:
            caller = _caller_and_body(host, headers, None)[0]
            if (caller is None or caller.workspace is None
                    or caller.tenant != run.owner.tenant):
                return response
        key = _owner_key(host, run) if run is not None else None
        return response if key is None else _as_key(host, key, method, target, headers,
                                                        body)
    return edge


def _polled_after(method: str, target: str, headers: dict[str, str]) -> bool:
    parts = urlsplit(target)
    after = parse_qs(parts.query).get("afterSequence", ["-1"])[0]
    return method == "GET" and parts.path.endswith("/events/poll") and after.isdigit()


def _etag_before_owner(host: SimHost, method: str, target: str, headers: dict[str, str],
                       body: bytes | None, response: Response) -> Response:
    """If-None-Match weighed before the owner: another tenant's run that exists is 304."""
    conditional = any(k.lower() == "if-none-match" for k in headers)
    run = _run_in_path(host, urlsplit(target).path) if conditional else None
    key = _owner_key(host, run) if run is not None else None
    if method != "GET" or response.status not in (403, 404) or key is None:
        return response
    owner = _as_key(host, key, method, target, headers, body)
    return owner if owner.status == 304 else response


def _bare_segment_any_tenant(host: SimHost, method: str, target: str,
                             headers: dict[str, str], body: bytes | None,
                             response: Response) -> Response:
    """A bare opaque path segment that names none of the caller's runs is looked up in
    every tenant, and the run found is answered as its owner would be."""
    segment = _segment_in_path(urlsplit(target).path)
    if response.status not in (403, 404) or segment is None or not OPAQUE_RE.fullmatch(
            segment):
        return response
    run = next((r for rid, r in host.core.runs.items() if rid.opaque == segment), None)
    key = _owner_key(host, run) if run is not None else None
    if run is None or key is None:
        return response
    return _as_key(host, key, method, target.replace(segment, run.run_id.projected, 1),
                   headers, body)


def _lists_every_tenant_when_filtered(host: SimHost, method: str, target: str,
                                      headers: dict[str, str], body: bytes | None,
                                      response: Response) -> Response:
    """GET /runs?workflowId=...: the filtered listing forgets the owner and shows every
    tenant's matching runs (the unfiltered one is right)."""
    parts = urlsplit(target)
    if (method != "GET" or parts.path != "/runs" or response.status != 200
            or "workflowId" not in parse_qs(parts.query) or not isinstance(response.json,
                                                                            dict)):
        return response
    runs = list(response.json.get("runs", []))
    seen = {r.get("runId") for r in runs}
    for key in list(host.core.tenants):
        other = host.router.handle(method, target, {"Authorization": f"Bearer {key}"}, None)
        if other.status == 200 and isinstance(other.json, dict):
            runs += [r for r in other.json.get("runs", []) if r.get("runId") not in seen]
            seen |= {r.get("runId") for r in other.json.get("runs", [])}
    return Response(200, dict(response.headers), {**response.json, "runs": runs})


# This family's hosts (the package puts them in the zoo's order, its `ORDER`).
HOSTS: tuple[Mutant, ...] = (
    Mutant("foreign-forks-eval-run", "Security/§C: a tenant that cannot read a run cannot "
           "fork it", edge=_as_owner("fork")),
    Mutant("foreign-reads-eval-summary", "Security/RFC 0081: a tenant that cannot read a "
           "run cannot read its summary", edge=_as_owner("summary")),
    Mutant("foreign-streams-eval-events", "Security: a tenant that cannot read a run cannot "
           "read its events (here on the SSE stream)", edge=_as_owner("stream")),
    Mutant("foreign-erases-eval-run", "Security: a tenant that cannot read a run cannot "
           "erase it", edge=_as_owner("erase")),
    Mutant("percent-path-skips-owner", "Security: a tenant that cannot read a run cannot "
           "read its snapshot, events or summary (here it can, with the id's slash "
           "percent-encoded)", edge=_percent_path_skips_owner),
    Mutant("foreign-polls-eval-events", "Security: a tenant that cannot read a run cannot "
           "read its events (here on the poll)", edge=_as_owner("poll")),
    Mutant("foreign-reads-eval-snapshot", "Security/§C: a tenant that cannot read a run "
           "cannot read its snapshot", edge=_as_owner("snapshot")),
    Mutant("foreign-cancels-eval-run", "Security: another tenant's run reads as no run on "
           "every route (here its cancellation is answered as the owner's: 409 run_terminal, "
           "not the unknown id's 404)", edge=_as_owner("cancel")),
    Mutant("poll-continuation-skips-owner", "Security: another tenant's run reads as no run on "
           "every route (here a poll from afterSequence 0 on is answered as to the owner)",
           edge=_as_its_owner(lambda m, t, h: _polled_after(m, t, h))),
    Mutant("etag-before-owner", "Security/§C: another tenant's run reads as no run (here "
           "If-None-Match: * is weighed first, and gets 304 for a run that exists)",
           edge=_etag_before_owner),
    Mutant("bare-segment-any-tenant", "Security/§C: another tenant's run reads as no run "
           "(here a bare opaque path segment finds a run in any tenant)",
           edge=_bare_segment_any_tenant),
    Mutant("lists-foreign-runs-when-filtered", "Security/§C: another tenant's run reads as no "
           "run (here GET /runs?workflowId= lists every tenant's matching runs)",
           edge=_lists_every_tenant_when_filtered),
    Mutant("workspace-blind-routes", "§C/Security: the owner triple reads a run (here a key "
           "scoped to a workspace, refused its tenant's run as a source, reads it on every "
           "route: the routes compare tenants only)",
           edge=_as_its_owner(lambda m, t, h: True, same_tenant=True)),
)
