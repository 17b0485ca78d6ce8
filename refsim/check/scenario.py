"""The conformance scenario `v2-eval-recorded-fixtures`: RFC 0252's six legs over any host.

Gates on what the host advertises; runs positive controls before judging refusals alike.
A leg that needs what the host does not offer (the counter seam, a fixture, a second
tenant's key) is blocked or inapplicable, naming it, never failed.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Callable, Collection
from typing import Any

import attrs

from refsim.check import judges
from refsim.check.differential import alike, asked_apart, no_new_runs, noise_of_host
from refsim.check.findings import Disposition, Finding, Row, check_raised
from refsim.check.ids import req_id
from refsim.check.observe import (
    COUNTER_KEY,
    COUNTER_TOOL,
    DRIFT,
    DRIFT_KEY,
    FIXTURES,
    NO_SUCH_TENANT,
    RECORDER,
    REPLAY,
    SOURCE,
    UNKNOWN_OPAQUE,
    Gate,
    Observed,
    Session,
    Unobservable,
    eval_body,
    gate,
    inspector_of,
    nonce,
)
from refsim.data import paths
from refsim.domain.ids import seen_parts
from refsim.wire.client import HostClient
from refsim.wire.response import Response
from refsim.wire.trace import segment

SCENARIO = "v2-eval-recorded-fixtures"
SCENARIO_ROW = "openwop.scenario." + SCENARIO
SHAPE, REPLAYED = req_id("0252.shape"), req_id("0252.source-replayed")
DRIFTED, REFUSED = req_id("0252.drift-fails-closed"), req_id("0252.source-refused")
UNIFORM, FIELDS = req_id("0252.source-uniform"), req_id("0252.fields-refused")
UNIFORM_BODY = req_id("0252.source-uniform-body")
LATENCY = req_id("0252.source-uniform-latency")
LEGS = (SHAPE, REPLAYED, DRIFTED, REFUSED, UNIFORM, FIELDS)
HOST_LEGS = (*LEGS[1:], UNIFORM_BODY, LATENCY)
# Values that are no run id at all: each is an unknown source (§C: "an id that does not
# decode included").
UNDECODABLE = ("not a run id", "short/run", "~2F", "%2Fx", "a/b/c-0000000000000000", "")
# Interleaved samples of each kind of refusal the body judge compares; how often tenant
# B's run is asked for again (plain and under an Idempotency-Key) before the refusal
# counts as one that a retry cannot change.
BODY_SAMPLES = 4
# Request headers a client may send that negotiate the answer's form, not its meaning.
REQUEST_VARIANTS: tuple[dict[str, str], ...] = (
    {"Accept": "application/problem+json"}, {"Accept": "application/json"},
    {"Accept": "*/*", "Accept-Language": "fr-CA, en;q=0.5"},
    {"Content-Type": "application/json; charset=utf-8"}, {"Prefer": "return=minimal"})
FIRST_ASKS = 24  # fresh ids of each kind, each asked once (see Scenario._first_asks)
RETRIES = 12
WAIT_INPUT = "conformance-wait-input"
NOOP = "conformance-noop"
# The catalog suite whose modes include live-shadow (the §B rule the oracle judge pairs).
LIVE_SHADOW_SUITE = "refsim-eval-two-tasks"

__all__ = ["FIXTURES", "LEGS", "SCENARIO", "Gate", "gate", "run_scenario", "shape_leg"]


@attrs.frozen
class ScenarioConfig:
    api_key: str
    tenant_b_api_key: str | None = None
    # The latency leg times the host: where rows run side by side (`refsim.check.lanes`),
    # this gives it the host alone for the leg.
    alone: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext


def load_vectors() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for file in sorted((paths.SPECS / "vectors").glob("*.json")):
        out.extend(json.loads(file.read_text(encoding="utf-8"))["vectors"])
    return out


def shape_leg() -> Row:
    """Server-free: the schema vectors for fixtureRuns, the facet member and eval.started."""
    vectors = load_vectors()
    return Row.judged(SHAPE, SCENARIO, [judges.schema_vector(SHAPE, v) for v in vectors])


def run_scenario(client: HostClient, config: ScenarioConfig, *,
                 only: Collection[str] | None = None, stop_on_fail: bool = False
                 ) -> list[Row]:
    """The scenario's rows: every leg, or only those in `only` (the shape row and the scenario row
    come with them when they hold every leg the scenario row sums up). `stop_on_fail`: no
    leg after the first that fails (a kill matrix needs only the first)."""
    every = only is None or set(LEGS[1:]) <= set(only)
    # The shape row judges refsim's own schema vectors and sends no request: beside a host
    # over HTTP it observed nothing of that host, so it is no pass there (listed apart).
    rows = [] if not every else [shape_leg() if inspector_of(client) is not None else
                                 Row.apart_row(
        SHAPE, SCENARIO, "it judges refsim's own schema vectors (fixtureRuns, the facet "
        "member, eval.started) and sends the host nothing; the fields leg judges the host's "
        "answers to those shapes")]
    a = Session(client, config.api_key)
    gated = gate(a.surface)
    if not gated.applies:
        reason = str(gated.reason)
        rows += [Row.unjudged(r, SCENARIO, gated.disposition, reason) for r in HOST_LEGS
                 if only is None or r in only]
        return [*rows, Row.unjudged(SCENARIO_ROW, SCENARIO, gated.disposition, reason)
                ] if every else rows
    legs = _Legs(a, config)
    steps: dict[str, Callable[[], list[Finding]]] = {
        REPLAYED: legs.replayed, DRIFTED: legs.drifted, REFUSED: legs.refused,
        UNIFORM: lambda: legs.uniform(exact=False),
        UNIFORM_BODY: lambda: legs.uniform(exact=True),
        FIELDS: legs.fields, LATENCY: legs.latency,
    }
    for req, step in steps.items():
        if only is not None and req not in only:
            continue
        if stop_on_fail and any(r.disposition is Disposition.EXECUTED_FAIL for r in rows):
            return rows
        try:
            with segment(req), (config.alone() if req == LATENCY
                                else contextlib.nullcontext()):
                found = step()
            rows.append(Row.judged(req, SCENARIO, found))
        except Unobservable as exc:
            rows.append(Row.unjudged(req, SCENARIO, exc.disposition, exc.reason))
        except Exception as exc:  # refsim's fault, never the host's: blocked, with where
            rows.append(Row.unjudged(req, SCENARIO, Disposition.BLOCKED,
                                     check_raised(f"the leg {req}", exc)))
    if every:
        rows.append(scenario_row(rows))
    return rows


def scenario_row(rows: list[Row]) -> Row:
    """The scenario row, summing up the legs among `rows`."""
    legs = [r for r in rows if r.requirement_id in LEGS and not r.apart]
    unjudged = [r for r in legs if r.disposition in (Disposition.BLOCKED,
                                                     Disposition.INAPPLICABLE)]
    if unjudged:
        worst = Disposition.BLOCKED if any(r.disposition is Disposition.BLOCKED
                                           for r in unjudged) else Disposition.INAPPLICABLE
        return Row.unjudged(SCENARIO_ROW, SCENARIO, worst,
                            "; ".join(f"{r.requirement_id}: {r.detail}" for r in unjudged))
    findings = [judges.leg_passed(SCENARIO_ROW, r.requirement_id, r.disposition.value, r.passed)
                for r in legs]
    return Row.judged(SCENARIO_ROW, SCENARIO, findings)


def unknown_ids(own_head: str, other_head: str | None) -> list[tuple[str, str]]:
    """The four forms of an id that names no run: the caller's own never-minted id,
    another tenant's never-minted id, an id under a tenant that does not exist, and values
    that do not decode at all. `own_head`, `other_head`: the tenant parts (`seen_parts`)
    of ids the host minted for each tenant; another tenant's never-minted id is asked only
    where its ids carry a tenant part of their own."""
    forms = [("the caller's own never-minted id", f"{own_head}{UNKNOWN_OPAQUE}")]
    if other_head and other_head != own_head:
        forms.append(("another tenant's never-minted id", f"{other_head}{UNKNOWN_OPAQUE}"))
    forms.append(("an id under a tenant that does not exist",
                  f"{NO_SUCH_TENANT}/{UNKNOWN_OPAQUE}"))
    forms += [(f"an undecodable value {value!r}", value) for value in UNDECODABLE]
    return forms


def near_misses(run_id: str) -> list[tuple[str, str]]:
    """Ids one slip away from a real one: each names no run (ids are matched exactly: no
    case folding, trimming or prefix match), so each is an unknown source. Only the
    opaque part is changed: the whole id where it carries no tenant part."""
    tenant, opaque = seen_parts(run_id)
    if not opaque:
        return []
    last = opaque[-1]
    other = "0" if last != "0" else "1"
    swapped = next((opaque[:i] + c.swapcase() + opaque[i + 1:]
                    for i, c in enumerate(opaque) if c.isalpha()), None)
    out = [("the real id with its last character changed", f"{tenant}{opaque[:-1]}{other}"),
           ("the real id less its last character", f"{tenant}{opaque[:-1]}"),
           ("the real id with a character more", f"{tenant}{opaque}0"),
           ("the real id with a space after it", f"{run_id} "),
           ("the real id with a space before it", f" {run_id}")]
    if swapped is not None:
        out.append(("the real id with one letter's case changed", f"{tenant}{swapped}"))
    return out


def near_miss_keys(task_id: str) -> list[tuple[str, str]]:
    """Keys one slip away from a real taskId: each names no task of the suite."""
    return [(f"the key {key!r}, close to {task_id!r}", key)
            for key in (task_id.capitalize(), task_id.upper(), f"{task_id} ", f" {task_id}",
                        task_id[:-1], task_id + "s")
            if key != task_id]


def b_rule_cases(source: str, live_shadow: bool = False) -> list[tuple[str, Any]]:
    """The §B refusals, each as a body naming `source` (live-shadow where the host lists
    the catalog suite whose modes include it)."""
    cases: list[tuple[str, Any]] = [
        ("a key naming no task", eval_body(REPLAY, {"no-such-task": source})),
        ("the source fixture as the target", eval_body(SOURCE, {"record": source})),
        ("fixtureRuns without mode", {"workflowId": NOOP, "fixtureRuns": {"record": source}})]
    if live_shadow:
        cases.append(("live-shadow among the run's modes",
                      eval_body(LIVE_SHADOW_SUITE, {"alpha": source})))
    return cases


def _head(run_id: str | None) -> str:
    """The tenant part of an id the host minted, with its separator (`seen_parts`): empty
    for an id that carries none; `acme/` before any id was seen."""
    return seen_parts(run_id)[0] if run_id else "acme/"


@attrs.define
class _Legs:
    """The legs over one host: the recorded source and tenant B's, made once."""

    a: Session
    config: ScenarioConfig
    _source: Observed | None = None
    _foreign: Observed | None = None

    @property
    def source(self) -> Observed:
        """The recorded source, with the live counter read around it where the host offers
        the counter seam."""
        if self._source is None:
            self._source = self.a.eval(SOURCE, counter_key=COUNTER_KEY)
        return self._source

    def b(self) -> Session:
        if not self.config.tenant_b_api_key:
            raise Unobservable("no second tenant's API key (--tenant-b-api-key or "
                               "OPENWOP_TEST_TENANT_B_API_KEY)")
        return Session(self.a.client, self.config.tenant_b_api_key)

    def foreign(self) -> Observed:
        """Tenant B's completed source run."""
        if self._foreign is None:
            self._foreign = self.b().eval(SOURCE)
        return self._foreign

    def _source_control(self, req: str) -> list[Finding]:
        """Positive control: the recorded source itself was created and completed."""
        source = self.source
        return [judges.created(req, source.response, "the source eval run"),
                judges.completed(req, source.completed, "the source run")]

    def _accepted_control(self, req: str) -> list[Finding]:
        """Show a usable source is accepted before judging unusable ones refused."""
        out = self._source_control(req)
        if self.source.run_id is not None:
            r = self.a.create(eval_body(REPLAY, {"record": self.source.run_id}))
            out.append(judges.created(req, r, "positive control: the usable source"))
        return out

    def _unechoed(self, req: str, response: Response, value: str, what: str,
                  body: Callable[[str], Any]) -> Finding:
        """no_echo, with the same request made again for a control value where the answer
        holds any run of the id (text every refusal carries is no echo)."""
        controls = []
        if response.status >= 400 and judges.echo_windows(response, [value]):
            controls.append(self.a.create(body(judges.control_value(value))))
        return judges.no_echo(req, response, [value], what, controls)

    # -- the legs

    def replayed(self) -> list[Finding]:
        req, a, source = REPLAYED, self.a, self.source
        if source.counter_before is None or source.counter_after is None:
            a.require_counter()  # says why it cannot be read
        assert source.counter_before is not None and source.counter_after is not None
        out = self._source_control(req)
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
            a.require_counter()
        assert replay.counter_before is not None and replay.counter_after is not None
        out.append(judges.counter_unchanged(req, replay.counter_before, replay.counter_after,
                                            "the replay"))
        if replay.run_id is not None:
            out += _on_the_stream(req, a, replay.run_id, mapping, source.events,
                                  replay.events)
        return out

    def drifted(self) -> list[Finding]:
        req, a, source = DRIFTED, self.a, self.source
        before = a.require_counter()
        drift_before = a.counter(DRIFT_KEY)
        out = self._source_control(req)
        if source.run_id is None:
            return out
        drift = a.observe(a.create(eval_body(DRIFT, {"record": source.run_id})))
        out.append(judges.created(req, drift.response, "the drifted replay"))
        out += judges.eval_order(req, drift.events)
        out += judges.miss_count(req, drift.events, drift.summary, "record", 1)
        out += judges.passed_is(req, drift.events, drift.summary, "record", False)
        if drift.run_id is not None:  # the miss shows on every channel the host offers
            stream = a.stream(drift.run_id)
            if stream is not None:
                out.append(judges.eval_events_alike(req, drift.events, stream))
        out.append(judges.counter_unchanged(req, before, a.require_counter(),
                                            "the drifted replay"))
        # The drifted inc names another key: judged as a change across the drift, so a
        # host that once ran the drift suite live (or serves other tenants) still passes.
        drift_after = a.counter(DRIFT_KEY)
        if drift_before is not None and drift_after is not None:
            out.append(judges.counter_delta(req, drift_before, drift_after, 0,
                                            "the drifted inc's own key"))
        return out

    def refused(self) -> list[Finding]:
        """An unknown id (in every form, near misses of the real id included) and a run
        that never invoked the agent: 400 validation_error each, without the id, and
        nothing minted."""
        req, a, source = REFUSED, self.a, self.source
        a.require_fixture(NOOP)
        out = self._accepted_control(req)
        own = _head(source.run_id)
        other = _head(self.foreign().run_id) if self.config.tenant_b_api_key else None
        cases = unknown_ids(own, other) + (near_misses(source.run_id) if source.run_id
                                           else [])
        listed = a.list_runs()
        for label, value in cases:
            r = a.create(eval_body(REPLAY, {"record": value}))
            out += judges.refused(req, r, label)
            out.append(self._unechoed(req, r, value, label,
                                      lambda v: eval_body(REPLAY, {"record": v})))
            out.append(judges.nothing_minted(req, r, label))
        noop = a.workflow(NOOP)
        out.append(judges.created(req, noop, "a workflow run that never invokes the agent"))
        if noop.status == 201 and isinstance(noop.json, dict):
            nid = str(noop.json["runId"])
            a.events(nid)
            listed = a.list_runs() if listed is not None else None
            r = a.create(eval_body(REPLAY, {"record": nid}))
            out += judges.refused(req, r, "a run that never invoked the agent")
            out.append(self._unechoed(req, r, nid, "a run that never invoked the agent",
                                      lambda v: eval_body(REPLAY, {"record": v})))
        if listed is not None:
            out += no_new_runs(a, req, listed, "the refusals")
        return out

    def uniform(self, *, exact: bool) -> list[Finding]:
        """Tenant B's completed run is refused as an unknown id is: the same status and
        code (the MUST), or (exact, refsim's reading of the Security section) answers a
        client cannot tell apart, judged differentially over interleaved samples; a retry
        changes nothing."""
        req = UNIFORM_BODY if exact else UNIFORM
        a = self.a
        self.b()
        out = self._accepted_control(req)
        foreign = self.foreign()
        out.append(judges.completed(req, foreign.run_id is not None and foreign.completed,
                                    "tenant B's source run"))
        if foreign.run_id is None:
            return out
        own, other = _head(self.source.run_id), _head(foreign.run_id)

        def body(value: str) -> Any:
            return eval_body(REPLAY, {"record": value})
        r_foreign = a.create(body(foreign.run_id))
        out += judges.refused(req, r_foreign, "tenant B's run")
        out.append(self._unechoed(req, r_foreign, foreign.run_id, "tenant B's run", body))
        forms = unknown_ids(own, other)
        if not exact:
            refusals = [("tenant B's run", r_foreign)] + [
                (label, a.create(body(value))) for label, value in forms[:2]]
            out.append(judges.uniform(req, refusals, exact=False))
            # Whatever the request's negotiable headers say, tenant B's run and an unknown
            # id get the same status and code (not necessarily 400: a host may refuse a
            # media type it does not serve, alike for both).
            unknown_value = forms[0][1]
            for variant in REQUEST_VARIANTS:
                said = _said(variant)
                out.append(judges.uniform(req, [
                    (f"tenant B's run ({said})",
                     a.request("POST", "/runs", body(foreign.run_id), variant)),
                    (f"an unknown id ({said})",
                     a.request("POST", "/runs", body(unknown_value), variant))], exact=False))
            # A retry cannot change the refusal: asked again and again, plain and under one
            # Idempotency-Key (a cache or a counter must not turn it into an answer).
            key = {"Idempotency-Key": f"refsim-retry-{nonce()}"}
            for index in range(RETRIES):
                headers = key if index % 2 else None
                label = f"tenant B's run, asked again ({index + 2}" + (
                    ", with an Idempotency-Key)" if headers else ")")
                out += judges.refused(req, a.request("POST", "/runs", body(foreign.run_id),
                                                     headers), label)
            return out
        unknown_value = forms[0][1]
        rng = random.Random(nonce())
        found, groups, _ = asked_apart(
            req, _asks(a, [("an unknown id", unknown_value),
                           ("tenant B's run", foreign.run_id)], body), BODY_SAMPLES, rng)
        out.append(found)
        if judges.uneven(groups):  # a value that recurs unevenly: ask enough to tell
            more: list[tuple[str, list[Response]]] = [(label, []) for label, _ in groups]
            for _ in range(judges.FREQUENCY_SAMPLES):
                for index in rng.sample((0, 1), 2):
                    value = (unknown_value, foreign.run_id)[index]
                    more[index][1].append(a.create(body(value)))
            out.append(judges.frequencies_alike(req, more))
        out += self._first_asks(req, body, foreign.run_id)
        noise = noise_of_host(a)
        singles = [("tenant B's run", foreign.run_id), *forms]
        first = [r_foreign] + [a.create(body(value)) for _, value in forms]
        out.append(alike(req, _asks(a, singles, body), first, noise))
        # Whatever the negotiable headers say (a language, a media type), the two refusals
        # read alike: a host may answer in French, for both.
        for variant in REQUEST_VARIANTS:
            said = _said(variant)
            pair = [(f"tenant B's run ({said})", foreign.run_id),
                    (f"an unknown id ({said})", unknown_value)]
            asks = _asks(a, pair, body, variant)
            out.append(alike(req, asks, [ask() for _, ask in asks], noise))
        out += _b_rules_paired(req, a, own, foreign.run_id, other, noise,
                               a.surface.lists(LIVE_SHADOW_SUITE))
        return out

    def _first_asks(self, req: str, body: Callable[[str], Any], like: str) -> list[Finding]:
        """A refusal that differs only the first time an id is asked (a cache the first ask
        fills) tells another tenant's run from no run too: the first asks of FIRST_ASKS
        fresh runs of tenant B's against those of as many fresh ids no host minted (under
        tenant B's name, shaped like its ids: only existing or not differs; the whole id
        made alike where it carries no tenant part), interleaved,
        compared by how often each value shows. Where the host lists no workflow that
        makes a run, nothing is judged here."""
        a = self.a
        if not a.surface.lists(NOOP):
            return []
        b, rng = self.b(), random.Random(nonce())
        tenant, opaque = seen_parts(like)
        groups: list[tuple[str, list[Response]]] = [
            ("an unknown id, asked once", []), ("tenant B's run, asked once", [])]
        for _ in range(FIRST_ASKS):
            made = b.workflow(NOOP)
            if made.status != 201 or not isinstance(made.json, dict):
                return [judges.could_not_go_on(req, "tenant B's workflow run",
                                               f"not created ({made.status})")]
            values = (tenant + _lookalike(opaque, rng), str(made.json["runId"]))
            for index in rng.sample((0, 1), 2):
                groups[index][1].append(a.create(body(values[index])))
        return [judges.frequencies_alike(req, groups)]

    def latency(self) -> list[Finding]:
        """Time is part of "indistinguishable" (SHOULD): refusals of tenant B's run take no
        longer or shorter than refusals of an id no host minted."""
        req, a = LATENCY, self.a
        self.b()
        out = self._accepted_control(req)
        foreign = self.foreign()
        if foreign.run_id is None:
            return [*out, judges.could_not_go_on(req, "tenant B's source run", "not created")]
        own = _head(self.source.run_id)
        values = {"an unknown id": f"{own}{UNKNOWN_OPAQUE}",
                  "tenant B's run": foreign.run_id}
        waiting = self.foreign_waiting()
        if waiting is not None:
            values["tenant B's run still waiting"] = waiting
        times: dict[str, list[float]] = {label: [] for label in values}
        labels = list(values)
        for label in labels:  # one of each first, untimed: nothing cold is timed
            r = a.create(eval_body(REPLAY, {"record": values[label]}))
            code = r.json.get("error") if isinstance(r.json, dict) else None
            if r.status != 400 or code != "validation_error":  # named in a fixed order
                return [*out, judges.refused_as(req, r, f"{label} (else its latency is not "
                                                "a refusal's)")]
        # A fresh random order each round: a host whose answers vary with their order
        # (replicas in turn) spreads that over every group alike.
        rng = random.Random(nonce())
        for _ in range(judges.LATENCY_SAMPLES):
            for label in rng.sample(labels, len(labels)):
                r, seconds = a.timed("POST", "/runs",
                                     eval_body(REPLAY, {"record": values[label]}))
                code = r.json.get("error") if isinstance(r.json, dict) else None
                if r.status != 400 or code != "validation_error":
                    return [*out, judges.refused_as(req, r, f"{label} (else its latency is "
                                                    "not a refusal's)")]
                times[label].append(seconds)
        # Each of tenant B's groups is compared twice at most (medians, then a tail timed
        # afresh): alpha split over all of them keeps the row's false alarms under it.
        alpha = judges.LATENCY_ALPHA / (2 * (len(labels) - 1))
        medians = {label: judges.latency_alike(req, (labels[0], times[labels[0]]),
                                               (label, times[label]), alpha)
                   for label in labels[1:]}
        tailed: dict[str, Finding] = {}
        if any(judges.tail_seen(times[labels[0]], times[label])
               for label in labels[1:]):  # a tail at all: time it afresh
            tails: dict[str, list[float]] = {label: [] for label in labels}
            for _ in range(judges.TAIL_SAMPLES):
                for label in rng.sample(labels, len(labels)):
                    _, seconds = a.timed("POST", "/runs",
                                         eval_body(REPLAY, {"record": values[label]}))
                    tails[label].append(seconds)
            tailed = {label: judges.latency_tail_alike(req, (labels[0], tails[labels[0]]),
                                                        (label, tails[label]), alpha)
                      for label in labels[1:]}
        out.extend(judges.latency_and_tail(medians[label], tailed.get(label))
                   for label in labels[1:])
        return out

    def foreign_waiting(self) -> str | None:
        """Tenant B's run that invoked the agent and waits for input, where the host lists
        the workflow that makes one (None otherwise)."""
        if not self.a.surface.lists(WAIT_INPUT):
            return None
        b = self.b()
        r = b.workflow(WAIT_INPUT, {"agentId": RECORDER, "script": [
            {"call": COUNTER_TOOL, "args": {"op": "read", "key": COUNTER_KEY}}]})
        if r.status != 201 or not isinstance(r.json, dict):
            return None
        run_id = str(r.json["runId"])
        b.events(run_id)
        return run_id

    def fields(self) -> list[Finding]:
        req, a, source = FIELDS, self.a, self.source
        a.require_fixture(NOOP)
        out = self._accepted_control(req)
        sid = source.run_id or f"acme/{UNKNOWN_OPAQUE}"
        listed = a.list_runs()
        cases = b_rule_cases(sid) + [
            (label, eval_body(REPLAY, {key: sid})) for label, key in near_miss_keys("record")]
        for label, body in cases:
            r = a.create(body)
            out += judges.refused(req, r, label)
            out.append(judges.nothing_minted(req, r, label))
        if listed is not None:  # eval runs: a no-op workflow run is what other traffic of
            # the tenant's makes too, so "fixtureRuns without mode" is judged by its answer
            out += no_new_runs(a, req, listed, "the §B refusals")
        if source.run_id is None:
            out.append(judges.could_not_go_on(req, "the source run", "never created"))
        return out


def _on_the_stream(req: str, a: Session, run_id: str, mapping: dict[str, Any],
                   source_events: list[dict[str, Any]], polled: list[dict[str, Any]]
                   ) -> list[Finding]:
    """The echo and the recorded answers hold on every channel the host offers: the SSE
    stream of the replay shows what its poll shows."""
    stream = a.stream(run_id)
    if stream is None:
        return []
    out = [judges.echo(req, stream, mapping), judges.eval_events_alike(req, polled, stream)]
    if judges.outcomes_on_wire(source_events, RECORDER):
        out += [attrs.evolve(f, message="on the event stream: " + f.message)
                for f in judges.outcomes_equal(req, source_events, stream, RECORDER)]
    return out


def _lookalike(opaque: str, rng: random.Random) -> str:
    """An opaque id segment of the same shape (length, and each character's class) that
    no host minted: a fresh id for every ask."""
    def like(c: str) -> str:
        if c.isdigit():
            return rng.choice("0123456789")
        if c.isalpha():
            pool = "abcdefghijklmnopqrstuvwxyz"
            return rng.choice(pool.upper() if c.isupper() else pool)
        return c
    return "".join(like(c) for c in opaque)


def _said(headers: dict[str, str]) -> str:
    """Request headers as a label names them."""
    return ", ".join(f"{k}: {v}" for k, v in headers.items())


def _asks(a: Session, cases: list[tuple[str, str]], body: Callable[[str], Any],
          headers: dict[str, str] | None = None) -> list[tuple[str, Callable[[], Response]]]:
    """Each labelled value as a request that can be made again (with `headers`)."""
    def ask(value: str) -> Callable[[], Response]:
        if headers is None:
            return lambda: a.create(body(value))
        return lambda: a.request("POST", "/runs", body(value), headers)
    return [(label, ask(value)) for label, value in cases]


def _b_rules_paired(req: str, a: Session, own: str, foreign: str, other: str,
                    noise: frozenset[str], live_shadow: bool) -> list[Finding]:
    """Check order is no oracle: a §B refusal answers the same whether the source it names
    is another tenant's existing run, another tenant's unminted id (where its ids carry a
    tenant part: `own`, `other` are those parts), or an unknown id."""
    out: list[Finding] = []
    sources = [("an existing foreign source", foreign)]
    if other and other != own:
        sources.append(("an unminted foreign source", f"{other}{UNKNOWN_OPAQUE}"))
    sources.append(("an unknown source", f"{own}{UNKNOWN_OPAQUE}"))
    for index, (label, _) in enumerate(b_rule_cases("x", live_shadow)):
        def body(value: str, index: int = index) -> Any:
            return b_rule_cases(value, live_shadow)[index][1]
        cases = [(f"{label} with {what}", value) for what, value in sources]
        first = [a.create(body(value)) for _, value in cases]
        out += judges.refused(req, first[0], cases[0][0])
        out.append(alike(req, _asks(a, cases, body), first, noise))
    return out
