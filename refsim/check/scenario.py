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
from refsim.check.ids import req_id
from refsim.check.observe import (
    COUNTER_KEY,
    DRIFT,
    DRIFT_KEY,
    FIXTURES,
    RECORDER,
    REPLAY,
    SOURCE,
    Gate,
    Observed,
    Session,
    eval_body,
    gate,
)
from refsim.wire.client import HostClient
from refsim.wire.response import Response

SCENARIO = "v2-eval-recorded-fixtures"
SCENARIO_ROW = "openwop.scenario." + SCENARIO
SHAPE, REPLAYED = req_id("0252.shape"), req_id("0252.source-replayed")
DRIFTED, REFUSED = req_id("0252.drift-fails-closed"), req_id("0252.source-refused")
UNIFORM, FIELDS = req_id("0252.source-uniform"), req_id("0252.fields-refused")
UNIFORM_BODY = req_id("0252.source-uniform-body")
LEGS = (SHAPE, REPLAYED, DRIFTED, REFUSED, UNIFORM, FIELDS)
HOST_LEGS = (*LEGS[1:], UNIFORM_BODY)
# A well-formed opaque segment that no host minted.
UNKNOWN_OPAQUE = "run-0252unknown0000000"
# A tenant id no host has: an id under it names no run anyone could read.
NO_SUCH_TENANT = "tenant-0252-nobody"
# Values that are no run id at all: each is an unknown source (§C: "an id that does not
# decode included").
UNDECODABLE = ("not a run id", "short/run", "~2F", "%2Fx", "a/b/c-0000000000000000", "")

__all__ = ["FIXTURES", "LEGS", "SCENARIO", "Gate", "gate", "run_scenario", "shape_leg"]


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


def run_scenario(client: HostClient, config: ScenarioConfig) -> list[Row]:
    rows = [shape_leg()]
    a = Session(client, config.api_key)
    gated = gate(a.discovery())
    if not gated.applies:
        reason = str(gated.reason)
        rows += [Row.unjudged(r, SCENARIO, Disposition.INAPPLICABLE, reason) for r in HOST_LEGS]
        return [*rows, Row.unjudged(SCENARIO_ROW, SCENARIO, Disposition.INAPPLICABLE, reason)]
    source = a.eval(SOURCE, counter_key=COUNTER_KEY)
    legs: dict[str, Callable[[], list[Finding] | Row]] = {
        REPLAYED: lambda: _replayed(a, source),
        DRIFTED: lambda: _drifted(a, source),
        REFUSED: lambda: _refused(a, config, source),
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


def _source_control(req: str, source: Observed) -> list[Finding]:
    """Positive control: the recorded source itself was created and completed."""
    return [judges.created(req, source.response, "the source eval run"),
            check(req, source.completed, "the source run reached run.completed")]


def _blocked(req: str, why: str) -> Row:
    return Row.unjudged(req, SCENARIO, Disposition.BLOCKED, why)


NO_COUNTER = ("the live counter conformance.eval:counter cannot be observed "
              "(GET /conformance/seams/eval-counter)")


def _replayed(a: Session, source: Observed) -> list[Finding] | Row:
    req = REPLAYED
    if source.counter_before is None or source.counter_after is None:
        return _blocked(req, NO_COUNTER)
    out = _source_control(req, source)
    out.append(judges.counter_moved(req, source.counter_before, source.counter_after,
                                    "the source run"))
    if source.run_id is None:
        return out
    mapping = {"record": source.run_id}
    replay = a.eval(REPLAY, mapping, counter_key=COUNTER_KEY)
    out.append(judges.created(req, replay.response, "the replay"))
    out.append(judges.echo(req, replay.events, mapping))
    out += judges.eval_order(req, replay.events)
    if judges.outcomes_on_wire(source.events, RECORDER):
        out += judges.outcomes_equal(req, source.events, replay.events, RECORDER)
    out += judges.miss_count(req, replay.events, replay.summary, "record", 0)
    if replay.counter_before is None or replay.counter_after is None:
        return _blocked(req, "the live counter could not be read around the replay")
    out.append(judges.counter_unchanged(req, replay.counter_before, replay.counter_after,
                                        "the replay"))
    return out


def _drifted(a: Session, source: Observed) -> list[Finding] | Row:
    req = DRIFTED
    drift_before = a.counter(DRIFT_KEY)
    before = a.counter()
    if before is None:
        return _blocked(req, NO_COUNTER)
    out = _source_control(req, source)
    if source.run_id is None:
        return out
    drift = a.observe(a.create(eval_body(DRIFT, {"record": source.run_id})))
    out.append(judges.created(req, drift.response, "the drifted replay"))
    out += judges.eval_order(req, drift.events)
    out += judges.miss_count(req, drift.events, drift.summary, "record", 1)
    out += judges.passed_is(req, drift.events, drift.summary, "record", False)
    after = a.counter()
    if after is None:
        return _blocked(req, "the live counter could not be read after the drifted replay")
    out.append(judges.counter_unchanged(req, before, after, "the drifted replay"))
    # The drifted inc names another key: judged as a change across the drift, so a host
    # that once ran the drift suite live (or serves other tenants) still passes.
    drift_after = a.counter(DRIFT_KEY)
    if drift_before is not None or drift_after is not None:
        out.append(judges.counter_delta(req, drift_before or 0, drift_after or 0, 0,
                                        "the drifted inc's own key"))
    return out


def _accepted_control(req: str, a: Session, source: Observed) -> list[Finding]:
    """Show a usable source is accepted before judging unusable ones refused."""
    out = _source_control(req, source)
    if source.run_id is not None:
        r = a.create(eval_body(REPLAY, {"record": source.run_id}))
        out.append(judges.created(req, r, "positive control: the usable source"))
    return out


def _tenant(run_id: str | None, fallback: str = "acme") -> str:
    return (run_id or fallback + "/x").split("/", 1)[0]


def unknown_ids(own_tenant: str, other_tenant: str | None) -> list[tuple[str, str]]:
    """The four forms of an id that names no run: the caller's own never-minted id,
    another tenant's never-minted id, an id under a tenant that does not exist, and values
    that do not decode at all."""
    forms = [("the caller's own never-minted id", f"{own_tenant}/{UNKNOWN_OPAQUE}")]
    if other_tenant is not None and other_tenant != own_tenant:
        forms.append(("another tenant's never-minted id", f"{other_tenant}/{UNKNOWN_OPAQUE}"))
    forms.append(("an id under a tenant that does not exist",
                  f"{NO_SUCH_TENANT}/{UNKNOWN_OPAQUE}"))
    forms += [(f"an undecodable value {value!r}", value) for value in UNDECODABLE]
    return forms


def _other_tenant(config: ScenarioConfig, a: Session) -> str | None:
    """Tenant B's name, read off a run it creates (None without its key)."""
    if not config.tenant_b_api_key:
        return None
    b = Session(a.client, config.tenant_b_api_key)
    r = b.workflow("conformance-noop")
    if r.status != 201 or not isinstance(r.json, dict):
        return None
    return _tenant(str(r.json.get("runId")))


def _refused(a: Session, config: ScenarioConfig, source: Observed) -> list[Finding]:
    req = REFUSED
    out = _accepted_control(req, a, source)
    own = _tenant(source.run_id)
    for label, value in unknown_ids(own, _other_tenant(config, a)):
        r = a.create(eval_body(REPLAY, {"record": value}))
        out += judges.refused(req, r, label)
        out.append(judges.no_echo(req, r, [value], label))
        out.append(judges.nothing_minted(req, r, label))
    noop = a.workflow("conformance-noop")
    out.append(judges.created(req, noop, "a workflow run that never invokes the agent"))
    if noop.status == 201 and isinstance(noop.json, dict):
        nid = str(noop.json["runId"])
        a.events(nid)
        r = a.create(eval_body(REPLAY, {"record": nid}))
        out += judges.refused(req, r, "a run that never invoked the agent")
        out.append(judges.no_echo(req, r, [nid], "a run that never invoked the agent"))
    return out


def _uniform(a: Session, config: ScenarioConfig, source: Observed, *, exact: bool
             ) -> list[Finding] | Row:
    req = UNIFORM_BODY if exact else UNIFORM
    if not config.tenant_b_api_key:
        return _blocked(req, "no second tenant's API key (OPENWOP_TEST_TENANT_B_API_KEY)")
    out = _accepted_control(req, a, source)
    b = Session(a.client, config.tenant_b_api_key)
    foreign = b.eval(SOURCE)
    out.append(check(req, foreign.run_id is not None and foreign.completed,
                     "tenant B's source run completed"))
    if foreign.run_id is None:
        return out
    own, other = _tenant(source.run_id), _tenant(foreign.run_id)
    refusals: list[tuple[str, Response]] = []
    r_foreign = a.create(eval_body(REPLAY, {"record": foreign.run_id}))
    out += judges.refused(req, r_foreign, "tenant B's run")
    out.append(judges.no_echo(req, r_foreign, [foreign.run_id], "tenant B's run"))
    refusals.append(("tenant B's run", r_foreign))
    forms = unknown_ids(own, other) if exact else unknown_ids(own, other)[:2]
    for label, value in forms:
        refusals.append((label, a.create(eval_body(REPLAY, {"record": value}))))
    out.append(judges.uniform(req, refusals, exact=exact))
    if exact:
        out += _b_rules_paired(req, a, own, foreign.run_id, other)
    return out


def b_rule_cases(source: str) -> list[tuple[str, Any]]:
    """The §B refusals, each as a body naming `source`."""
    return [("a key naming no task", eval_body(REPLAY, {"no-such-task": source})),
            ("the source fixture as the target", eval_body(SOURCE, {"record": source})),
            ("fixtureRuns without mode", {"workflowId": "conformance-noop",
                                          "fixtureRuns": {"record": source}})]


def _b_rules_paired(req: str, a: Session, own: str, foreign: str, other: str
                    ) -> list[Finding]:
    """Check order is no oracle: a §B refusal answers the same whether the source it names
    is another tenant's existing run, another tenant's unminted id, or an unknown id."""
    out: list[Finding] = []
    sources = (("an existing foreign source", foreign),
               ("an unminted foreign source", f"{other}/{UNKNOWN_OPAQUE}"),
               ("an unknown source", f"{own}/{UNKNOWN_OPAQUE}"))
    for index, (label, _) in enumerate(b_rule_cases("x")):
        answers = [(f"{label} with {what}", a.create(b_rule_cases(value)[index][1]))
                   for what, value in sources]
        out += judges.refused(req, answers[0][1], answers[0][0])
        out.append(judges.uniform(req, answers, exact=True))
    return out


def _fields(a: Session, source: Observed) -> list[Finding]:
    req = FIELDS
    out = _accepted_control(req, a, source)
    sid = source.run_id or f"acme/{UNKNOWN_OPAQUE}"
    for label, body in b_rule_cases(sid):
        r = a.create(body)
        out += judges.refused(req, r, label)
        out.append(judges.nothing_minted(req, r, label))
    if source.run_id is None:
        out.append(fail(req, "the source run was never created"))
    return out
