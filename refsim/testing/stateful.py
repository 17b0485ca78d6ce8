"""A stateful Hypothesis machine for RFC 0252 over any `HostClient`.

It records sources of every kind, replays them, asks for every refusal, forks and erases,
and after every step checks the host against a model: usability both ways, refusal
uniformity, fail-closed replay, the echo, isolation, erasure and no re-resolution.

    from refsim.testing.stateful import machine_for
    TestRecordedFixtures = machine_for(lambda: SimHost(seed=0)).TestCase
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import hashlib
import random
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar, cast

import attrs
from hypothesis import note as _hypothesis_note
from hypothesis import reject
from hypothesis import strategies as st
from hypothesis.control import should_note
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    get_state_machine_test,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from refsim.check import classes, judges
from refsim.check.differential import alike, asked_apart, noise_of_host
from refsim.check.examples import Example, RowRun, load_examples
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
    Surface,
    Unobservable,
    eval_body,
    inspector_of,
    nonce,
    run_path,
    share_surface,
    stream_events,
    surface_of,
)
from refsim.check.observe import KEYS as TENANT_KEYS
from refsim.domain.agents import CONTENT_FREE, RECORDER, UNHELD
from refsim.domain.canonical import canonical, integral
from refsim.domain.ids import RunId, parse_bound
from refsim.domain.tools import COUNTER, FLAKY, VAULT, vault_credential
from refsim.host import SimHost
from refsim.testing.model import Entry, Model, ModelRun
from refsim.testing.strategies import (
    ANY_SCRIPTS,
    COUNTER_KEYS,
    COUNTER_SCRIPTS,
    counter_only,
    drift,
    increments,
    suite_script,
)
from refsim.wire import catalog
from refsim.wire.client import NO_BODY, HostClient
from refsim.wire.response import Response
from refsim.wire.trace import current, mark

# The script of every example's first sources: both keys moved, one read twice.
COUNTER_INIT: tuple[dict[str, Any], ...] = (
    {"call": COUNTER, "args": {"op": "inc", "key": "k1"}},
    {"call": COUNTER, "args": {"op": "read", "key": "k1"}},
    {"call": COUNTER, "args": {"op": "inc", "key": "k2"}},
    {"call": COUNTER, "args": {"op": "read", "key": "k1"}},
    {"decide": "ok"})
# Refusals asked again per group to tell two kinds apart, and first asks per group needed
# before their frequencies are compared (as the uniformity rows ask: scenario.py).
# The task of every suite the machine registers: with a "-" in it, so that a key folded
# or slugged before it is judged (hyphen as underscore, say) is a near-miss of a real task.
TASK_ID = "the-task"
BODY_SAMPLES = 4
FIRST_ASKS = 12
# The counters the machine's scripts and the suites it names can move or read.
WATCHED_KEYS = (*COUNTER_KEYS, "recorded-fixtures", "recorded-fixtures-drift", "alpha", "beta",
                "canned")
LANES = (RECORDER, CONTENT_FREE, UNHELD)
TENANTS = dict(TENANT_KEYS)
EXTRA_TENANTS = ("initech", "umbrella")
CRITICAL = (
    "source:eval", "source:workflow", "source:delegates", "source:failed-call",
    "source:credentialed", "source:non-terminal", "source:no-agent", "source:not-held",
    "refusal:unknown", "refusal:undecodable", "refusal:foreign", "refusal:non-terminal",
    "refusal:no-agent", "refusal:not-held", "refusal:erased", "refusal:key-not-task",
    "refusal:suite-fixtures", "refusal:without-mode", "refusal:live-shadow", "refusal:empty-map",
    "replay:no-miss", "replay:miss", "fork:ok", "fork:gone",
)


# ----------------------------------------------------------------------------- the classes

def _class_data() -> classes.Classes:
    return classes.load()


def _named(items: list[tuple[str, Any]]) -> st.SearchStrategy[tuple[str, Any]]:
    return st.sampled_from(items)


def _of_patterns(patterns: tuple[str, ...]) -> list[st.SearchStrategy[tuple[str, Any]]]:
    def labelled(pattern: str) -> st.SearchStrategy[tuple[str, Any]]:
        return st.tuples(st.just(f"pattern {pattern}"), st.from_regex(pattern, fullmatch=True))
    return [labelled(p) for p in patterns]


def _source_values() -> st.SearchStrategy[tuple[str, Any]]:
    """source-values' own members: its JSON values, and strings of its patterns."""
    data = _class_data()
    drawn = [_named([(classes.value_name(v), v) for v in data.values])]
    return st.one_of(drawn + _of_patterns(data.value_patterns))


def _task_keys() -> st.SearchStrategy[tuple[str, Any]]:
    data = _class_data()
    drawn = [_named([(f"value {v!r}", v) for v in data.key_values])]
    return st.one_of(drawn + _of_patterns(data.key_patterns))


# Each class drawn from specs/classes.yaml, read when the machine first draws (a data error
# is reported by the data check before any command runs, never at import).
SOURCE_VALUES = st.deferred(_source_values)
FROM_ID = st.deferred(lambda: st.sampled_from([op.name for op in _class_data().from_id]))
TASK_KEYS = st.deferred(_task_keys)
FROM_KEY = st.deferred(lambda: st.sampled_from([op.name for op in _class_data().from_key]))
ARG_VARIANTS = st.deferred(lambda: st.sampled_from(
    [op.name for op in _class_data().arg_variants]))
RECORDED_ARGS = st.deferred(lambda: st.integers(0, len(_class_data().recorded_args)))
RUN_STATES = st.deferred(lambda: st.sampled_from([m.name for m in _class_data().run_states]))
ROUTES = st.deferred(lambda: st.sampled_from([r.name for r in _class_data().routes]))
SPELLINGS = st.deferred(lambda: st.sampled_from([op.name for op in _class_data().spellings]))
NAMED_TWICE = st.deferred(lambda: st.sampled_from([m.name for m in _class_data().named_twice]
                                                  or ["-"]))
LISTINGS = st.deferred(lambda: st.sampled_from([m.name for m in _class_data().listings]
                                               or ["-"]))
IDEMPOTENT = st.deferred(lambda: st.sampled_from(
    [str(m["name"]) for m in _class_data().idempotent]))
HEADERS = st.deferred(lambda: st.sampled_from([name for name, _ in _class_data().headers]))


def _str(made: Any) -> str:
    """A run id a recording rule returned (they return one always, typed as any rule)."""
    return str(made)


def _op(ops: tuple[classes.Op, ...], name: str) -> classes.Op:
    return next(op for op in ops if op.name == name)


def note(text: str) -> None:
    """Narrate a step: into Hypothesis's report in a test, onto stdout in a pasted program."""
    try:
        _hypothesis_note(text)
    except InvalidArgument:
        print(text)


def narrating() -> bool:
    """Whether this example's narrative is shown: in the run Hypothesis reports (its final
    replay of a failure), at verbose, or in a pasted program. Asked once per example, so
    the other runs neither format nor file a narrative no one reads."""
    try:
        return should_note()
    except InvalidArgument:  # outside a test: a pasted program prints its story
        return True


class RequirementViolated(AssertionError):
    """A check failed; the message starts with the requirement id in brackets."""

    def __init__(self, requirement_id: str, message: str, observation: Any = None) -> None:
        super().__init__(f"[{requirement_id}] {message}")
        self.requirement_id = requirement_id
        # What the failed finding quoted (the answers it judged), for the evidence.
        self.observation = observation


# While set, a violation of any other requirement makes the example invalid rather than
# failing (Hypothesis rejects it). `refsim.testing.fuzz.shrink_for_display` sets it: without
# it the shrinker may slip from the kill it shrinks to another requirement's smaller one.
_FOCUS: contextvars.ContextVar[str | None] = contextvars.ContextVar("refsim_machine_focus",
                                                                     default=None)


@contextlib.contextmanager
def focused_on(requirement_id: str | None) -> Iterator[None]:
    """Only `requirement_id` fails an example inside; other violations reject it."""
    token = _FOCUS.set(requirement_id)
    try:
        yield
    finally:
        _FOCUS.reset(token)


def expect(condition: bool, requirement_id: str, message: str,
           observation: Any = None) -> None:
    if not condition:
        focus = _FOCUS.get()
        if focus is not None and requirement_id != focus:
            reject()
        raise RequirementViolated(requirement_id, message, observation)


# Every finding the machine's judges gave in this process, by requirement id: how often a
# requirement (an invariant row's, say) was checked, and how often it held.
JUDGED: collections.Counter[tuple[str, bool]] = collections.Counter()


def judged(finding: Finding) -> None:
    """The machine's verdicts are the checker's judges' (`refsim.check.judges`): a failed
    finding fails the step."""
    JUDGED[(finding.requirement_id, finding.ok)] += 1
    if not finding.ok:
        expect(False, finding.requirement_id, finding.message, finding.observation)


def _norm(value: Any, failed: bool) -> Any:
    """Errors compare by code only: messages are the host's to word."""
    if failed:
        return {"code": value.get("code")} if isinstance(value, dict) else value
    return value


# ----------------------------------------------------------------------------- what the host offers

AGENT_CALL, WAIT_INPUT, NOOP = ("conformance-agent-call", "conformance-wait-input",
    "conformance-noop")
SUITE_FIXTURES_SUITE, TWO_TASKS_SUITE = "refsim-eval-with-suite-fixtures", "refsim-eval-two-tasks"


@attrs.frozen
class Offered:
    """What the machine may send this host, read from its discovery document: it never
    sends what the host does not advertise (fixtureRuns without recordedFixtures, a seam
    or a fixture it does not list, a fork without the replay family)."""

    surface: Surface

    @property
    def recorded(self) -> bool:
        return (self.surface.advertises("recordedFixtures") and
            self.surface.advertises("fixtureMatching"))

    def seam(self, name: str) -> bool:
        return self.surface.offers(name)

    def fixture(self, name: str) -> bool:
        return self.surface.lists(name)

    @property
    def forks(self) -> bool:
        return self.surface.family("replay")

    def lane(self, agent: str) -> bool:
        """An agent the machine may run: the recorder, or a catalog agent the host lists."""
        needed = catalog.for_agent_or_tool(agent)
        return needed is None or self.fixture(needed)

    def script(self, script: list[Any]) -> list[Any]:
        """The script with every step the host cannot run (a tool or a delegate whose
        catalog fixture it does not list) left out, a delegate's own steps kept in line."""
        out: list[Any] = []
        for step in script:
            if "delegate" in step and not self.lane(step["delegate"]):
                out.extend(self.script(step.get("script") or []))
            elif "call" in step and not self.lane(step["call"]):
                continue
            elif "delegate" in step:
                out.append({**step, "script": self.script(step.get("script") or [])})
            else:
                out.append(step)
        return out

    def unoffered(self, tenants: int) -> dict[str, str]:
        """The critical branches this host cannot reach, and what it would take."""
        out: dict[str, str] = {}

        def need(branches: tuple[str, ...], ok: bool, why: str) -> None:
            for branch in branches:
                if not ok:
                    out.setdefault(branch, why)
        if not self.recorded:
            need(tuple(b for b in CRITICAL if b.startswith(("refusal:", "replay:", "fork:"))),
                 False, "the host does not advertise recordedFixtures with fixtureMatching")
        need(("source:workflow", "source:delegates", "source:failed-call",
              "source:credentialed"), self.fixture(AGENT_CALL),
             f"the host does not list the fixture {AGENT_CALL}")
        need(("source:delegates",), self.lane("refsim.agents:helper"),
             "the host does not list the fixture refsim-agent-helper")
        need(("source:failed-call",), self.lane("refsim.tools:flaky"),
             "the host does not list the fixture refsim-tool-flaky")
        need(("source:credentialed",), self.lane("refsim.tools:vault"),
             "the host does not list the fixture refsim-tool-vault")
        need(("source:non-terminal", "refusal:non-terminal"), self.fixture(WAIT_INPUT),
             f"the host does not list the fixture {WAIT_INPUT}")
        need(("source:no-agent", "refusal:no-agent"), self.fixture(NOOP),
             f"the host does not list the fixture {NOOP}")
        need(("source:not-held", "refusal:not-held"), self.lane("refsim.agents:unheld"),
             "the host does not list the fixture refsim-agent-unheld")
        need(("refusal:erased", "fork:gone"), self.seam(SEAM_ERASE),
             f"the host does not advertise the seam {SEAM_ERASE}")
        need(("fork:ok", "fork:gone"), self.forks,
             "the host does not advertise the replay family (forkRun)")
        need(("refusal:suite-fixtures",), self.fixture(SUITE_FIXTURES_SUITE),
             f"the host does not list the fixture {SUITE_FIXTURES_SUITE}")
        need(("refusal:live-shadow", "refusal:empty-map"), self.fixture(TWO_TASKS_SUITE),
             f"the host does not list the fixture {TWO_TASKS_SUITE}")
        need(("refusal:foreign",), tenants > 1,
             "one tenant only: no second tenant's API key")
        return out


# ----------------------------------------------------------------------------- the machine

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


class RecordedFixturesMachine(RuleBasedStateMachine):
    """Subclass via `machine_for(factory)`; the default drives a fresh `SimHost(seed=0)`."""

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

    # -- every example starts from one usable source of each known tenant

    @initialize(target=runs, rich=RECORDED_ARGS, trials=st.integers(1, 3))
    def first_source(self, rich: int, trials: int) -> Any:
        """Before any rule: the facet as discovery shows it (§A), and one completed eval
        source per tenant, so every rule that names a run has the caller's and another
        tenant's to name from the first step on."""
        judged(judges.facet_implies_matching(req_id("0252.facet-implies-matching"),
                                             self._session(next(iter(self.keys))).discovery()
                                             .json))
        if not self.offer.recorded:
            return multiple()
        made = [self.record_eval_source(tenant, RECORDER, list(COUNTER_INIT), rich, trials)
                for tenant in sorted(self.keys)]
        return multiple(*made)

    # -- tenants

    @rule(target=tenants, name=st.sampled_from(sorted(TENANTS)))
    def known_tenant(self, name: str) -> Any:
        return name if name in self.keys else multiple()

    def _seam(self, name: str) -> bool:
        return self.offer.seam(name) and name not in type(self).broken

    def _broke(self, name: str, r: Response) -> None:
        type(self).broken.add(name)
        if self.narrate:
            note(f"the seam {name} is listed but answered {r.status}: not used from now on")

    @precondition(lambda self: self._seam(SEAM_TENANTS))
    @rule(target=tenants, name=st.sampled_from(EXTRA_TENANTS))
    def add_tenant(self, name: str) -> Any:
        if name in self.keys:
            return multiple()
        key = f"hk_test_{name}"
        if name not in self._added:  # else an earlier example added it to this host
            r = self.client.request("POST", "/conformance/seams/tenants",
                                    api_key=self.keys["acme"], json={"name": name, "apiKey": key})
            if r.status == 400 and self.inside is None:
                if self.narrate:
                    note(f"{name} already exists on this long-lived host")  # another run's
            elif not 200 <= r.status < 300 and r.status != 400:
                self._broke(SEAM_TENANTS, r)  # listed, but it does not answer: nothing added
                return multiple()
            else:
                judged(judges.created(req_id("0252.tenant-isolation"), r,
                                      f"adding tenant {name}"))
        self.keys[name] = key
        self._added.add(name)
        if self.inside is not None:  # the one-step counter comparison needs the same names
            self._same_names &= self.inside.tenant_of(key) == name
        self._take_in_counters(name)
        self._count("tenant:add")
        if self.narrate:
            note(f"added tenant {name}")
        return name

    # -- recording sources

    def _lane(self, lane: str) -> str:
        """The drawn lane where the host lists its agent, else the recorder."""
        return lane if self.offer.lane(lane) else RECORDER

    @precondition(lambda self: self.offer.recorded)
    @rule(target=runs, tenant=tenants, lane=st.sampled_from(LANES), script=COUNTER_SCRIPTS,
          rich=RECORDED_ARGS, trials=st.integers(1, 3))
    def record_eval_source(self, tenant: str, lane: str, script: list[Any], rich: int = 0,
                           trials: int = 1) -> str:
        """run-states: a completed eval source; with several trials, several invocations
        of the agent (UQ1: every call of every invocation is derived)."""
        lane = self._lane(lane)
        script = self._rich(script, rich)
        suite, _, script, trials, _ = self._suite(tenant, script, source=True, trials=trials)
        self._may_move([tenant], script)
        r = self._session(tenant).create(eval_body(suite, agent_id=lane))
        if trials > 1:
            self._count("source:several-invocations")
        return self._recorded_source(tenant, "eval", lane, script, r, trials)

    def _rich(self, script: list[Any], rich: int) -> list[Any]:
        """The script with exact-args' `rich`-th recorded argument set beside every counter
        call's own (0: as drawn), so the variants of exact-args have something to change."""
        if not rich:
            return script
        self._drew("exact-args", f"recorded {rich - 1}")
        return [{**step, "args": classes.with_recorded(step["args"], rich - 1)}
                if step.get("call") == COUNTER and isinstance(step.get("args"), dict) else step
                for step in script]

    @precondition(lambda self: self.offer.fixture(AGENT_CALL))
    @rule(target=runs, tenant=tenants, lane=st.sampled_from(LANES), script=ANY_SCRIPTS,
          rich=RECORDED_ARGS)
    def record_workflow_source(self, tenant: str, lane: str, script: list[Any],
                               rich: int = 0) -> str:
        lane = self._lane(lane)
        script = self.offer.script(script) if type(self).extended else counter_only(script)
        script = self._rich(script, rich)
        self._may_move([tenant], script)
        r = self._session(tenant).workflow(AGENT_CALL, {"agentId": lane, "script": script})
        return self._recorded_source(tenant, "workflow", lane, script, r)

    def _recorded_source(self, tenant: str, kind: str, lane: str, script: list[Any],
                         r: Response, trials: int = 1) -> str:
        """Model a live source run the host just created, and count what it holds."""
        run_id = self._created_id(tenant, r, f"a {kind} source run")
        run = self._record(ModelRun(run_id, tenant, kind, lane, True, script=script))
        for _ in range(trials):
            self.model.run_live(tenant, lane, script, run.calls, run.invoked)
        if self.inside is None or not self._same_names:  # counts the model may not know
            self.model.take_in(tenant, run.calls, self._session(tenant).events(run_id))
            self._settled.add(run_id)
        self._count("source:" + kind)
        self._count_source(run)
        if self.narrate:
            note(f"{tenant} recorded {kind} source {run_id} on lane {lane}: {script}")
        return run_id

    def _count_source(self, run: ModelRun) -> None:
        if any("delegate" in s for s in run.script):
            self._count("source:delegates")
        if any(c.failed for c in run.calls):
            self._count("source:failed-call")
        if any(c.tool == VAULT for c in run.calls):
            self._count("source:credentialed")
        if run.agent in self.model.unheld_agents and any(c.agent == run.agent for c in run.calls):
            self._count("source:not-held")

    @precondition(lambda self: self.offer.fixture(WAIT_INPUT))
    @rule(target=runs, tenant=tenants, script=COUNTER_SCRIPTS)
    def record_waiting_run(self, tenant: str, script: list[Any]) -> str:
        self._may_move([tenant], script)
        r = self._session(tenant).workflow(WAIT_INPUT, {"agentId": RECORDER, "script": script})
        run_id = self._created_id(tenant, r, "a waiting run")
        run = self._record(ModelRun(run_id, tenant, "waiting", RECORDER, False, script=script))
        self.model.run_live(tenant, RECORDER, script, run.calls, run.invoked)
        if self.inside is None or not self._same_names:
            self.model.take_in(tenant, run.calls, self._session(tenant).events(run_id))
            self._settled.add(run_id)  # waiting for input, until it is resolved
        self._count("source:non-terminal")
        if self.narrate:
            note(f"{tenant} started waiting run {run_id}")
        return run_id

    @precondition(lambda self: self.offer.fixture(NOOP))
    @rule(target=runs, tenant=tenants)
    def record_noop_run(self, tenant: str) -> str:
        r = self._session(tenant).workflow(NOOP)
        run_id = self._created_id(tenant, r, "a noop run")
        self._record(ModelRun(run_id, tenant, "noop", None, True))
        self._count("source:no-agent")
        if self.narrate:
            note(f"{tenant} ran noop {run_id}")
        return run_id

    @precondition(lambda self: self._seam(SEAM_RESOLVE))
    @rule(run_id=runs)
    def resolve(self, run_id: str) -> None:
        run = self.model.runs[run_id]
        if run.deleted:
            return  # the host took it away: there is nothing to resolve
        path = "/conformance/seams" + run_path(run_id, ":resolve")
        self._may_move([run.tenant], run.script)
        self._settled.discard(run_id)  # a waiting run goes on
        r = self._checked(run.tenant, self.client.request("POST", path,
                                                          api_key=self.keys[run.tenant]))
        if r.status in (404, 405, 501) and not (isinstance(r.json, dict)
                                                and r.json.get("error") == "not_found"
                                                and self.inside is not None
                                                and not self.inside.rewrites_answers()):
            self._broke(SEAM_RESOLVE, r)
            return
        if run.kind == "waiting" and not run.terminal:
            judged(judges.answered(req_id("0252.non-terminal-refused"), r, 200, "resolving"))
            run.terminal = True
            self._state_moved(run_id)
            self._count("resolve")
        else:
            judged(judges.answered(req_id("0252.non-terminal-refused"), r, 409,
                                   "resolving a run that is not waiting"))

    @precondition(lambda self: self.offer.fixture(WAIT_INPUT))
    @rule(run_id=runs)
    def cancel(self, run_id: str) -> None:
        """run-states: a run waiting for input, cancelled by its owner after the agent's
        calls: terminal, so a usable source for its owner (§C asks only that it is
        terminal), and refused like no run for anyone else."""
        run = self.model.runs[run_id]
        if run.kind != "waiting" or run.terminal or run.deleted:
            return
        r = self._checked(run.tenant, self._session(run.tenant).request(
            "POST", run_path(run_id, "/cancel"), json={}))
        if r.status in (404, 405, 501):
            return  # no cancellation here: the run waits on
        judged(judges.answered(req_id("0252.source-refused"), r, 200,
                               "cancelling a run that waits for input"))
        run.terminal = True
        run.kind = "cancelled"
        self._state_moved(run_id)
        self._settled.discard(run_id)
        self._count("source:cancelled")
        self._drew("run-states", "cancelled-after-calls (caller)")
        if self.narrate:
            note(f"{run.tenant} cancelled {run_id}")

    @precondition(lambda self: self.offer.recorded)
    @rule(target=runs, state=RUN_STATES, foreign=st.booleans(), script=COUNTER_SCRIPTS,
          header=HEADERS)
    def name_state(self, state: str, foreign: bool, script: list[Any], header: str) -> Any:
        """run-states: a run of a state and kind §C tells apart, made by its owner, then
        named by its owner or by another tenant: taken exactly when §C calls it usable."""
        (member,) = [m for m in _class_data().run_states if m.name == state]
        owner = sorted(self.keys)[0] if not foreign else sorted(self.keys)[-1]
        caller = sorted(self.keys)[0]
        run_id = self._made(member.recipe, owner, script)
        if run_id is None:
            return multiple()
        self._drew("run-states", f"{state} ({'another-tenant' if foreign else 'caller'})")
        run = self.model.runs[run_id]
        if not foreign and member.usable is not False and run.terminal:
            self._count("state:" + member.recipe)
        self.replay(caller, run_id, run.agent or RECORDER, "same", 1, header)
        return run_id

    def _made(self, recipe: str, owner: str, script: list[Any]) -> str | None:
        """A run of `recipe` (specs/classes.yaml, run-states) made by `owner`, or None
        where the host does not list what it takes."""
        def fixture(name: str) -> bool:
            return self.offer.fixture(name)
        if recipe in ("eval", "trials", "erased", "eval-of-eval"):
            run_id = _str(self.record_eval_source(owner, RECORDER, script, 0,
                                             3 if recipe == "trials" else 1))
            if recipe == "erased":
                if not self._seam(SEAM_ERASE):
                    return None
                self.erase(run_id)
            if recipe == "eval-of-eval":
                made = self.replay(owner, run_id, RECORDER, "same", 1)
                return made if isinstance(made, str) else None
            return run_id
        if recipe == "workflow" and fixture(AGENT_CALL):
            return _str(self.record_workflow_source(owner, RECORDER, script, 0))
        if recipe == "unheld" and fixture(AGENT_CALL) and self.offer.lane(UNHELD):
            return _str(self.record_workflow_source(owner, UNHELD, script, 0))
        if recipe == "failed-call" and fixture(AGENT_CALL) and self.offer.lane(FLAKY):
            return _str(self.record_workflow_source(
                owner, RECORDER, [{"call": FLAKY, "args": {"mode": "error"}}, *script], 0))
        if recipe in ("waiting", "cancelled", "resolved") and fixture(WAIT_INPUT):
            run_id = _str(self.record_waiting_run(owner, script))
            if recipe == "cancelled":
                self.cancel(run_id)
            elif recipe == "resolved" and self._seam(SEAM_RESOLVE):
                self.resolve(run_id)
            return run_id
        if recipe == "noop" and fixture(NOOP):
            return _str(self.record_noop_run(owner))
        return None

    # -- replays

    @precondition(lambda self: self.offer.recorded)
    @rule(target=evals, caller=tenants, source_id=runs, lane=st.sampled_from(LANES),
          variant=st.sampled_from(["same", "drift"]), trials=st.integers(1, 3),
          header=HEADERS)
    def replay(self, caller: str, source_id: str, lane: str, variant: str, trials: int,
               header: str = "plain", script: list[Any] | None = None,
               fixed: dict[str, str] | None = None,
               twice: tuple[str, str] | None = None) -> Any:
        lane = self._lane(lane)
        source = self.model.runs[source_id]
        if script is None:
            script = source.script if source.script else [{"decide": "ok"}]
        if variant == "drift":
            script = drift(script)
        suite, task, script, trials, decision = self._suite(
            caller, script, source=False, trials=trials, drift=variant == "drift")
        # `twice`: the task named twice, `source_id` (usable) one of the two values.
        named: dict[str, Any] = ({task: source_id} if twice is None
                                 else classes.NamedTwice([(task, v) for v in twice]))
        body = eval_body(suite, named, agent_id=lane)
        usable = self.model.usable(caller, source_id, lane)
        if caller != source.tenant:
            self._count("cross-tenant")
        before = self.inside.resolutions(source_id) if self.inside else 0
        self._settle(source_id)
        self._may_move([caller], script)  # the eval run is the caller's, live or not
        minted = self.inside.run_count() if self.inside is not None else None
        if fixed is not None:  # the caller's own headers (an Idempotency-Key to reuse)
            r = self._checked(caller, self._session(caller).request("POST", "/runs", json=body,
                                                                    headers=fixed))
        else:
            r = self._create(caller, body, header)
        if header != "plain":
            self._drew("request-headers", header)
        if twice is not None and r.status != 201:  # refused, as any unusable source may be
            for finding in judges.refused(req_id("0252.source-refused"), r,
                                          f"{caller} naming a task twice ({twice})"):
                judged(finding)
            return multiple()
        if usable is None:
            kind = self.model.unusable_kind(caller, source_id, lane)
            self._refused_unusable(caller, r, [source_id], kind,
                                   lambda v: eval_body(suite, {task: v}, agent_id=lane),
                                   header=header, minted=minted)
            return multiple()
        judged(judges.created(req_id("0252.usable-source-accepted"), r,
                              f"{caller} replaying usable source {source_id} on lane {lane}"))
        run_id = str(r.json["runId"])
        entries = self.model.derive(usable, lane)
        run = self._record(ModelRun(run_id, caller, "eval", lane, True, fixture_runs={
            task: source_id}, derived={task: entries}, script=script, trials=trials,
            content_from={source_id, *usable.content_from}))
        misses, decisions, answers = self.model.run_replay(lane, script, entries, trials,
                                                           run.calls, run.invoked)
        run.expected_misses = misses
        run.expected_passed = misses == 0 and all(d == decision for d in decisions)
        self._count("replay:miss" if misses else "replay:no-miss")
        if trials > 1:
            self._count("replay:trials")
        if self.narrate:
            note(f"{caller} replayed {source_id} as {run_id} ({variant}, {trials} trial(s)): "
                 f"expect {misses} miss(es)")
        self._judge_eval(run, answers)
        if self.inside is not None:
            got = [[tool, args, _norm(response, failed), failed]
                   for tool, args, response, failed in self.inside.copy_of(
                       source_id, run_id, task) or ()]
            want = [[e.tool, e.args, _norm(e.response, e.is_error), e.is_error]
                    for e in entries]
            judged(judges.same_as(req_id("0252.derive-agent-calls-only"), got, want,
                                  f"the stored copy of {source_id} is the entries of its held "
                                  f"calls of {lane}"))
            judged(judges.no_secret_in(req_id("0252.no-egress-credential"), got,
                                       [vault_credential(usable.tenant)], "a derived entry"))
            stored = [e for _, eval_id, _, e in self.inside.copies() if eval_id == run_id]
            judged(judges.no_secret_in(req_id("0252.no-egress-credential"), stored,
                                       [vault_credential(usable.tenant)],
                                       "a derived entry as the copy store holds it"))
            judged(judges.counter_delta(req_id("0252.fork-no-reresolve"), before,
                                        self.inside.resolutions(source_id), 1,
                                        "resolving the source at create"))
        return run_id

    @precondition(lambda self: self.offer.recorded)
    @rule(target=evals, source_id=runs, variant=st.sampled_from(["same", "drift"]),
          trials=st.integers(1, 3), header=HEADERS)
    def replay_own(self, source_id: str, variant: str, trials: int,
                   header: str = "plain") -> Any:
        """The owner replays its own source on the source's lane: most often usable."""
        source = self.model.runs[source_id]
        return self.replay(source.tenant, source_id, source.agent or RECORDER, variant, trials,
                           header)

    @precondition(lambda self: self.offer.recorded)
    @rule(target=evals, source_id=runs, other=runs, member=NAMED_TWICE)
    def name_twice(self, source_id: str, other: str, member: str) -> Any:
        """source-values (named-twice): the owner names the task twice, its usable source
        beside another tenant's run or an id of no run: refused, or taken as the usable
        run, whose recording alone is served (the replay's outcomes are judged against
        the model's, as every replay's are)."""
        source = self.model.runs[source_id]
        lane = source.agent or RECORDER
        found = [m for m in _class_data().named_twice if m.name == member]
        if not found:
            return multiple()
        chosen, theirs = found[0], self.model.runs[other]
        roles = {"usable": source_id, "unknown": classes.shifted(source_id),
                 "foreign": other if theirs.tenant != source.tenant else None}
        values = [roles[r] for r in chosen.roles]
        if self.model.usable(source.tenant, source_id, lane) is None or None in values:
            return multiple()
        self._drew("source-values", member)
        return self.replay(source.tenant, source_id, lane, "same", 1,
                           twice=(str(values[0]), str(values[1])))

    @precondition(lambda self: self.offer.recorded)
    @rule(target=evals, source_id=runs, caller=tenants, header=HEADERS)
    def replay_as_another_tenant(self, source_id: str, caller: str,
                                 header: str = "plain") -> Any:
        """Tenant isolation: another tenant names this source on the source's own lane."""
        source = self.model.runs[source_id]
        if caller == source.tenant:
            return multiple()
        return self.replay(caller, source_id, source.agent or RECORDER, "same", 1, header)

    @precondition(lambda self: self.offer.recorded)
    @rule(target=evals, source_id=runs, how=ARG_VARIANTS, which=st.integers(0, 7))
    def replay_varied(self, source_id: str, how: str, which: int) -> Any:
        """exact-args: the owner replays its source with one call's arguments changed by a
        variant exact matching tells apart: that call misses."""
        source = self.model.runs[source_id]
        script = source.script or []
        calls = [i for i, step in enumerate(script)
                 if step.get("call") == COUNTER and isinstance(step.get("args"), dict)]
        if not calls:
            return multiple()
        index = calls[which % len(calls)]
        varied = classes.vary(_op(_class_data().arg_variants, how), script[index]["args"])
        if varied is None:
            return multiple()
        self._drew("exact-args", how)
        changed = [*script[:index], {**script[index], "args": varied}, *script[index + 1:]]
        return self.replay(source.tenant, source_id, source.agent or RECORDER, "same", 1,
                           script=changed)

    @precondition(lambda self: self._seam(SEAM_ERASE) and self.offer.forks)
    @rule(eval_id=consumes(evals), mode=st.sampled_from(["replay", "branch"]))
    def erase_source_then_fork(self, eval_id: str, mode: str) -> None:
        """Security: once the source is erased, a fork of the eval run is refused."""
        for source_id in (self.model.runs[eval_id].fixture_runs or {}).values():
            self.erase(source_id)
        self.fork(eval_id, mode)

    @precondition(lambda self: self.inside is not None and self.offer.forks)
    @rule(eval_id=consumes(evals), mode=st.sampled_from(["replay", "branch"]))
    def delete_source_then_fork(self, eval_id: str, mode: str) -> None:
        """§E, in process: the source deleted outright, as a host that deletes runs would
        (v2 has no portable deletion, so over HTTP there is no such step): a fork of the
        eval run re-reads its copy, never the source."""
        assert self.inside is not None
        for source_id in (self.model.runs[eval_id].fixture_runs or {}).values():
            source = self.model.runs[source_id]
            self.inside.delete_run(source_id)
            source.held = False
            source.deleted = True
            self._count("delete")
            if self.narrate:
                note(f"the host deleted {source.tenant}'s {source_id}")
        self.fork(eval_id, mode)

    def _judge_eval(self, run: ModelRun, answers: list[Any]) -> None:
        session = self._session(run.tenant)
        events = session.events(run.id)
        self._settled.add(run.id)
        task = next(iter(run.fixture_runs or {}), TASK_ID)
        judged(judges.echo(req_id("0252.echo-verbatim"), events, run.fixture_runs or {}))
        judged(judges.scored_once(req_id("0252.miss-count-reported"), events))
        judged(judges.scored_miss_count(req_id("0252.fail-closed-miss"), events, task,
                                        run.expected_misses))
        judged(judges.scored_passed(req_id("0252.fail-closed-miss"), events, task,
                                    run.expected_passed))
        self._judge_wire(run, events, session)
        if run.agent is not None and judges.outcomes_on_wire(events, run.agent):
            returned = [e.get("payload") or {} for e in events
                        if e.get("type") == "agent.tool-returned"]
            got = [_norm(p.get("error"), True) if "error" in p else p.get("outcome")
                   for p in returned]
            want = [_norm(value, failed) for value, failed in answers]
            judged(judges.same_as(req_id("0252.source-replayed"), got, want,
                                  "the answers served are the recorded ones"))

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

    @precondition(lambda self: self.offer.recorded)
    @rule(caller=tenants)
    def refusals_told_apart(self, caller: str) -> None:
        """Security (refsim's SHOULD reading), as the uniformity rows judge it: another
        tenant's run and an id of no run, asked again and again interleaved, are told apart
        by nothing constant within each (`indistinguishable`) nor by how often a value
        shows (`frequencies_alike`); nor are their first asks, where each group has
        FIRST_ASKS of them."""
        kinds = self.kinds_seen.get((caller, "plain"), {})
        anchor = next((kinds[k] for k in ("unknown", "near-id", "spliced") if k in kinds), None)
        other = kinds.get("foreign")
        req = req_id("0252.source-uniform-body")
        rng = random.Random(f"{type(self).examples_run}:{caller}")
        if anchor is not None and other is not None:
            asks = [(anchor[0], anchor[1]), (other[0], other[1])]
            # What tells them apart at BODY_SAMPLES each is asked ALIKE_CONFIRM times more
            # before it counts (as the rows ask): a member order shuffled on every answer
            # is constant within four answers of each group one time in 128.
            found, groups, _ = asked_apart(req, asks, BODY_SAMPLES, rng)
            judged(found)
            if judges.uneven(groups):  # a value that recurs unevenly: ask enough to tell
                for _ in range(judges.FREQUENCY_SAMPLES):
                    for index in rng.sample((0, 1), 2):
                        groups[index][1].append(asks[index][1]())
                judged(judges.frequencies_alike(req, groups))
            self._count("refusal:told-apart")
        firsts = self.first_asks.get(caller, {})
        if all(len(firsts.get(g, ())) >= FIRST_ASKS for g in ("another tenant's run",
                                                               "an id of no run")):
            judged(judges.frequencies_alike(req, [
                (f"{g}, asked once", firsts[g]) for g in ("an id of no run",
                                                          "another tenant's run")]))
            self._count("refusal:first-asks")

    def _settle(self, run_id: str) -> None:
        """A host may answer before a run has finished, and a source still running is
        rightly refused (§C): its owner reads it until it settles before it is named or
        asked for (once: a run read until it settled stays so, until it is resolved)."""
        if run_id not in self._settled:
            self._session(self.model.runs[run_id].tenant).events(run_id)
            self._settled.add(run_id)

    def _drew(self, cls: str, member: str) -> None:
        type(self).drawn[f"{cls}: {member}"] += 1

    def _refuse_value(self, caller: str, value: Any, kind: str, header: str) -> None:
        """Name `value` as the source: a value that names no usable source is refused as
        every unusable source is (one that happens to be a run's id is replayed)."""
        suite, task, script, _, _ = self._suite(caller, [{"decide": "ok"}], source=False)
        if isinstance(value, str) and value in self.model.runs:
            return  # a member that is a run's id after all: not this class
        self._may_move([caller], script)
        minted = self.inside.run_count() if self.inside is not None else None
        r = self._create(caller, eval_body(suite, {task: value}), header)
        exact = _class_data().id_like(value)
        supplied = [value] if isinstance(value, str) else [
            v for v in (value if isinstance(value, list) else
                        value.values() if isinstance(value, dict) else ())
            if isinstance(v, str)]
        self._refused_unusable(caller, r, supplied, kind, lambda v: eval_body(suite, {task: v}),
                               header=header, exact=exact, minted=minted)

    @precondition(lambda self: self.offer.recorded)
    @rule(caller=tenants, member=SOURCE_VALUES, header=HEADERS)
    def refuse_value(self, caller: str, member: tuple[str, Any], header: str) -> None:
        """source-values: any JSON value that is no run's id, of every type and pattern."""
        name, value = member
        self._drew("source-values", name)
        self._drew("request-headers", header)
        kind = "unknown" if _class_data().id_like(value) else "undecodable"
        self._refuse_value(caller, value, kind, header)

    @precondition(lambda self: self.offer.recorded)
    @rule(run_id=runs, hows=st.lists(FROM_ID, min_size=1, max_size=4, unique=True),
          header=HEADERS, caller=st.one_of(st.none(), tenants))
    def refuse_derived(self, run_id: str, hows: list[str], header: str,
                       caller: str | None) -> None:
        """source-values: an id the caller has seen (its own, unless another tenant is
        drawn), turned into ones that name no run."""
        owner = caller or self.model.runs[run_id].tenant
        for how in hows:
            value = classes.derive(_op(_class_data().from_id, how), run_id)
            if value is None:
                continue
            self._drew("source-values", how)
            self._drew("request-headers", header)
            self._refuse_value(owner, value, "near-id", header)

    @precondition(lambda self: self.offer.recorded)
    @rule(first=runs, second=runs, at=st.integers(0, 64))
    def refuse_spliced(self, first: str, second: str, at: int) -> None:
        """source-values: two seen ids of different tenants spliced, asked by the tenant
        of the head: another tenant's parts next to the caller's."""
        if self.model.runs[first].tenant == self.model.runs[second].tenant:
            return
        caller = self.model.runs[first].tenant
        for op in _class_data().from_two_ids:
            value = classes.derive(op, first, second, at)
            if value is not None:
                self._drew("source-values", op.name)
                self._refuse_value(caller, value, "spliced", "plain")

    @precondition(lambda self: self.offer.recorded)
    @rule(caller=tenants, times=st.integers(1, 12))
    def ask_again(self, caller: str, times: int) -> None:
        """A refusal asked for again, many times: the same answer each time (a host that
        counts the asks, or caches, must not show it)."""
        kinds = self.kinds_seen.get((caller, "plain"), {})
        for kind, ask, first in list(kinds.values()):
            if kind == "unknown" and len(kinds) > 1:
                continue  # asked again beside the others below
            for _ in range(times):
                again = ask()
                judged(judges.refused_as(req_id("0252.source-refused"), again,
                                         f"an unusable source ({kind}), asked again"))
                if judges.signature(again, self._noise()) != judges.signature(
                        first, self._noise()):
                    anchor = next((e for k, e in kinds.items() if k != kind), None)
                    pairs = [(kind, ask), (anchor[0], anchor[1])] if anchor else [(kind, ask)]
                    firsts = [again, anchor[2]] if anchor else [again]
                    if anchor is not None:
                        found = alike(req_id("0252.source-uniform-body"), pairs, firsts,
                                      self._noise())
                        judged(attrs.evolve(found, message=f"asked again, the refusal of "
                                            f"{kind} now differs from {anchor[0]}'s: "
                                            f"{found.message}"))
            self._count("refusal:asked-again")

    @precondition(lambda self: self.offer.recorded)
    @rule(caller=tenants, source_id=runs,
          kind=st.sampled_from(["key-not-task", "suite-fixtures", "without-mode", "live-shadow",
                                "empty-map"]),
          how=st.one_of(st.none(), FROM_ID), key=st.one_of(TASK_KEYS, FROM_KEY))
    def refuse_fields(self, caller: str, source_id: str, kind: str, how: str | None = None,
                      key: tuple[str, Any] | str = ("value 'nope'", "nope")) -> None:
        """§B: each request rule refused with 400 validation_error, whatever source it
        names (a run of any tenant or an id near one: a §B refusal must not tell them
        apart), and for a key, any key that is not a taskId (task-keys)."""
        needs = {"suite-fixtures": SUITE_FIXTURES_SUITE, "without-mode": NOOP,
                 "live-shadow": TWO_TASKS_SUITE, "empty-map": TWO_TASKS_SUITE}
        if kind in needs and not self.offer.fixture(needs[kind]):
            return  # the host does not list the fixture this refusal names
        value: Any = source_id
        if how is not None:
            value = classes.derive(_op(_class_data().from_id, how), source_id) or source_id
        if kind == "key-not-task":
            suite, task, script, _, _ = self._suite(caller, [{"decide": "ok"}], source=False)
            self._may_move([caller], script)
            if isinstance(key, tuple):
                name, bad = key
            else:
                name, bad = key, classes.derive(_op(_class_data().from_key, key), task)
            if not isinstance(bad, str) or bad == task:
                return
            self._drew("task-keys", name)

            def body_of(v: Any) -> Any:
                return eval_body(suite, {bad: v})
        elif kind == "live-shadow":
            # Through evalModes where the host takes it (RFC 0251), else the suite's modes.
            modes: dict[str, Any] = ({"evalModes": ["golden", "live-shadow"]}
                if self.offer.surface.advertises("baselineSelection") else {})

            def body_of(v: Any) -> Any:
                return eval_body(TWO_TASKS_SUITE, {"alpha": v}, **modes)
        else:
            def body_of(v: Any) -> Any:
                return {"suite-fixtures": eval_body(SUITE_FIXTURES_SUITE, {"canned": v}),
                        "without-mode": {"workflowId": NOOP, "fixtureRuns": {TASK_ID: v}},
                        "empty-map": eval_body(TWO_TASKS_SUITE, {})}[kind]
        if kind in needs:  # a host that ran the refused suite anyway moved its counters
            self._may_move([caller, self.model.runs[source_id].tenant],
                           suite_script(needs[kind]))
        r = self._create(caller, body_of(value))
        requirement = {"live-shadow": req_id("0252.live-shadow-refused"),
                       "empty-map": req_id("0252.empty-map-refused"),
                       "suite-fixtures": req_id("0252.suite-fixtures-refused"),
                       }.get(kind, req_id("0252.fields-refused"))
        judged(judges.refused_as(requirement, r, kind))
        self._count("refusal:" + kind)
        if kind == "empty-map":
            return
        # One §B refusal whatever the source it names: the first one for this caller and
        # rule is the anchor; one that reads otherwise is asked again beside it.
        named = self._source_kind(caller, value)
        # All else held equal: a refusal may name the bad key, so each key is its own group.
        held = kind if kind != "key-not-task" else f"{kind} {bad!r}"
        groups = self.field_refusals.setdefault((caller, held), {})
        signature = judges.signature(r, self._noise())
        if signature not in groups and groups:
            first_named, first_ask, first = next(iter(groups.values()))
            found = alike(req_id("0252.source-uniform-body"),
                          [(f"{kind} naming {first_named}", first_ask),
                           (f"{kind} naming {named}", lambda: self._create(caller,
                                                                           body_of(value)))],
                          [first, r], self._noise())
            if not found.ok:
                self.oracles.append(found)
            judged(found)
        groups.setdefault(signature, (named, lambda: self._create(caller, body_of(value)), r))

    def _source_kind(self, caller: str, value: Any) -> str:
        run = self.model.runs.get(value) if isinstance(value, str) else None
        if run is None:
            return "an id of no run"
        return "the caller's run" if run.tenant == caller else "another tenant's run"

    # -- maps of several keys

    @precondition(lambda self: self.offer.recorded and self._seam(SEAM_SUITES))
    @rule(first=runs, second=runs,
          shape=st.sampled_from(["both", "one-named", "near-key", "conflict"]),
          reverse=st.booleans(), key=st.one_of(TASK_KEYS, FROM_KEY))
    def replay_map(self, first: str, second: str, shape: str, reverse: bool,
                   key: tuple[str, Any] | str) -> None:
        """§B with a map of two keys, in either order, from the first source's owner: both
        tasks named (each from its own source: any unusable one refuses the whole request,
        as every unusable source is refused), one named and the other live, a second key
        that is no taskId (task-keys), or a second task with suite fixtures. Every key and
        every source is judged, not the first alone; and only a named task is served."""
        caller = self.model.runs[first].tenant
        lane = RECORDER
        script_a = list(self.model.runs[first].script or [{"decide": "ok"}])
        script_b = (list(self.model.runs[second].script or [{"decide": "ok"}])
                    if shape != "one-named" else
                    [{"call": COUNTER, "args": {"op": "inc", "key": "k2"}}, {"decide": "ok"}])
        expected = {"kind": "golden", "match": {"strategy": "exact", "value": "ok"}}
        task_b: dict[str, Any] = {"taskId": "beta", "input": {"script": script_b},
                                  "expected": expected}
        if shape == "conflict":
            task_b["fixtures"] = {"toolResponses": [], "onMiss": "live"}
        tasks = [{"taskId": "alpha", "input": {"script": script_a}, "expected": expected},
                 task_b]
        digest = hashlib.sha256(canonical(tasks).encode()).hexdigest()[:12]
        suite_id = f"refsim.machine.evals.map-{digest}"
        doc = {"suiteId": suite_id, "version": "1.0.0",
               "modes": ["golden"], "trials": 1, "tasks": tasks}
        if not self._register(caller, doc):
            return
        second_key: Any = "beta"
        if shape == "near-key":
            if isinstance(key, tuple):
                name, second_key = key
            else:
                name, second_key = key, classes.derive(_op(_class_data().from_key, key), "beta")
            if not isinstance(second_key, str) or second_key in ("alpha", "beta"):
                return
            self._drew("task-keys", name)
        pairs: list[tuple[str, str]] = [("alpha", first)]
        if shape != "one-named":
            pairs.append((second_key, second))
        if reverse:
            pairs.reverse()
        named = dict(pairs)

        for source_id in named.values():
            self._settle(source_id)

        def body_of(replace: str | None = None, value: Any = None) -> Any:
            return eval_body(suite_id, {k: (value if k == replace else v)
                                              for k, v in named.items()}, agent_id=lane)
        self._may_move([caller], script_a + script_b)
        self._may_move([self.model.runs[second].tenant], script_b)
        minted = self.inside.run_count() if self.inside is not None else None
        r = self._create(caller, body_of())
        self._count("map:" + shape)
        if shape in ("near-key", "conflict"):
            requirement = req_id("0252.fields-refused" if shape == "near-key"
                                 else "0252.suite-fixtures-refused")
            judged(judges.refused_as(requirement, r, f"a map of two keys ({shape}, "
                                     f"{'second' if not reverse else 'first'} key at fault)"))
            return
        unusable = [(k, v) for k, v in named.items()
                    if self.model.usable(caller, v, lane) is None]
        if unusable:
            bad_key, bad_id = unusable[0]
            self._refused_unusable(caller, r, [bad_id],
                                   self.model.unusable_kind(caller, bad_id, lane),
                                   lambda v: body_of(bad_key, v), minted=minted)
            return
        judged(judges.created(req_id("0252.usable-source-accepted"), r,
                              f"a map of two usable sources ({shape})"))
        run_id = str(r.json["runId"])
        derived = {k: self.model.derive(self.model.usable(caller, v, lane) or
                                        self.model.runs[v], lane) for k, v in named.items()}
        run = self._record(ModelRun(run_id, caller, "eval-map", lane, True, fixture_runs=named,
                                    derived=derived, script=script_a,
                                    content_from=set(named.values())))
        misses: dict[str, int] = {}
        for task_id, script in (("alpha", script_a), ("beta", script_b)):
            if task_id in named:
                misses[task_id], _, _ = self.model.run_replay(lane, script, derived[task_id], 1,
                                                              run.calls, run.invoked)
            else:
                self.model.run_live(caller, lane, script, run.calls, run.invoked)
                misses[task_id] = 0
        events = self._session(caller).events(run_id)
        self._settled.add(run_id)
        judged(judges.echo(req_id("0252.echo-verbatim"), events, named))
        for task_id, count in misses.items():
            if task_id not in named:
                continue  # a task without fixtures need not report misses at all
            judged(judges.scored_miss_count(req_id("0252.fail-closed-miss"), events, task_id,
                                            count))
        if self.narrate:
            note(f"{caller} ran {run_id} with {named} ({shape}): misses {misses}")

    # -- other tenants on the owner's routes (owner-routes)

    @precondition(lambda self: self.offer.recorded and len(self.keys) > 1
                  and self.offer.surface.family("runList"))
    @rule(run_id=st.one_of(evals, runs), caller=tenants, listing=LISTINGS)
    def foreign_listing(self, run_id: str, caller: str, listing: str) -> None:
        """owner-routes: another tenant lists runs, filtered by the run's own workflowId or
        status or not at all: the listing answers, and never shows the owner's run (its id:
        the caller's own runs may hold like content)."""
        run = self.model.runs[run_id]
        chosen = [m for m in _class_data().listings if m.name == listing]
        if caller == run.tenant or run.deleted or not chosen:
            return
        self._settle(run_id)
        owned = self._checked(run.tenant, self._session(run.tenant).get_run(run_id)).json
        if not isinstance(owned, dict):
            return
        path = classes.listed(chosen[0], owned)
        self._drew("owner-routes", listing)
        r = self._checked(caller, self._session(caller).request("GET", path))
        judged(judges.nothing_of_run(req_id("0252.tenant-isolation"), r, run_id, [],
                                     f"{caller} lists runs ({listing}, {r.status}) beside "
                                     f"{run.tenant}'s run {run_id}"))

    def _ask_route(self, label: str, session: Session, run: ModelRun, chosen: classes.Route,
                   spelling: str, who: str) -> None:
        """`session` (another owner than the run's) asks the route under the spelling:
        refused with a registered code, nothing of the run in the answer, and the same
        status and code as for an id of the same shape that names no run."""
        data = _class_data()
        run_id, route = run.id, chosen.name
        path = classes.spelt(chosen, run_id, _op(data.spellings, spelling))
        body = chosen.body if chosen.body is not None else NO_BODY
        headers = dict(chosen.headers) or None
        r = self._checked(label, session.request(chosen.method, path, json=body,
                                                 headers=headers))
        what = f"{who}: {route}, the id {spelling}"
        for finding in judges.refused_registered(req_id("0252.tenant-isolation"), r, what):
            judged(finding)
        content = [v for c in run.calls for v in (c.args, c.outcome, c.error)
                   if isinstance(v, dict | list) and v]
        judged(judges.nothing_of_run(req_id("0252.tenant-isolation"), r, run_id, content, what))
        # Another owner's run reads as no run on this route too: the same route asked for
        # an id of the same shape that names no run gets the same status and code.
        control = classes.shifted(run_id)
        if control != run_id and control not in self.model.runs:
            asked = self._checked(label, session.request(
                chosen.method, classes.spelt(chosen, control, _op(data.spellings, spelling)),
                json=body, headers=headers))
            if judges.undecodable(asked) and not judges.undecodable(r):
                return  # the host reads the made-up id as no id at all (a checksum, say)
            judged(judges.uniform(req_id("0252.tenant-isolation"),
                                  [(f"{route} of {run.tenant}'s run", r),
                                   (f"{route} of an id of no run", asked)], exact=False))

    def _workspace_session(self, tenant: str) -> Session | None:
        """A key of `tenant` scoped to a workspace, minted once through the seam tenants
        (None where the host mints none): another owner triple of the same tenant."""
        if tenant not in self._workspaces:
            fresh = f"hk_ws_{tenant}_{self._fresh()}"
            r = self._checked(tenant, self._session(tenant).add_tenant(
                tenant, fresh, workspace="refsim-ws"))
            self._workspaces[tenant] = fresh if 200 <= r.status < 300 else None
        key = self._workspaces[tenant]
        return None if key is None else Session(self.client, key)

    def _refused_to_workspace(self, tenant: str, run_id: str, lane: str) -> Session | None:
        """The session of a key of `tenant` scoped to a workspace, where the host refuses it
        the tenant's usable run `run_id` as a source (it is another owner triple there);
        None where the host mints no such key, or takes the run (it reads it)."""
        if (lane != RECORDER or not self._seam(SEAM_TENANTS) or not self.offer.fixture(REPLAY)
                or self.model.usable(tenant, run_id, RECORDER) is None):
            return None
        session = self._workspace_session(tenant)
        if session is None:
            return None
        self._settle(run_id)
        asked = self._checked(tenant, session.create(eval_body(REPLAY, {"record": run_id})))
        return None if asked.status == 201 else session

    def _reused_by_workspace(self, owner: str, source_id: str, lane: str, run_id: str,
                             body: Any, key: dict[str, str]) -> None:
        """A key of the owner's tenant scoped to another workspace, refused the owner's
        source, sends the owner's body under the owner's Idempotency-Key: it is not
        answered with the owner's run."""
        session = self._refused_to_workspace(owner, source_id, lane)
        if session is None:
            return
        again = self._checked(owner, session.request("POST", "/runs", json=body, headers=key))
        judged(judges.nothing_of_run(req_id("0252.tenant-isolation"), again, run_id, [],
                                     f"a key of {owner} scoped to another workspace, under "
                                     "the owner's Idempotency-Key and body"))

    @precondition(lambda self: self.offer.recorded and self._seam(SEAM_TENANTS)
                  and self.offer.fixture(REPLAY))
    @rule(run_id=runs, route=ROUTES, spelling=SPELLINGS)
    def workspace_route(self, run_id: str, route: str, spelling: str) -> None:
        """owner-routes, within one tenant: a key of the run's tenant scoped to a workspace
        names the run (the owner's tenant-wide source) in an eval. Where the host refuses it
        that source (it cannot read it: another owner triple), the key asks the route and is
        answered as another tenant is; where the host takes it, it reads the run, and
        nothing is asked (the run it made is one of the owner's tenant)."""
        run = self.model.runs[run_id]
        data = _class_data()
        found = [r for r in data.routes if r.name == route]
        if (run.deleted or not found
                or (found[0].needs == "replay" and not self.offer.forks)
                or (found[0].needs == "seam:erase" and not self._seam(SEAM_ERASE))):
            return
        session = self._refused_to_workspace(run.tenant, run_id, run.agent or RECORDER)
        if session is None:
            return  # no such key here, or it reads its tenant's run: no other owner
        self._drew("owner-routes", f"{route} ({spelling}), another workspace")
        self._ask_route(run.tenant, session, run, found[0], spelling,
                        f"a key of {run.tenant} scoped to another workspace asks its run "
                        f"{run_id}")
        self._count("owner-route:workspace")

    @precondition(lambda self: self.offer.recorded and len(self.keys) > 1)
    @rule(run_id=st.one_of(evals, runs), caller=tenants, route=ROUTES, spelling=SPELLINGS)
    def foreign_route(self, run_id: str, caller: str, route: str, spelling: str) -> None:
        """owner-routes: another tenant asks a route that carries the run's owner, under a
        spelling of its id: refused with a registered code, nothing of the run in the
        answer (and the run as it was: a later step that reads it would tell)."""
        run = self.model.runs[run_id]
        if caller == run.tenant or run.deleted:
            return
        data = _class_data()
        (chosen,) = [r for r in data.routes if r.name == route]
        if chosen.needs == "replay" and not self.offer.forks:
            return
        if chosen.needs == "seam:erase" and not self._seam(SEAM_ERASE):
            return
        self._settle(run_id)
        self._drew("owner-routes", f"{route} ({spelling})")
        self._ask_route(caller, self._session(caller), run, chosen, spelling,
                        f"{caller} asks {run.tenant}'s run {run_id}")
        self._count("owner-route:" + route)

    @precondition(lambda self: self.offer.recorded)
    @rule(target=evals, source_id=runs, other=runs, how=IDEMPOTENT, caller=tenants)
    def idempotent_create(self, source_id: str, other: str, how: str, caller: str) -> Any:
        """owner-routes: a create under the owner's Idempotency-Key, asked again by another
        tenant with the owner's body, or by the owner with another source: never answered
        with the owner's run (a host may refuse the key's reuse, or judge the body as new)."""
        source = self.model.runs[source_id]
        owner = source.tenant
        spec = next(m for m in _class_data().idempotent if m["name"] == how)
        lane = source.agent or RECORDER
        if self.model.usable(owner, source_id, lane) is None:
            return multiple()
        suite, task, script, _, _ = self._suite(owner, source.script or [{"decide": "ok"}],
                                                source=False)
        key = {"Idempotency-Key": f"refsim-machine-{self._fresh()}"}
        body = eval_body(suite, {task: source_id}, agent_id=lane)
        self._drew("owner-routes", how)
        # The first create is a replay like any other: judged and modelled as one.
        run_id = self.replay(owner, source_id, lane, "same", 1, fixed=key)
        if not isinstance(run_id, str):
            return multiple()
        if spec["who"] == "another-workspace":
            self._reused_by_workspace(owner, source_id, lane, run_id, body, key)
        elif spec["who"] == "another-tenant":
            if caller == owner:
                return run_id
            self._suite(caller, source.script or [{"decide": "ok"}], source=False)
            self._may_move([caller], script)
            again = self._checked(caller, self._session(caller).request(
                "POST", "/runs", json=body, headers=key))
            self._refused_unusable(caller, again, [source_id], "foreign",
                                   lambda v: eval_body(suite, {task: v}, agent_id=lane),
                                   header="idempotency-key")
        else:
            value: Any = other if spec["body"] == "other-source" else None
            if value is not None and (value == source_id
                                      or self.model.usable(owner, value, lane) is not None):
                return run_id  # a usable other source may rightly run: not this case
            changed = (eval_body(suite, {task: value}, agent_id=lane) if value is not None
                       else eval_body(suite, agent_id=lane))
            self._may_move([owner], script)
            again = self._checked(owner, self._session(owner).request(
                "POST", "/runs", json=changed, headers=key))
            same_run = (isinstance(again.json, dict) and again.json.get("runId") == run_id)
            answered = f"with the first run {run_id}" if same_run else "apart"
            judged(judges.done(req_id("0252.source-refused"), not same_run,
                               f"the owner's Idempotency-Key with another body ({how}) is "
                               f"answered {answered}"))
            if value is None and again.status == 201 and isinstance(again.json, dict):
                new = self._record(ModelRun(str(again.json["runId"]), owner, "eval", lane, True,
                                            script=script))
                self.model.run_live(owner, lane, script, new.calls, new.invoked)
            elif value is not None:
                judged(judges.refused_registered_any(
                    req_id("0252.source-refused"), again,
                    f"the owner's Idempotency-Key with an unusable source ({how})"))
        self._count("idempotent:" + how)
        return run_id

    # -- erasure and forks

    @precondition(lambda self: self._seam(SEAM_ERASE))
    @rule(run_id=runs)
    def erase(self, run_id: str) -> None:
        run = self.model.runs[run_id]
        if run.deleted:
            return  # the host took it away: nothing is left to erase
        r = self._checked(run.tenant, self._session(run.tenant).erase(run_id))
        if r.status in (404, 405, 501):  # listed, but no seam answers there: nothing erased
            self._broke(SEAM_ERASE, r)
            return
        judged(judges.answered(req_id("0252.copy-erased-with-source"), r, 200, "erasing"))
        run.erased = True
        for other in self.model.runs.values():
            if run_id in other.content_from:
                other.erased = True  # it holds the erased content too
        self._count("erase")
        if self.narrate:
            note(f"{run.tenant} erased {run_id}")
        # The erasure's own effect is judged at the erasure, before any later step of the
        # same rule (a fork) can fail for it first: the failure names the right rule.
        self.erasure_reaches_copies()

    @precondition(lambda self: self.offer.forks)
    @rule(target=runs, eval_id=consumes(evals), mode=st.sampled_from(["replay", "branch"]))
    def fork(self, eval_id: str, mode: str) -> Any:
        run = self.model.runs[eval_id]
        gone = any(self.model.runs[s].erased for s in (run.fixture_runs or {}).values())
        before = self.inside.resolved_and_derived() if self.inside else None
        self._may_move([run.tenant, *(self.model.runs[s].tenant
                                      for s in (run.fixture_runs or {}).values())], run.script)
        r = self._checked(run.tenant, self._session(run.tenant).fork(eval_id, mode))
        if self.inside is not None:
            judged(judges.unchanged(req_id("0252.fork-no-reresolve"), before,
                                    self.inside.resolved_and_derived(),
                                    "what a fork resolved and derived from its sources"))
        if gone:
            judged(judges.refused_registered_any(req_id("0252.gone-copy-refused"), r,
                                                 f"a {mode} fork whose copy is gone"))
            self._count("fork:gone")
            return multiple()
        judged(judges.created(req_id("0252.fork-no-reresolve"), r, f"a {mode} fork"))
        fork_id = str(r.json["runId"])
        child = self._record(ModelRun(fork_id, run.tenant, "fork-" + mode, run.agent, True,
                                      fixture_runs=run.fixture_runs, derived=run.derived,
                                      script=run.script, trials=run.trials,
                                      content_from=set(run.content_from)))
        child.expected_misses, child.expected_passed = run.expected_misses, run.expected_passed
        if mode == "replay":
            child.held = False
            child.invoked = set(run.invoked)
        else:
            assert run.agent is not None
            (entries,) = run.derived.values()
            _, _, answers = self.model.run_replay(run.agent, run.script, entries,
                                                  run.trials, child.calls, child.invoked)
            self._judge_eval(child, answers)
        self._count("fork:ok")
        if self.narrate:
            note(f"{run.tenant} forked {eval_id} ({mode}) as {fork_id}")
        return fork_id

    # -- after every step

    # The checks after every step, run by one invariant: Hypothesis pays its own overhead
    # per invariant and step (a verbosity comparison, a timing), so three would cost thrice.
    # In the order Hypothesis ran them as three (by name): where two fail after one step,
    # the same one is reported.
    AFTER_EVERY_STEP: ClassVar[tuple[str, ...]] = ("erasure_reaches_copies",
                                                   "live_state_agrees",
                                                   "refusals_uniform")

    # -- the example table's rows, as programs of the machine

    def row_apart(self, example: Example) -> str | None:
        """Why the example row cannot run on this machine's host (None when it can): the
        row pins a profile of the built-in host, or, over HTTP, needs the simulator's
        inside; the host advertises what the row needs withheld, or not what it requires;
        or the row names a tenant the machine has no key for."""
        if not self.offer.recorded and not example.every_host:
            return "the host does not advertise recordedFixtures"
        if example.profile is not None:
            return (f"it runs on the {example.profile!r} profile of the built-in host, not "
                    "on the host under test")
        if self.inside is None:
            why = example.needs_inside()
            if why is not None:
                return why
        surface = self.offer.surface
        against = example.advertised_against(surface)
        if against:
            return f"the host advertises {', '.join(against)}; the row judges a host without"
        unmet = example.unmet(surface)
        if unmet:
            return f"the host does not advertise {', '.join(unmet)}"
        missing = example.tenants_missing(self.keys)
        if missing:
            return "no API key for tenant " + ", ".join(missing)
        return None

    def example_step(self, row: str) -> None:
        """The next step of the example row `row` (specs/examples/): its action sent to this
        machine's host, its expectations judged as `refsim check` judges them, then the
        machine's invariants (isolation and registered codes on every answer it got, every
        channel of an eval with fixtureRuns it made, the live counters).
        The model takes in what the step made and moved: the row's runs, so that no other
        tenant is shown their ids, and the row's counters, which its own expectations
        judge. The first call starts the row, the call after its last step starts it again.
        A program-only rule (`refsim.testing.programs.table`): not drawn at random, where
        each of its steps would cost an eval's worth of requests."""
        example = example_rows()[row]
        why = self.row_apart(example)
        if why is not None:
            type(self).rows_apart[row] = why
            return
        if row not in self._rows:
            tag = nonce() if self.inside is None else f"m{self._fresh()}"
            self._rows[row] = (RowRun(example, _Watched(self.client), self.inside,
                                      dict(self.keys), tag=tag), 0)
        run, index = self._rows[row]
        watched = cast(_Watched, run.host)
        watched.seen.clear()
        try:
            if index == 0:
                for fixture in sorted(example.fixtures()):
                    run.session("acme").require_fixture(fixture)
            found, go_on = run.step(index)
        except Unobservable as exc:
            del self._rows[row]
            type(self).rows_apart[row] = exc.reason
            self._take_in_row(run, watched.seen)
            return
        for finding in found:
            judged(finding)
        self._take_in_row(run, watched.seen)
        self._count("example:step")
        if go_on and index + 1 < run.length:
            self._rows[row] = (run, index + 1)
            return
        del self._rows[row]
        if go_on:
            type(self).rows_run[row] += 1

    def _take_in_row(self, run: RowRun, seen: list[_Sent]) -> None:
        """What a step of an example row made and moved, taken into the model and judged
        by the machine's invariants (see `example_step`)."""
        tenant_of_key = {key: label for label, key in self.keys.items()}
        for name, run_id in run.runs.items():
            owner = run.owners.get(name)
            if owner in self.keys and run_id not in self.model.runs:
                self._record(ModelRun(run_id, owner, "example", None, terminal=True))
        for sent in seen:
            caller = tenant_of_key.get(sent.api_key or "")
            if caller is None:
                type(self).requests_made += 1
                continue
            self._checked(caller, sent.response)
        for sent in seen:
            caller = tenant_of_key.get(sent.api_key or "")
            body = sent.body
            if (caller is None or sent.method != "POST" or sent.path != "/runs"
                    or not isinstance(body, dict)
                    or not isinstance(body.get("fixtureRuns"), dict)):
                continue
            r = sent.response
            if r.status == 201 and isinstance(r.json, dict) and isinstance(
                    r.json.get("runId"), str) and body.get("mode") is not None:
                eval_id = str(r.json["runId"])
                self._record(ModelRun(eval_id, caller, "example", None, terminal=True,
                                      fixture_runs=dict(body["fixtureRuns"])))
                session = self._session(caller)
                self._judge_wire(self.model.runs[eval_id], session.events(eval_id), session,
                                 modelled=False)
        keys = run.example.live_keys()
        if not keys:
            return
        if self._same_names and self.inside is not None and self.inside.counter_seam():
            for (tenant, key), count in self.inside.live_counters().items():
                if key in keys:
                    self.model.world.counters[(tenant, key)] = count
        watched = sorted(keys.intersection(WATCHED_KEYS))
        self._movable.update(watched)
        for tenant in self.keys:
            for key, got in self._readings(tenant, watched) if watched else ():
                if got is not None:
                    self.model.world.counters[(tenant, key)] = got
                    self._known.setdefault(tenant, {})[key] = got

    @invariant()
    def after_every_step(self) -> None:
        type(self).steps_taken += 1
        for name in self.AFTER_EVERY_STEP:
            getattr(self, name)()
        self._step += 1  # the exchanges from here on are the next step's (the evidence)
        mark(f"step {self._step}")

    def live_state_agrees(self, every: bool = False
                          ) -> dict[str, list[tuple[str, int | None]]]:
        """Fail-closed: only live runs moved the counter, exactly as the model did. After a
        step, the counters it may have moved (`_may_move`); with `every`, every tenant's
        counters any step of the example may have moved; wherever the reading costs no
        request (in process), every watched counter of every tenant. Returns what it read,
        by tenant."""
        world = self.model.world
        moved, self._moved = self._moved, set()
        read: dict[str, list[tuple[str, int | None]]] = {}
        if (self._same_names and self.inside is not None and self.inside.counter_seam()
                and self.inside.live_counters() == world.counters):
            return read  # every counter of every tenant agrees, the watched ones among them
        for tenant in self.keys:
            if self._gateway_owner(tenant) is not None:  # free to read: all of them
                names: Iterable[str] = WATCHED_KEYS
            elif every:
                names = sorted(self._movable)
            else:
                names = sorted(name for owner, name in moved if owner == tenant)
            read[tenant] = self._readings(tenant, names) if names else []
            for name, got in read[tenant]:
                if got is None:
                    continue
                judged(judges.count_is(req_id("0252.fail-closed-miss"), got,
                                       world.counter_value(tenant, name),
                                       f"{tenant}'s live counter {name}, as the model counts"))
        return read

    def erasure_reaches_copies(self) -> None:
        if self.inside is None:
            return
        for run in self.model.runs.values():
            if run.erased:
                judged(judges.count_is(req_id("0252.copy-erased-with-source"),
                                       self.inside.copy_count(run.id), 0,
                                       f"derived copies of erased {run.id} still stored"))

    def teardown(self) -> None:
        """The example's final check, where no step failed: every tenant's counters that any
        step may have moved, where a step moved one of a tenant it did not run for. Then let
        the host and the model go with the example. Hypothesis's rule strategy and the
        machine refer to each other, so a machine is freed only when a collection finds
        that cycle; until then it kept its host alive, every run and event of the example,
        which the collections on the way (the full ones included, once they had aged that
        far) walked again and again."""
        try:
            if sys.exc_info()[0] is None and "model" in self.__dict__:
                read = self.live_state_agrees(every=True)
                if set(read) == set(self._known) == set(self.keys):
                    # the next example on this host starts from what this one knew
                    for tenant, readings in read.items():
                        self._known[tenant].update(readings)
                    self._memory.counters = self._known
        finally:
            for name in ("client", "inside", "model", "refusals", "registered", "_needles",
                         "oracles", "_memory"):
                self.__dict__.pop(name, None)
            super().teardown()

    def refusals_uniform(self) -> None:
        if self.oracles:  # a difference found at a step, found again after every step
            judged(self.oracles[0])


@attrs.frozen
class _Sent:
    """One request an example row's step sent, and its answer."""

    method: str
    path: str
    api_key: str | None
    body: Any
    response: Response


@attrs.define(eq=False)  # compared by identity: a client, as its discovery is remembered
class _Watched:
    """The machine's host as an example row drives it: every request and answer kept, so
    that the machine's invariants judge them after the step."""

    client: HostClient
    seen: list[_Sent] = attrs.Factory(list)

    def __attrs_post_init__(self) -> None:
        # The host's discovery as its client read it: over HTTP one host answers every
        # example, and each example's rows would otherwise each ask it again.
        share_surface(self, self.client)

    @property
    def name(self) -> str:
        return self.client.name

    @property
    def host(self) -> Any:  # the in-process host, where there is one (`inspector_of`)
        return getattr(self.client, "host", self.client)

    def request(self, method: str, path: str, *, api_key: str | None = None,
                json: Any = NO_BODY, headers: dict[str, str] | None = None) -> Response:
        r = self.client.request(method, path, api_key=api_key, json=json, headers=headers)
        self.seen.append(_Sent(method, path, api_key, None if json is NO_BODY else json, r))
        return r


_TABLE: dict[str, Example] = {}


def example_rows() -> dict[str, Example]:
    """The example rows of specs/examples/, by id (loaded once)."""
    if not _TABLE:
        _TABLE.update((e.id, e) for e in load_examples())
    return _TABLE


def attr_tuple(entry: Entry) -> list[Any]:
    return [entry.tool, entry.args, entry.response, entry.is_error]


def _rid(run_id: str) -> RunId:
    """The simulator's id of a run it created (the bound form always parses there)."""
    parsed = parse_bound(run_id)
    assert parsed is not None, f"not a bound run id: {run_id!r}"
    return parsed


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


def machine_for(factory: Callable[[], HostClient], *, extended: bool = True,
                keys: dict[str, str] | None = None,
                name: str = "RecordedFixturesMachine") -> type[RecordedFixturesMachine]:
    """A machine class over hosts from `factory` (a fresh host per example, or one
    long-lived host over HTTP); `keys` maps tenant labels to API keys."""
    settle_constants()
    return type(name, (RecordedFixturesMachine,), {
        "client_factory": staticmethod(factory), "extended": extended,
        "tenant_keys": dict(keys or TENANTS), "offered": None, "noise": None, "broken": set(),
        "branches": collections.Counter(), "drawn": collections.Counter(),
        "programs_run": collections.Counter(), "judged_counts": collections.Counter(),
        "rows_run": collections.Counter(), "rows_apart": {}, "requests_made": 0,
        "run_nonce": nonce(),
        "http_sent": 0, "steps_taken": 0,
        "examples_run": 0, "kept": None})


def machine_test(machine: type[RuleBasedStateMachine],
                 config: Any) -> Callable[[], None]:
    """Hypothesis's test function for a machine class under `config` (a `settings`):
    `get_state_machine_test`, typed (some Hypothesis releases leave it unannotated)."""
    make = cast(Callable[..., Callable[[], None]], get_state_machine_test)
    return make(machine, settings=config)


def machine_parts(machine: type[RuleBasedStateMachine]) -> Any:
    """The rules, invariants and bundles Hypothesis reads off a machine class."""
    return cast(Any, machine).setup_state()


def unreached(branches: collections.Counter[str]) -> list[str]:
    return [b for b in CRITICAL if branches[b] == 0]


__all__ = ["CRITICAL", "RecordedFixturesMachine", "RequirementViolated", "focused_on",
           "machine_for", "machine_parts", "machine_test", "settle_constants", "unreached"]
