"""`refsim diff`: what another reading changes for a client, found by the stateful machine.

The machine drives a `PairClient`: every request goes to two fresh hosts, A (the reference
reading) and B (the other one). The machine sees A's answers only, so it runs exactly as it
does against the reference host. The pair compares each request's two answers: the status,
the body, and the events the request caused on each host, after mapping the run ids B
minted onto A's one to one (learnt from the 201 answers in request order) and numbering
the other minted values (event ids, timestamps, call and invocation ids) by first
appearance. On the first difference it raises `WireDifference`, a `RequirementViolated`
filed under `refsim.diff.wire-difference`, so Hypothesis shrinks the program that led to it.

No difference within the budget says: at N examples x S steps, the two readings cannot be
told apart from outside.
"""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from refsim.check import classes
from refsim.check.assume import Assumable, Reading, assumables, build, parse
from refsim.check.judges import NOT_THE_ANSWERS
from refsim.check.observe import SEAM_ERASE, eval_body
from refsim.check.runner import HostRecipe
from refsim.domain.ids import parse_bound, project
from refsim.domain.profile import profile_named
from refsim.host import SimHost
from refsim.testing.fuzz import FuzzResult
from refsim.testing.stateful import (
    LANES,
    WATCHED_KEYS,
    RecordedFixturesMachine,
    RequirementViolated,
    machine_for,
    machine_test,
    note,
    unreached,
)
from refsim.testing.strategies import COUNTER_SCRIPTS
from refsim.wire.client import NO_BODY
from refsim.wire.response import Response

DIFF_ID = "refsim.diff.wire-difference"
# Values a host mints (or stamps) itself: compared by order of first appearance, not by value.
MINTED = frozenset({"eventId", "timestamp", "invocationId", "parentInvocationId", "callId",
                    "createdAt", "updatedAt", "startedAt", "completedAt", "durationMs",
                    "correlationId"})
# A member that refers to another's minted value is numbered in that one's sequence.
SAME_SEQUENCE = {"parentInvocationId": "invocationId"}
DEFAULT_EXAMPLES, DEFAULT_STEPS = 100, 20
SHRINK_WITHOUT_EXPLAIN = tuple(p for p in Phase if p is not Phase.explain)

HostFactory = Callable[[], SimHost]


def _forms(bound: str) -> list[str]:
    """The forms a run id takes on the wire: bound, `~2F`-projected, `%2F`-encoded."""
    return list(dict.fromkeys([bound, project(bound), bound.replace("/", "%2F")]))


def _replace_ids(text: str, mapping: dict[str, str]) -> str:
    if not mapping:
        return text
    pairs: dict[str, str] = {}
    for old, new in mapping.items():
        if old != new:
            pairs.update(zip(_forms(old), _forms(new), strict=True))
    if not pairs:
        return text
    pattern = re.compile("|".join(re.escape(k) for k in sorted(pairs, key=len, reverse=True)))
    return pattern.sub(lambda m: pairs[m.group(0)], text)


def _map_json(value: Any, mapping: dict[str, str]) -> Any:
    if value is NO_BODY or value is None or not mapping:
        return value
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return value  # not JSON: the host refuses it alike on both sides
    return json.loads(_replace_ids(text, mapping), object_pairs_hook=_as_written)


def _as_written(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object as its text names its members: one that names a member twice stays so
    (B is sent what A was, a task named twice included)."""
    if len({k for k, _ in pairs}) != len(pairs):
        return classes.NamedTwice(pairs)
    return dict(pairs)


class _Minted:
    """Numbers minted values by first appearance, so two hosts' values compare by role."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, Any], str] = {}
        self.counts: dict[str, int] = {}

    def __call__(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self._one(k, v) if k in MINTED and not isinstance(v, (dict, list))
                    else self(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v) for v in value]
        return value

    def _one(self, key: str, value: Any) -> str:
        key = SAME_SEQUENCE.get(key, key)
        if (key, value) not in self.seen:
            self.counts[key] = self.counts.get(key, 0) + 1
            self.seen[(key, value)] = f"<{key} #{self.counts[key]}>"
        return self.seen[(key, value)]


# Where each assumable open point decides what a host answers: the machine's branches that
# reach it (`refsim diff` prints how often each was reached when it found no difference,
# and calls the search inconclusive if one never was).
TOUCHES: dict[str, tuple[str, ...]] = {
    "merge-suite-fixtures": ("refusal:suite-fixtures",),
    "gone-copy-code": ("fork:gone",),
    "default-on-miss": ("probe:suite-fixtures-without-onMiss",),
    "uniform-refusal-body": ("refusal:unknown", "refusal:foreign", "refusal:non-terminal",
                             "refusal:no-agent", "refusal:not-held"),
    "delegate-calls-derived": ("source:delegates",),
    "fixture-errors": ("source:failed-call",),
    "held-calls": ("source:eval", "source:workflow"),
}


@attrs.frozen
class Answer:
    """One host's answer to one request, as compared: status, body, the events it caused."""

    status: int
    body: Any
    events: dict[str, list[Any]]
    headers: dict[str, str] = attrs.field(factory=dict)  # those compared (see PairClient)

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "headers": self.headers, "body": self.body,
                "events": self.events}


@attrs.frozen
class Difference:
    method: str
    path: str
    request: Any
    what: str  # "status", "header NAME", "body" or "events"
    a: Answer
    b: Answer

    def to_json(self) -> dict[str, Any]:
        return {"request": {"method": self.method, "path": self.path,
                            **({} if self.request is None else {"json": self.request})},
                "differs": self.what, "a": self.a.to_json(), "b": self.b.to_json()}


class WireDifference(RequirementViolated):
    def __init__(self, difference: Difference) -> None:
        super().__init__(DIFF_ID, f"{difference.method} {difference.path}: the answers differ "
                                  f"in the {difference.what}")
        self.difference = difference


def _events(host: SimHost) -> dict[str, int]:
    return {rid.bound: len(run.events) for rid, run in host.core.runs.items()}


def _new_events(host: SimHost, before: dict[str, int]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for rid, run in host.core.runs.items():
        fresh = run.events[before.get(rid.bound, 0):]
        if fresh:
            out[rid.bound] = [e.to_json() for e in fresh]
    return out


@attrs.define
class PairClient:
    """A `HostClient` over two hosts: A answers the machine, B is compared with it. It has
    no `core` or `host`, so the machine and the checker see it as a host behind HTTP."""

    a: SimHost
    b: SimHost
    a_to_b: dict[str, str] = attrs.Factory(dict)
    b_to_a: dict[str, str] = attrs.Factory(dict)
    requests: int = 0
    on_difference: Callable[[Difference], None] | None = None
    # Headers are compared differentially: a header either host has sent with two values
    # (a request id, a trace, a clock) is noise from then on; one only a host sends is a
    # difference of representation (a vendor header), not of what the host answers.
    _seen: dict[tuple[str, str], str] = attrs.Factory(dict)
    _noise: set[str] = attrs.Factory(set)

    @property
    def name(self) -> str:
        return f"pair({self.a.name} | {self.b.name})"

    def request(self, method: str, path: str, *, api_key: str | None = None,
                json: Any = NO_BODY, headers: dict[str, str] | None = None) -> Response:
        self.requests += 1
        before_a, before_b = _events(self.a), _events(self.b)
        ra = self.a.request(method, path, api_key=api_key, json=json, headers=headers)
        rb = self.b.request(method, _replace_ids(path, self.a_to_b), api_key=api_key,
                            json=_map_json(json, self.a_to_b), headers=headers)
        self._learn(ra, rb)
        ha, hb = self._headers("a", ra, {}), self._headers("b", rb, self.b_to_a)
        shared = sorted(n for n in set(ha) & set(hb) if n not in self._noise)
        a = _answer(ra, _new_events(self.a, before_a), {}, {n: ha[n] for n in shared})
        b = _answer(rb, _new_events(self.b, before_b), self.b_to_a, {n: hb[n] for n in shared})
        header = next((f"header {n}" for n in shared if ha[n] != hb[n]), None)
        what = ("status" if a.status != b.status else "body" if a.body != b.body
                else header if header is not None else "events" if a.events != b.events
                else None)
        if what is not None:
            shown = None if json is NO_BODY else json
            difference = Difference(method, path, shown, what, a, b)
            if self.on_difference is not None:
                self.on_difference(difference)
            raise WireDifference(difference)
        return ra

    def _headers(self, side: str, r: Response, mapping: dict[str, str]) -> dict[str, str]:
        """The answer's headers by lowercase name, ids mapped onto A's, but Date and the
        connection's own; a name seen with another value before becomes noise."""
        out: dict[str, str] = {}
        for name, value in r.headers.items():
            key = name.lower()
            if key in NOT_THE_ANSWERS or key in _OF_THE_BYTES or key in self._noise:
                continue
            value = _replace_ids(value, mapping)
            before = self._seen.setdefault((side, key), value)
            if before != value:
                self._noise.add(key)
                continue
            out[key] = value
        return out

    def _learn(self, ra: Response, rb: Response) -> None:
        if ra.status != 201 or rb.status != 201:
            return
        ida = ra.json.get("runId") if isinstance(ra.json, dict) else None
        idb = rb.json.get("runId") if isinstance(rb.json, dict) else None
        if (isinstance(ida, str) and isinstance(idb, str) and parse_bound(ida)
                and parse_bound(idb) and idb not in self.b_to_a and ida not in self.a_to_b):
            self.a_to_b[ida] = idb
            self.b_to_a[idb] = ida


# Headers computed from the body's bytes: the body is compared with minted ids mapped, and
# these would differ wherever an id does.
_OF_THE_BYTES = frozenset({"content-length", "etag", "digest", "content-digest", "repr-digest"})


def _body(r: Response, mapping: dict[str, str]) -> Any:
    if r.json is not None:
        return _map_json(r.json, mapping)
    return _replace_ids(r.body.decode("utf-8", "replace"), mapping)


def _answer(r: Response, events: dict[str, list[Any]], mapping: dict[str, str],
            headers: dict[str, str] | None = None) -> Answer:
    """The answer as compared: ids mapped onto A's, minted values numbered in order (the
    body first, then the events run by run)."""
    minted = _Minted()
    body = minted(_body(r, mapping))
    mapped = {mapping.get(k, k): _map_json(v, mapping) for k, v in events.items()}
    return Answer(r.status, body, {k: minted(mapped[k]) for k in sorted(mapped)},
                  dict(headers or {}))


# ----------------------------------------------------------------------------- the runs


@attrs.frozen
class Pair:
    """What is diffed: how A and B are built, and how to say it (`--assume` or profiles)."""

    assume: tuple[str, ...] = ()
    profile: str = "reference"
    against: str | None = None
    # B is a correct host of the pass zoo (refsim.zoo.correct) instead.
    variant: HostRecipe | None = None

    @property
    def label(self) -> str:
        if self.variant is not None:
            return f"{self.variant.flag} {self.variant.name}"
        if self.against is not None:
            return f"--profile {self.profile} --against {self.against}"
        return " ".join(f"--assume {a}" for a in self.assume) or f"--profile {self.profile}"

    def hosts(self) -> tuple[HostFactory, HostFactory]:
        readings: list[Reading] = parse(self.assume)
        base = profile_named(self.profile)
        other = profile_named(self.against) if self.against is not None else base

        def make_a() -> SimHost:
            return SimHost(seed=0, profile=base)

        def make_b() -> SimHost:
            if self.variant is not None:
                return self.variant.host(0)
            profile, components = build(readings, other)
            return SimHost(seed=0, profile=profile, components=components)
        return make_a, make_b

    def rows(self) -> list[tuple[Assumable, str]]:
        known = assumables()
        out = []
        for spec in self.assume:
            name, _, value = spec.partition("=")
            if name in known:
                out.append((known[name], value))
        return out


class DiffMachine(RecordedFixturesMachine):
    """The machine, plus steps whose answers the reference judges by nothing but that only
    a reading of an open point can change (refsim's own suites, through the suite seam).
    The pair compares their answers; against one host they are plain requests."""

    def _readings(self, tenant: str,
                  names: Iterable[str] = WATCHED_KEYS) -> list[tuple[str, int | None]]:
        """The counters `names` after a step. Where both hosts' counter seams would
        answer from their gateways (no edge, the seam on, the key known) and the gateways
        agree, the two answers are equal (200 and `{"key", "count"}`, no events): read there,
        without two seam requests per key and step (most of a diff run's cost otherwise).
        Else through the pair, which compares the seams' answers and reports a difference."""
        pair = self.client
        if isinstance(pair, PairClient):
            key = self.keys[tenant]
            names = list(names)
            a, b = _gateway_counters(pair.a, key, names), _gateway_counters(pair.b, key, names)
            if a is not None and a == b:
                return list(zip(names, a, strict=True))
        return super()._readings(tenant, names)

    def _judge_wire(self, run: Any, events: list[dict[str, Any]], session: Any, *,
                    modelled: bool = True) -> None:
        """Not read here: the diff compares the answers of the machine's rules, and each
        channel's framing (a stream's line ends, member order) may differ between two
        correct hosts; fuzz judges the channels."""

    @precondition(lambda self: self.offer.recorded and self.offer.forks)
    @rule(tenant=RecordedFixturesMachine.tenants, lane=st.sampled_from(LANES[:2]),
          script=COUNTER_SCRIPTS, mode=st.sampled_from(["replay", "branch"]),
          erase=st.booleans())
    def source_replayed_then_forked(self, tenant: str, lane: str, script: list[Any],
                                    mode: str, erase: bool) -> None:
        """The chain a fork's answer needs, in one step: a source, its replay, the source
        erased (where the erase seam is offered) or not, then a fork. Readings that differ
        only there (the code of a gone copy, what a fork re-reads) need all four steps in
        order, which the machine's separate rules reach seldom in 20 steps."""
        source = self.record_eval_source(tenant, lane, script, 0, 1)
        evaluated = self.replay_own(source, "same", 1, "plain")
        if not isinstance(evaluated, str):  # refused: nothing to fork
            return
        if erase and self._seam(SEAM_ERASE):
            self.erase_source_then_fork(evaluated, mode)
        else:
            self.fork(evaluated, mode)

    @rule(tenant=RecordedFixturesMachine.tenants, script=COUNTER_SCRIPTS,
          responses=st.sampled_from(["none", "empty"]), after=RecordedFixturesMachine.evals)
    def eval_with_suite_fixtures_without_on_miss(self, tenant: str, script: list[Any],
                                                 responses: str, after: str) -> None:
        """A task whose suite fixtures omit onMiss (the profile's default decides a miss).
        It waits for a replay (`after`, unused) so that it does not crowd out the steps a
        replay needs."""
        fixtures: dict[str, Any] = {"toolResponses": []} if responses == "empty" else {
            "toolResponses": [{"tool": "conformance.eval:counter",
                               "args": {"op": "read", "key": "canned"},
                               "response": {"key": "canned", "count": 0}}]}
        suite_id = f"refsim.diff.evals.no-on-miss-{responses}-{len(self.registered)}"
        doc = {"suiteId": suite_id, "version": "1.0.0", "modes": ["golden"], "trials": 1,
               "tasks": [{"taskId": "t", "input": {"script": script}, "fixtures": fixtures,
                          "expected": {"kind": "golden",
                                       "match": {"strategy": "exact", "value": "ok"}}}]}
        r = self._session(tenant).register_suite(doc)
        if r.status != 201:
            return
        self.registered.add((tenant, suite_id))
        self._may_move([tenant], script)
        self._checked(tenant, self._session(tenant).create(eval_body(suite_id)))
        # The reference misses every unmatched call: no live tool, no counter to move.
        self._count("probe:suite-fixtures-without-onMiss")
        note(f"{tenant} ran suite {suite_id} ({responses} toolResponses, no onMiss)")


def _gateway_counters(host: SimHost, api_key: str,
                      names: Sequence[str]) -> list[int | None] | None:
    """What the counter seam would count for each key of `names`, or None where the seam's
    answer is not just that (an edge may rewrite it, the seam is off, the key unknown)."""
    if host.edge is not None or not host.profile.counter_seam:
        return None
    owner = host.core.caller(api_key)
    if owner is None:
        return None
    counts = [host.core.gateway.counter_value(owner.tenant, name) for name in names]
    if not all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
        return None
    return list(counts)


def pair_machine(assume: Sequence[str] = (), profile: str = "reference",
                 against: str | None = None, variant: HostRecipe | None = None
                 ) -> type[RecordedFixturesMachine]:
    """The machine over a fresh pair per example: what a printed program runs against."""
    make_a, make_b = Pair(tuple(assume), profile, against, variant).hosts()
    return _machine(lambda: PairClient(make_a(), make_b()))


def _machine(factory: Callable[[], PairClient]) -> type[RecordedFixturesMachine]:
    base = machine_for(factory)
    return type("RecordedFixturesMachine", (DiffMachine,), {
        k: v for k, v in vars(base).items()
        if k in ("client_factory", "extended", "tenant_keys", "branches", "requests_made",
                 "steps_taken", "examples_run", "drawn", "programs_run", "judged_counts")})


def _run(machine: type[RecordedFixturesMachine], *, max_examples: int, steps: int,
         seed_value: int | None) -> FuzzResult:
    """`refsim.testing.fuzz.run_machine` for the diff machine (same settings, same report).
    The first difference ends the search (`report_multiple_bugs=False`): Hypothesis would
    otherwise go on looking for other failures for up to 10 s and shrink each it found,
    while the report shows one difference. No explain phase: it reruns the shrunk program
    under a line tracer to annotate it, and the report shows the program alone."""
    config = settings(max_examples=max_examples, stateful_step_count=steps, deadline=None,
                      database=None, print_blob=False, suppress_health_check=list(HealthCheck),
                      report_multiple_bugs=False, phases=SHRINK_WITHOUT_EXPLAIN)
    test = machine_test(machine, config)
    if seed_value is not None:
        test = seed(seed_value)(test)
    try:
        test()
    except RequirementViolated as exc:
        notes = tuple(getattr(exc, "__notes__", ()))
        program = tuple(line for line in notes
                        if line.startswith(("state", "runs_", "evals_", "tenants_")))
        return FuzzResult(False, exc.requirement_id, str(exc), program, (), machine)
    return FuzzResult(True, None, "", (), (), machine)


@attrs.frozen
class DiffResult:
    pair: Pair
    max_examples: int
    steps: int
    seed: int | None
    difference: Difference | None
    fuzz: FuzzResult
    error: str | None = None  # the machine failed on A itself (it should not)

    @property
    def found(self) -> bool:
        return self.difference is not None

    @property
    def program(self) -> list[str]:
        lines = [line for line in self.fuzz.pasteable if "state.teardown()" not in line]
        imports = ["from refsim.testing.diff import pair_machine"]
        if self.pair.variant is not None:
            imports.append(self.pair.variant.rebuilt()[0])
        return [*imports, f"RecordedFixturesMachine = pair_machine({_args(self.pair)})",
                *lines]

    @property
    def budget(self) -> str:
        return f"{self.max_examples} examples × {self.steps} steps"  # noqa: RUF001

    @property
    def unreached(self) -> list[str]:
        """With no difference found: the machine's critical branches it never reached (a
        search that never, say, forked an eval after erasing its source cannot say two
        readings agree there)."""
        if self.difference is not None or self.error is not None:
            return []
        return unreached(collections.Counter(self.fuzz.machine.branches))

    @property
    def touched(self) -> dict[str, int]:
        """The machine's branches where the pair's readings decide something (TOUCHES),
        with how often the search reached each."""
        branches = collections.Counter(self.fuzz.machine.branches)
        names = sorted({b for row, _ in self.pair.rows() for b in TOUCHES.get(row.id, ())})
        return {b: branches[b] for b in names}

    @property
    def inconclusive(self) -> str | None:
        """Why "none found" is no answer, or None: the machine failed on host A, a critical
        branch was never reached, or a step the reading touches was never taken."""
        if self.error is not None:
            return self.error
        if self.difference is not None:
            return None
        missing = self.unreached
        if missing:
            return "critical branches never reached: " + ", ".join(missing)
        untaken = [b for b, n in self.touched.items() if n == 0]
        return ("the steps this reading touches were never taken: " + ", ".join(untaken)
                if untaken else None)

    def to_json(self) -> dict[str, Any]:
        machine = self.fuzz.machine
        out: dict[str, Any] = {
            "pair": self.pair.label, "assume": list(self.pair.assume),
            "profile": self.pair.profile, "against": self.pair.against,
            "budget": {"maxExamples": self.max_examples, "steps": self.steps,
                       "seed": self.seed},
            "rows": [{"id": row.id, "question": row.question, "default": row.default,
                      "value": value, "reading": row.alternatives.get(value)}
                     for row, value in self.pair.rows()],
            "found": self.found}
        if self.difference is not None:
            out["difference"] = self.difference.to_json()
            out["program"] = self.program
            out["programSteps"] = self.fuzz.steps
        else:
            out["examplesRun"] = machine.examples_run
            out["stepsTaken"] = machine.steps_taken
            out["branches"] = dict(sorted(machine.branches.items()))
        if self.error is not None:
            out["error"] = self.error
        if self.inconclusive is not None:
            out["inconclusive"] = self.inconclusive
        if self.difference is None:
            out["touched"] = self.touched
        return out




def _args(pair: Pair) -> str:
    parts = []
    if pair.variant is not None:
        parts.append(f"variant={pair.variant.rebuilt()[1]}")
    if pair.assume:
        parts.append(f"assume={list(pair.assume)!r}")
    if pair.profile != "reference" or pair.against is not None:
        parts.append(f"profile={pair.profile!r}")
    if pair.against is not None:
        parts.append(f"against={pair.against!r}")
    return ", ".join(parts)


def run_diff(pair: Pair, *, max_examples: int = DEFAULT_EXAMPLES, steps: int = DEFAULT_STEPS,
             seed: int | None = 0, on_example: Callable[[], None] | None = None) -> DiffResult:
    """Drive the pair with the machine until the first difference (shrunk), or the budget.
    `on_example` is called as each example starts (a progress bar)."""
    seen: list[Difference] = []
    make_a, make_b = pair.hosts()

    def pair_of_hosts() -> PairClient:
        if on_example is not None:
            on_example()
        return PairClient(make_a(), make_b(), on_difference=seen.append)
    machine = _machine(pair_of_hosts)
    fuzz = _run(machine, max_examples=max_examples, steps=steps, seed_value=seed)
    difference = (seen[-1] if seen and not fuzz.passed and fuzz.requirement_id == DIFF_ID
        else None)
    error = (None if fuzz.passed or difference is not None else
        f"the machine failed on host A itself: {fuzz.message}")
    return DiffResult(pair, max_examples, steps, seed, difference, fuzz, error)


def _show(value: Any, limit: int = 600) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def report(result: DiffResult, out: TextIO) -> None:
    pair = result.pair
    print(f"refsim diff {pair.label}", file=out)
    for row, value in pair.rows():
        print(f"  {row.id}: {row.question}", file=out)
        print(f"    A, the default ({row.default}): refsim's reading "
              "(specs/assumptions.yaml)", file=out)
        print(f"    B, {value}: {row.alternatives.get(value, 'the default reading')}",
              file=out)
    if pair.against is not None:
        print(f"  A: profile {pair.profile}; B: profile {pair.against}", file=out)
    if result.error is not None:
        print(f"ERROR: {result.error}", file=out)
        return
    d = result.difference
    if d is None:
        machine = result.fuzz.machine
        print(f"no wire-observable difference in {result.budget}"
              f" (seed {result.seed})", file=out)
        print(f"  {machine.examples_run} example(s) run, {machine.steps_taken} step(s), "
              f"{machine.requests_made} request(s); branches:", file=out)
        for branch, count in sorted(machine.branches.items()):
            print(f"  {branch:<28} {count}", file=out)
        if result.touched:
            print("  the steps this reading touches: " + ", ".join(
                f"{b} reached {n} time(s)" for b, n in result.touched.items()), file=out)
        if result.inconclusive is not None:
            print(f"INCONCLUSIVE: {result.inconclusive}; try a larger --max-examples or "
                  "--steps, or another --seed", file=out)
        return
    print(f"DIFFERENCE after {result.fuzz.steps} step(s): {d.method} {d.path}: the answers "
          f"differ in the {d.what}", file=out)
    print(f"\nThe program ({result.fuzz.steps} steps), pasteable; its last step raises "
          f"WireDifference [{DIFF_ID}]:", file=out)
    for line in result.program:
        print(f"  {line}", file=out)
    print("\nThe request:", file=out)
    print(f"  {d.method} {d.path}" + ("" if d.request is None else f" {_show(d.request)}"),
          file=out)
    for side, answer in (("A", d.a), ("B", d.b)):
        print(f"{side} answered {answer.status} {_show(answer.body)}", file=out)
        if d.what.startswith("header "):
            name = d.what.removeprefix("header ")
            print(f"  {name}: {answer.headers.get(name)}", file=out)
    if d.what == "events":
        for run, index, ea, eb in _first_event_differences(d.a.events, d.b.events):
            print(f"  the events of {run} first differ at event {index}:", file=out)
            print(f"    A: {_event(ea)}", file=out)
            print(f"    B: {_event(eb)}", file=out)


def _first_event_differences(a: dict[str, list[Any]], b: dict[str, list[Any]]
                             ) -> list[tuple[str, int, Any, Any]]:
    out = []
    for run in sorted(set(a) | set(b)):
        ea, eb = a.get(run, []), b.get(run, [])
        for index in range(max(len(ea), len(eb))):
            x = ea[index] if index < len(ea) else None
            y = eb[index] if index < len(eb) else None
            if x != y:
                out.append((run, index, x, y))
                break
    return out


def _event(e: Any) -> str:
    if not isinstance(e, dict):
        return "(no event)" if e is None else repr(e)
    payload = {k: v for k, v in (e.get("payload") or {}).items() if k not in MINTED}
    return f"{e.get('type')} {_show(payload, 200)}"


def write_json(results: Sequence[DiffResult], path: str | Path, *, every: bool = False,
               partial: dict[str, Any] | None = None) -> None:
    """One diff as its own document; several (`every`, as `--all` asks) under "diffs".
    `partial` says how far a run stopped with Ctrl-C got."""
    doc: Any = (results[0].to_json() if len(results) == 1 and not every else
        {"diffs": [r.to_json() for r in results]})
    if partial is not None:
        doc = {**doc, "partial": partial}
    Path(path).write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n",
                          encoding="utf-8")


def every_reading() -> list[Pair]:
    """One pair per alternative of every assumable row (the values `--assume` can build)."""
    from refsim.check.assume import BUILDERS
    return [Pair((f"{row.id}={value}",)) for row in assumables().values()
            for value in row.alternatives if (row.id, value) in BUILDERS]


def summary_line(result: DiffResult) -> str:
    name = " ".join(result.pair.assume) or result.pair.label
    if result.error is not None:
        return f"{name:<48} error: {result.error}"
    if result.difference is not None:
        d = result.difference
        when = (f"in {result.fuzz.steps} step(s)" if result.fuzz.steps else
                "before any step (what the machine reads first)")
        return (f"{name:<48} difference found {when}: "
                f"{d.method} {d.path.split('?')[0]} ({d.what}: {d.a.status} vs {d.b.status})")
    return f"{name:<48} none found in {result.budget}" + (
        f" (INCONCLUSIVE: {result.inconclusive})" if result.inconclusive else "")
