"""The machine's state and bookkeeping, the base every group of its rules builds on
(`MachineState`): the counts a run reports (class-wide), the bundles, what one example
knows of its host (the model, the counters as read, the refusals remembered), and the
plumbing more than one group of rules calls (sessions, checked answers, suites, the
judging of an unusable source's refusal and of what every channel shows of an eval run);
what a long-lived host keeps between examples (`HostMemory`); and `settle_constants`.

A new piece of state, or a helper that rules of more than one module call, goes here; a
rule goes in the rules module of its kind (`sources.py`, `replays.py`, `refusals.py`,
`owners.py`, `table_rows.py`), a check after every step in `invariants.py`.
"""

from __future__ import annotations

import collections
import hashlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
from hypothesis.stateful import Bundle, RuleBasedStateMachine

from refsim.check import classes, judges
from refsim.check.differential import alike, noise_of_host
from refsim.check.examples import RowRun
from refsim.check.findings import Finding
from refsim.check.ids import req_id
from refsim.check.judges import id_forms
from refsim.check.observe import (
    DRIFT,
    REPLAY,
    SEAM_ERASE,
    SEAM_RESOLVE,
    SEAM_SUITES,
    SEAM_TENANTS,
    SOURCE,
    Session,
    inspector_of,
    nonce,
    run_path,
    stream_events,
    surface_of,
)
from refsim.check.observe import KEYS as TENANT_KEYS
from refsim.domain.agents import RECORDER, UNHELD
from refsim.domain.canonical import canonical, integral
from refsim.domain.ids import parse_bound
from refsim.host import SimHost
from refsim.testing.machine.draws import _class_data
from refsim.testing.machine.offered import NOOP, Offered
from refsim.testing.machine.verdicts import judged, narrating, note
from refsim.testing.model import Model, ModelRun
from refsim.testing.strategies import COUNTER_KEYS, increments
from refsim.wire import catalog
from refsim.wire.client import HostClient
from refsim.wire.response import Response
from refsim.wire.trace import current, mark

# The task of every suite the machine registers: with a "-" in it, so that a key folded
# or slugged before it is judged (hyphen as underscore, say) is a near-miss of a real task.
TASK_ID = "the-task"
# The counters the machine's scripts and the suites it names can move or read.
WATCHED_KEYS = (*COUNTER_KEYS, "recorded-fixtures", "recorded-fixtures-drift", "alpha", "beta",
                "canned")
TENANTS = dict(TENANT_KEYS)


def _norm(value: Any, failed: bool) -> Any:
    """Errors compare by code only: messages are the host's to word."""
    if failed:
        return {"code": value.get("code")} if isinstance(value, dict) else value
    return value


@attrs.frozen(eq=False)
class _AskAgain:
    """A refused create, to send again: the source value it named is kept, so that the
    refusal can be forgotten once that run's state moves (a waiting run cancelled or
    resolved is asked a different question: it may now be usable)."""

    send: Callable[[Any], Response]
    value: Any

    def __call__(self) -> Response:
        return self.send(self.value)


@attrs.define(eq=False)
class HostMemory:
    """What a host the examples share (one host over HTTP) keeps from one example to the
    next, so that no example asks it again: the suites registered (tenant, suiteId) and the
    tenants added, whatever the examples' outcomes; and each tenant's watched counters as
    the last example knew them, only when it ended without a failure (its final check
    agreeing), else empty and read afresh."""

    client: HostClient
    registered: set[tuple[str, str]] = attrs.Factory(set)
    added: set[str] = attrs.Factory(set)
    counters: dict[str, dict[str, int | None]] = attrs.Factory(dict)


_SETTLED = False


def settle_constants() -> None:
    """Import every refsim module, once per process, before the machine draws anything.

    Hypothesis draws a few values (one in twenty of its integer choices) from the literal
    constants of every imported module that is not a library's, refsim's own included,
    and collects them as modules are imported. So the same seed searched differently
    depending on which of refsim's modules a process had imported by then (`refsim fuzz`,
    a pytest session, a worker of `refsim mutants`). With all of them imported the pool is
    the same in every process running the same code; modules of your own that Hypothesis
    counts as local (not under site-packages, not tests) still add theirs."""
    global _SETTLED
    if _SETTLED:
        return
    _SETTLED = True
    import importlib
    import pkgutil

    import refsim
    for module in pkgutil.walk_packages(refsim.__path__, "refsim."):
        if module.name != "refsim.__main__":  # that one runs the command line
            importlib.import_module(module.name)


class MachineState(RuleBasedStateMachine):
    """The machine's state and plumbing. `refsim.testing.stateful.RecordedFixturesMachine`
    adds the rules (the mixins of `sources.py`, `replays.py`, `refusals.py`, `owners.py` and
    `table_rows.py`) and the checks after every step (`invariants.py`)."""

    client_factory: ClassVar[Callable[[], HostClient]] = staticmethod(lambda: SimHost(seed=0))
    extended: ClassVar[bool] = True
    tenant_keys: ClassVar[dict[str, str]] = TENANTS
    # Read off the first example's host, then kept: what the host offers and what varies
    # on every answer it gives (noise the uniformity checks set aside).
    offered: ClassVar[Offered | None] = None
    noise: ClassVar[frozenset[str] | None] = None
    # Seams the host lists but that did not answer as a seam does (a 404, say): no breach
    # of RFC 0252, so the machine stops using them, as it does an unlisted one.
    broken: ClassVar[set[str]] = set()
    branches: ClassVar[collections.Counter[str]] = collections.Counter()
    # How many members of each class of specs/classes.yaml the run drew ("class: member").
    drawn: ClassVar[collections.Counter[str]] = collections.Counter()
    # The explicit programs run before anything random (refsim.testing.programs).
    programs_run: ClassVar[collections.Counter[str]] = collections.Counter()
    # Example rows of the table run to their end as programs of the machine, and why each
    # row that cannot run on this host was left apart (see `example_step`).
    rows_run: ClassVar[collections.Counter[str]] = collections.Counter()
    rows_apart: ClassVar[dict[str, str]] = {}
    # The findings of this class's run, (requirement id, held) -> count (from `JUDGED`).
    judged_counts: ClassVar[collections.Counter[tuple[str, bool]]] = collections.Counter()
    requests_made: ClassVar[int] = 0
    # Over HTTP, every request the run sent (set by `refsim.testing.fuzz.run_machine`).
    http_sent: ClassVar[int] = 0
    steps_taken: ClassVar[int] = 0
    examples_run: ClassVar[int] = 0
    # What the long-lived host over HTTP keeps from one example to the next.
    kept: ClassVar[HostMemory | None] = None
    # What makes this machine class's fresh values (Idempotency-Keys) its own on a host
    # that outlives it (`machine_for` gives each class its own).
    run_nonce: ClassVar[str] = nonce()

    tenants = Bundle("tenants")
    runs = Bundle("runs")
    evals = Bundle("evals")

    # For the type checker only: rules of one mixin that another mixin's rules call (replay
    # and erase: replays.py; erasure_reaches_copies: invariants.py). At run
    # time each is defined once, in its mixin, where Hypothesis finds it.
    if TYPE_CHECKING:
        def replay(self, caller: str, source_id: str, lane: str, variant: str, trials: int,
                   header: str = "plain", script: list[Any] | None = None,
                   fixed: dict[str, str] | None = None,
                   twice: tuple[str, str] | None = None) -> Any: ...

        def erase(self, run_id: str) -> None: ...

        def erasure_reaches_copies(self) -> None: ...

    def __init__(self) -> None:
        super().__init__()
        settle_constants()
        self.client = type(self).client_factory()
        # What only the simulator sees (in process): None for a host behind HTTP.
        self.inside = inspector_of(self.client)
        self.keys = dict(type(self).tenant_keys)
        cls = type(self)
        if cls.offered is None:
            cls.offered = Offered(surface_of(self.client))
            self.offer = cls.offered
            self._probe_seams()
        self.offer = cls.offered
        unheld = self.inside.unheld_agents() if self.inside else frozenset({UNHELD})
        self.model = Model(fixture_errors=self.offer.surface.advertises("fixtureErrors"),
                           unheld_agents=unheld)
        # A fresh host per example in process; over HTTP one host the examples share.
        kept = HostMemory(self.client)
        if self.inside is None:
            if cls.kept is None or cls.kept.client is not self.client:
                cls.kept = kept
            kept = cls.kept
        self.registered, self._added = kept.registered, kept.added
        # Per caller: the refusals every unusable source gets, by signature (noise set
        # aside): one, or more that asked again could not be told apart.
        self.refusals: dict[tuple[str, str],
                            dict[Any, tuple[str, Callable[[], Response], Response]]] = {}
        self._serial = 0
        # Values already named once (caller, headers, value), and the first refusal of
        # each, by caller and group (see `refusals_told_apart`).
        self._asked: set[tuple[str, str, str]] = set()
        # The first refusal of each kind of unusable source, by caller and headers.
        self.kinds_seen: dict[tuple[str, str],
                              dict[str, tuple[str, Callable[[], Response], Response]]] = {}
        self.first_asks: dict[str, dict[str, list[Response]]] = {}
        # Per caller and §B rule: its refusals by signature (see `refuse_fields`).
        self.field_refusals: dict[tuple[str, str],
                                  dict[Any, tuple[str, Callable[[], Response], Response]]] = {}
        self.oracles: list[Finding] = []
        # A key of each tenant scoped to a workspace (None: the host minted none).
        self._workspaces: dict[str, str | None] = {}
        # The example rows under way (see `example_step`): each row's run and its next step.
        self._rows: dict[str, tuple[RowRun, int]] = {}
        if self.offer.recorded:  # learnt before any step: a replayed example asks what
            self._noise()        # the first did (never fixtureRuns the host did not offer)
        self.narrate = narrating()
        # What to look for of each run's id in another tenant's answers (see `_checked`).
        self._needles: dict[str, tuple[str, ...]] = {}
        # In process, where every tenant label is the host's own tenant name, the host's
        # counters can be compared with the model's in one step (see `live_state_agrees`).
        self._same_names = self.inside is not None and all(
            self.inside.tenant_of(key) == label for label, key in self.keys.items())
        type(self).examples_run += 1
        # The exchanges of this example alone, filed by step (a counterexample's evidence:
        # `refsim.testing.fuzz` records them).
        trace = current()
        if trace is not None:
            trace.clear()
        self._step = 1
        mark("step 1")
        # (tenant, counter key) pairs the current step may have moved: read after it; and
        # every key a step of the example may have moved (read for every tenant at its end).
        self._moved: set[tuple[str, str]] = set()
        self._movable: set[str] = set()
        # Runs whose events were read until they settled (see `replay`).
        self._settled: set[str] = set()
        # Each tenant's watched counters as last read (see `HostMemory.counters`): taken
        # from the host's memory, which holds none again until this example ends well.
        self._known = {tenant: dict(counts) for tenant, counts in kept.counters.items()}
        kept.counters = {}
        self._memory = kept
        for tenant in self.keys:
            self._take_in_counters(tenant)

    def _probe_seams(self) -> None:
        """Which listed seams answer as a seam does, asked once before any example draws
        (a seam found broken half-way through a run would change which rules the next
        examples may draw, and Hypothesis replays choices across examples): a malformed
        suite or tenant is refused 400 by a seam that is there; a finished run that never
        invoked the agent is erased (200) and is not resolved (409) by one."""
        cls = type(self)
        # In process each example has a fresh host: probe a throwaway one, so that no
        # example's host holds a run the example did not make.
        probed = cls.client_factory() if self.inside is not None else self.client
        session = Session(probed, next(iter(self.keys.values())))

        def gone(name: str, r: Response) -> None:
            if r.status in (404, 405, 501):
                cls.broken.add(name)
        if self.offer.seam(SEAM_SUITES):
            gone(SEAM_SUITES, session.request("POST", "/conformance/seams/eval-suites",
                                              json={"suite": {}}))
        if self.offer.seam(SEAM_TENANTS):
            gone(SEAM_TENANTS, session.request("POST", "/conformance/seams/tenants", json={}))
        if not (self.offer.seam(SEAM_ERASE) or self.offer.seam(SEAM_RESOLVE)) or not (
                self.offer.fixture(NOOP)):
            return
        made = session.workflow(NOOP)
        if made.status != 201 or not isinstance(made.json, dict):
            return
        run_id = str(made.json.get("runId"))
        session.events(run_id)
        if self.offer.seam(SEAM_RESOLVE):
            gone(SEAM_RESOLVE, session.request(
                "POST", "/conformance/seams" + run_path(run_id, ":resolve")))
        if self.offer.seam(SEAM_ERASE):
            gone(SEAM_ERASE, session.erase(run_id))

    def _take_in_counters(self, tenant: str) -> None:
        """A host that outlives one example (over HTTP) has live state already: take it in
        (as the last example knew it, where it ended without a failure)."""
        known = self._known.get(tenant)
        if known is None:
            known = self._known[tenant] = dict(self._readings(tenant))
        for name, count in known.items():
            if count:
                self.model.world.counters[(tenant, name)] = count

    def _readings(self, tenant: str,
                  names: Iterable[str] = WATCHED_KEYS) -> list[tuple[str, int | None]]:
        """`tenant`'s counters `names`, None where the host cannot say. In process they are
        read where the seam reads them (the host's gateway), without a request per key and
        step: most of a machine run's cost otherwise."""
        owner = self._gateway_owner(tenant)
        if self.inside is not None and owner is not None:
            names = tuple(names)
            return list(zip(names, self.inside.counters(owner, names), strict=True))
        session = Session(self.client, self.keys[tenant])
        return [(name, session.counter(name)) for name in names]

    def _gateway_owner(self, tenant: str) -> str | None:
        """In process, the host's own name for `tenant`, where its counters are read inside
        the host (as the counter seam would, at no request's cost); else None."""
        if self.inside is None or not self.inside.counter_seam():
            return None
        return self.inside.tenant_of(self.keys[tenant])

    def _may_move(self, tenants: Iterable[str], script: list[Any]) -> None:
        """A step ran `script` (or sent it, to be refused) on behalf of `tenants`: their
        counters it increments are read after the step. No other key can have moved; the
        example's final check (`teardown`) reads these keys of every tenant."""
        keys = increments(script).intersection(WATCHED_KEYS)
        self._moved.update((tenant, name) for tenant in tenants for name in keys)
        self._movable |= keys

    # -- plumbing

    def _count(self, branch: str) -> None:
        type(self).branches[branch] += 1

    def _session(self, tenant: str) -> Session:
        return Session(self.client, self.keys[tenant])

    def _needles_of(self, run_id: str) -> tuple[str, ...]:
        """The strings whose absence shows that no form of `run_id` (`id_forms`) is in a
        text: its opaque segment alone when every form contains it (one substring search
        instead of one per form, with the same verdict), else every form."""
        needles = self._needles.get(run_id)
        if needles is None:
            forms = id_forms(run_id)
            parsed = parse_bound(run_id)
            opaque = parsed.opaque if parsed is not None else None
            needles = ((opaque,) if opaque is not None and all(opaque in f for f in forms)
                else tuple(forms))
            self._needles[run_id] = needles
        return needles

    def _checked(self, tenant: str, response: Response) -> Response:
        """Every response: no other tenant's run id in any form (isolation)."""
        type(self).requests_made += 1
        text = response.body.decode("utf-8", "replace")
        judged(judges.no_foreign_run_ids(
            req_id("0252.tenant-isolation"), text, tenant,
            ((run.tenant, run.id, self._needles_of(run.id)) for run in self.model.runs.values()
             if run.tenant != tenant)))
        if response.status >= 400:
            judged(judges.code_registered("refsim.requirement.wire.registered-codes", response))
        return response

    def _suite(self, tenant: str, script: list[Any], *, source: bool, trials: int = 1,
               drift: bool = False) -> tuple[str, str, list[Any], int, Any]:
        """(evalSuiteRef, taskId, the script its task runs, trials, the decision its task
        expects). Through the suite seam, a suite of the drawn script; on a host without
        it, the conformance fixture of the kind asked (source, replay or drift), whose
        script is its own."""
        if not self._seam(SEAM_SUITES):
            fixture = SOURCE if source else DRIFT if drift else REPLAY
            listed = catalog.suite(fixture)["tasks"][0]
            return (fixture, "record", list(listed["input"]["script"]), 1,
                    listed["expected"]["match"]["value"])
        task: dict[str, Any] = {"taskId": TASK_ID, "input": {"script": script},
                                "expected": {"kind": "golden",
                                             "match": {"strategy": "exact", "value": "ok"}}}
        if source:
            task["fixtures"] = {"toolResponses": [], "onMiss": "live"}
        digest = hashlib.sha256(canonical([script, source, trials]).encode()).hexdigest()[:12]
        suite_id = f"refsim.machine.evals.{'src' if source else 'rep'}-{digest}"
        doc = {"suiteId": suite_id, "version": "1.0.0", "modes": ["golden"], "trials": trials,
               "tasks": [task]}
        if not self._register(tenant, doc):
            return self._suite(tenant, script, source=source, trials=trials, drift=drift)
        return suite_id, TASK_ID, script, trials, "ok"

    def _register(self, tenant: str, doc: dict[str, Any]) -> bool:
        """`doc` registered for `tenant` through the suite seam (once per host); False when
        the seam turned out not to answer (then it is not used again)."""
        suite_id = doc["suiteId"]
        if (tenant, suite_id) in self.registered:
            return True
        inside = self.inside if self._same_names else None
        if (inside is not None and inside.tenant_of(self.keys[tenant]) is not None
                and not inside.rewrites_answers()):
            # In process the suite is registered where the seam registers it, as the
            # counters are read where the seam reads them: the seam's own checks are
            # not what the machine judges, and would cost a fifth of a step.
            judged(judges.suite_taken(req_id("0252.usable-source-accepted"),
                                      inside.register_suite(self.keys[tenant], doc),
                                      suite_id))
        else:
            r = self.client.request("POST", "/conformance/seams/eval-suites",
                                    api_key=self.keys[tenant], json={"suite": doc})
            if r.status in (404, 405, 501):  # listed, but no seam answers there
                self._broke(SEAM_SUITES, r)
                return False
            judged(judges.created(req_id("0252.usable-source-accepted"), r,
                                  "the suite seam, given a suite"))
        self.registered.add((tenant, suite_id))
        return True

    def _created_id(self, tenant: str, r: Response, what: str) -> str:
        self._checked(tenant, r)
        judged(judges.created(req_id("0252.usable-source-accepted"), r, what))
        return str(r.json["runId"])

    def _record(self, run: ModelRun) -> ModelRun:
        self.model.runs[run.id] = run
        return run

    def _seam(self, name: str) -> bool:
        return self.offer.seam(name) and name not in type(self).broken

    def _broke(self, name: str, r: Response) -> None:
        type(self).broken.add(name)
        if self.narrate:
            note(f"the seam {name} is listed but answered {r.status}: not used from now on")

    def _lane(self, lane: str) -> str:
        """The drawn lane where the host lists its agent, else the recorder."""
        return lane if self.offer.lane(lane) else RECORDER

    def _judge_wire(self, run: ModelRun, events: list[dict[str, Any]],
                    session: Session, *, modelled: bool = True) -> None:
        """What every channel shows of an eval run, read as a client reads it: the SSE
        stream tells what the poll told (the echo, the misses), the summary read twice
        reports the same, and no answer about the run (snapshot, poll, stream, summary)
        carries a derived entry, by key or by content (§D: never on the wire). For a run
        the model did not predict (`modelled=False`: an example row's), the misses every
        channel must report are those the polled eval.scored reports."""
        tasks = list(run.fixture_runs or {}) or [TASK_ID]
        misses: int | None = run.expected_misses
        if not modelled:
            score = judges.scored(events, tasks[0])
            misses = None if score is None else integral(score.get("fixtureMissCount"))
        # Each channel read once, as raw answers: the judges read events and summaries off
        # them, and the content judges search the same answers (five requests an eval).
        documents: list[tuple[str, Any]] = []
        for what, suffix in (("its snapshot", ""), ("its events, polled",
                                                    "/events/poll?afterSequence=-1"),
                             ("its events, streamed", "/events"),
                             ("its EvalSummary", "/eval-summary"),
                             ("its EvalSummary, read again", "/eval-summary")):
            r = self._checked(run.tenant, session.request("GET", run_path(run.id, suffix)))
            judged(judges.no_derived_entries(req_id("0252.derived-never-on-wire"),
                                             r.body.decode("utf-8", "replace"), what))
            documents.append((what, r))
        stream = stream_events(documents[2][1])
        if stream is not None:
            judged(judges.echo(req_id("0252.echo-verbatim"), stream, run.fixture_runs or {}))
            if misses is not None:
                judged(judges.scored_miss_count(req_id("0252.fail-closed-miss"), stream,
                                                tasks[0], misses))
        first, again = (r.json if r.status == 200 else None for _, r in documents[3:])
        if first is not None:
            for finding in judges.content_free(req_id("0252.summary-content-free"), first,
                                               events):
                judged(finding)
            judged(judges.summary_reread_alike(req_id("0252.miss-count-reported"), first,
                                               again))
            for finding in (judges.miss_count(req_id("0252.miss-count-reported"), events,
                                              first, tasks[0], misses)
                            if misses is not None else ()):
                judged(finding)
        recorded = [(c.args, c.error if c.failed else c.outcome)
                    for source_id in (run.fixture_runs or {}).values()
                    if source_id in self.model.runs
                    for c in self.model.runs[source_id].calls if c.agent == run.agent]
        made = [(c.args, c.error if c.failed else c.outcome) for c in run.calls]
        if recorded:
            for finding in judges.no_entries_on_wire(req_id("0252.derived-never-on-wire"),
                                                     documents, recorded, made):
                judged(finding)

    def _noise(self) -> frozenset[str]:
        """What varies between answers to one and the same request on this host (learnt
        once per machine class: a request id, a trace header)."""
        cls = type(self)
        if cls.noise is None:
            cls.noise = noise_of_host(self._session(next(iter(self.keys))))
        return cls.noise

    def _headers(self, member: str) -> dict[str, str] | None:
        """The headers of a request-headers member, a fresh value where it asks for one."""
        if member == "plain":
            return None
        (headers,) = [h for name, h in _class_data().headers if name == member]
        return classes.headers_for(headers, lambda: f"refsim-machine-{self._fresh()}")

    def _fresh(self) -> str:
        """A value no earlier request of this run sent (an Idempotency-Key, a tag); over
        HTTP, of any run: a long-lived host remembers keys an earlier refsim run sent."""
        self._serial += 1
        if self.inside is None:
            return f"{type(self).run_nonce}-{type(self).examples_run}-{self._serial}"
        return f"{type(self).examples_run}-{self._serial}"

    def _create(self, caller: str, body: Any, header: str = "plain") -> Response:
        headers = self._headers(header)
        session = self._session(caller)
        if headers is None:
            return self._checked(caller, session.create(body))
        return self._checked(caller, session.request("POST", "/runs", json=body,
                                                     headers=headers))

    def _refused_unusable(self, caller: str, r: Response, supplied: list[Any], kind: str,
                          body: Callable[[Any], Any], *, header: str = "plain",
                          exact: bool = True, minted: int | None = None) -> None:
        """An unusable source's refusal: 400 validation_error, no echo of any string
        supplied, nothing minted (in process), and, for a value a run id could be
        (`exact`), every client-visible part alike with every other kind of unusable
        source this caller was refused under the same request headers."""
        # Another tenant's run is eval-fixture-run-tenant-scoped's case (the source-uniform
        # leg): refused as no run is; every other unusable source, source-refused's.
        judged(judges.refused_as(req_id("0252.source-uniform" if kind == "foreign"
                                        else "0252.source-refused"), r,
                                 f"an unusable source ({kind})"))
        texts = [v for v in supplied if isinstance(v, str) and v]
        controls: list[Response] = []
        if texts and judges.echo_windows(r, texts):  # text every refusal carries is no echo
            controls = [self._create(caller, body(judges.control_value(v)), header)
                        for v in texts]
        unechoed = judges.no_echo(req_id("0252.no-echo"), r, texts, f"the refusal ({kind})",
                                  controls)
        judged(unechoed)
        if minted is not None and self.inside is not None:
            judged(judges.nothing_minted(req_id("0252.source-refused"), r,
                                         f"the refusal ({kind})", minted,
                                         self.inside.run_count()))
        self._count("refusal:" + kind)
        if header != "plain":
            self._count("refusal-header:" + header)
        if not exact:
            return
        # Alike means all a client sees but what varies on every answer (noise): one
        # refusal per caller and request headers, whatever made the source unusable. A
        # refusal that reads differently on first sight is asked for again, beside one of
        # every other kind seen, before the difference counts (a header with a few values
        # at random is noise, too).
        seen = self.refusals.setdefault((caller, header), {})
        signature = judges.signature(r, self._noise())
        asked = (caller, header, canonical(supplied[0]))
        if header == "plain" and asked not in self._asked:  # the first ask of this value
            self._asked.add(asked)
            group = "another tenant's run" if kind == "foreign" else (
                "an id of no run" if kind in ("unknown", "near-id", "spliced") else None)
            if group is not None:
                self.first_asks.setdefault(caller, {}).setdefault(group, []).append(r)

        ask = _AskAgain(lambda value: self._create(caller, body(value), header), supplied[0])
        kinds = self.kinds_seen.setdefault((caller, header), {})
        if signature not in seen and seen:
            others = [e for k, e in kinds.items() if k != kind] or list(kinds.values())[:1]
            for first_kind, first_ask, first in others[:3]:
                found = alike(req_id("0252.source-uniform-body"),
                              [(first_kind, first_ask), (kind, ask)], [first, r],
                              self._noise())
                if not found.ok:
                    self.oracles.append(found)
                judged(attrs.evolve(found, message=f"unusable-source refusals to {caller} "
                                    f"differ ({first_kind}, {kind}; headers: {header}): "
                                    f"{found.message}"))
        seen.setdefault(signature, (kind, ask, r))
        kinds.setdefault(kind, (kind, ask, r))

    def _state_moved(self, run_id: str) -> None:
        """Forget the refusals that named `run_id` as it was: once a waiting run is
        cancelled or resolved it is terminal, and asking again asks another question (its
        owner may now use it). A refusal of it asked again would be no refusal to compare."""
        for remembered in (*self.refusals.values(), *self.kinds_seen.values()):
            for key, (_, ask, _) in list(remembered.items()):
                if isinstance(ask, _AskAgain) and ask.value == run_id:
                    del remembered[key]

    def _settle(self, run_id: str) -> None:
        """A host may answer before a run has finished, and a source still running is
        rightly refused (§C): its owner reads it until it settles before it is named or
        asked for (once: a run read until it settled stays so, until it is resolved)."""
        if run_id not in self._settled:
            self._session(self.model.runs[run_id].tenant).events(run_id)
            self._settled.add(run_id)

    def _drew(self, cls: str, member: str) -> None:
        type(self).drawn[f"{cls}: {member}"] += 1
