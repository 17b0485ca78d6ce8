"""The example table's expectations: one small class each, that parses its value at load
time, judges one request with `refsim.check.judges`, documents itself, and says whether it
needs the simulator's inside (and what stands in for it over HTTP, if anything).

Adding an expectation is one class here, listed in `EXPECTATIONS`, and its test.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol

import attrs

from refsim.check import judges
from refsim.check.differential import alike, no_new_runs
from refsim.check.findings import Finding, check, fail
from refsim.check.observe import (
    Inspector,
    Observed,
    Session,
    inapplicable,
    run_path,
)
from refsim.domain.canonical import canonical
from refsim.wire.response import Response


class Invalid(Exception):
    """A problem in one row; the loader adds the file and row id."""


class Parser(Protocol):
    """What an expectation's parser may ask of the row being loaded."""

    labels: list[str]
    tenants: set[str]

    def run_ref(self, value: Any, where: str) -> str: ...

    def run_refs(self, value: Any, where: str) -> list[str]: ...


class Context(Protocol):
    """What an expectation's judge may ask of the row being run."""

    responses: dict[str, Response]
    inspector: Inspector | None

    @property
    def req(self) -> str: ...

    @property
    def counter_keys(self) -> tuple[str, ...]: ...
    # The arguments of the action being judged, as the row gives them (before `$` names).
    current_args: dict[str, Any]

    def subst(self, value: Any) -> Any: ...

    def session(self, tenant: str) -> Session: ...

    def counter(self, tenant: str, key: str) -> int | None: ...

    def events_of(self, ref: str) -> list[dict[str, Any]]: ...

    @property
    def noise(self) -> frozenset[str]:
        """What varies between answers to one and the same request on this host."""
        ...

    def control(self, values: Sequence[str]) -> Response | None:
        """The request just judged, made again with control values in place of `values`."""
        ...

    def ask(self, label: str) -> Callable[[], Response]:
        """The request labelled `label`, to be made again as it was sent."""
        ...


class Expectation:
    """One `expect:` key. Subclasses set the class attributes and override what they need."""

    name: ClassVar[str]
    form: ClassVar[str]  # the value's form, as the reference shows it
    doc: ClassVar[str]  # what it asserts, in a sentence
    reads_run: ClassVar[bool] = False  # reads the run the request creates (201 needed)
    inside: ClassVar[bool] = False  # needs the simulator's inside
    # Over HTTP (no inside): what is judged instead, or None when nothing can be.
    outside: ClassVar[str | None] = None

    def parse(self, p: Parser, action: Any, value: Any, where: str) -> Any:
        return value

    def before(self, ctx: Context, value: Any, tenant: str) -> Any:
        return None

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        raise NotImplementedError

    @property
    def observable_outside(self) -> bool:
        return not self.inside or self.outside is not None


class Flag(Expectation):
    """An expectation whose only value is `true`."""

    form = "true"

    def parse(self, p: Parser, action: Any, value: Any, where: str) -> Any:
        return _true(value, where)


def _int(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise Invalid(f"{where}: must be an integer, got {value!r}")
    return value


def _true(value: Any, where: str) -> bool:
    if value is not True:
        raise Invalid(f"{where}: the only value is `true`, got {value!r}")
    return True


def _labels(p: Parser, value: Any, where: str) -> list[str]:
    labels = value if isinstance(value, list) else [value]
    for label in labels:
        if label not in p.labels:
            raise Invalid(f"{where}: {label!r} is no earlier request's label "
                          f"(earlier: {', '.join(p.labels) or 'none'})")
    return labels


def _per_task(kind: type, value: Any, where: str) -> Any:
    def ok(v: Any) -> bool:
        return isinstance(v, kind) and (kind is bool or not isinstance(v, bool))
    if ok(value):
        return value
    if isinstance(value, dict) and value and all(ok(v) for v in value.values()):
        return value
    raise Invalid(f"{where}: must be a {kind.__name__} or a mapping task -> {kind.__name__}, "
                  f"got {value!r}")


def _tasks(value: Any, obs: Observed) -> list[tuple[str, Any]] | None:
    if isinstance(value, dict):
        return list(value.items())
    summary = obs.summary
    tasks = summary.get("tasks") if isinstance(summary, dict) else None
    if not isinstance(tasks, list) or not tasks:
        return None
    return [(str(t.get("taskId")), value) for t in tasks if isinstance(t, dict)]


def _includes(actual: Any, want: Any) -> bool:
    """Mappings by subset, at any depth; everything else by canonical equality."""
    if isinstance(want, dict):
        return isinstance(actual, dict) and all(
            k in actual and _includes(actual[k], v) for k, v in want.items())
    return canonical(actual) == canonical(want)


# ----------------------------------------------------------------------------- the wire


class Status(Expectation):
    name, form = "status", "N | 4xx"
    doc = ("the HTTP status (201: the created judge; 4xx: any refusal, where the RFC asks "
           "for one and names no code); every request states one")

    def parse(self, p: Parser, action: Any, value: Any, where: str) -> Any:
        if value == "4xx":
            return value
        return _int(value, where)

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        if value == 201:
            return [judges.created(ctx.req, obs.response, label)]
        if value == "4xx":
            return judges.refused_registered(ctx.req, obs.response, label)
        got = obs.response.status
        return [check(ctx.req, got == value, f"{label}: expected {value}, got {got}",
                      judges._obs(obs.response))]


class Error(Expectation):
    name, form = "error", "CODE"
    doc = "with `status`: that code, in a registered-code envelope"

    def parse(self, p: Parser, action: Any, value: Any, where: str) -> Any:
        if not isinstance(value, str) or not value:
            raise Invalid(f"{where}: must be a string, got {value!r}")
        return value

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        return []  # judged with `status`, by the runner (judges.refused)


class NoEcho(Expectation):
    name, form = "no_echo", "[V, ...]"
    doc = ("the response shows no run of 8 or more characters of these ids, in any encoding, "
           "in its headers or body")

    def parse(self, p: Parser, action: Any, value: Any, where: str) -> Any:
        if not isinstance(value, list) or not value or not all(isinstance(v, str)
                                                               for v in value):
            raise Invalid(f"{where}: must be a non-empty list of ids or $names")
        return value

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        supplied = [str(v) for v in ctx.subst(value)]
        controls: list[Response] = []
        if obs.response.status >= 400 and judges.echo_windows(obs.response, supplied):
            # Text any refusal carries is no echo: ask again with control values to see it.
            control = ctx.control(supplied)
            controls = [control] if control is not None else []
        return [judges.no_echo(ctx.req, obs.response, supplied, label, controls)]


class IdenticalTo(Expectation):
    name, form = "identical_to", "L | [L]"
    doc = ("the responses cannot be told apart: status, headers and body bytes, setting "
           "aside what varies between two asks of one request (asked again, interleaved, "
           "when they differ on first sight)")
    exact: ClassVar[bool] = True

    def parse(self, p: Parser, action: Any, value: Any, where: str) -> Any:
        return _labels(p, value, where)

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        pairs = [(other, ctx.responses[other]) for other in value]
        if not self.exact:
            return [judges.uniform(ctx.req, [*pairs, (label, obs.response)], exact=False)]
        labels = [*value, label]
        return [alike(ctx.req, [(name, ctx.ask(name)) for name in labels],
                      [*(r for _, r in pairs), obs.response], ctx.noise)]


class SameCodeAs(IdenticalTo):
    name, form = "same_code_as", "L | [L]"
    doc = "the same status and code as those earlier requests' responses"
    exact = False


class Echo(Expectation):
    name, form = "echo", "true | MAP"
    doc = ("eval.started.fixtureRuns is the request's map (or MAP) verbatim, in request "
           "order")
    reads_run = True

    def parse(self, p: Parser, action: Any, value: Any, where: str) -> Any:
        if value is True:
            if action.kind != "create_eval" or "fixture_runs" not in action.args:
                raise Invalid(f"{where}: `true` echoes the request's own fixture_runs; this "
                              "request has none, so give the expected map")
            return True
        if not isinstance(value, dict) or not value:
            raise Invalid(f"{where}: must be `true` or the expected fixtureRuns map")
        return value

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        raw = ctx.current_args["fixture_runs"] if value is True else value
        return [judges.echo(ctx.req, obs.events, ctx.subst(raw)),
                *_alike_on_the_stream(ctx, obs, tenant)]


def _alike_on_the_stream(ctx: Context, obs: Observed, tenant: str) -> list[Finding]:
    """The eval is the same on every channel the host offers: the run's SSE stream carries
    the eval events its poll does (the echo, each task's fixtureMissCount and passed). A host
    with no stream there is judged on the poll alone. Read once per run: the first
    expectation that asks judges it."""
    if obs.run_id is None or obs.stream_judged:
        return []
    obs.stream_judged = True
    stream = ctx.session(tenant).stream(obs.run_id)
    return [] if stream is None else [judges.eval_events_alike(ctx.req, obs.events, stream)]


def _alike_read_again(ctx: Context, obs: Observed, tenant: str) -> list[Finding]:
    """The run's EvalSummary, read a second time, reports what the first read did. Once
    per run, as the stream is."""
    if obs.run_id is None or obs.summary_reread or obs.summary is None:
        return []
    obs.summary_reread = True
    again = ctx.session(tenant).summary(obs.run_id)
    return [judges.summary_reread_alike(ctx.req, obs.summary, again)]


class OutcomesEqualSource(Expectation):
    name, form = "outcomes_equal_source", "RUN | [RUN]"
    doc = ("each agent.tool-returned of the agent equals the source's (several sources: "
           "concatenated in order)")
    reads_run = True

    def parse(self, p: Parser, action: Any, value: Any, where: str) -> Any:
        return p.run_refs(value, where)

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        source = [event for ref in value for event in ctx.events_of(ref)]
        if (not judges.outcomes_on_wire(source, agent)
                and not judges.outcomes_on_wire(obs.events, agent)):
            raise inapplicable(f"{agent}'s lane carries no outcome or error on the wire "
                               "(argsHash alone, RFC 0252 §C), so the outcomes cannot be "
                               "compared there")
        return judges.outcomes_equal(ctx.req, source, obs.events, agent)


class FixtureMissCount(Expectation):
    name, form = "fixture_miss_count", "N | {task: N}"
    doc = "fixtureMissCount on eval.scored and in the summary (every task, or per task)"
    reads_run = True
    kind: ClassVar[type] = int

    def parse(self, p: Parser, action: Any, value: Any, where: str) -> Any:
        return _per_task(self.kind, value, where)

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        pairs = _tasks(value, obs)
        if pairs is None:
            return [fail(ctx.req, f"{label}: the run has no EvalSummary with tasks")]
        return [*(f for task, want in pairs for f in self.per_task(ctx.req, obs, task, want)),
                *_alike_on_the_stream(ctx, obs, tenant), *_alike_read_again(ctx, obs, tenant)]

    def per_task(self, req: str, obs: Observed, task: str, want: Any) -> list[Finding]:
        return judges.miss_count(req, obs.events, obs.summary, task, want)


class Passed(FixtureMissCount):
    name, form = "passed", "BOOL | {task: BOOL}"
    doc = "passed on eval.scored and in the summary (every task, or per task)"
    kind = bool

    def per_task(self, req: str, obs: Observed, task: str, want: Any) -> list[Finding]:
        return judges.passed_is(req, obs.events, obs.summary, task, want)


class CounterUnchanged(Expectation):
    name, form = "counter_unchanged", "{key, tenant} | [...]"
    doc = "the live counter reads the same before and after the request (a change, not a value)"
    moved: ClassVar[bool] = False

    def parse(self, p: Parser, action: Any, value: Any, where: str) -> Any:
        items = value if isinstance(value, list) else [value]
        out = []
        for item in items:
            if (not isinstance(item, dict) or not isinstance(item.get("key"), str)
                    or set(item) - {"key", "tenant"}):
                raise Invalid(f"{where}: each counter is {{key, tenant?}}, got {item!r}")
            tenant = item.get("tenant", action.tenant)
            if not isinstance(tenant, str) or tenant not in p.tenants:
                raise Invalid(f"{where}: tenant {tenant!r} is unknown")
            out.append({"key": item["key"], "tenant": tenant})
        return out

    def before(self, ctx: Context, value: Any, tenant: str) -> Any:
        return [ctx.counter(c["tenant"], c["key"]) for c in value]

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        out = []
        for spec, was in zip(value, before, strict=True):
            now = ctx.counter(spec["tenant"], spec["key"])
            what = f"{label} (counter {spec['key']!r} of {spec['tenant']})"
            if was is None or now is None:
                out.append(fail(ctx.req, f"{what}: the live counter cannot be observed"))
            elif self.moved:
                out.append(judges.counter_moved(ctx.req, was, now, what))
            else:
                out.append(judges.counter_unchanged(ctx.req, was, now, what))
        return out


class CounterMoved(CounterUnchanged):
    name = "counter_moved"
    doc = "a positive control: the live counter went up across the request"
    moved = True


class EventIncludes(Expectation):
    name, form = "event_includes", "{type, payload}"
    doc = "an event of the run of that type carries that payload (mappings by subset)"
    reads_run = True

    def parse(self, p: Parser, action: Any, value: Any, where: str) -> Any:
        if (not isinstance(value, dict) or not isinstance(value.get("type"), str)
                or set(value) - {"type", "payload"}):
            raise Invalid(f"{where}: must be {{type, payload?}}, got {value!r}")
        return value

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        want = ctx.subst(value.get("payload", {}))
        typed = judges.of_type(obs.events, value["type"])
        found = any(_includes(e.get("payload"), want) for e in typed)
        return [check(ctx.req, found,
                      f"{label}: a {value['type']} event carries {canonical(want)}" if found else
                      f"{label}: no {value['type']} event (of {len(typed)}) carries "
                      f"{canonical(want)}", [e.get("payload") for e in typed])]


class JsonIncludes(Expectation):
    name, form = "json_includes", "VALUE"
    doc = "the response body contains VALUE (mappings by subset)"

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        want = ctx.subst(value)
        found = _includes(obs.response.json, want)
        return [check(ctx.req, found, f"{label}: the response body contains {canonical(want)}"
                      if found else f"{label}: the response body lacks {canonical(want)}",
                      judges._obs(obs.response))]


class ToolStatuses(Expectation):
    name, form = "tool_statuses", "[S, ...]"
    doc = "the statuses of the agent's agent.tool-returned, in order"
    reads_run = True

    def parse(self, p: Parser, action: Any, value: Any, where: str) -> Any:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise Invalid(f"{where}: must be a list of status names")
        return value

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        got = [(e.get("payload") or {}).get("status")
               for e in judges.of_type(obs.events, "agent.tool-returned")
               if (e.get("payload") or {}).get("agentId") == agent]
        return [check(ctx.req, got == value, f"{label}: {agent}'s calls returned {got}"
                      + ("" if got == value else f", expected {value}"))]


class LaneContentFree(Expectation):
    name, form = "lane_content_free", "RUN"
    doc = "that run's tool events carry argsHash, no inputs and no outcome"

    def parse(self, p: Parser, action: Any, value: Any, where: str) -> Any:
        return p.run_ref(value, where)

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        events = ctx.events_of(value)
        called = [e.get("payload") or {} for e in judges.of_type(events, "agent.tool-called")]
        returned = [e.get("payload") or {}
                    for e in judges.of_type(events, "agent.tool-returned")]
        hashed = bool(called) and all("argsHash" in p and "inputs" not in p for p in called)
        bare = all("outcome" not in p and "error" not in p for p in returned)
        return [check(ctx.req, bool(called), f"{label}: the source recorded "
                      f"{len(called)} tool call(s) on the wire"),
                check(ctx.req, hashed and bare,
                      f"{label}: the source's wire lane is content-free (argsHash, no outcome)"
                      if hashed and bare else
                      f"{label}: the source's wire lane carries content", called + returned)]


class FacetImpliesMatching(Flag):
    name = "facet_implies_matching"
    doc = "discovery never advertises recordedFixtures without fixtureMatching"

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        return [judges.facet_implies_matching(ctx.req, obs.response.json)]


class SummaryContentFree(Flag):
    name = "summary_content_free"
    doc = "eval.* events and the EvalSummary carry no content"
    reads_run = True

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        return judges.content_free(ctx.req, obs.summary, obs.events)


class NoDerivedOnWire(Flag):
    name = "no_derived_on_wire"
    doc = ("no response about the run (create answer, snapshot, events, summary) carries a "
           "fixture entry, by key name, nor any recorded call of its sources it did not make, "
           "under any name")
    reads_run = True
    inside = True
    outside = "the content judge alone (no white-box control that the run holds entries)"

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        out: list[Finding] = []
        rid = obs.run_id or ""
        if ctx.inspector is not None:
            held = [e for _, run, _, e in ctx.inspector.copies() if run == rid and e]
            out.append(check(ctx.req, bool(held), f"{label}: (white box) the run holds derived "
                             f"entries for {len(held)} task(s), so there is something to leak"))
        session = ctx.session(tenant)
        snapshot = session.get_run(rid)
        summary = session.request("GET", run_path(rid, "/eval-summary"))
        documents: list[tuple[str, Any]] = [("the create response", obs.response),
                                            ("the run snapshot", snapshot),
                                            ("the EvalSummary", summary)]
        for what, doc in documents:
            parsed = doc.json if isinstance(doc, Response) else doc
            bad = sorted(_keys(parsed) & DERIVED_KEYS)
            out.append(check(ctx.req, not bad, f"{label}: {what} carries no fixture-entry key"
                             if not bad else f"{label}: {what} carries fixture-entry keys {bad}",
                             parsed))
        for e in obs.events:
            bad = sorted(_keys(e) & DERIVED_KEYS)
            if bad:
                out.append(fail(ctx.req, f"{label}: event {e.get('sequence')} ({e.get('type')}) "
                                f"carries fixture-entry keys {bad}", e))
        sources = [v for v in (ctx.current_args.get("fixture_runs") or {}).values()]
        content = [c for s in ctx.subst(sources)
                   for c in judges.recorded_content(ctx.session(tenant).events(s), agent)]
        made = judges.recorded_content(obs.events, agent)
        left = {canonical(c) for c in content} - {canonical(m) for m in made}
        if left:  # a run that made every recorded call has nothing of its sources to leak
            out += [attrs.evolve(f, message=f"{label}: {f.message}") for f in
                    judges.no_recorded_content(ctx.req, documents, content, made)]
        return out


# Keys that only a fixture entry has: none may reach the wire (RFC 0252 §D).
# (`isError` alone is not one: an MCP tool result carries it, on the wire, rightly.)
DERIVED_KEYS = frozenset({"toolResponses", "argsMatch"})


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        out = set(map(str, value))
        for v in value.values():
            out |= _keys(v)
        return out
    if isinstance(value, list):
        return set().union(*map(_keys, value)) if value else set()
    return set()


# ----------------------------------------------------------------------------- the inside


class RunsUnchanged(Flag):
    name = "runs_unchanged"
    doc = "refused before the run starts: nothing was minted"
    inside = True
    outside = ("the answer names no run (no runId, eventsUrl, statusUrl or Location), and "
               "where the host advertises run listing (runList) the list gains no run")

    def before(self, ctx: Context, value: Any, tenant: str) -> Any:
        count = None if ctx.inspector is None else ctx.inspector.run_count()
        return count, ctx.session(tenant).list_runs()

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        count, listed = before
        after = None if ctx.inspector is None else ctx.inspector.run_count()
        out = [judges.nothing_minted(ctx.req, obs.response, label, count, after)]
        if listed is not None:
            workflow = ctx.current_args.get("workflow")
            kind = str(workflow) if isinstance(workflow, str) else "eval"
            out += no_new_runs(ctx.session(tenant), ctx.req, listed, label, ("eval", kind))
        return out


class ResolutionsUnchanged(Expectation):
    name, form = "resolutions_unchanged", "RUN | [RUN]"
    doc = "the host did not resolve these sources (again) while answering"
    inside = True

    def parse(self, p: Parser, action: Any, value: Any, where: str) -> Any:
        return p.run_refs(value, where)

    def before(self, ctx: Context, value: Any, tenant: str) -> Any:
        assert ctx.inspector is not None
        return [ctx.inspector.resolutions(str(ctx.subst(r))) for r in value]

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        assert ctx.inspector is not None
        return [judges.no_reresolution(
            ctx.req, was, ctx.inspector.resolutions(str(ctx.subst(ref))),
            f"{label} (run {ref.removeprefix('$')})")
            for ref, was in zip(value, before, strict=True)]


class DerivationsUnchanged(ResolutionsUnchanged):
    name = "derivations_unchanged"
    doc = "the host derived no entries from these sources (again) while answering"

    def before(self, ctx: Context, value: Any, tenant: str) -> Any:
        assert ctx.inspector is not None
        return [ctx.inspector.derivations(str(ctx.subst(r))) for r in value]

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        assert ctx.inspector is not None
        return [judges.count_is(
            ctx.req, ctx.inspector.derivations(str(ctx.subst(ref))), was,
            f"{label}: derivations from run {ref.removeprefix('$')}")
            for ref, was in zip(value, before, strict=True)]


class LiveCallsUnchanged(Flag):
    name = "live_calls_unchanged"
    doc = "no live tool ran and nothing left through egress"
    inside = True
    outside = "every counter key the row's scripts name reads the same before and after"

    def before(self, ctx: Context, value: Any, tenant: str) -> Any:
        if ctx.inspector is not None:
            s = ctx.inspector.live_state()
            return (s["liveCalls"], s["egress"])
        counts: list[int | None] = [ctx.counter(tenant, k) for k in ctx.counter_keys]
        return counts

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        if ctx.inspector is not None:
            state = ctx.inspector.live_state()
            seen = (state["liveCalls"], state["egress"])
            return [check(ctx.req, seen == before,
                          f"{label}: (white box) no live tool ran, nothing left through egress"
                          if seen == before else f"{label}: (white box) live calls / egress "
                          f"records went {before} -> {seen}")]
        now = [ctx.counter(tenant, k) for k in ctx.counter_keys]
        moved = [k for k, a, b in zip(ctx.counter_keys, before, now, strict=True) if a != b]
        return [check(ctx.req, not moved, f"{label}: no live counter the row names moved "
                      f"({len(ctx.counter_keys)} key(s))" if not moved else
                      f"{label}: live counter(s) {moved} moved")]


class NoSecretInDerived(Flag):
    name = "no_secret_in_derived"
    doc = "no credential resolved at egress appears in any derived copy (SR-1)"
    inside = True

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        inspector = ctx.inspector
        assert inspector is not None
        secrets = inspector.egress_secrets()
        entries = [{"source": s, "evalRun": r, "task": t, "entries": e}
                   for s, r, t, e in inspector.copies()]
        log = json.dumps(inspector.egress_log(), default=str)
        resolved = any(s in log for s in secrets)
        return [check(ctx.req, resolved, f"{label}: (white box) control: the host resolved an "
                      "egress credential" if resolved else f"{label}: (white box) no egress "
                      "credential was ever resolved, so its absence shows nothing"),
                check(ctx.req, any(e["entries"] for e in entries),
                      f"{label}: (white box) derived copies exist ({len(entries)})"),
                judges.no_secret_in(ctx.req, entries, secrets, f"{label}: derived copies")]


class DerivedEntries(Expectation):
    name, form = "derived_entries", "{source: RUN, task, entries: [...]}"
    doc = "the copy this run derived for the task is exactly these entries (to_json form)"
    reads_run = True
    inside = True

    def parse(self, p: Parser, action: Any, value: Any, where: str) -> Any:
        if (not isinstance(value, dict) or set(value) != {"source", "task", "entries"}
                or not isinstance(value["task"], str) or not isinstance(value["entries"], list)):
            raise Invalid(f"{where}: must be {{source, task, entries: [...]}}")
        return {**value, "source": p.run_ref(value["source"], where)}

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        assert ctx.inspector is not None
        source = ctx.subst(value["source"])
        found = [e for s, r, t, e in ctx.inspector.copies()
                 if s == source and r == obs.run_id and t == value["task"]]
        got = found[0] if found else None
        want = ctx.subst(value["entries"])
        same = got is not None and canonical(got) == canonical(want)
        return [check(ctx.req, same,
                      f"{label}: (white box) task {value['task']} derived {len(want)} "
                      "expected entr(ies)" if same else f"{label}: (white box) task "
                      f"{value['task']} derived {_entries_in_words(got)}; expected "
                      f"{_entries_in_words(want)}",
                      {"got": got, "expected": want})]


def _entries_in_words(entries: Any) -> str:
    """Derived entries as a person reads them: how many, then each tool with its args."""
    if not isinstance(entries, list):
        return "nothing"
    shown = [f"{e.get('tool')} {json.dumps(e.get('args'), sort_keys=True)}"
             if isinstance(e, dict) else json.dumps(e) for e in entries]
    return f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}" + (
        ": " + "; ".join(shown) if shown else "")


class DerivedCopies(Expectation):
    name, form = "derived_copies", "{source: RUN, count: N}"
    doc = "exactly N derived copies are stored under the source"
    inside = True

    def parse(self, p: Parser, action: Any, value: Any, where: str) -> Any:
        if (not isinstance(value, dict) or set(value) != {"source", "count"}
                or not isinstance(value["count"], int)):
            raise Invalid(f"{where}: must be {{source, count}}")
        return {**value, "source": p.run_ref(value["source"], where)}

    def judge(self, ctx: Context, label: str, value: Any, obs: Observed, before: Any,
              tenant: str, agent: str) -> list[Finding]:
        assert ctx.inspector is not None
        source = ctx.subst(value["source"])
        got = sum(1 for s, _, _, _ in ctx.inspector.copies() if s == source)
        return [check(ctx.req, got == value["count"],
                      f"{label}: (white box) {got} derived cop(ies) under {value['source']}"
                      + ("" if got == value["count"] else f", expected {value['count']}"))]


EXPECTATIONS: dict[str, Expectation] = {e.name: e for e in (
    Status(), Error(), NoEcho(), IdenticalTo(), SameCodeAs(), Echo(),
    OutcomesEqualSource(),
    FixtureMissCount(), Passed(), CounterUnchanged(), CounterMoved(), EventIncludes(),
    JsonIncludes(), ToolStatuses(), LaneContentFree(), FacetImpliesMatching(),
    SummaryContentFree(), NoDerivedOnWire(), RunsUnchanged(), ResolutionsUnchanged(),
    DerivationsUnchanged(), LiveCallsUnchanged(), NoSecretInDerived(), DerivedEntries(),
    DerivedCopies())}


def reference_table() -> list[tuple[str, str, str, str]]:
    """(name: form, what it asserts, needs the inside, what runs over HTTP) per expectation,
    for specs/REFERENCE.md."""
    rows = []
    for e in EXPECTATIONS.values():
        where = "wire" if not e.inside else ("inside; over HTTP: " + e.outside if e.outside
                                             else "inside only")
        rows.append((f"{e.name}: {e.form}", e.doc, "yes" if e.inside else "no", where))
    return rows


def names_needing_run() -> frozenset[str]:
    return frozenset(e.name for e in EXPECTATIONS.values() if e.reads_run)


def unknown(names: Sequence[str]) -> list[str]:
    return [n for n in names if n not in EXPECTATIONS]
