"""The checker's one observation layer: a session makes requests, an `Observed` run holds
what the wire said about one request, `gate` says whether RFC 0252's rows apply to a host,
and an `Inspector` reads what only the simulator can see.

Every driver (legs, example table, invariants, demo, machine) observes through this module;
judging is for `refsim.check.judges`, and asking again until refusals tell apart or not is
`refsim.check.differential`'s (it takes both). Nothing here calls a judge.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import quote

import attrs

from refsim.check.findings import Disposition
from refsim.domain.canonical import integral
from refsim.domain.ids import parse_bound, project
from refsim.domain.owners import DEFAULT_TENANTS
from refsim.wire.client import NO_BODY, HostClient
from refsim.wire.response import Response

# The tenants, defined once: the label a row or leg uses -> the default API key.
TENANT_A, TENANT_B = DEFAULT_TENANTS[0].name, DEFAULT_TENANTS[1].name
KEYS: Mapping[str, str] = {t.name: t.api_key for t in DEFAULT_TENANTS}
KEY_A, KEY_B = KEYS[TENANT_A], KEYS[TENANT_B]

RECORDER = "conformance.eval:recorder"
COUNTER_TOOL = "conformance.eval:counter"
COUNTER_KEY = "recorded-fixtures"
DRIFT_KEY = "recorded-fixtures-drift"
SOURCE = "conformance-eval-recorded-source"
REPLAY = "conformance-eval-recorded-replay"
DRIFT = "conformance-eval-recorded-drift"
FIXTURES = (SOURCE, REPLAY, DRIFT)
MAX_POLLS = 200
# A listing of the caller's runs (before and after a refusal) reads at most this many pages
# of 100: on a host that has served more, the listing judge stands aside.
LIST_MAX_PAGES = 20
# How long the checker waits, in all, for one run to reach a terminal state (a host may
# run it after answering the create), polling with a growing pause between empty pages.
RUN_DEADLINE_SECONDS = 30.0
SEAM_COUNTER, SEAM_ERASE, SEAM_RESOLVE = "eval-counter", "runs:erase", "runs:resolve"
SEAM_SUITES, SEAM_TENANTS = "eval-suites", "tenants"
SEAMS = (SEAM_COUNTER, SEAM_ERASE, SEAM_RESOLVE, SEAM_SUITES, SEAM_TENANTS)
# refsim's own seams, beside the conformance profile's counter, erase and resolve.
REFSIM_SEAMS = frozenset({SEAM_SUITES, SEAM_TENANTS})
TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})
# A well-formed opaque segment that no host minted, and a tenant no host has.
UNKNOWN_OPAQUE = "run-0252unknown0000000"
NO_SUCH_TENANT = "tenant-0252-nobody"


class Unobservable(Exception):
    """The checker needs a fact this host does not offer: a seam it does not advertise (or
    one that answers with no use), a fixture it does not list, a second tenant's key, or
    content a lane keeps off the wire. The row it stops is `blocked` (a fact on the
    checker's side: a seam, a fixture, a key) or `inapplicable` (a fact about the host:
    what it advertises, what its wire carries), with the fact named; never failed."""

    def __init__(self, reason: str, disposition: Disposition = Disposition.BLOCKED) -> None:
        super().__init__(reason)
        self.reason = reason
        self.disposition = disposition


def inapplicable(reason: str) -> Unobservable:
    return Unobservable(reason, Disposition.INAPPLICABLE)


def run_path(run_id: str, suffix: str = "") -> str:
    return "/runs/" + project(run_id) + suffix


def eval_body(suite: str, fixture_runs: dict[str, Any] | None = None, *,
              agent_id: str = RECORDER, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"mode": "eval", "evalSuiteRef": suite, "agentId": agent_id}
    if fixture_runs is not None:
        body["fixtureRuns"] = fixture_runs
    body.update(extra)
    return body


def nonce() -> str:
    """A value unique to one checker run: suites, tenants and keys it creates carry it, so a
    host that has seen earlier runs (or other traffic) never mistakes them for its own."""
    return secrets.token_hex(4)


# ----------------------------------------------------------------------------- the inside


class Inspector(Protocol):
    """What only the simulator can see. Over HTTP there is none: rows that need one are
    listed apart, never judged."""

    def run_count(self) -> int: ...

    def resolutions(self, run_id: str) -> int:
        """How often the host resolved this id as a fixture source."""
        ...

    def derivations(self, run_id: str) -> int:
        """How often the host derived fixture entries from this run."""
        ...

    def copies(self) -> list[tuple[str, str, str, list[dict[str, Any]]]]:
        """Every stored derived copy: (source id, eval run id, task id, entries as JSON)."""
        ...

    def held_calls(self, run_id: str) -> list[dict[str, Any]]:
        """The calls the host holds for a run, as executed."""
        ...

    def live_state(self) -> dict[str, Any]:
        """Every piece of live tool state (live calls, egress records, counters)."""
        ...

    def egress_secrets(self) -> list[str]:
        """The credentials the host resolved at egress for its tenants."""
        ...

    def egress_log(self) -> list[dict[str, Any]]:
        """Every request as it left the host, after credential injection."""
        ...

    def counter(self, api_key: str, key: str) -> int | None:
        """The live counter of the key's tenant, read from inside."""
        ...

    def delete_run(self, run_id: str) -> bool:
        """Take a run out of the host, as a host that deletes runs would."""
        ...

    # What the machine reads inside after every step, where a request per read would cost
    # most of the step:

    def tenant_of(self, api_key: str) -> str | None:
        """The host's own name of the key's tenant."""
        ...

    def counters(self, tenant: str, names: Sequence[str]) -> list[int]:
        """The tenant's (by the host's name) live counters `names`, as the seam reads them."""
        ...

    def live_counters(self) -> Mapping[tuple[str, str], int]:
        """Every live counter that moved, by (tenant, key)."""
        ...

    def counter_seam(self) -> bool:
        """Whether the host serves the counter seam (its counters are the seam's to read)."""
        ...

    def unheld_agents(self) -> frozenset[str]:
        """The agents whose calls the host does not hold."""
        ...

    def rewrites_answers(self) -> bool:
        """Whether something between the host and the wire rewrites its answers (then the
        host is only read over its wire, never shortcut inside)."""
        ...

    def register_suite(self, api_key: str, doc: Mapping[str, Any]) -> bool:
        """Register a suite document for the key's tenant where the suite seam would."""
        ...

    def resolved_and_derived(self) -> tuple[dict[str, int], dict[str, int]]:
        """How often each run was resolved as a source, and derived from, by id."""
        ...

    def copy_of(self, source_id: str, eval_id: str, task_id: str
                ) -> list[tuple[str, Any, Any, bool]] | None:
        """The derived copy stored for one eval task: (tool, args, response, is_error)."""
        ...

    def copy_count(self, source_id: str) -> int:
        """How many derived copies are stored under a source."""
        ...



@attrs.define
class SimInspector:
    """The `Inspector` of an in-process `SimHost` (anything with its `core`)."""

    host: Any

    @property
    def _core(self) -> Any:
        return self.host.core

    def run_count(self) -> int:
        return len(self._core.runs)

    def resolutions(self, run_id: str) -> int:
        rid = parse_bound(run_id)
        return 0 if rid is None else int(self._core.resolutions.get(rid, 0))

    def derivations(self, run_id: str) -> int:
        rid = parse_bound(run_id)
        return 0 if rid is None else int(self._core.derivations.get(rid, 0))

    def copies(self) -> list[tuple[str, str, str, list[dict[str, Any]]]]:
        return [(source.bound, run.bound, task, [e.to_json() for e in entries])
                for source, run, task, entries in self._core.copies.all_entries()]

    def held_calls(self, run_id: str) -> list[dict[str, Any]]:
        rid = parse_bound(run_id)
        run = self._core.runs.get(rid) if rid is not None else None
        return [] if run is None else [
            {"agentId": c.agent_id, "tool": c.tool, "inputs": c.inputs, "status": c.status,
             "outcome": c.outcome, "error": c.error} for c in run.held_calls]

    def live_state(self) -> dict[str, Any]:
        gw = self._core.gateway
        return {"liveCalls": gw.live_calls, "egress": len(gw.egress),
                "counters": sorted([*k, v] for k, v in gw.counters.items())}

    def egress_secrets(self) -> list[str]:
        from refsim.domain.tools import vault_credential
        return sorted({vault_credential(t.name) for t in self._core.tenants.values()})

    def egress_log(self) -> list[dict[str, Any]]:
        return [attrs.asdict(r) for r in self._core.gateway.egress]

    def counter(self, api_key: str, key: str) -> int | None:
        owner = self._core.caller(api_key)
        return None if owner is None else int(self._core.gateway.counter_value(owner.tenant,
                                                                               key))

    def delete_run(self, run_id: str) -> bool:
        rid = parse_bound(run_id)
        return rid is not None and self._core.runs.pop(rid, None) is not None

    def tenant_of(self, api_key: str) -> str | None:
        owner = self._core.caller(api_key)
        return None if owner is None else str(owner.tenant)

    def counters(self, tenant: str, names: Sequence[str]) -> list[int]:
        value = self._core.gateway.counter_value
        return [int(value(tenant, name)) for name in names]

    def live_counters(self) -> Mapping[tuple[str, str], int]:
        counters: Mapping[tuple[str, str], int] = self._core.gateway.counters
        return counters

    def counter_seam(self) -> bool:
        return bool(self._core.profile.counter_seam)

    def unheld_agents(self) -> frozenset[str]:
        return frozenset(self._core.profile.unheld_agents)

    def rewrites_answers(self) -> bool:
        return getattr(self.host, "edge", None) is not None

    def register_suite(self, api_key: str, doc: Mapping[str, Any]) -> bool:
        from refsim.wire.suite_docs import parse_suite
        owner = self._core.caller(api_key)
        return owner is not None and bool(self._core.suites.register(owner.tenant,
                                                                     parse_suite(dict(doc))))

    def resolved_and_derived(self) -> tuple[dict[str, int], dict[str, int]]:
        return ({rid.bound: n for rid, n in self._core.resolutions.items()},
                {rid.bound: n for rid, n in self._core.derivations.items()})

    def copy_of(self, source_id: str, eval_id: str, task_id: str
                ) -> list[tuple[str, Any, Any, bool]] | None:
        source, run = parse_bound(source_id), parse_bound(eval_id)
        held = self._core.runs.get(source) if source is not None else None
        if held is None or run is None:
            return None
        copy = self._core.copies.get(held.run_id, run, task_id)
        return None if copy is None else [(e.tool, e.args, e.response, e.is_error)
                                          for e in copy]

    def copy_count(self, source_id: str) -> int:
        rid = parse_bound(source_id)
        return 0 if rid is None else int(self._core.copies.count_for(rid))



def inspector_of(client: HostClient) -> Inspector | None:
    """The inspector of an in-process host; None for a host behind HTTP."""
    host = getattr(client, "host", client)  # a recording wrapper keeps its host
    return SimInspector(host) if hasattr(host, "core") else None


# ----------------------------------------------------------------------------- observed runs


@attrs.define
class Observed:
    """One request and what the wire said about the run it created: the create answer, the
    run's events (polled until terminal) and its EvalSummary, and the live counter before
    and after when the driver read it. The one observed-run value every driver uses."""

    response: Response
    events: list[dict[str, Any]] = attrs.Factory(list)
    summary: Any = None
    counter_before: int | None = None
    counter_after: int | None = None
    # Whether the run's SSE stream was already judged against its poll (one read per run,
    # however many expectations ask; see expectations._alike_on_the_stream).
    stream_judged: bool = attrs.field(default=False, eq=False, repr=False)
    # Whether its EvalSummary was read a second time (see expectations._alike_read_again).
    summary_reread: bool = attrs.field(default=False, eq=False, repr=False)

    @property
    def run_id(self) -> str | None:
        body = self.response.json
        if (self.response.status in (200, 201) and isinstance(body, dict)
                and isinstance(body.get("runId"), str)):
            return str(body["runId"])
        return None

    @property
    def completed(self) -> bool:
        return any(e.get("type") == "run.completed" for e in self.events)

    @property
    def tenant(self) -> str | None:
        rid = parse_bound(self.run_id) if self.run_id else None
        return None if rid is None else rid.tenant


# ----------------------------------------------------------------------------- what a host offers


def eval_suite_facet(discovery: Any) -> dict[str, Any]:
    if not isinstance(discovery, dict):
        return {}
    agents = discovery.get("agents")
    facet = agents.get("evalSuite") if isinstance(agents, dict) else None
    return facet if isinstance(facet, dict) else {}


@attrs.frozen
class Surface:
    """What a host offers, as its discovery document says: the conformance seams, the
    fixtures it seeded, the agents facet and the capability families. The checker uses a
    seam or a fixture only where the host lists it."""

    readable: bool
    status: int
    seams: frozenset[str] = frozenset()
    fixtures: frozenset[str] = frozenset()
    facet: Mapping[str, Any] = attrs.Factory(dict)
    families: frozenset[str] = frozenset()

    @staticmethod
    def of(discovery: Response) -> Surface:
        doc = discovery.json
        if discovery.status != 200 or not isinstance(doc, dict):
            return Surface(False, discovery.status)
        conformance = doc.get("conformance")
        listed = conformance.get("seams") if isinstance(conformance, dict) else None
        seams = (frozenset(s for s in listed if isinstance(s, str))
            if isinstance(listed, list) else frozenset())
        fixtures = doc.get("fixtures")
        seeded = (frozenset(f for f in fixtures if isinstance(f, str))
            if isinstance(fixtures, list) else frozenset())
        families = frozenset(k for k, v in doc.items()
                             if isinstance(v, dict) and "status" in v and "since" in v)
        return Surface(True, 200, seams, seeded, dict(eval_suite_facet(doc)), families)

    def offers(self, seam: str) -> bool:
        return seam in self.seams

    def lists(self, fixture: str) -> bool:
        return fixture in self.fixtures

    def advertises(self, member: str) -> bool:
        """An agents.evalSuite member (recordedFixtures, fixtureErrors, ...) set to true."""
        return self.facet.get(member) is True

    def family(self, name: str) -> bool:
        """A capability family record at the discovery root (replay, runList, ...)."""
        return name in self.families


_SURFACES: weakref.WeakKeyDictionary[Any, Surface] = weakref.WeakKeyDictionary()


def surface_of(client: HostClient) -> Surface:
    """The host's discovery document, read once per client (a host's discovery does not
    change under the checker)."""
    try:
        return _SURFACES[client]
    except (KeyError, TypeError):
        pass
    found = Surface.of(client.request("GET", "/.well-known/openwop"))
    try:
        _SURFACES[client] = found
    except TypeError:  # a client that cannot be weakly referred to is asked every time
        pass
    return found


def share_surface(wrapper: HostClient, inner: HostClient) -> None:
    """`wrapper`, which sends its requests through `inner`, reads the discovery `inner`
    read (asked once, by `inner`, where neither has yet)."""
    try:
        _SURFACES[wrapper] = surface_of(inner)
    except TypeError:  # a wrapper that cannot be weakly referred to reads its own
        pass


# ----------------------------------------------------------------------------- sessions


def _code(response: Response) -> str:
    body = response.json
    return str(body.get("error")) if isinstance(body, dict) and body.get("error") else ""


@attrs.define
class Session:
    """One tenant's requests to one host. It observes; it never judges.

    The `require_*` methods are the checker's own needs of the host (a seam, a fixture):
    where the host does not offer one they raise `Unobservable`, so that the row stops as
    blocked with the fact named, never as a failure of the host."""

    client: HostClient
    api_key: str
    inspector: Inspector | None = None

    @property
    def surface(self) -> Surface:
        return surface_of(self.client)

    def request(self, method: str, path: str, json: Any = NO_BODY,
                headers: dict[str, str] | None = None) -> Response:
        return self.client.request(method, path, api_key=self.api_key, json=json,
                                   headers=headers)

    def timed(self, method: str, path: str, json: Any = NO_BODY) -> tuple[Response, float]:
        """A request and the seconds it took, as the client saw them."""
        started = time.perf_counter()
        response = self.request(method, path, json=json)
        return response, time.perf_counter() - started

    def create(self, body: Any) -> Response:
        response = self.request("POST", "/runs", json=body)
        if (response.status == 201 and isinstance(response.json, dict)
                and isinstance(response.json.get("runId"), str) and isinstance(body, dict)
                and _keyable(self.client)):  # what the checker made, to tell in a listing
            with _REGISTRY:
                _MADE.setdefault(self.client, {})[response.json["runId"]] = (
                    "eval" if body.get("mode") == "eval" else str(body.get("workflowId")))
                _MAKER.setdefault(self.client, {})[response.json["runId"]] = self.api_key
        return response

    def discovery(self) -> Response:
        return self.client.request("GET", "/.well-known/openwop")

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """Every event of a run, page by page until the run has settled (terminal, or
        waiting for someone) and its last page is read. A host may run a run after
        answering its create: while it is pending or running the poll long-polls, and an
        empty page that came back at once is asked again after a growing pause (bounded by
        RUN_DEADLINE_SECONDS and MAX_POLLS)."""
        events: list[dict[str, Any]] = []
        after, timeout = -1, 2
        pause = 0.005
        deadline = time.monotonic() + RUN_DEADLINE_SECONDS
        for _ in range(MAX_POLLS):
            started = time.monotonic()
            r = self.request("GET", run_path(run_id, f"/events/poll?afterSequence={after}"
                                             f"&timeout={timeout}"))
            if r.status != 200 or not isinstance(r.json, dict):
                return events
            page = [e for e in r.json.get("events", []) if isinstance(e, dict)]
            status = r.json.get("status")
            settled = r.json.get("isTerminal") is True or status in TERMINAL_STATUSES or (
                isinstance(status, str) and status.startswith("waiting"))
            if settled:
                timeout = 0  # nothing is on its way: the next poll need not wait
            if page:
                events.extend(page)
                seq = integral(page[-1].get("sequence", after))
                after = seq if seq is not None and seq > after else after + len(page)
                continue
            if settled or not isinstance(status, str) or time.monotonic() > deadline:
                return events
            if time.monotonic() - started < 0.5:  # the host did not wait: pause instead
                time.sleep(pause)
                pause = min(pause * 2, 0.25)
        return events

    def stream(self, run_id: str) -> list[dict[str, Any]] | None:
        """The run's events as its SSE stream carries them (`GET /runs/{id}/events`), or
        None when the host offers no stream there or none of its frames is an event
        object (frames that are not, an end marker or a keep-alive, are skipped)."""
        return stream_events(self.request("GET", run_path(run_id, "/events")))

    def summary(self, run_id: str) -> Any:
        r = self.request("GET", run_path(run_id, "/eval-summary"))
        return r.json if r.status == 200 else None

    def get_run(self, run_id: str) -> Response:
        return self.request("GET", run_path(run_id))

    def list_runs(self) -> dict[str, str | None] | None:
        """Every run the caller can list (`GET /runs`, gate runList), following cursors:
        its id and the workflowId the listing shows (None if it shows none); None where
        the host does not advertise run listing, or lists more than LIST_MAX_PAGES pages
        (the judge that compares two listings then has nothing to compare: a refusal is
        judged by its answer alone)."""
        if not self.surface.family("runList"):
            return None
        ids: dict[str, str | None] = {}
        cursor: str | None = None
        for _ in range(LIST_MAX_PAGES):
            path = "/runs?limit=100" + (f"&cursor={quote(cursor, safe='')}" if cursor else "")
            r = self.request("GET", path)
            body = r.json if isinstance(r.json, dict) else None
            if r.status != 200 or body is None or not isinstance(body.get("runs"), list):
                return None
            ids.update((str(run.get("runId")), run["workflowId"]
                        if isinstance(run.get("workflowId"), str) else None)
                       for run in body["runs"] if isinstance(run, dict))
            cursor = body.get("nextCursor") if isinstance(body.get("nextCursor"), str) else None
            if not cursor:
                self._remember_listed(ids)
                return ids
        return None

    def _remember_listed(self, listed: Mapping[str, str | None]) -> None:
        """How a listing shows the checker's own runs: by kind, their workflowIds."""
        if not _keyable(self.client):
            return
        with _REGISTRY:
            made = _MADE.get(self.client, {})
            seen = _LISTED.setdefault(self.client, {})
            for run_id, workflow in listed.items():
                if run_id in made and workflow is not None:
                    seen.setdefault(made[run_id], set()).add(workflow)

    def listing_news(self, before: Mapping[str, str | None] | None,
                     kinds: Sequence[str] = ("eval",)
                     ) -> tuple[Mapping[str, str | None], Mapping[str, str | None],
                                frozenset[str]] | None:
        """What §B's "before the run starts" is judged on, by listing: the listing before
        (`before`) and now, and the workflowIds that are other traffic of the tenant's
        (`judges.no_new_runs`). A new run the listing shows under a workflowId that
        listings showed for the checker's own runs of another kind (a no-op workflow run,
        say) and never for one of `kinds` (an eval run) is such traffic. None where either
        listing cannot be read (other traffic may push it past LIST_MAX_PAGES)."""
        after = self.list_runs()
        if before is None or after is None:
            return None
        seen = _listed(self.client)
        known = set().union(*seen.values()) if seen else set()
        if any(w is not None and w not in known for w in after.values()):
            seen = self._learn_workflows()
        related = set().union(*(seen.get(kind, set()) for kind in kinds))
        # A listing that shows a catalog workflow by its own id shows a run of it.
        others = set().union(*(w for kind, w in seen.items() if kind not in kinds),
                             CATALOG_WORKFLOWS - set(kinds))
        return before, after, frozenset(others - related)

    def _learn_workflows(self) -> dict[str, set[str]]:
        """The workflowId of one run of each kind the checker made that no listing has
        shown yet, read from its snapshot (at most a few reads a kind, once)."""
        if not _keyable(self.client):
            return {}
        with _REGISTRY:
            made = list(_MADE.get(self.client, {}).items())
            makers = dict(_MAKER.get(self.client, {}))
        known = set(_listed(self.client))  # the kinds learnt (from here on, by this loop)
        tried: dict[str, int] = {}
        for run_id, kind in made:
            # Its maker's run only: another tenant's is not this caller's to read.
            if (kind in known or tried.get(kind, 0) >= 3
                    or makers.get(run_id, self.api_key) != self.api_key):
                continue
            tried[kind] = tried.get(kind, 0) + 1
            r = self.get_run(run_id)
            workflow = r.json.get("workflowId") if isinstance(r.json, dict) else None
            if r.status == 200 and isinstance(workflow, str):
                known.add(kind)
                with _REGISTRY:
                    _LISTED.setdefault(self.client, {}).setdefault(kind, set()).add(workflow)
        return _listed(self.client)

    def counter(self, key: str = COUNTER_KEY) -> int | None:
        """The live counter through the seam, or None when it cannot be observed."""
        if self.surface.readable and not self.surface.offers(SEAM_COUNTER):
            return None
        r = self.request("GET", f"/conformance/seams/eval-counter?key={key}")
        return _count_of(r)

    def require_counter(self, key: str = COUNTER_KEY) -> int:
        """The live counter, or `Unobservable` (blocked) naming why it cannot be read."""
        r = self._seam(SEAM_COUNTER, "GET", f"/conformance/seams/eval-counter?key={key}")
        count = _count_of(r)
        if count is None:
            raise Unobservable(f"the conformance seam {SEAM_COUNTER} answered without an "
                               "integer count, so the live counter cannot be read")
        return count

    def _seam(self, seam: str, method: str, path: str, json: Any = NO_BODY) -> Response:
        if not self.surface.offers(seam):
            raise Unobservable(f"the host does not advertise the conformance seam {seam} "
                               "(discovery conformance.seams), which the check needs")
        r = self.request(method, path, json=json)
        if not 200 <= r.status < 300:
            raise Unobservable(f"the conformance seam {seam} is advertised but answered "
                               f"{r.status} {_code(r)}".rstrip() + ", so the check cannot "
                               "use it")
        return r

    def workflow(self, workflow_id: str, inputs: dict[str, Any] | None = None,
                 **extra: Any) -> Response:
        body: dict[str, Any] = {"workflowId": workflow_id}
        if inputs is not None:
            body["inputs"] = inputs
        body.update(extra)
        return self.create(body)

    def require_fixture(self, fixture: str) -> str:
        """A fixture the check runs (a workflow, an agent or tool of the catalog), or
        `Unobservable` (blocked) when discovery does not list it."""
        if not self.surface.lists(fixture):
            raise Unobservable(f"the host does not list the conformance fixture {fixture} "
                               "(discovery fixtures), which the check runs")
        return fixture

    def fork(self, run_id: str, mode: str = "replay", **body: Any) -> Response:
        return self.request("POST", run_path(run_id, ":fork"), json={"mode": mode, **body})

    def erase(self, run_id: str) -> Response:
        """The erase seam: the run's tool content and every copy derived from it."""
        return self.request("POST", "/conformance/seams" + run_path(run_id, ":erase"))

    def require_erase(self, run_id: str) -> Response:
        return self._seam(SEAM_ERASE, "POST", "/conformance/seams" + run_path(run_id, ":erase"))

    def resolve(self, run_id: str) -> Response:
        return self.request("POST", "/conformance/seams" + run_path(run_id, ":resolve"))

    def require_resolve(self, run_id: str) -> Response:
        return self._seam(SEAM_RESOLVE, "POST",
                          "/conformance/seams" + run_path(run_id, ":resolve"))

    def register_suite(self, suite: Any) -> Response:
        return self.request("POST", "/conformance/seams/eval-suites", json={"suite": suite})

    def require_suite(self, fixture: str, doc: Mapping[str, Any], tag: str) -> str:
        """The evalSuiteRef of a catalog suite on this host: its fixture id where discovery
        lists it, else the document registered through the suite seam (under a suiteId
        unique to this run of the check, `tag`), else `Unobservable`."""
        if self.surface.lists(fixture):
            return fixture
        if not self.surface.offers(SEAM_SUITES):
            raise Unobservable(f"the host neither lists the catalog suite {fixture} "
                               "(discovery fixtures) nor advertises the suite seam "
                               f"{SEAM_SUITES}")
        suite_id = f"{doc['suiteId']}-{tag}"
        self._seam(SEAM_SUITES, "POST", "/conformance/seams/eval-suites",
                   {"suite": {**doc, "suiteId": suite_id}})
        return suite_id

    def add_tenant(self, name: str, api_key: str, workspace: str | None = None) -> Response:
        body: dict[str, Any] = {"name": name, "apiKey": api_key}
        if workspace is not None:
            body["workspace"] = workspace
        return self.request("POST", "/conformance/seams/tenants", json=body)

    def require_tenant(self, name: str, api_key: str, workspace: str | None = None
                       ) -> Response:
        body: dict[str, Any] = {"name": name, "apiKey": api_key}
        if workspace is not None:
            body["workspace"] = workspace
        return self._seam(SEAM_TENANTS, "POST", "/conformance/seams/tenants", body)

    def observe(self, response: Response, *, counter_key: str | None = None,
                counter_before: int | None = None) -> Observed:
        """The observed run of a response: its events and summary, when it created one."""
        obs = Observed(response, counter_before=counter_before)
        if obs.run_id is not None:
            obs.events = self.events(obs.run_id)
            obs.summary = self.summary(obs.run_id)
        if counter_key is not None:
            obs.counter_after = self.counter(counter_key)
        return obs

    def eval(self, suite: str, fixture_runs: dict[str, Any] | None = None, *,
             counter_key: str | None = None, **extra: Any) -> Observed:
        """Create an eval run and observe it (the counter around it, when a key is given)."""
        before = self.counter(counter_key) if counter_key is not None else None
        return self.observe(self.create(eval_body(suite, fixture_runs, **extra)),
                            counter_key=counter_key, counter_before=before)

    def agent_run(self, script: list[Any], agent_id: str = RECORDER) -> Observed:
        """A workflow run of an agent with a script: a usable source when it completes."""
        return self.observe(self.workflow("conformance-agent-call",
                                          {"agentId": agent_id, "script": script}))

    def forked(self, run_id: str, mode: str) -> Observed:
        return self.observe(self.fork(run_id, mode))


CATALOG_WORKFLOWS = frozenset({"conformance-agent-call", "conformance-noop",
                               "conformance-wait-input"})
_NOISE: weakref.WeakKeyDictionary[Any, frozenset[str]] = weakref.WeakKeyDictionary()
# Per client: the runs the checker made (201 to a create), by kind ("eval", or the
# workflowId it named), so that a run listing's workflows can be told apart.
_MADE: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()
# Per client: by kind, the workflowIds run listings showed for the checker's own runs.
_LISTED: weakref.WeakKeyDictionary[Any, dict[str, set[str]]] = weakref.WeakKeyDictionary()
# Per client: the key that made each of those runs (a run is read back by its maker).
_MAKER: weakref.WeakKeyDictionary[Any, dict[str, str | None]] = weakref.WeakKeyDictionary()
# Rows in lanes (`refsim.check.lanes`) share one client from several threads: the maps
# above are written and copied under this lock.
_REGISTRY = threading.Lock()


def _listed(client: Any) -> dict[str, set[str]]:
    """A copy of `_LISTED[client]` (empty where the client cannot key it)."""
    if not _keyable(client):
        return {}
    with _REGISTRY:
        return {kind: set(w) for kind, w in _LISTED.get(client, {}).items()}


def _keyable(client: Any) -> bool:
    """Whether a client can key the weak per-client maps (weakly referable, hashable)."""
    try:
        weakref.ref(client)
        hash(client)
    except TypeError:
        return False
    return True
NOISE_SAMPLES = 3


def stream_events(r: Response) -> list[dict[str, Any]] | None:
    """The run events an answer to `GET /runs/{id}/events` carries as its SSE stream, or
    None when it is no stream or none of its frames is an event object (frames that are
    not, an end marker or a keep-alive, are skipped)."""
    from refsim.wire.sse import parse_sse
    kind = (r.header("Content-Type") or "").split(";")[0].strip().lower()
    if r.status != 200 or kind != "text/event-stream":
        return None
    out: list[dict[str, Any]] = []
    others = 0
    for frame in parse_sse(r.body.decode("utf-8", "replace")):
        try:
            doc = frame.json()
        except ValueError:
            doc = None
        if isinstance(doc, dict) and "type" in doc:
            out.append(doc)
        else:  # a frame that is no run event (an end marker, a keep-alive) is skipped
            others += 1
    return out if out or not others else None


def _count_of(r: Response) -> int | None:
    if r.status != 200 or not isinstance(r.json, dict):
        return None
    return integral(r.json.get("count"))


# ----------------------------------------------------------------------------- the keys


_VERSION = re.compile(r"^\d+\.\d+$")


def discovery_refused(client: HostClient) -> str | None:
    """Why the host at a base URL is no OpenWOP v2 host, in one line naming what came back,
    or None. Asked first, before any key or row: its discovery document
    (`GET /.well-known/openwop`) must be a JSON object with what every v2 discovery holds
    (capabilities.schema.json: `protocolVersions`, strings `<major>.<minor>` naming a
    2.x version, and `preferredVersion`). Only what the schema requires is asked: the
    members it closes over (vendor ones) are not this preflight's business."""
    where = f"{getattr(client, 'base_url', client.name)}/.well-known/openwop"
    r = client.request("GET", "/.well-known/openwop", headers={"OpenWOP-Version": "2"})
    said = " ".join((r.text or "").split())
    said = f": {said[:80]}{'...' if len(said) > 80 else ''}" if said else " (no body)"
    if r.status != 200:
        return (f"{where} answered {r.status}{said}; an OpenWOP v2 host answers its "
                "discovery document there (is --base-url the host's root?)")
    body = r.json
    if not isinstance(body, dict):
        return (f"{where} answered 200 with no JSON object{said}; an OpenWOP v2 host's "
                "discovery document is one")
    versions = body.get("protocolVersions")
    if not (isinstance(versions, list) and versions
            and all(isinstance(v, str) and _VERSION.match(v) for v in versions)
            and isinstance(body.get("preferredVersion"), str)):
        return (f"{where} answered a JSON object that is no OpenWOP discovery document (no "
                f"protocolVersions of <major>.<minor> strings and preferredVersion){said}")
    if not any(v.split(".")[0] == "2" for v in versions):
        return (f"{where} names protocolVersions {versions}: no 2.x, and refsim checks "
                "OpenWOP v2")
    return None


def keys_refused(client: HostClient, api_key: str, tenant_b_key: str | None) -> str | None:
    """Why the API keys given cannot drive a check, in one line, or None. Asked before any
    row runs: a key the host refuses would turn every row into a failure that is no
    breach, and one tenant given twice would make tenant isolation look broken."""
    if tenant_b_key is not None and tenant_b_key == api_key:
        return ("the same API key is given for both tenants: --tenant-b-api-key must be a "
                "second tenant's key")
    probe = "/runs/" + project(f"{NO_SUCH_TENANT}/{UNKNOWN_OPAQUE}")
    for label, key in (("--api-key", api_key), ("--tenant-b-api-key", tenant_b_key)):
        if key is None:
            continue
        r = client.request("GET", probe, api_key=key)
        if r.status == 401:
            return (f"the host refuses the key given as {label} (401 {_code(r)}): check "
                    "the key".replace(" ()", ""))
    if tenant_b_key is None:
        return None
    a = Session(client, api_key)
    fixture = next((f for f in (SOURCE, "conformance-noop") if a.surface.lists(f)), None)
    if fixture is None:
        return None
    made = a.create(eval_body(SOURCE) if fixture == SOURCE else {"workflowId": fixture})
    run_id = (made.json.get("runId") if made.status == 201 and isinstance(made.json, dict)
        else None)
    if isinstance(run_id, str) and client.request("GET", run_path(run_id),
                                                  api_key=tenant_b_key).status == 200:
        return ("the two keys name one tenant (the key given as --tenant-b-api-key reads a "
                "run made with --api-key): give a second tenant's key")
    return None


# ----------------------------------------------------------------------------- the gate


@attrs.frozen
class Gate:
    """Whether RFC 0252's host rows apply, and why not. `untested` names an advertised
    capability the gate left unjudged (the report says so; `--strict` makes it exit 2)."""

    reason: str | None
    untested: str | None = None
    seams: frozenset[str] = frozenset()
    # Discovery could not be read: whether the rows apply is unknown, so they are blocked
    # (the suite could not learn the host's facts), never inapplicable (which certifies).
    unread: bool = False

    @property
    def applies(self) -> bool:
        return self.reason is None

    @property
    def disposition(self) -> Disposition:
        """What a row the gate stops records: blocked where discovery was not read, else
        inapplicable (the host's discovery says the rows do not apply)."""
        return Disposition.BLOCKED if self.unread else Disposition.INAPPLICABLE


def gate(discovery: Response | Surface, *, fixtures: bool = True) -> Gate:
    """The one gate: discovery readable, recordedFixtures and fixtureMatching advertised,
    and (when `fixtures`) the three conformance fixtures listed in discovery `fixtures`."""
    surface = discovery if isinstance(discovery, Surface) else Surface.of(discovery)
    if not surface.readable:
        return Gate(f"discovery (GET /.well-known/openwop) answered {surface.status} without "
                    "a JSON object, so what the host advertises could not be read",
                    unread=True)
    seams = surface.seams
    if not surface.advertises("recordedFixtures"):
        return Gate("the host does not advertise agents.evalSuite.recordedFixtures", None, seams)
    if not surface.advertises("fixtureMatching"):
        return Gate("the host does not advertise agents.evalSuite.fixtureMatching", None, seams)
    if fixtures:
        missing = [f for f in FIXTURES if not surface.lists(f)]
        if missing:
            return Gate("discovery fixtures does not list " + ", ".join(missing),
                        "agents.evalSuite.recordedFixtures (advertised with fixtureMatching, "
                        "but without the three conformance fixtures it went untested)", seams)
    return Gate(None, None, seams)
