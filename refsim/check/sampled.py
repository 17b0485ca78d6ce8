"""`check`'s sample of each class of specs/classes.yaml: one row per class, each judging a
bounded, seeded sample of the class's members (`refsim.check.classes.sample`) on one host,
in process or over HTTP.

- source-values: each value as a fixtureRuns value is refused 400 validation_error without
  echo; an id-shaped one gets the unknown id's whole answer (`differential.alike`). Every
  derivation of the caller's own usable id is sent (a loose host takes exactly those); the
  rest is sampled.
- task-keys: each key (every derivation of the suite's real task ids, then a sample) is
  refused 400 validation_error.
- exact-args: a source recorded with a recorded argument set; a replay whose calls differ
  by each sampled variant misses each (fixtureMissCount), and the live counter stays.
- run-states: runs of the sampled states and owners; the caller's usable ones accepted,
  every other refused alike with the unknown id.
- owner-routes: another tenant asks each route under each spelling, refused with a
  registered code as the same route is for an unknown id, nothing of the run in the answer;
  and the idempotent creates are never answered with the owner's run.
- request-headers: another tenant's run and an unknown id refused alike under each member.

Ids are opaque: members come from ids seen (`classes.sample(ids=...)`), and an unknown id
is `judges.control_value` of a seen one (its shape, none of its characters).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import attrs

from refsim.check import classes, judges
from refsim.check.classes import CLASS_NAMES, Member, RunState
from refsim.check.differential import alike, noise_of_host
from refsim.check.findings import Disposition, Finding, Row, matches
from refsim.check.ids import req_id
from refsim.check.invariants import Probe
from refsim.check.lanes import remember_minted
from refsim.check.observe import (
    COUNTER_TOOL,
    KEYS,
    RECORDER,
    REPLAY,
    SEAM_ERASE,
    SEAM_RESOLVE,
    SOURCE,
    TENANT_A,
    TENANT_B,
    Observed,
    Session,
    Unobservable,
    eval_body,
    gate,
    inspector_of,
    nonce,
    run_path,
)
from refsim.domain.canonical import canonical
from refsim.wire import catalog
from refsim.wire.client import NO_BODY, HostClient
from refsim.wire.response import Response
from refsim.wire.trace import segment

SCENARIO = "sampled"
# How many members of each class one `check` takes (beyond every derivation of the caller's
# own id and of the suite's task ids, which are all sent): small, so the part costs little.
SIZES: Mapping[str, int] = {"source-values": 10, "task-keys": 6, "exact-args": 6,
                            "run-states": 5, "owner-routes": 12, "request-headers": 12}
AGENT_CALL, WAIT_INPUT, NOOP = ("conformance-agent-call", "conformance-wait-input",
                                "conformance-noop")
EXACT_SUITE = "refsim-sampled-exact-args"
EVERY = 1 << 30  # a sample size no class reaches: the whole pool


def check_id(cls: str) -> str:
    return f"sampled-{cls}"


def requirement(cls: str) -> str:
    """The requirement a class's row is filed under: the class's own (specs/classes.yaml)."""
    return req_id(classes.load().requirement[cls])


@attrs.define
class Context:
    """What every class's check stands on: the sessions, the caller's usable source and an
    eval run replaying it, another tenant's source, the seed."""

    probe: Probe
    seed: int
    has_b: bool
    own: str
    replay: str
    foreign: str | None
    noise: frozenset[str]
    sizes: dict[str, int] = attrs.Factory(dict)
    notes: dict[str, str] = attrs.Factory(dict)

    @property
    def a(self) -> Session:
        return self.probe.a

    @property
    def b(self) -> Session:
        return self.probe.b


def _replay_body(value: Any) -> dict[str, Any]:
    return eval_body(REPLAY, {"record": value})


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 48 else text[:45] + "..."


def _controlled(value: Any) -> Any:
    """`value` with every string in it replaced by its control value."""
    if isinstance(value, str):
        return judges.control_value(value)
    if isinstance(value, list):
        return [_controlled(v) for v in value]
    if isinstance(value, dict):
        return {k: _controlled(v) for k, v in value.items()}
    return value


def _no_echo(ctx: Context, req: str, r: Response, value: Any, what: str,
             body: Callable[[Any], Any], control: Response) -> Finding:
    """judges.no_echo, with the control request made only where a window of the value is
    found (what the host says whatever the value). An answer byte for byte the same as
    `control`, the answer to another value, holds nothing that comes from this one: it is
    not searched (the search costs a millisecond a value)."""
    supplied = judges.strings_in(value)
    controls = ([ctx.a.create(body(_controlled(value)))]
                if judges.whole(r) != judges.whole(control) and r.status >= 400
                and judges.echo_windows(r, supplied) else [])
    return judges.no_echo(req, r, supplied, what, controls, same_as=control)


def _unknown_anchor(ctx: Context, req: str) -> tuple[
        list[Finding], list[tuple[str, Callable[[], Response]]], list[Response]]:
    """The refusal every other one is held to: an id of no run, shaped like the caller's
    own, asked once (refused, no echo): the findings, its ask, its answer."""
    unknown = judges.control_value(ctx.own)
    first = ctx.a.create(_replay_body(unknown))
    out = judges.refused(req, first, "an unknown id")
    out.append(judges.no_echo(req, first, [unknown], "an unknown id"))
    return out, [("an unknown id", _ask(ctx.a, _replay_body(unknown)))], [first]


def _distinct(members: Sequence[Member]) -> list[Member]:
    seen: set[str] = set()
    out = []
    for m in members:
        key = canonical(m.value)
        if key not in seen:
            seen.add(key)
            out.append(m)
    return out


def _ask(session: Session, body: Any, headers: Callable[[], dict[str, str]] | None = None
         ) -> Callable[[], Response]:
    if headers is None:
        return lambda: session.create(body)
    return lambda: session.request("POST", "/runs", body, headers())


# ----------------------------------------------------------------------------- the classes


def check_source_values(ctx: Context) -> list[Finding]:
    cls, req, a = "source-values", requirement("source-values"), ctx.a
    data = classes.load()
    near = {op.name for op in data.from_id}
    own_near = [m for m in classes.sample(cls, ctx.seed, ids=[ctx.own], size=EVERY)
                if m.name in near]
    seen = [ctx.own] + ([ctx.foreign] if ctx.foreign else [])
    members = _distinct(own_near + classes.sample(cls, ctx.seed, ids=seen,
                                                  size=SIZES[cls]))
    ctx.sizes[cls] = len(members)
    out, asks, answers = _unknown_anchor(ctx, req)
    first = answers[0]
    for m in members:
        what = f"fixtureRuns value {m.name} {_show(m.value)}"
        r = a.create(_replay_body(m.value))
        out += judges.refused(req, r, what)
        out.append(_no_echo(ctx, req, r, m.value, what, _replay_body, first))
        if data.id_like(m.value):
            asks.append((what, _ask(a, _replay_body(m.value))))
            answers.append(r)
    if len(asks) > 1:
        out.append(alike(req, asks, answers, ctx.noise))
    return out + _named_twice(ctx, req, data)


def _outcomes(events: Sequence[Mapping[str, Any]]) -> list[Any]:
    return [answer for _, answer in judges.recorded_calls(events, RECORDER)]


def _named_twice(ctx: Context, req: str, data: classes.Classes) -> list[Finding]:
    """Each `named-twice` member: the task named twice, with the caller's usable run and the
    other value in the member's order (another tenant's run is one whose recording differs
    from the caller's, so that serving it shows: tenant B records once more where its
    first recorded the same outcomes)."""
    a = ctx.a
    own = a.events(ctx.own)
    roles: dict[str, str | None] = {"usable": ctx.own, "unknown": classes.shifted(ctx.own),
                                    "foreign": None}
    if ctx.foreign is not None:
        foreign: str | None = ctx.foreign
        for _ in range(2):
            if foreign is None or _outcomes(ctx.b.events(foreign)) != _outcomes(own):
                break
            foreign = _completed(ctx.b.eval(SOURCE))
        roles["foreign"] = foreign
    out: list[Finding] = []
    asked = [m for m in data.named_twice if all(roles[r] is not None for r in m.roles)]
    ctx.sizes["source-values"] += len(asked)
    for m in asked:
        what = f"fixtureRuns naming its task twice ({m.name})"
        pairs = [("record", roles[r]) for r in m.roles]
        r = a.create(eval_body(REPLAY, classes.NamedTwice(pairs)))
        run_id = r.json.get("runId") if r.status == 201 and isinstance(r.json, dict) else None
        served = a.events(str(run_id)) if isinstance(run_id, str) else []
        out += judges.named_twice(req, r, own, served, RECORDER, what)
    return out


# A catalog suite whose one task id holds a "-": task-keys derives near-misses from it too.
HYPHENATED = "refsim-eval-both-tasks-at-once"


def check_task_keys(ctx: Context) -> list[Finding]:
    cls, req, a = "task-keys", requirement("task-keys"), ctx.a
    data = classes.load()
    near = {op.name for op in data.from_key}
    # The replay fixture's task ids, and where the host lists it a suite whose task id has
    # a "-" (a host that folds separators before it judges a key is caught only there).
    suites = [REPLAY] + [s for s in (HYPHENATED,) if a.surface.lists(s)]
    asks: list[tuple[str, classes.Member]] = []
    for suite in suites:
        keys = [str(t["taskId"]) for t in catalog.suite(suite)["tasks"]]
        derived = [m for m in classes.sample(cls, ctx.seed, keys=keys, size=EVERY)
                   if m.name in near]
        drawn = classes.sample(cls, ctx.seed, keys=keys, size=SIZES[cls]) if (
            suite == REPLAY) else []
        asks += [(suite, m) for m in _distinct(derived + drawn)]
    ctx.sizes[cls] = len(asks)
    out = []
    for suite, m in asks:
        what = f"fixtureRuns key {m.name} {_show(m.value)} ({suite})"
        r = a.create(eval_body(suite, {m.value: ctx.own}))
        out += judges.refused(req, r, what)
    return out


def _task(task_id: str, calls: Sequence[Any]) -> dict[str, Any]:
    return {"taskId": task_id,
            "input": {"script": [{"call": COUNTER_TOOL, "args": args} for args in calls]
                      + [{"decide": "ok"}]},
            "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "ok"}}}


def check_exact_args(ctx: Context) -> list[Finding]:
    """The source calls the counter once with each recorded argument set of the class; the
    replay has a task that makes those calls again (no miss) and a task per variant, each
    variant taken on the first recorded set it changes (one miss each, the counter
    unmoved): every variant of the class, none left to a draw."""
    cls, req, a, probe = "exact-args", requirement("exact-args"), ctx.a, ctx.probe
    a.require_fixture(AGENT_CALL)
    key = f"sampled-exact-{probe.tag}"
    data = classes.load()
    recorded = [classes.with_recorded({"op": "inc", "key": key}, ctx.seed + j)
                for j in range(len(data.recorded_args))]
    members: list[tuple[str, Any]] = []
    for op in data.arg_variants:
        for args in recorded:
            value = classes.vary(op, args)
            if value is not None and not any(_same_args(value, r) for r in recorded):
                members.append((op.name, value))
                break
    ctx.sizes[cls] = len(members)
    tasks = {"exact": recorded} | {f"variant-{i}": [value]
                                   for i, (_, value) in enumerate(members)}
    doc = {"suiteId": "refsim.sampled.evals.exact-args", "version": "1.0.0", "modes": ["golden"],
           "tasks": [_task(t, calls) for t, calls in tasks.items()]}
    try:
        suite = a.require_suite(EXACT_SUITE, doc, probe.tag)
    except Unobservable as exc:  # the seam named with a word after it, as every row does
        raise Unobservable(f"{exc.reason} (the check registers its suite of variants "
                           "there)", exc.disposition) from exc
    source = a.agent_run([{"call": COUNTER_TOOL, "args": r} for r in recorded]
                         + [{"decide": "ok"}])
    out = [judges.created(req, source.response, "the source, recorded with "
                          f"{len(recorded)} argument sets"),
           judges.completed(req, source.completed, "the source")]
    if source.run_id is None:
        return out
    before = probe.count(a, key)
    run = a.eval(suite, dict.fromkeys(tasks, source.run_id))
    out += [judges.created(req, run.response, "the replay of every variant"),
            judges.completed(req, run.completed, "the replay")]
    out += judges.miss_count(req, run.events, run.summary, "exact", 0)
    for i, (name, _) in enumerate(members):
        out += [attrs.evolve(f, message=f"{name}: {f.message}") for f in
                judges.miss_count(req, run.events, run.summary, f"variant-{i}", 1)]
    out.append(judges.counter_unchanged(req, before, probe.count(a, key),
                                        "the variants' calls"))
    return out


def _same_args(a: Any, b: Any) -> bool:
    return bool(canonical(a) == canonical(b))


def _waiting(s: Session) -> str | None:
    r = s.workflow(WAIT_INPUT, {"agentId": RECORDER,
                                "script": [{"call": COUNTER_TOOL,
                                            "args": {"op": "read", "key": "sampled"}}]})
    if r.status != 201 or not isinstance(r.json, dict):
        return None
    run_id = str(r.json["runId"])
    s.events(run_id)  # until it waits
    return run_id


def _completed(obs: Observed) -> str | None:
    return obs.run_id if obs.completed else None


def _make(ctx: Context, state: RunState, s: Session, source: str) -> str | None:
    """A run of `state` made by `s` (whose usable source is `source`), or None where the
    host did not make it; `Unobservable` where a fixture or seam it needs is missing."""
    recipe = state.recipe
    if recipe == "eval":
        return _completed(s.eval(SOURCE))
    if recipe == "eval-of-eval":
        return _completed(s.eval(REPLAY, {"record": source}))
    if recipe == "workflow":
        s.require_fixture(AGENT_CALL)
        return _completed(s.agent_run([{"call": COUNTER_TOOL,
                                        "args": {"op": "read", "key": "sampled"}},
                                       {"decide": "ok"}]))
    if recipe == "noop":
        s.require_fixture(NOOP)
        r = s.workflow(NOOP)
        run_id = r.json.get("runId") if r.status == 201 and isinstance(r.json, dict) else None
        if isinstance(run_id, str):
            s.events(run_id)
            return run_id
        return None
    if recipe == "erased":
        s.require_fixture(AGENT_CALL)
        if not ctx.a.surface.offers(SEAM_ERASE):
            _missing(SEAM_ERASE)
        made = _completed(s.agent_run([{"call": COUNTER_TOOL,
                                        "args": {"op": "read", "key": "sampled"}},
                                       {"decide": "ok"}]))
        if made is not None:
            s.require_erase(made)
        return made
    s.require_fixture(WAIT_INPUT)
    if recipe == "resolved" and not ctx.a.surface.offers(SEAM_RESOLVE):
        _missing(SEAM_RESOLVE)
    waiting = _waiting(s)
    if waiting is None or recipe == "waiting":
        return waiting
    if recipe == "cancelled":
        done = s.request("POST", run_path(waiting, "/cancel"), json={})
        s.events(waiting)  # until it is cancelled (a host may get there after answering)
        return waiting if done.status == 200 else None
    s.require_resolve(waiting)  # resolved
    s.events(waiting)
    return waiting


def _missing(seam: str) -> None:
    raise Unobservable(f"the host does not advertise the conformance seam {seam}")


# The recipes this check makes (the machine makes the rest: a failed call, calls not held,
# several trials).
MADE_HERE = frozenset({"eval", "eval-of-eval", "workflow", "noop", "erased", "waiting",
                       "cancelled", "resolved"})


def check_run_states(ctx: Context) -> list[Finding]:
    cls, req, a = "run-states", requirement("run-states"), ctx.a
    pool = [m for m in classes.sample(cls, ctx.seed, size=EVERY)
            if m.value[0].recipe in MADE_HERE and (ctx.has_b or m.value[1] == "caller")]
    random.Random(f"{ctx.seed}:{cls}:pick").shuffle(pool)
    members = pool[:SIZES[cls]]
    ctx.sizes[cls] = len(members)
    out, asks, answers = _unknown_anchor(ctx, req)
    first = answers[0]
    skipped = []
    for m in members:
        state, owner = m.value
        mine = owner == "caller"
        s = ctx.a if mine else ctx.b
        try:
            made = _make(ctx, state, s, ctx.own if mine else str(ctx.foreign))
        except Unobservable as exc:
            skipped.append(f"{m.name} ({exc.reason})")
            continue
        out.append(judges.done(req, made is not None, f"{m.name}: made"))
        if made is None:
            continue
        r = a.create(_replay_body(made))
        what = f"a source {m.name}"
        if mine and state.usable is True:
            out.append(judges.created(req, r, f"{what}, usable"))
            continue
        out += judges.refused(req, r, what)
        out.append(_no_echo(ctx, req, r, made, what, _replay_body, first))
        asks.append((what, _ask(a, _replay_body(made))))
        answers.append(r)
    if skipped:
        ctx.notes[cls] = "not made here: " + "; ".join(skipped)
    if len(asks) > 1:
        out.append(alike(req, asks, answers, ctx.noise))
    return out


def _code(r: Response) -> str:
    return str(r.json.get("error")) if isinstance(r.json, dict) else ""


def _ask_routes(req: str, asker: Session, who: str, rid: str, unknown: str,
                routes: Sequence[classes.Route], data: classes.Classes,
                content: Sequence[Any], listings: Sequence[str]) -> list[Finding]:
    """`asker`, another owner than the run's, asks every route under every spelling of
    `rid` (refused as for `unknown`, an id of no run, with nothing of the run), and every
    listing (which never shows the run's id: the asker's own runs may hold like content)."""
    out: list[Finding] = []
    for route in routes:
        body = route.body if route.body is not None else NO_BODY
        for spelling in data.spellings:
            what = f"{who} asks {route.method} {route.name} (the id {spelling.name})"
            r = asker.request(route.method, classes.spelt(route, rid, spelling), json=body,
                              headers=dict(route.headers) or None)
            u = asker.request(route.method, classes.spelt(route, unknown, spelling),
                              json=body, headers=dict(route.headers) or None)
            out += judges.refused_registered(req, r, what)
            # An id made up from the run's that the host reads as no id at all (a checksum
            # in its ids, say) is no id of no run to compare with.
            if not judges.undecodable(u) or judges.undecodable(r):
                out.append(judges.refused_as(req, r, f"{what}, as for an unknown id",
                                             status=u.status, code=_code(u)))
            out.append(judges.nothing_of_run(req, r, rid, content, what))
    for path in listings:
        r = asker.request("GET", path)
        out.append(judges.nothing_of_run(req, r, rid, [], f"{who} asks the listing {path} "
                                         f"({r.status})"))
    return out


def _other_workspace(ctx: Context, req: str, data: classes.Classes,
                     routes: Sequence[classes.Route], listings: Sequence[classes.Listing]
                     ) -> tuple[list[Finding], tuple[Session, str, Session]] | str:
    """The owner triple, within one tenant: a fresh tenant minted through the seam tenants
    records a usable source with its tenant-wide key; a key of the same tenant scoped to a
    workspace names it. Where the host refuses that source to that key (it cannot read it),
    the key asks every owner route and listing of the run as another tenant does, and gets
    the same: a route that reads the run would read what its create refused. Where the host
    takes it, this key reads its tenant's runs, and nothing is asked. Returns the findings
    and (the tenant-wide session, its source, the scoped session), or why it was not asked
    (one line)."""
    a = ctx.a
    if not _offers_seam(a, "tenants"):
        return "another workspace: no seam tenants"
    # Over HTTP, names no earlier check minted; in process, on a fresh host, the seed's
    # (a failed row's words then read the same each time).
    run = nonce() if ctx.probe.inspector is None else f"s{ctx.seed}"
    name, whole, scoped = (f"refsim-ws-{run}", f"hk_ws_{run}_tenant", f"hk_ws_{run}_scoped")
    remember_minted(a.client, "workspace_tenant", whole)
    remember_minted(a.client, "workspace_scoped", scoped)
    if not 200 <= a.add_tenant(name, whole).status < 300:
        return "another workspace: the seam tenants did not mint a tenant"
    t = Session(a.client, whole)
    if not 200 <= t.add_tenant(name, scoped, workspace="refsim-ws").status < 300:
        return "another workspace: the seam tenants mints no key scoped to a workspace"
    w = Session(a.client, scoped)
    source = _completed(t.eval(SOURCE))
    if source is None:
        return "another workspace: the tenant's source did not complete"
    asked = w.create(_replay_body(source))
    if asked.status == 201:
        return ("another workspace: a key scoped to a workspace may use its tenant's "
                "tenant-wide run here, so it reads it, and the routes are not asked of it")
    what = "a key of another workspace names its tenant's run"
    out = judges.refused(req, asked, what)
    events = t.events(source)
    content = [c for call in judges.recorded_calls(events, RECORDER) for c in call]
    owned = t.get_run(source).json
    out += _ask_routes(req, w, "a key of another workspace", source, classes.shifted(source),
                       routes, data, content,
                       [classes.listed(m, owned) for m in listings])
    return out, (t, source, w)


def check_owner_routes(ctx: Context) -> list[Finding]:
    cls, req, a, b = "owner-routes", requirement("owner-routes"), ctx.a, ctx.b
    if not ctx.has_b:
        raise _no_b()
    data = classes.load()
    routes, skipped = [], []
    for m in classes.sample(cls, ctx.seed, size=SIZES[cls]):
        needs = m.value.needs
        if needs == "replay" and not a.surface.family("replay"):
            skipped.append(f"{m.name} (no replay family)")
        elif needs is not None and needs.startswith("seam:") and not _offers_seam(
                a, needs.removeprefix("seam:")):
            skipped.append(f"{m.name} (no {needs.removeprefix('seam:')} seam)")
        else:
            routes.append(m.value)
    listings = list(data.listings) if a.surface.family("runList") else []
    ctx.sizes[cls] = (len(routes) * len(data.spellings) + len(data.idempotent)
                      + len(listings))
    if skipped:
        ctx.notes[cls] = "not asked: " + "; ".join(skipped)
    rid = ctx.replay
    # An id of no run shaped like this one, its tenant part kept (the last letter or digit
    # shifted): a control that swapped every character named another tenant too.
    unknown = classes.shifted(rid)
    events = a.events(rid)
    before = [(e.get("type"), e.get("payload")) for e in events]
    content = [c for call in judges.recorded_calls(events, RECORDER) for c in call]
    owned = a.get_run(rid).json
    out = _ask_routes(req, b, "tenant B", rid, unknown, routes, data, content,
                      [classes.listed(m, owned) for m in listings])
    other = _other_workspace(ctx, req, data, routes, listings)
    ws: tuple[Session, str, Session] | None = None
    if isinstance(other, str):
        ctx.notes[cls] = "; ".join(filter(None, (ctx.notes.get(cls), other)))
    else:
        found, ws = other
        out += found
    for spec in data.idempotent:
        who = str(spec.get("who"))
        # The owner and its source: tenant A's; for another workspace, the minted tenant's
        # (whose scoped key is the one that asks again).
        owner, source, asker = ((a, ctx.own, b) if who == "another-tenant" else
                                (a, ctx.own, a) if who != "another-workspace" else
                                (ws[0], ws[1], ws[2]) if ws is not None else (a, "", None))
        if asker is None:
            continue  # no key of another workspace here (the note says why)
        key = {"Idempotency-Key": f"refsim-sampled-{nonce()}"}
        made = owner.request("POST", "/runs", _replay_body(source), key)
        name = spec.get("name", "?")
        out.append(judges.created(req, made, f"{name}: the owner's create"))
        first = made.json.get("runId") if isinstance(made.json, dict) else None
        if not isinstance(first, str):
            continue
        other = ctx.foreign or judges.control_value(ctx.own)
        body = {"same": _replay_body(source), "other-source": _replay_body(other),
                "without-fixture-runs": eval_body(REPLAY)}[spec.get("body", "same")]
        r = asker.request("POST", "/runs", body, key)
        what = f"{name}: asked again under the owner's Idempotency-Key"
        out.append(judges.code_registered(req, r))
        out.append(judges.nothing_of_run(req, r, first, [], what))
    after = [(e.get("type"), e.get("payload")) for e in a.events(rid)]
    out.append(judges.unchanged(req, before, after, "tenant A's eval run, after tenant B's "
                                "tries"))
    return out


def _offers_seam(session: Session, name: str) -> bool:
    """A seam the data names by its last part (`erase` for `runs:erase`)."""
    return any(s == name or s.endswith(":" + name) for s in session.surface.seams)


def check_request_headers(ctx: Context) -> list[Finding]:
    cls, req, a = "request-headers", requirement("request-headers"), ctx.a
    if not ctx.has_b or ctx.foreign is None:
        raise _no_b()
    members = classes.sample(cls, ctx.seed, size=SIZES[cls])
    ctx.sizes[cls] = len(members)
    unknown = judges.control_value(ctx.foreign)
    out: list[Finding] = []
    for m in members:
        def headers(spec: Mapping[str, str] = m.value) -> dict[str, str]:
            return classes.headers_for(spec, lambda: f"refsim-sampled-{nonce()}")
        asks = [(f"tenant B's run, {m.name}", _ask(a, _replay_body(ctx.foreign), headers)),
                (f"an unknown id, {m.name}", _ask(a, _replay_body(unknown), headers))]
        first = [ask() for _, ask in asks]
        for (what, _), r in zip(asks, first, strict=True):
            out += judges.refused(req, r, what)
        out.append(alike(req, asks, first, ctx.noise))
    return out


def _no_b() -> Unobservable:
    return Unobservable("no second tenant's API key (--tenant-b-api-key or "
                        "OPENWOP_TEST_TENANT_B_API_KEY)")


CHECKS: Mapping[str, Callable[[Context], list[Finding]]] = {
    "source-values": check_source_values, "task-keys": check_task_keys,
    "exact-args": check_exact_args, "run-states": check_run_states,
    "owner-routes": check_owner_routes, "request-headers": check_request_headers}


# ----------------------------------------------------------------------------- the part


def wanted_classes(prefix: str | None = None) -> list[str]:
    """The classes whose rows `prefix` selects, in the data's order."""
    return [c for c in CLASS_NAMES if matches(prefix, Row.unjudged(
        requirement(c), SCENARIO, Disposition.SKIPPED, "-", check_id(c)))]


def run_sampled(make_host: Callable[[], HostClient], prefix: str | None = None, *,
                keys: Mapping[str, str] | None = None, seed: int = 0,
                stop_on_fail: bool = False, only: Collection[str] | None = None,
                noted: set[str] | None = None) -> list[Row]:
    """One row per class (those `prefix` matches, of `only` where given), each on a sample
    drawn with `seed`, all on one host (`make_host()` once); `stop_on_fail`: none after
    the first that fails. `noted` gets the check id of each row that says what it did not
    ask or make (a seam the keys could not use, a family the host lacks)."""
    wanted = [c for c in wanted_classes(prefix) if only is None or c in only]
    if not wanted:
        return []
    keys = dict(keys or KEYS)
    host = make_host()
    a = Session(host, keys[TENANT_A])
    gated = gate(a.surface)
    if not gated.applies:
        return [Row.unjudged(requirement(c), SCENARIO, gated.disposition, str(gated.reason),
                             check_id(c)) for c in wanted]
    inspector = inspector_of(host)
    has_b = TENANT_B in keys
    probe = Probe(host, Session(host, keys[TENANT_A], inspector),
                  Session(host, keys.get(TENANT_B, keys[TENANT_A]), inspector), inspector)
    setup, ctx = _setup(probe, seed, has_b)
    rows: list[Row] = []
    for cls in wanted:
        if stop_on_fail and rows and rows[-1].disposition is Disposition.EXECUTED_FAIL:
            break
        req = requirement(cls)
        if ctx is None:
            rows.append(Row.judged(req, SCENARIO, setup, check_id(cls)))
            continue
        try:
            with segment(check_id(cls)):  # its exchanges, for a failed row's evidence
                found = CHECKS[cls](ctx)
        except Unobservable as exc:
            rows.append(Row.unjudged(req, SCENARIO, exc.disposition, exc.reason,
                                     check_id(cls)))
            continue
        except Exception as exc:  # a check that crashes on a host fails, with why
            found = [judges.could_not_go_on(req, f"the sampled class {cls}", f"raised {exc!r}")]
        row = Row.judged(req, SCENARIO, [attrs.evolve(f, requirement_id=req) for f in setup]
                         + found, check_id(cls))
        note = f"; {ctx.notes[cls]}" if cls in ctx.notes else ""
        if note and noted is not None:
            noted.add(check_id(cls))
        rows.append(attrs.evolve(row, detail=f"{ctx.sizes.get(cls, 0)} sampled (seed {seed})"
                                 f"{note}; {row.detail}"))
    return rows


def _setup(probe: Probe, seed: int, has_b: bool) -> tuple[list[Finding], Context | None]:
    """The caller's usable source, an eval run replaying it, and tenant B's source."""
    req = requirement("source-values")
    a, b = probe.a, probe.b
    own = a.eval(SOURCE)
    out = [judges.created(req, own.response, "positive control: the caller's source run"),
           judges.completed(req, own.completed, "the caller's source run")]
    if own.run_id is None:
        return out, None
    replay = a.create(_replay_body(own.run_id))
    out.append(judges.created(req, replay, "positive control: the caller's own source, "
                              "as it is, accepted"))
    replay_id = replay.json.get("runId") if isinstance(replay.json, dict) else None
    if not isinstance(replay_id, str):
        return out, None
    a.events(replay_id)
    foreign = None
    if has_b:
        theirs = b.eval(SOURCE)
        out.append(judges.created(req, theirs.response, "tenant B's source run"))
        foreign = theirs.run_id
        if foreign is None:
            return out, None
    return out, Context(probe, seed, has_b, own.run_id, replay_id, foreign, noise_of_host(a))


_SIZE_RE = re.compile(r"^(\d+) sampled \(seed (-?\d+)\)")


def sample_sizes(rows: Sequence[Row]) -> dict[str, int]:
    """How many members each class's row judged, by class, as its detail says."""
    out = {}
    for row in rows:
        found = _SIZE_RE.match(row.detail) if row.scenario_id == SCENARIO else None
        if found is not None:
            out[row.check_id.removeprefix("sampled-")] = int(found.group(1))
    return out


def sizes_line(rows: Sequence[Row], seed: int) -> str | None:
    """One line: each class's sample size and the seed (None where no class was sampled)."""
    sizes = sample_sizes(rows)
    if not sizes:
        return None
    return (f"sampled from specs/classes.yaml (--seed {seed}): "
            + ", ".join(f"{cls} {n}" for cls, n in sizes.items()))


__all__ = ["CHECKS", "SCENARIO", "SIZES", "check_id", "requirement", "run_sampled",
           "sample_sizes", "sizes_line"]
