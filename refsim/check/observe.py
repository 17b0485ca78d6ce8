"""The checker's one observation layer: a session makes requests, an `Observed` run holds
what the wire said about one request, `gate` says whether RFC 0252's rows apply to a host,
and an `Inspector` reads what only the simulator can see.

Every driver (legs, example table, invariants, demo, machine) observes through this module;
judging is for `refsim.check.judges`.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any, Protocol

import attrs

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
MAX_POLLS = 50
SEAM_COUNTER, SEAM_ERASE, SEAM_RESOLVE = "eval-counter", "runs:erase", "runs:resolve"
SEAM_SUITES, SEAM_TENANTS = "eval-suites", "tenants"


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

    def known_runs(self) -> list[tuple[str, str]]:
        """(run id, owner's API key) of every run the host holds."""
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

    def known_runs(self) -> list[tuple[str, str]]:
        keys = {t.name: k for k, t in self._core.tenants.items()}
        return [(rid.bound, keys[run.owner.tenant]) for rid, run in self._core.runs.items()
                if run.owner.tenant in keys]


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

    @property
    def run_id(self) -> str | None:
        body = self.response.json
        if self.response.status in (200, 201) and isinstance(body, dict) \
                and isinstance(body.get("runId"), str):
            return str(body["runId"])
        return None

    @property
    def completed(self) -> bool:
        return any(e.get("type") == "run.completed" for e in self.events)

    @property
    def tenant(self) -> str | None:
        rid = parse_bound(self.run_id) if self.run_id else None
        return None if rid is None else rid.tenant


# ----------------------------------------------------------------------------- sessions


@attrs.define
class Session:
    """One tenant's requests to one host. It observes; it never judges."""

    client: HostClient
    api_key: str
    inspector: Inspector | None = None

    def request(self, method: str, path: str, json: Any = NO_BODY,
                headers: dict[str, str] | None = None) -> Response:
        return self.client.request(method, path, api_key=self.api_key, json=json,
                                   headers=headers)

    def create(self, body: Any) -> Response:
        return self.request("POST", "/runs", json=body)

    def discovery(self) -> Response:
        return self.client.request("GET", "/.well-known/openwop")

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """Every event of a run, polling page by page until it is terminal (bounded)."""
        events: list[dict[str, Any]] = []
        after = -1
        for _ in range(MAX_POLLS):
            r = self.request("GET", run_path(run_id, f"/events/poll?afterSequence={after}"
                                             "&timeout=2"))
            if r.status != 200 or not isinstance(r.json, dict):
                return events
            page = [e for e in r.json.get("events", []) if isinstance(e, dict)]
            events.extend(page)
            if page:
                seq = page[-1].get("sequence", after)
                after = seq if isinstance(seq, int) and seq > after else after + len(page)
            # Stop at the first empty page: a terminal run has no more, and a run still
            # waiting (the host long-polled for `timeout`) has nothing coming soon.
            if not page:
                return events
        return events

    def summary(self, run_id: str) -> Any:
        r = self.request("GET", run_path(run_id, "/eval-summary"))
        return r.json if r.status == 200 else None

    def get_run(self, run_id: str) -> Response:
        return self.request("GET", run_path(run_id))

    def counter(self, key: str = COUNTER_KEY) -> int | None:
        """The live counter through the seam, or None when it cannot be observed."""
        r = self.request("GET", f"/conformance/seams/eval-counter?key={key}")
        if r.status != 200 or not isinstance(r.json, dict):
            return None
        count = r.json.get("count")
        return count if isinstance(count, int) and not isinstance(count, bool) else None

    def workflow(self, workflow_id: str, inputs: dict[str, Any] | None = None,
                 **extra: Any) -> Response:
        body: dict[str, Any] = {"workflowId": workflow_id}
        if inputs is not None:
            body["inputs"] = inputs
        body.update(extra)
        return self.create(body)

    def fork(self, run_id: str, mode: str = "replay", **body: Any) -> Response:
        return self.request("POST", run_path(run_id, ":fork"), json={"mode": mode, **body})

    def erase(self, run_id: str, *, held_calls_only: bool = False) -> Response:
        """The erase seam: the run's tool content and every copy derived from it, or (with
        `held_calls_only`) a retention lapse: only the run's held calls go."""
        scope = "?scope=held-calls" if held_calls_only else ""
        return self.request("POST", "/conformance/seams" + run_path(run_id, ":erase") + scope)

    def resolve(self, run_id: str) -> Response:
        return self.request("POST", "/conformance/seams" + run_path(run_id, ":resolve"))

    def register_suite(self, suite: Any) -> Response:
        return self.request("POST", "/conformance/seams/eval-suites", json={"suite": suite})

    def add_tenant(self, name: str, api_key: str, workspace: str | None = None) -> Response:
        body: dict[str, Any] = {"name": name, "apiKey": api_key}
        if workspace is not None:
            body["workspace"] = workspace
        return self.request("POST", "/conformance/seams/tenants", json=body)

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


# ----------------------------------------------------------------------------- the gate


@attrs.frozen
class Gate:
    """Whether RFC 0252's host rows apply, and why not. `untested` names an advertised
    capability the gate left unjudged (the report says so; `--strict` makes it exit 2)."""

    reason: str | None
    untested: str | None = None
    seams: frozenset[str] = frozenset()

    @property
    def applies(self) -> bool:
        return self.reason is None


def eval_suite_facet(discovery: Any) -> dict[str, Any]:
    if not isinstance(discovery, dict):
        return {}
    agents = discovery.get("agents")
    facet = agents.get("evalSuite") if isinstance(agents, dict) else None
    return facet if isinstance(facet, dict) else {}


def gate(discovery: Response, *, fixtures: bool = True) -> Gate:
    """The one gate: discovery readable, recordedFixtures and fixtureMatching advertised,
    and (when `fixtures`) the three conformance fixtures listed in discovery `fixtures`."""
    if discovery.status != 200 or not isinstance(discovery.json, dict):
        return Gate(f"discovery answered {discovery.status}; the host advertises nothing "
                    "readable")
    doc = discovery.json
    conformance = doc.get("conformance")
    listed_seams = conformance.get("seams") if isinstance(conformance, dict) else None
    seams = frozenset(s for s in listed_seams if isinstance(s, str)) \
        if isinstance(listed_seams, list) else frozenset()
    facet = eval_suite_facet(doc)
    if facet.get("recordedFixtures") is not True:
        return Gate("the host does not advertise agents.evalSuite.recordedFixtures", None, seams)
    if facet.get("fixtureMatching") is not True:
        return Gate("the host does not advertise agents.evalSuite.fixtureMatching", None, seams)
    if fixtures:
        listed = doc.get("fixtures")
        missing = [f for f in FIXTURES if not isinstance(listed, list) or f not in listed]
        if missing:
            return Gate("discovery fixtures does not list " + ", ".join(missing),
                        "agents.evalSuite.recordedFixtures (advertised with fixtureMatching, "
                        "but without the three conformance fixtures it went untested)", seams)
    return Gate(None, None, seams)
