"""Running one row of the example table: `RowRun` performs its setup actions and requests
in order, captures the runs they make, and judges each request by its expectations.

Part of `refsim.check.examples` (import the runner from there; `run_example` there judges a
row into a report `Row`). How a step of a row is performed or judged changes here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from refsim.check import judges
from refsim.check.differential import noise_of_host
from refsim.check.examples.actions import ACTIONS
from refsim.check.examples.rows import Action, Example, Expected, RowRequest
from refsim.check.expectations import EXPECTATIONS
from refsim.check.findings import Disposition, Finding
from refsim.check.observe import RECORDER, Inspector, Observed, Session, Unobservable, nonce
from refsim.domain.ids import parse_bound
from refsim.wire import catalog
from refsim.wire.client import HostClient
from refsim.wire.response import Response

NOOP_WORKFLOW = "conformance-noop"  # a catalog workflow that makes a run and calls nothing


class _Unbound(Exception):
    """A `$name` whose run was never captured, because the action that makes it failed."""


# The expectations that only say the request was answered as a control expects: a row
# whose every other expectation could not be observed on a host has observed no claim.
CONTROLS = frozenset({"status", "error"})


@attrs.define
class RowRun:
    example: Example
    host: HostClient
    inspector: Inspector | None
    keys: dict[str, str]
    findings: list[Finding] = attrs.Factory(list)
    runs: dict[str, str] = attrs.Factory(dict)  # captured name -> bound run id
    owners: dict[str, str] = attrs.Factory(dict)  # captured name -> tenant label
    responses: dict[str, Response] = attrs.Factory(dict)
    current_args: dict[str, Any] = attrs.Factory(dict)
    # The tenant each label names on this host (learnt from the runs it mints), so a literal
    # id written `acme/...` in the table names the caller's own tenant whatever it is called.
    tenant_names: dict[str, str] = attrs.Factory(dict)
    # Unique to this run of the row: suiteIds it registers through the suite seam carry
    # it, so a host that has seen the row before answers as if new.
    tag: str = attrs.Factory(nonce)
    # (tenant label, catalog fixture id or suiteId) -> the evalSuiteRef to send.
    suite_refs: dict[tuple[str, str], str] = attrs.Factory(dict)
    # Claims (findings of expectations other than the controls) judged, and what could not
    # be observed on this host (an expectation the host's wire cannot carry).
    claims: int = 0
    notes: list[str] = attrs.Factory(list)
    # Why an expectation could not be judged for want of what the host does not offer (a
    # seam): the row is blocked for it, unless a claim it could judge failed.
    blocked: list[str] = attrs.Factory(list)
    current: Action | None = None
    # label -> the action and its arguments as sent: a refusal can be asked for again.
    performed: dict[str, tuple[Action, dict[str, Any]]] = attrs.Factory(dict)
    last_args: dict[str, Any] = attrs.Factory(dict)

    @property
    def req(self) -> str:
        return self.example.requirement_id

    @property
    def counter_keys(self) -> tuple[str, ...]:
        return self.example.counter_keys

    @property
    def noise(self) -> frozenset[str]:
        return noise_of_host(self.session("acme"))

    def session(self, tenant: str) -> Session:
        return Session(self.host, self.keys[tenant], self.inspector)

    @property
    def length(self) -> int:
        """The row's steps: its setup actions, then its requests."""
        return len(self.example.setup) + len(self.example.requests)

    def run(self) -> list[Finding]:
        for index in range(self.length):
            found, go_on = self.step(index)
            self.findings += found
            if not go_on:
                break
        return self.findings

    def step(self, index: int) -> tuple[list[Finding], bool]:
        """Step `index` of the row (setup actions first, then requests): its findings, and
        whether the row can go on (a setup action that failed, or a `$name` never bound,
        ends it). The stateful machine runs a row this way, one rule step per row step."""
        setup = self.example.setup
        if index < len(setup):
            action = setup[index]
            what = f"setup {index + 1} ({action.kind})"
            if action.kind == "register_suite":
                ref, how = self.register(action)
                # require_suite stops the row where the suite cannot be made available
                return [judges.done(self.req, True,
                                    f"{what}: the suite is there as {ref} ({how})")], True
            try:
                response = self.perform(action)
            except _Unbound as exc:
                return [judges.could_not_go_on(self.req, what, str(exc))], False
            done = ACTIONS[action.kind].judge_setup(self.req, response, what)
            if done.ok:
                self.capture(action, response)
            return [done], done.ok
        request = self.example.requests[index - len(setup)]
        try:
            return self.request(request), True
        except _Unbound as exc:
            return [judges.could_not_go_on(self.req, request.label, str(exc))], False

    # -- acting

    def subst(self, value: Any) -> Any:
        if isinstance(value, str):
            if value.startswith("$$"):
                return value[1:]
            if value.startswith("$"):
                name = value[1:]
                if name not in self.runs:
                    raise _Unbound(f"${name} was never captured (the action that creates it "
                                   "did not succeed)")
                return self.runs[name]
            head, sep, rest = value.partition("/")
            if sep and head in self.tenant_names and self.tenant_names[head] != head:
                return f"{self.tenant_names[head]}/{rest}"
            return value
        if isinstance(value, dict):
            return {k: self.subst(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.subst(v) for v in value]
        return value

    def register(self, action: Action) -> tuple[str, str]:
        """Make a suite the row runs available to the action's tenant: a catalog suite by
        its fixture id where discovery lists it, else through the suite seam (a row-local
        suite only that way); `Unobservable` where neither is offered."""
        suite, tenant = action.args["suite"], action.tenant
        session = self.session(tenant)
        if isinstance(suite, str):
            key = suite
            listed = session.surface.lists(suite)
            ref = self.suite_refs.get((tenant, suite)) or session.require_suite(
                suite, catalog.suite(suite), self.tag)  # once per tenant (and machine example)
        else:
            key, listed = str(suite["suiteId"]), False
            ref = session.require_suite(key, suite, self.tag)
        self.suite_refs[(tenant, key)] = ref
        return ref, ("listed in discovery fixtures" if listed
                     else "registered through the suite seam")

    def suite_ref(self, tenant: str, suite: str) -> str:
        """The evalSuiteRef for a suite the row names: one registered for this tenant, a
        catalog suite made available now, or the value as it stands (a suiteId)."""
        if (tenant, suite) in self.suite_refs:
            return self.suite_refs[(tenant, suite)]
        if catalog.is_suite(suite):
            ref = self.session(tenant).require_suite(suite, catalog.suite(suite), self.tag)
            self.suite_refs[(tenant, suite)] = ref
            return ref
        return suite

    def learn_tenant(self, label: str) -> str:
        """The host's name for the row's tenant `label` (acme, globex): the tenant segment
        of a run it makes (a run of the no-op workflow, where the host lists it); the label
        itself where nothing can be learnt."""
        session = self.session(label)
        if label not in ("acme", "globex") or not session.surface.lists(NOOP_WORKFLOW):
            return label
        made = session.workflow(NOOP_WORKFLOW)
        rid = parse_bound(made.json["runId"]) if made.status == 201 and isinstance(
            made.json, dict) and isinstance(made.json.get("runId"), str) else None
        if rid is None:
            return label
        self.tenant_names.setdefault(label, rid.tenant)
        return rid.tenant

    def _settle(self, args: Mapping[str, Any]) -> None:
        """A host may answer a create (or a cancel, a resolve) before the run has
        finished, and a source still running is rightly refused (§C): each captured run a
        request names as a source is read by its owner until it settles (terminal, or
        waiting for someone) first."""
        named = (list((args.get("fixture_runs") or {}).values())
            if isinstance(args.get("fixture_runs"), dict) else [])
        extra = args.get("extra")
        if isinstance(extra, dict):
            named.append(extra.get("baselineRunId"))
        by_id = {run_id: name for name, run_id in self.runs.items()}
        for value in named:
            if isinstance(value, str) and value in by_id:
                self.session(self.owners.get(by_id[value], "acme")).events(value)

    def perform(self, action: Action, args: dict[str, Any] | None = None) -> Response:
        kind = action.kind
        session = self.session(action.tenant)
        self.current_args = dict(action.args)
        self.current = action
        if args is None:
            args = self.subst(dict(action.args))
        self.last_args = args
        if kind in ("create_eval", "create_workflow"):
            self._settle(args)
        return ACTIONS[kind].send(self, session, action.tenant, args)

    def ask(self, label: str) -> Callable[[], Response]:
        """The request labelled `label`, as it was sent, to be made again (a refusal)."""
        action, args = self.performed[label]
        return lambda: self.perform(action, dict(args))

    def control(self, values: Sequence[str]) -> Response | None:
        """The request just made, made again with each of `values` replaced by a control
        value of the same shape (`judges.control_value`): what the host says whatever the
        value is. Only for a request the host refused (it changes nothing)."""
        action = self.current
        if action is None:
            return None
        text = json.dumps(self.subst(dict(action.args)))
        for value in values:
            text = text.replace(json.dumps(value)[1:-1], json.dumps(
                judges.control_value(value))[1:-1])
        return self.perform(action, json.loads(text))

    def capture(self, action: Action, response: Response) -> None:
        body = response.json
        if (response.status in (200, 201) and isinstance(body, dict)
                and isinstance(body.get("runId"), str)):
            rid = parse_bound(body["runId"])
            if rid is not None:
                self.tenant_names.setdefault(action.tenant, rid.tenant)
        name = action.capture
        if name is None:
            return
        if action.kind == "add_tenant":
            self.keys[name] = f"{action.args['api_key']}-{self.tag}"
            return
        if (response.status in (200, 201) and isinstance(body, dict)
                and isinstance(body.get("runId"), str)):
            self.runs[name] = body["runId"]
            self.owners[name] = action.tenant

    def request(self, request: RowRequest) -> list[Finding]:
        tenant = request.action.tenant
        judged = self._judged(request)
        before = {}
        for e in judged:
            try:
                before[e.name] = EXPECTATIONS[e.name].before(self, e.value, tenant)
            except Unobservable as exc:
                if exc.disposition not in (Disposition.INAPPLICABLE, Disposition.BLOCKED):
                    raise
                before[e.name] = exc
        response = self.perform(request.action)
        self.responses[request.label] = response
        self.performed[request.label] = (request.action, self.last_args)
        self.capture(request.action, response)
        observed = self.observe(request, response)
        agent = str(request.action.args.get("agent", RECORDER))
        out: list[Finding] = []
        names = {e.name for e in request.expect}
        for e in judged:
            if e.name == "error" or (e.name == "status" and "error" in names):
                continue  # judged together below
            try:
                if isinstance(before[e.name], Unobservable):
                    raise before[e.name]
                found = EXPECTATIONS[e.name].judge(self, request.label, e.value, observed,
                                                   before[e.name], tenant, agent)
            except Unobservable as exc:
                if exc.disposition is Disposition.BLOCKED:
                    # The rest of the request is still judged: a seam the host does not
                    # offer must not hide a breach the wire shows.
                    if exc.reason not in self.blocked:
                        self.blocked.append(exc.reason)
                    continue
                if exc.disposition is not Disposition.INAPPLICABLE:
                    raise
                self.notes.append(f"{request.label}: {e.name}: {exc.reason}")
                continue
            if e.name not in CONTROLS:
                self.claims += len(found)
            out += [_labelled(request.label, f) for f in found]
        if "error" in names:
            status = next(e.value for e in request.expect if e.name == "status")
            code = next(e.value for e in request.expect if e.name == "error")
            out = judges.refused(self.req, response, request.label, status=status,
                                 code=code) + out
        return out

    def _judged(self, request: RowRequest) -> list[Expected]:
        """The request's expectations this host can witness: without the inside, those
        that need it and have no outside form are left out (the row's detail says so)."""
        if self.inspector is not None:
            return list(request.expect)
        return [e for e in request.expect if EXPECTATIONS[e.name].observable_outside]

    def observe(self, request: RowRequest, response: Response) -> Observed:
        if not any(EXPECTATIONS[e.name].reads_run for e in request.expect):
            return Observed(response)
        session = self.session(request.action.tenant)
        return session.observe(response)

    # -- observing

    def counter(self, tenant: str, key: str) -> int | None:
        return self.session(tenant).require_counter(key)

    def events_of(self, ref: str) -> list[dict[str, Any]]:
        name = ref.removeprefix("$")
        tenant = self.owners.get(name, "acme")
        return self.session(tenant).events(self.subst(ref))


def _labelled(label: str, finding: Finding) -> Finding:
    """Name the request in a finding whose judge could not (it takes no `what`)."""
    if finding.message.startswith(label + ":") or finding.message.startswith(label + " ("):
        return finding
    return attrs.evolve(finding, message=f"{label}: {finding.message}")
