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
    invariant,
    multiple,
    precondition,
    rule,
)

from refsim import catalog
from refsim.check import judges
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
    alike,
    eval_body,
    inspector_of,
    noise_of_host,
    run_path,
    surface_of,
)
from refsim.check.observe import KEYS as TENANT_KEYS
from refsim.domain.agents import CONTENT_FREE, RECORDER, UNHELD
from refsim.domain.canonical import canonical
from refsim.domain.ids import RunId, parse_bound
from refsim.domain.tools import VAULT, vault_credential
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
from refsim.wire.client import HostClient
from refsim.wire.response import Response

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

    def __init__(self, requirement_id: str, message: str) -> None:
        super().__init__(f"[{requirement_id}] {message}")
        self.requirement_id = requirement_id


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


def expect(condition: bool, requirement_id: str, message: str) -> None:
    if not condition:
        focus = _FOCUS.get()
        if focus is not None and requirement_id != focus:
            reject()
        raise RequirementViolated(requirement_id, message)


def judged(finding: Finding) -> None:
    """The machine's verdicts are the checker's judges' (`refsim.check.judges`): a failed
    finding fails the step."""
    if not finding.ok:
        expect(False, finding.requirement_id, finding.message)


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
    requests_made: ClassVar[int] = 0
    # Over HTTP, every request the run sent (set by `refsim.testing.fuzz.run_machine`).
    http_sent: ClassVar[int] = 0
    steps_taken: ClassVar[int] = 0
    examples_run: ClassVar[int] = 0
    # What the long-lived host over HTTP keeps from one example to the next.
    kept: ClassVar[HostMemory | None] = None

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
        self.refusals: dict[str, dict[Any, tuple[str, Callable[[], Response], Response]]] = {}
        self.oracles: list[Finding] = []
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
        task: dict[str, Any] = {"taskId": "t", "input": {"script": script},
                                "expected": {"kind": "golden",
                                             "match": {"strategy": "exact", "value": "ok"}}}
        if source:
            task["fixtures"] = {"toolResponses": [], "onMiss": "live"}
        digest = hashlib.sha256(canonical([script, source, trials]).encode()).hexdigest()[:12]
        suite_id = f"refsim.machine.evals.{'src' if source else 'rep'}-{digest}"
        if (tenant, suite_id) not in self.registered:
            doc = {"suiteId": suite_id, "version": "1.0.0", "modes": ["golden"], "trials": trials,
                   "tasks": [task]}
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
                    return self._suite(tenant, script, source=source, trials=trials,
                                       drift=drift)
                judged(judges.created(req_id("0252.usable-source-accepted"), r,
                                      "the suite seam, given a suite"))
            self.registered.add((tenant, suite_id))
        return suite_id, "t", script, trials, "ok"

    def _created_id(self, tenant: str, r: Response, what: str) -> str:
        self._checked(tenant, r)
        judged(judges.created(req_id("0252.usable-source-accepted"), r, what))
        return str(r.json["runId"])

    def _record(self, run: ModelRun) -> ModelRun:
        self.model.runs[run.id] = run
        return run

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
    @rule(target=runs, tenant=tenants, lane=st.sampled_from(LANES), script=COUNTER_SCRIPTS)
    def record_eval_source(self, tenant: str, lane: str, script: list[Any]) -> str:
        lane = self._lane(lane)
        suite, _, script, _, _ = self._suite(tenant, script, source=True)
        self._may_move([tenant], script)
        r = self._session(tenant).create(eval_body(suite, agent_id=lane))
        return self._recorded_source(tenant, "eval", lane, script, r)

    @precondition(lambda self: self.offer.fixture(AGENT_CALL))
    @rule(target=runs, tenant=tenants, lane=st.sampled_from(LANES), script=ANY_SCRIPTS)
    def record_workflow_source(self, tenant: str, lane: str, script: list[Any]) -> str:
        lane = self._lane(lane)
        script = self.offer.script(script) if type(self).extended else counter_only(script)
        self._may_move([tenant], script)
        r = self._session(tenant).workflow(AGENT_CALL, {"agentId": lane, "script": script})
        return self._recorded_source(tenant, "workflow", lane, script, r)

    def _recorded_source(self, tenant: str, kind: str, lane: str, script: list[Any],
                         r: Response) -> str:
        """Model a live source run the host just created, and count what it holds."""
        run_id = self._created_id(tenant, r, f"a {kind} source run")
        run = self._record(ModelRun(run_id, tenant, kind, lane, True, script=script))
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
            self._count("resolve")
        else:
            judged(judges.answered(req_id("0252.non-terminal-refused"), r, 409,
                                   "resolving a run that is not waiting"))

    # -- replays

    @precondition(lambda self: self.offer.recorded)
    @rule(target=evals, caller=tenants, source_id=runs, lane=st.sampled_from(LANES),
          variant=st.sampled_from(["same", "drift"]), trials=st.integers(1, 3))
    def replay(self, caller: str, source_id: str, lane: str, variant: str, trials: int) -> Any:
        lane = self._lane(lane)
        source = self.model.runs[source_id]
        script = source.script if source.script else [{"decide": "ok"}]
        if variant == "drift":
            script = drift(script)
        suite, task, script, trials, decision = self._suite(
            caller, script, source=False, trials=trials, drift=variant == "drift")
        body = eval_body(suite, {task: source_id}, agent_id=lane)
        usable = self.model.usable(caller, source_id, lane)
        if caller != source.tenant:
            self._count("cross-tenant")
        before = self.inside.resolutions(source_id) if self.inside else 0
        # A host may answer before a run has finished, and a source still running is
        # rightly refused (§C): its owner reads it until it settles before it is named
        # (once: a run read until it settled stays so, until it is resolved).
        if source_id not in self._settled:
            self._session(source.tenant).events(source_id)
            self._settled.add(source_id)
        self._may_move([caller], script)  # the eval run is the caller's, live or not
        r = self._checked(caller, self._session(caller).create(body))
        if usable is None:
            kind = self.model.unusable_kind(caller, source_id, lane)
            self._refused_unusable(caller, r, [source_id], kind,
                                   lambda v: eval_body(suite, {task: v}, agent_id=lane))
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
            judged(judges.counter_delta(req_id("0252.fork-no-reresolve"), before,
                                        self.inside.resolutions(source_id), 1,
                                        "resolving the source at create"))
        return run_id

    @precondition(lambda self: self.offer.recorded)
    @rule(target=evals, source_id=runs, variant=st.sampled_from(["same", "drift"]),
          trials=st.integers(1, 3))
    def replay_own(self, source_id: str, variant: str, trials: int) -> Any:
        """The owner replays its own source on the source's lane: most often usable."""
        source = self.model.runs[source_id]
        return self.replay(source.tenant, source_id, source.agent or RECORDER, variant, trials)

    @precondition(lambda self: self.offer.recorded)
    @rule(target=evals, source_id=runs, caller=tenants)
    def replay_as_another_tenant(self, source_id: str, caller: str) -> Any:
        """Tenant isolation: another tenant names this source on the source's own lane."""
        source = self.model.runs[source_id]
        if caller == source.tenant:
            return multiple()
        return self.replay(caller, source_id, source.agent or RECORDER, "same", 1)

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
        task = next(iter(run.fixture_runs or {}), "t")
        judged(judges.echo(req_id("0252.echo-verbatim"), events, run.fixture_runs or {}))
        judged(judges.scored_once(req_id("0252.miss-count-reported"), events))
        judged(judges.scored_miss_count(req_id("0252.fail-closed-miss"), events, task,
                                        run.expected_misses))
        judged(judges.scored_passed(req_id("0252.fail-closed-miss"), events, task,
                                    run.expected_passed))
        if run.agent is not None and judges.outcomes_on_wire(events, run.agent):
            returned = [e.get("payload") or {} for e in events
                        if e.get("type") == "agent.tool-returned"]
            got = [_norm(p.get("error"), True) if "error" in p else p.get("outcome")
                   for p in returned]
            want = [_norm(value, failed) for value, failed in answers]
            judged(judges.same_as(req_id("0252.source-replayed"), got, want,
                                  "the answers served are the recorded ones"))

    def _noise(self) -> frozenset[str]:
        """What varies between answers to one and the same request on this host (learnt
        once per machine class: a request id, a trace header)."""
        cls = type(self)
        if cls.noise is None:
            cls.noise = noise_of_host(self._session(next(iter(self.keys))))
        return cls.noise

    def _refused_unusable(self, caller: str, r: Response, supplied: list[str], kind: str,
                          body: Callable[[str], Any]) -> None:
        judged(judges.refused_as(req_id("0252.source-refused"), r,
                                 f"an unusable source ({kind})"))
        controls: list[Response] = []
        if judges.echo_windows(r, supplied):  # text every refusal carries is no echo
            session = self._session(caller)
            controls = [session.create(body(judges.control_value(v))) for v in supplied]
        unechoed = judges.no_echo(req_id("0252.no-echo"), r, supplied, f"the refusal ({kind})",
                                  controls)
        judged(unechoed)
        # Alike means all a client sees but what varies on every answer (noise): one
        # refusal per caller, whatever made the source unusable. A refusal that reads
        # differently on first sight is asked for again, beside the first one, before the
        # difference counts (a header with a few values at random is noise, too).
        seen = self.refusals.setdefault(caller, {})
        signature = judges.signature(r, self._noise())
        session = self._session(caller)

        def ask() -> Response:
            return session.create(body(supplied[0]))
        if signature not in seen and seen:
            first_kind, first_ask, first = next(iter(seen.values()))
            found = alike(req_id("0252.source-uniform-body"),
                          [(first_kind, first_ask), (kind, ask)], [first, r], self._noise())
            if not found.ok:
                self.oracles.append(found)
            judged(attrs.evolve(found, message=f"unusable-source refusals to {caller} differ "
                                f"({first_kind}, {kind}): {found.message}"))
        seen.setdefault(signature, (kind, ask, r))
        self._count("refusal:" + kind)

    @precondition(lambda self: self.offer.recorded)
    @rule(caller=tenants, how=st.sampled_from(["unknown", "undecodable"]),
          junk=st.sampled_from(["not an id", "acme/short", "x/run-000000000000000000", "~2F"]))
    def refuse_unknown(self, caller: str, how: str, junk: str) -> None:
        value = f"{caller}/run-unknown000000000000" if how == "unknown" else junk
        suite, task, script, _, _ = self._suite(caller, [{"decide": "ok"}], source=False)
        self._may_move([caller], script)
        r = self._checked(caller, self._session(caller).create(eval_body(suite, {task: value})))
        self._refused_unusable(caller, r, [value], how if how == "undecodable" else "unknown",
                               lambda v: eval_body(suite, {task: v}))

    @precondition(lambda self: self.offer.recorded)
    @rule(caller=tenants, source_id=runs,
          kind=st.sampled_from(["key-not-task", "suite-fixtures", "without-mode", "live-shadow",
                                "empty-map"]))
    def refuse_fields(self, caller: str, source_id: str, kind: str) -> None:
        needs = {"suite-fixtures": SUITE_FIXTURES_SUITE, "without-mode": NOOP,
                 "live-shadow": TWO_TASKS_SUITE, "empty-map": TWO_TASKS_SUITE}
        if kind in needs and not self.offer.fixture(needs[kind]):
            return  # the host does not list the fixture this refusal names
        if kind == "key-not-task":
            suite, _, script, _, _ = self._suite(caller, [{"decide": "ok"}], source=False)
            self._may_move([caller], script)
            body = eval_body(suite, {"nope": source_id})
        elif kind == "live-shadow":
            # Through evalModes where the host takes it (RFC 0251), else the suite's modes.
            modes: dict[str, Any] = ({"evalModes": ["golden", "live-shadow"]}
                if self.offer.surface.advertises("baselineSelection") else {})
            body = eval_body(TWO_TASKS_SUITE, {"alpha": source_id}, **modes)
        else:
            body = {"suite-fixtures": eval_body(SUITE_FIXTURES_SUITE, {"canned": source_id}),
                    "without-mode": {"workflowId": NOOP, "fixtureRuns": {"t": source_id}},
                    "empty-map": eval_body(TWO_TASKS_SUITE, {})}[kind]
        if kind in needs:  # a host that ran the refused suite anyway moved its counters
            self._may_move([caller, self.model.runs[source_id].tenant],
                           suite_script(needs[kind]))
        r = self._checked(caller, self._session(caller).create(body))
        requirement = {"live-shadow": req_id("0252.live-shadow-refused"),
                       "empty-map": req_id("0252.empty-map-refused"),
                       "suite-fixtures": req_id("0252.suite-fixtures-refused"),
                       }.get(kind, req_id("0252.fields-refused"))
        judged(judges.refused_as(requirement, r, kind))
        self._count("refusal:" + kind)

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

    @invariant()
    def after_every_step(self) -> None:
        type(self).steps_taken += 1
        for name in self.AFTER_EVERY_STEP:
            getattr(self, name)()

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
        "branches": collections.Counter(), "requests_made": 0, "http_sent": 0, "steps_taken": 0,
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
