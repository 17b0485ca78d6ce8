"""The conformance scenario `v2-eval-recorded-fixtures`: RFC 0252's six legs over any host.

Gates on what the host advertises; runs positive controls before judging refusals alike.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs

from refsim import paths
from refsim.check import judges
from refsim.check.findings import Disposition, Finding, Row, check, fail
from refsim.check.session import DRIFT, RECORDER, REPLAY, SOURCE, Session, eval_body
from refsim.wire.client import HostClient
from refsim.wire.response import Response

SCENARIO = "v2-eval-recorded-fixtures"
SCENARIO_ROW = "openwop.scenario." + SCENARIO
P = "openwop.requirement.0252."
SHAPE, REPLAYED, DRIFTED = P + "shape", P + "source-replayed", P + "drift-fails-closed"
REFUSED, UNIFORM, FIELDS = P + "source-refused", P + "source-uniform", P + "fields-refused"
UNIFORM_BODY = "refsim.requirement.0252.source-uniform-body"
LEGS = (SHAPE, REPLAYED, DRIFTED, REFUSED, UNIFORM, FIELDS)
HOST_LEGS = (*LEGS[1:], UNIFORM_BODY)
FIXTURES = (SOURCE, REPLAY, DRIFT)
# A well-formed id under the caller's tenant that no host minted.
UNKNOWN_OPAQUE = "run-0252unknown0000000"


@attrs.frozen
class ScenarioConfig:
    api_key: str
    tenant_b_api_key: str | None = None


def load_vectors() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for file in sorted((paths.SPECS / "vectors").glob("*.json")):
        out.extend(json.loads(file.read_text(encoding="utf-8"))["vectors"])
    return out


def shape_leg() -> Row:
    """Server-free: the schema vectors for fixtureRuns, the facet member and eval.started."""
    vectors = load_vectors()
    return Row.judged(SHAPE, SCENARIO, [judges.schema_vector(SHAPE, v) for v in vectors])


def gate(discovery: Response) -> str | None:
    """The reason the host legs do not apply, or None when they do."""
    if discovery.status != 200 or not isinstance(discovery.json, dict):
        return f"discovery answered {discovery.status}; the host advertises nothing readable"
    facet = judges.eval_suite_facet(discovery.json)
    if facet.get("recordedFixtures") is not True:
        return "the host does not advertise agents.evalSuite.recordedFixtures"
    if facet.get("fixtureMatching") is not True:
        return "the host does not advertise agents.evalSuite.fixtureMatching"
    listed = discovery.json.get("fixtures")
    missing = [f for f in FIXTURES if not isinstance(listed, list) or f not in listed]
    if missing:
        return "discovery fixtures does not list " + ", ".join(missing)
    return None


@attrs.define
class _Run:
    """Observations of one leg run, gathered before any judging."""

    session: Session
    created: Response | None = None
    events: list[dict[str, Any]] = attrs.Factory(list)
    summary: Any = None

    def create(self, body: Any) -> _Run:
        self.created = self.session.create(body)
        if self.created.status == 201 and isinstance(self.created.json, dict):
            run_id = str(self.created.json.get("runId"))
            self.events = self.session.events(run_id)
            self.summary = self.session.summary(run_id)
        return self

    @property
    def run_id(self) -> str | None:
        if self.created is None or self.created.status != 201:
            return None
        body = self.created.json
        return str(body["runId"]) if isinstance(body, dict) and "runId" in body else None


def run_scenario(client: HostClient, config: ScenarioConfig) -> list[Row]:
    rows = [shape_leg()]
    a = Session(client, config.api_key)
    reason = gate(a.discovery())
    if reason is not None:
        rows += [Row.unjudged(r, SCENARIO, Disposition.INAPPLICABLE, reason) for r in HOST_LEGS]
        return [*rows, Row.unjudged(SCENARIO_ROW, SCENARIO, Disposition.INAPPLICABLE, reason)]
    counter_before_source = a.counter()
    source = _Run(a).create(eval_body(SOURCE))
    legs: dict[str, Callable[[], list[Finding] | Row]] = {
        REPLAYED: lambda: _replayed(a, source, counter_before_source),
        DRIFTED: lambda: _drifted(a, source),
        REFUSED: lambda: _refused(a, source),
        UNIFORM: lambda: _uniform(a, config, source, exact=False),
        UNIFORM_BODY: lambda: _uniform(a, config, source, exact=True),
        FIELDS: lambda: _fields(a, source),
    }
    for req, leg in legs.items():
        outcome = leg()
        rows.append(outcome if isinstance(outcome, Row) else Row.judged(req, SCENARIO, outcome))
    rows.append(_scenario_row(rows))
    return rows


def _scenario_row(rows: list[Row]) -> Row:
    legs = [r for r in rows if r.requirement_id in LEGS]
    findings = [check(SCENARIO_ROW, r.passed, f"{r.requirement_id}: {r.disposition.value}")
                for r in legs]
    blocked = [r for r in legs if r.disposition is Disposition.BLOCKED]
    if blocked:
        return Row.unjudged(SCENARIO_ROW, SCENARIO, Disposition.BLOCKED,
                            "; ".join(f"{r.requirement_id}: {r.detail}" for r in blocked))
    return Row.judged(SCENARIO_ROW, SCENARIO, findings)


def _source_control(req: str, source: _Run) -> list[Finding]:
    """Positive control: the recorded source itself was created and completed."""
    out = [judges.created(req, source.created, "the source eval run")] if source.created else [
        fail(req, "the source eval run was never created")]
    done = [e for e in source.events if e.get("type") == "run.completed"]
    out.append(check(req, bool(done), "the source run reached run.completed"))
    return out


def _replayed(a: Session, source: _Run, counter_before_source: int | None) -> list[Finding] | Row:
    req = REPLAYED
    c1 = a.counter()
    if counter_before_source is None or c1 is None:
        return Row.unjudged(req, SCENARIO, Disposition.BLOCKED,
                            "the live counter conformance.eval:counter cannot be observed "
                            "(GET /conformance/seams/eval-counter)")
    out = _source_control(req, source)
    out.append(judges.counter_moved(req, counter_before_source, c1, "the source run"))
    if source.run_id is None:
        return out
    mapping = {"record": source.run_id}
    replay = _Run(a).create(eval_body(REPLAY, mapping))
    assert replay.created is not None
    out.append(judges.created(req, replay.created, "the replay"))
    out.append(judges.echo(req, replay.events, mapping))
    out += judges.eval_order(req, replay.events)
    if judges.outcomes_on_wire(source.events, RECORDER):
        out += judges.outcomes_equal(req, source.events, replay.events, RECORDER)
    out += judges.miss_count(req, replay.events, replay.summary, "record", 0)
    c2 = a.counter()
    if c2 is None:
        return Row.unjudged(req, SCENARIO, Disposition.BLOCKED,
                            "the live counter could not be read after the replay")
    out.append(judges.counter_unchanged(req, c1, c2, "the replay"))
    return out


def _drifted(a: Session, source: _Run) -> list[Finding] | Row:
    req = DRIFTED
    before = a.counter()
    if before is None:
        return Row.unjudged(req, SCENARIO, Disposition.BLOCKED,
                            "the live counter conformance.eval:counter cannot be observed")
    out = _source_control(req, source)
    if source.run_id is None:
        return out
    drift = _Run(a).create(eval_body(DRIFT, {"record": source.run_id}))
    assert drift.created is not None
    out.append(judges.created(req, drift.created, "the drifted replay"))
    out += judges.eval_order(req, drift.events)
    out += judges.miss_count(req, drift.events, drift.summary, "record", 1)
    out += judges.passed_is(req, drift.events, drift.summary, "record", False)
    after = a.counter()
    if after is None:
        return Row.unjudged(req, SCENARIO, Disposition.BLOCKED,
                            "the live counter could not be read after the drifted replay")
    out.append(judges.counter_unchanged(req, before, after, "the drifted replay"))
    drift_after = a.counter("recorded-fixtures-drift")
    out.append(check(req, drift_after in (None, 0),
                     "the drifted inc reached no live counter" if drift_after in (None, 0)
                     else f"the drifted inc reached the live counter ({drift_after})"))
    return out


def _accepted_control(req: str, a: Session, source: _Run) -> list[Finding]:
    """Show a usable source is accepted before judging unusable ones refused."""
    out = _source_control(req, source)
    if source.run_id is not None:
        r = a.create(eval_body(REPLAY, {"record": source.run_id}))
        out.append(judges.created(req, r, "positive control: the usable source"))
    return out


def _unknown_id(a: Session, source: _Run) -> str:
    tenant = (source.run_id or "acme/x").split("/", 1)[0]
    return f"{tenant}/{UNKNOWN_OPAQUE}"


def _refused(a: Session, source: _Run) -> list[Finding]:
    req = REFUSED
    out = _accepted_control(req, a, source)
    unknown = _unknown_id(a, source)
    r = a.create(eval_body(REPLAY, {"record": unknown}))
    out += judges.refused(req, r, "an unknown id")
    out.append(judges.no_echo(req, r, [unknown], "an unknown id"))
    noop = a.workflow("conformance-noop")
    out.append(judges.created(req, noop, "a workflow run that never invokes the agent"))
    if noop.status == 201 and isinstance(noop.json, dict):
        nid = str(noop.json["runId"])
        a.events(nid)
        r = a.create(eval_body(REPLAY, {"record": nid}))
        out += judges.refused(req, r, "a run that never invoked the agent")
        out.append(judges.no_echo(req, r, [nid], "a run that never invoked the agent"))
    return out


def _uniform(a: Session, config: ScenarioConfig, source: _Run, *, exact: bool
             ) -> list[Finding] | Row:
    req = UNIFORM_BODY if exact else UNIFORM
    if not config.tenant_b_api_key:
        return Row.unjudged(req, SCENARIO, Disposition.BLOCKED,
                            "no second tenant's API key (OPENWOP_TEST_TENANT_B_API_KEY)")
    out = _accepted_control(req, a, source)
    b = Session(a.client, config.tenant_b_api_key)
    foreign = _Run(b).create(eval_body(SOURCE))
    out.append(check(req, foreign.run_id is not None and any(
        e.get("type") == "run.completed" for e in foreign.events),
        "tenant B's source run completed"))
    if foreign.run_id is None:
        return out
    unknown = _unknown_id(a, source)
    r_unknown = a.create(eval_body(REPLAY, {"record": unknown}))
    r_foreign = a.create(eval_body(REPLAY, {"record": foreign.run_id}))
    out += judges.refused(req, r_foreign, "tenant B's run")
    out.append(judges.no_echo(req, r_foreign, [foreign.run_id], "tenant B's run"))
    out.append(judges.uniform(req, [("an unknown id", r_unknown), ("tenant B's run", r_foreign)],
                              exact=exact))
    return out


def _fields(a: Session, source: _Run) -> list[Finding]:
    req = FIELDS
    out = _accepted_control(req, a, source)
    sid = source.run_id or _unknown_id(a, source)
    cases = (("a key naming no task", eval_body(REPLAY, {"no-such-task": sid})),
             ("the source fixture as the target", eval_body(SOURCE, {"record": sid})),
             ("fixtureRuns without mode", {"workflowId": "conformance-noop",
                                           "fixtureRuns": {"record": sid}}))
    for label, body in cases:
        out += judges.refused(req, a.create(body), label)
    return out
