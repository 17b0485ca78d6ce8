"""Faulty hosts, each breaking exactly one RFC 0252 rule by swapping one component.

Every mutant is the reference host with one part replaced, never a switch inside the
real host. Its docstring names the line it breaks; `refsim mutants` must kill them all.
"""

from __future__ import annotations

import base64
import json
import time
import unicodedata
import uuid
import weakref
import zlib
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import attrs

from refsim.check.assume import Reading, build
from refsim.domain.canonical import canonical
from refsim.domain.commands import CreateEval, CreateRun
from refsim.domain.core import (
    Components,
    Echo,
    ForkPolicy,
    HostCore,
    MissPolicy,
    RequestRules,
    TaskPlan,
    TaskPlanner,
)
from refsim.domain.fixtures import FixtureEntry, FixtureMatcher
from refsim.domain.ids import (
    OPAQUE_RE,
    ProjectionError,
    RunId,
    parse_bound,
    project,
    unproject,
)
from refsim.domain.owners import Owner
from refsim.domain.profile import HostProfile
from refsim.domain.readings import DelegateDeriver, MergingPlanner, MergingRules
from refsim.domain.recorded import (
    FAILED_CALL,
    FOREIGN,
    NOT_HELD,
    NOT_TERMINAL,
    UNKNOWN,
    CopyStore,
    Deriver,
    SourcePolicy,
)
from refsim.domain.refusals import (
    UNUSABLE_SOURCE,
    Refusal,
    not_found,
    tenant_mismatch,
    validation,
)
from refsim.domain.runs import RunRecord
from refsim.domain.suites import Suite, Task
from refsim.domain.tools import VAULT, ToolResult, vault_credential
from refsim.domain.view import HostView
from refsim.host import Edge, SimHost
from refsim.wire.commands import create_command
from refsim.wire.response import Response
from refsim.wire.router import refusal_response


@attrs.frozen
class Mutant:
    """One faulty host: the reference host with one part swapped (a component, the profile's
    discovery claim, or an edge that rewrites answers on the wire)."""

    name: str
    breaks: str  # the RFC line, in a few words
    components: Callable[[], Components] = Components
    profile: Callable[[HostProfile], HostProfile] | None = None
    edge: Edge | None = None
    # Wires a component to the host it lives in, for parts that read the whole core.
    wire: Callable[[SimHost], None] | None = None
    # Why its fault cannot show on the wire, when it cannot: then only the in-process
    # checker (with the simulator's inside) can kill it.
    inside_only: str | None = None
    # Its fault is only in how long answers take: the latency rows judge it; the machine
    # times nothing (its steps run in any order, on a host that may be busy).
    timing_only: bool = False

    @property
    def doc(self) -> str:
        return self.breaks

    def host(self, seed: int = 0, profile: HostProfile | None = None) -> SimHost:
        return self.assemble(seed, self.claims(profile or HostProfile()), self.components())

    def claims(self, profile: HostProfile) -> HostProfile:
        """`profile` as this host advertises it (its own lie, if it has one)."""
        return self.profile(profile) if self.profile is not None else profile

    def assemble(self, seed: int, profile: HostProfile, components: Components) -> SimHost:
        """The faulty host from these parts: its edge and its wiring added."""
        host = SimHost(seed=seed, profile=profile, components=components, edge=self.edge)
        if self.wire is not None:
            self.wire(host)
        return host

    # As a `refsim.check.runner.HostRecipe`:

    @property
    def flag(self) -> str:
        return "--mutant"

    def read_as(self, readings: Sequence[Reading], seed: int, profile: HostProfile) -> SimHost:
        chosen, components = build(readings, self.claims(profile), self.components())
        return self.assemble(seed, chosen, components)

    def rebuilt(self) -> tuple[str, str]:
        return "from refsim.zoo.faulty import mutant", f"mutant({self.name!r})"

    def __reduce__(self) -> tuple[Callable[[str], Mutant], tuple[str]]:
        """To another process by name: its parts are functions."""
        return mutant, (self.name,)


# ----------------------------------------------------------------------------- parts


class _IgnoresFixtureRuns(TaskPlanner):
    def plan(self, core: HostCore, task: Task, modes: tuple[str, ...],
             derived: tuple[FixtureEntry, ...] | None) -> TaskPlan:
        return super().plan(core, task, modes, None)


class _EchoesId(RequestRules):
    def unusable_source(self, value: Any, kind: str) -> Refusal:
        return validation(f"fixtureRuns names a source run that cannot be used: {value}")


def _foreign_refused_as(refusal: Refusal) -> type[RequestRules]:
    """Rules that refuse another tenant's source with their own status and code."""

    class ForeignRefusedApart(RequestRules):
        def unusable_source(self, value: Any, kind: str) -> Refusal:
            return refusal if kind == FOREIGN else super().unusable_source(value, kind)

    return ForeignRefusedApart


class _WordsNonTerminalDifferently(RequestRules):
    def unusable_source(self, value: Any, kind: str) -> Refusal:
        if kind == NOT_TERMINAL:
            return validation("fixtureRuns names a source run that has not finished")
        return super().unusable_source(value, kind)


class _AcceptsLiveShadow(RequestRules):
    def live_shadow(self, modes: tuple[str, ...]) -> Refusal | None:
        return None


class _AcceptsWithoutMode(RequestRules):
    def fixture_runs_gate(self, core: HostCore, command: CreateRun) -> Refusal | None:
        if command.fixture_runs is not None and not isinstance(command, CreateEval):
            return None
        return super().fixture_runs_gate(core, command)


class _AcceptsForeign(SourcePolicy):
    def assess(self, core: HostView, caller: Owner, value: Any, agent_id: str
               ) -> RunRecord | str:
        rid = parse_bound(value)
        run = core.runs.get(rid) if rid is not None else None
        if run is not None and not caller.can_read(run.owner):
            return super().assess(core, run.owner, value, agent_id)
        return super().assess(core, caller, value, agent_id)


class _AcceptsNonTerminal(SourcePolicy):
    def assess(self, core: HostView, caller: Owner, value: Any, agent_id: str
               ) -> RunRecord | str:
        rid = parse_bound(value)
        run = core.runs.get(rid) if rid is not None else None
        if run is None or run.terminal:
            return super().assess(core, caller, value, agent_id)
        run.status, saved = "completed", run.status
        try:
            return super().assess(core, caller, value, agent_id)
        finally:
            run.status = saved


class _AcceptsKind(SourcePolicy):
    """Takes one kind of source §C calls unusable as usable (where `when` says so of the
    run): a failed-call source without fixtureErrors, or one whose calls were never kept
    (there is nothing to derive, so the task gets no recorded answers)."""

    def __init__(self, kind: str, when: Callable[[RunRecord], bool] = lambda run: True
                 ) -> None:
        self.kind, self.when = kind, when

    def assess(self, core: HostView, caller: Owner, value: Any, agent_id: str
               ) -> RunRecord | str:
        found = super().assess(core, caller, value, agent_id)
        if found == self.kind:
            rid = parse_bound(value)
            assert rid is not None
            if self.when(core.runs[rid]):
                return core.runs[rid]
        return found


class _AcceptsEmptyMap:
    """An edge in front of the host: an eval create whose fixtureRuns is an empty map has
    the member dropped before the host reads it, so the eval runs as if none were given
    (the schema's minProperties would refuse it further in)."""

    def before(self, host: SimHost, method: str, target: str, headers: dict[str, str],
               body: bytes | None) -> bytes | None:
        if method != "POST" or target.split("?", 1)[0] != "/runs" or not body:
            return body
        try:
            doc = json.loads(body)
        except ValueError:
            return body
        if isinstance(doc, dict) and doc.get("fixtureRuns") == {} and doc.get("mode") == "eval":
            return json.dumps({k: v for k, v in doc.items() if k != "fixtureRuns"}).encode()
        return body

    def __call__(self, host: SimHost, method: str, path: str, headers: dict[str, str],
                 body: bytes | None, response: Response) -> Response:
        return response


class _DropsErrorEntries(Deriver):
    def derive(self, core: HostView, source: RunRecord, agent_id: str
               ) -> tuple[FixtureEntry, ...]:
        return tuple(e for e in super().derive(core, source, agent_id) if not e.is_error)


class ServesMissLive(MissPolicy):
    def on_miss(self, core: HostCore, tenant: str, tool: str, args: Any,
                on_miss: str) -> tuple[ToolResult, bool]:
        return core.gateway.call(tenant, tool, args), False


class _DerivesEgress(Deriver):
    def derive(self, core: HostView, source: RunRecord, agent_id: str
               ) -> tuple[FixtureEntry, ...]:
        entries = super().derive(core, source, agent_id)
        egress = {r.tool: dict(r.headers) for r in core.gateway.egress
                  if r.tenant == source.owner.tenant}
        return tuple(e._replace(response={"answer": e.response, "egress": egress[e.tool]})
                     if e.tool in egress and not e.is_error else e for e in entries)


class _CredentialInVaultAnswer(Deriver):
    """A vault call's derived entry answers with the egress credential beside the recorded
    answer (`authorization`), as a gateway log merged into the recording would."""

    def derive(self, core: HostView, source: RunRecord, agent_id: str
               ) -> tuple[FixtureEntry, ...]:
        secret = "Bearer " + vault_credential(source.owner.tenant)
        return tuple(e._replace(response={**e.response, "authorization": secret})
                     if e.tool == VAULT and isinstance(e.response, dict) and not e.is_error
                     else e for e in super().derive(core, source, agent_id))


class ReresolvesOnFork(ForkPolicy):
    def copies(self, core: HostCore, run: RunRecord) -> dict[str, tuple[FixtureEntry, ...]] | None:
        assert run.eval is not None
        out: dict[str, tuple[FixtureEntry, ...]] = {}
        for task_id, value in (run.eval.fixture_runs or {}).items():
            source = core.components.sources.assess(core, run.owner, value, run.eval.agent_id)
            if isinstance(source, str):
                return None
            out[task_id] = core.components.deriver.derive(core, source, run.eval.agent_id)
        return out


class KeepsCopies(CopyStore):
    def erase_source(self, source: Any) -> int:
        return self.count_for(source)

    def erase_eval_run(self, eval_run: Any) -> int:
        return 0


class OmitsEcho(Echo):
    def eval_started(self, payload: dict[str, Any], fixture_runs: dict[str, Any] | None) -> None:
        return None


@attrs.define
class _LifoMatcher(FixtureMatcher):
    """Serves the last unconsumed match instead of the first."""

    _spent: set[int] = attrs.field(init=False, factory=set)

    def select(self, tool: str, args: Any, key: str | None = None) -> FixtureEntry | None:
        matching = [i for i, e in enumerate(self.entries) if e.tool == tool
                    and (not e.has_args or _same(e.args, args)) and i not in self._spent]
        if not matching:
            return None
        self._spent.add(matching[-1])
        return self.entries[matching[-1]]

    def reset(self) -> None:
        self._spent.clear()


def _same(a: Any, b: Any) -> bool:
    return canonical(a) == canonical(b)


class _NoResetMatcher(FixtureMatcher):
    def reset(self) -> None:
        return None


class _NeverConsumesMatcher(FixtureMatcher):
    def select(self, tool: str, args: Any, key: str | None = None) -> FixtureEntry | None:
        found = super().select(tool, args, key)
        super().reset()
        return found


class _MatcherPlanner(TaskPlanner):
    """The reference planner with another matcher class."""

    def __init__(self, matcher: type[FixtureMatcher]) -> None:
        self.matcher = matcher

    def make_matcher(self, entries: tuple[FixtureEntry, ...]) -> FixtureMatcher:
        return self.matcher(entries)




# ----------------------------------------------------------------------------- blind spots
# Each class below broke RFC 0252 yet passed every check until the checker learnt to see it.


FOREIGN_UNMINTED = "foreign-unminted"


class _TellsForeignIds(SourcePolicy):
    """Knows an id under another tenant's segment for what it is, minted or not."""

    def assess(self, core: HostView, caller: Owner, value: Any, agent_id: str
               ) -> RunRecord | str:
        found = super().assess(core, caller, value, agent_id)
        rid = parse_bound(value)
        if (found == UNKNOWN and rid is not None and rid.tenant != caller.tenant
                and any(t.name == rid.tenant for t in core.tenants.values())):
            return FOREIGN_UNMINTED
        return found


class _ForeignIds403(RequestRules):
    def unusable_source(self, value: Any, kind: str) -> Refusal:
        if kind == FOREIGN_UNMINTED:
            return tenant_mismatch()
        return super().unusable_source(value, kind)


class _OrderOracle(RequestRules):
    """Looks the named sources up before refusing fixtureRuns without mode eval, and words
    the refusal by what it found."""

    def fixture_runs_gate(self, core: HostCore, command: CreateRun) -> Refusal | None:
        refusal = super().fixture_runs_gate(core, command)
        if (refusal is not None and not isinstance(command, CreateEval)
                and command.fixture_runs is not None):
            named = [parse_bound(v) for v in command.fixture_runs.values()]
            if any(r is not None and r in core.runs for r in named):
                return validation("fixtureRuns is only meaningful with mode eval "
                                  "(the named run exists)", field="fixtureRuns")
        return refusal


def _caller_and_body(host: SimHost, headers: dict[str, str], body: bytes | None
                     ) -> tuple[Owner | None, Any]:
    auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
    owner = host.core.caller(auth.partition(" ")[2].strip())
    try:
        doc = json.loads(body) if body else None
    except ValueError:
        doc = None
    return owner, doc


def _foreign_source_header(host: SimHost, method: str, target: str, headers: dict[str, str],
                           body: bytes | None, response: Response) -> Response:
    """Adds a header to a refusal only when a named source is another tenant's run."""
    if (method != "POST" or not target.startswith("/runs") or response.status != 400
            or _names_foreign_run(host, headers, body) is None):
        return response
    return _with_header(response, "OpenWOP-Source-Scope", "other-tenant")


def _derived_in_snapshot(host: SimHost, method: str, target: str, headers: dict[str, str],
                         body: bytes | None, response: Response) -> Response:
    """GET /runs/{id} of an eval run also shows the copy it was served, as `provenance`."""
    if (method not in ("GET", "HEAD") or response.status != 200
            or not isinstance(response.json, dict) or "runId" not in response.json
            or "/events" in target or target.endswith("/eval-summary")):
        return response
    rid = parse_bound(response.json["runId"])
    kept = [{"task": task, "from": source.bound, "calls": [e.to_json() for e in entries]}
            for source, run, task, entries in host.core.copies.all_entries() if run == rid]
    if not kept:
        return response
    return attrs.evolve(response, json={**response.json, "provenance": kept})


class _PartialEcho(RequestRules):
    def unusable_source(self, value: Any, kind: str) -> Refusal:
        text = str(value)
        return validation("fixtureRuns names a source run that cannot be used: "
                          f"{text[:max(0, len(text) - 3)]}...")


# ----------------------------------------------------------------------------- from the tests
# Broken parts that tests once kept for themselves: here the kill matrix counts them.


class _LeaksEntries(Echo):
    """Puts the derived entries of the named sources into eval.started."""

    core: HostCore | None = None

    def eval_started(self, payload: dict[str, Any], fixture_runs: dict[str, Any] | None) -> None:
        super().eval_started(payload, fixture_runs)
        assert self.core is not None
        named = set((fixture_runs or {}).values())
        payload["toolResponses"] = [e.to_json() for source, _, _, entries
                                    in self.core.copies.all_entries()
                                    if source.bound in named for e in entries]


def _wire_echo(host: SimHost) -> None:
    echo = host.core.components.echo
    assert isinstance(echo, _LeaksEntries)
    echo.core = host.core


class _ProjectsEcho(Echo):
    def eval_started(self, payload: dict[str, Any], fixture_runs: dict[str, Any] | None) -> None:
        if fixture_runs is not None:
            payload["fixtureRuns"] = {k: project(v) for k, v in fixture_runs.items()}


class _ForgetsMisses(MissPolicy):
    def on_miss(self, core: HostCore, tenant: str, tool: str, args: Any,
                on_miss: str) -> tuple[ToolResult, bool]:
        result, _ = super().on_miss(core, tenant, tool, args, on_miss)
        return result, False


class _CountsMissButCallsLive(MissPolicy):
    def on_miss(self, core: HostCore, tenant: str, tool: str, args: Any,
                on_miss: str) -> tuple[ToolResult, bool]:
        core.gateway.call(tenant, tool, args)
        return ToolResult("error", error={"code": "fixture_miss", "message": "x"}), True


class _PlansLive(TaskPlanner):
    def plan(self, core: HostCore, task: Task, modes: tuple[str, ...],
             derived: tuple[FixtureEntry, ...] | None) -> TaskPlan:
        plan = super().plan(core, task, modes, derived)
        return TaskPlan(plan.entries, "live") if derived is not None else plan


class _DerivesFromSourceOnFork(ForkPolicy):
    """Derives from the source again, looking it up directly (no resolution is counted)."""

    def copies(self, core: HostCore, run: RunRecord) -> dict[str, tuple[FixtureEntry, ...]] | None:
        assert run.eval is not None
        out = {}
        for task_id, value in (run.eval.fixture_runs or {}).items():
            rid = parse_bound(value)
            source = core.runs.get(rid) if rid is not None else None
            if source is None or source.calls_erased:
                return None
            out[task_id] = core.components.deriver.derive(core, source, run.eval.agent_id)
        return out


class _RunsLiveWhenCopyGone(ForkPolicy):
    def copies(self, core: HostCore, run: RunRecord) -> dict[str, tuple[FixtureEntry, ...]] | None:
        return super().copies(core, run) or {}


class _WipesAllCopies(CopyStore):
    def erase_source(self, source: Any) -> int:
        count = self.count_for(source)
        self._by_source.clear()
        return count


def _without_matching(host: SimHost, method: str, target: str, headers: dict[str, str],
                      body: bytes | None, response: Response) -> Response:
    """Lies in discovery: recordedFixtures without fixtureMatching."""
    if not target.startswith("/.well-known/openwop") or not isinstance(response.json, dict):
        return response
    doc = json.loads(json.dumps(response.json))
    facet = doc.get("agents", {}).get("evalSuite")
    if not isinstance(facet, dict):
        return response
    facet.pop("fixtureMatching", None)
    facet["recordedFixtures"] = True
    return attrs.evolve(response, json=doc, text=None)


class _FirstInvocationDeriver(Deriver):
    def derive(self, core: HostView, source: RunRecord, agent_id: str
               ) -> tuple[FixtureEntry, ...]:
        calls = sorted((c for c in source.held_calls if c.agent_id == agent_id),
                       key=lambda c: c.sequence)
        first = calls[0].invocation_id if calls else None
        return tuple(self.entry(c) for c in calls if c.invocation_id == first)


class _EveryTaskPlanner(TaskPlanner):
    def plan(self, core: HostCore, task: Task, modes: tuple[str, ...],
             derived: tuple[FixtureEntry, ...] | None) -> TaskPlan:
        if derived is None and "live-shadow" not in modes:
            run = list(core.runs.values())[-1]  # the eval run being executed
            named = (run.eval.fixture_runs or {}) if run.eval is not None else {}
            for task_id, value in named.items():
                source = parse_bound(value)
                entries = None if source is None else core.copies.get(source, run.run_id,
                                                                       task_id)
                if entries is not None:
                    return TaskPlan(entries, "fail")
        return super().plan(core, task, modes, derived)


class _FirstKeyOnlyKeys(RequestRules):
    def keys(self, suite: Suite, fixture_runs: dict[str, Any]) -> Refusal | None:
        first = next(iter(fixture_runs))
        return super().keys(suite, {first: fixture_runs[first]})


class _FirstKeyOnlyConflicts(RequestRules):
    def conflicts(self, suite: Suite, fixture_runs: dict[str, Any]) -> Refusal | None:
        first = next(iter(fixture_runs))
        return super().conflicts(suite, {first: fixture_runs[first]})


class _FirstSourceOnly(SourcePolicy):
    """Assesses the first source of a request; every later one borrows its usable run."""

    def __init__(self) -> None:
        self.first: RunRecord | None = None

    def assess(self, core: HostView, caller: Owner, value: Any, agent_id: str
               ) -> RunRecord | str:
        if self.first is not None:
            return self.first
        verdict = super().assess(core, caller, value, agent_id)
        if not isinstance(verdict, str):
            self.first = verdict
        return verdict


class _ResetsFirstSource(RequestRules):
    def __init__(self, sources: _FirstSourceOnly) -> None:
        self.sources = sources

    def fixture_runs_gate(self, core: HostCore, command: CreateRun) -> Refusal | None:
        self.sources.first = None
        return super().fixture_runs_gate(core, command)


def _first_source_only() -> Components:
    sources = _FirstSourceOnly()
    return Components(rules=_ResetsFirstSource(sources), sources=sources)


# ----------------------------------------------------------------------------- quiet violators
# Each broke an RFC line yet passed every row and the machine, until the checker judged
# the RFC rather than refsim; the kill matrix counts them, in process only where the wire
# cannot show the fault (the reason is on the host).


class _OrderOracleLiveShadow(RequestRules):
    """Looks the named sources up before refusing live-shadow, and words the refusal by
    what it found (the §B oracle moved onto another rule than `fixtureRuns` without mode)."""

    def fixture_runs_gate(self, core: HostCore, command: CreateRun) -> Refusal | None:
        refusal = super().fixture_runs_gate(core, command)
        if (refusal is not None or not isinstance(command, CreateEval)
                or not command.fixture_runs):
            return refusal
        suite = core.suites.lookup("", command.suite_ref)  # a catalog suite, for any tenant
        modes = tuple(command.eval_modes or (suite.modes if suite is not None else ()))
        if "live-shadow" in modes:
            named = [parse_bound(v) for v in command.fixture_runs.values()]
            if any(r is not None and r in core.runs for r in named):
                return validation("fixtureRuns cannot be combined with live-shadow (the "
                                  "named run exists)", field="fixtureRuns")
        return None


def _entries_when_served_whole(host: SimHost, method: str, target: str,
                               headers: dict[str, str], body: bytes | None,
                               response: Response) -> Response:
    """GET /runs/{id} of an eval run that missed nothing shows the entries it was served,
    under names of its own (no `tool`, `args` or `toolResponses` key)."""
    if (method != "GET" or response.status != 200 or not isinstance(response.json, dict)
            or "runId" not in response.json or "/events" in target
            or target.endswith("/eval-summary")):
        return response
    rid = parse_bound(response.json["runId"])
    run = host.core.runs.get(rid) if rid is not None else None
    if (run is None or run.eval is None or run.eval.summary is None
            or any(t.get("fixtureMissCount") for t in run.eval.summary.get("tasks", []))):
        return response
    kept = [{"name": e.tool, "in": e.args, "out": e.response}
            for _, served, _, entries in host.core.copies.all_entries() if served == rid
            for e in entries]
    if not kept:
        return response
    return attrs.evolve(response, json={**response.json, "provenance": kept})


class _RederivesWhileUsable(ForkPolicy):
    """Derives the fork's fixtures from the source again while it is there, and falls back
    to the stored copy only once it is gone."""

    def copies(self, core: HostCore, run: RunRecord) -> dict[str, tuple[FixtureEntry, ...]] | None:
        assert run.eval is not None
        out: dict[str, tuple[FixtureEntry, ...]] = {}
        for task_id, value in (run.eval.fixture_runs or {}).items():
            rid = parse_bound(value)
            source = core.runs.get(rid) if rid is not None else None
            if source is None or source.calls_erased:
                return super().copies(core, run)
            out[task_id] = core.components.deriver.derive(core, source, run.eval.agent_id)
        return out


@attrs.define
class _StoresCredential(CopyStore):
    """Keeps the egress credential beside each stored entry and strips it when serving."""

    secret: dict[RunId, str] = attrs.Factory(dict)

    def put(self, source: RunId, eval_run: RunId, task_id: str,
            entries: tuple[FixtureEntry, ...]) -> None:
        from refsim.domain.tools import vault_credential
        kept = tuple(e._replace(response={"answer": e.response,
                                          "egress": vault_credential(source.tenant)})
                     for e in entries)
        super().put(source, eval_run, task_id, kept)

    def get(self, source: RunId, eval_run: RunId, task_id: str
            ) -> tuple[FixtureEntry, ...] | None:
        found = super().get(source, eval_run, task_id)
        return None if found is None else tuple(
            e._replace(response=e.response["answer"]) for e in found)


@attrs.define
class _KeepsErasedCopies(CopyStore):
    """Erasing the source stops serving its copies, and keeps them."""

    erased: set[RunId] = attrs.Factory(set)

    def erase_source(self, source: RunId) -> int:
        self.erased.add(source)
        return self.count_for(source)

    def erase_eval_run(self, eval_run: RunId) -> int:
        return 0

    def get(self, source: RunId, eval_run: RunId, task_id: str
            ) -> tuple[FixtureEntry, ...] | None:
        return None if source in self.erased else super().get(source, eval_run, task_id)


# ----------------------------------------------------------------------------- near misses


class _MatchesLoosely(SourcePolicy):
    """Finds a source by an id that is not its id: `loose` maps a supplied value and a run's
    id to the forms it compares (case folded, trimmed, or by prefix)."""

    def __init__(self, loose: Callable[[str, str], bool]) -> None:
        self.loose = loose

    def assess(self, core: HostView, caller: Owner, value: Any, agent_id: str
               ) -> RunRecord | str:
        found = super().assess(core, caller, value, agent_id)
        if found != UNKNOWN or not isinstance(value, str):
            return found
        near = [rid for rid in core.runs if rid.bound != value and self.loose(value, rid.bound)]
        if len(near) != 1:
            return found
        return super().assess(core, caller, near[0].bound, agent_id)


def _loosely(loose: Callable[[str, str], bool]) -> Callable[[], Components]:
    return lambda: Components(sources=_MatchesLoosely(loose))


class _KeysLoosely(RequestRules):
    """Takes a key for a taskId when they match case-folded and trimmed."""

    def keys(self, suite: Suite, fixture_runs: dict[str, Any]) -> Refusal | None:
        names = {t.task_id.casefold() for t in suite.tasks}
        if all(k.strip().casefold() in names for k in fixture_runs):
            return None
        return super().keys(suite, fixture_runs)


# ----------------------------------------------------------------------------- usable kinds


class _RefusesKind(SourcePolicy):
    """Refuses one kind of source §C calls usable."""

    def __init__(self, refuses: Callable[[RunRecord], bool]) -> None:
        self.refuses = refuses

    def assess(self, core: HostView, caller: Owner, value: Any, agent_id: str
               ) -> RunRecord | str:
        found = super().assess(core, caller, value, agent_id)
        if not isinstance(found, str) and self.refuses(found):
            return NOT_HELD
        return found


def _refusing(refuses: Callable[[RunRecord], bool]) -> Callable[[], Components]:
    return lambda: Components(sources=_RefusesKind(refuses))


def _content_free_lane(run: RunRecord) -> bool:
    return any("argsHash" in e.payload for e in run.events if e.type == "agent.tool-called")


# ----------------------------------------------------------------------------- other tenants


def _as_key(host: SimHost, key: str, method: str, target: str, headers: dict[str, str],
            body: bytes | None) -> Response:
    """The same request, under another key of the host's (how a faulty route skips the
    caller's owner: it answers as the run's owner would)."""
    kept = {k: v for k, v in headers.items() if k.lower() != "authorization"}
    return host.router.handle(method, target, {**kept, "Authorization": f"Bearer {key}"}, body)


def _owner_key(host: SimHost, run: RunRecord) -> str | None:
    """A key whose triple reads the run: its tenant's, tenant-wide or of its workspace."""
    return next((k for k, t in host.core.tenants.items() if t.name == run.owner.tenant
                 and t.workspace in (None, run.owner.workspace)), None)


def _segment_in_path(path: str) -> str | None:
    """The run id segment of a run's route (`/runs/{id}...`, a seam's included)."""
    if "/runs/" not in path:
        return None
    return path.split("/runs/", 1)[1].split("/", 1)[0].split(":", 1)[0]


def _run_in_path(host: SimHost, path: str) -> RunRecord | None:
    segment = _segment_in_path(path)
    if segment is None:
        return None
    try:
        rid = parse_bound(unproject(segment))
    except ProjectionError:
        return None
    return host.core.runs.get(rid) if rid is not None else None


def _as_owner(*kinds: str) -> Edge:
    """Another tenant's request about an eval run (the kinds named: fork, summary, poll,
    stream, erase, snapshot, cancel) is answered as if its owner had asked."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        if response.status not in (403, 404):
            return response
        path = target.split("?", 1)[0]
        kind = ("erase" if path.startswith("/conformance/seams/runs/") and ":erase" in path
                else "fork" if ":fork" in path else "summary" if path.endswith("/eval-summary")
                else "cancel" if path.endswith("/cancel")
                else "poll" if path.endswith("/events/poll") else "stream"
                if path.endswith("/events") else "snapshot" if path.count("/") == 2
                else None)
        run = _run_in_path(host, path) if kind in kinds else None
        key = _owner_key(host, run) if run is not None and run.eval is not None else None
        return response if key is None else _as_key(host, key, method, target, headers,
                                                        body)
    return edge


# ----------------------------------------------------------------------------- channels


def _stream_only(rewrite: Callable[[SimHost, dict[str, Any]], dict[str, Any]]) -> Edge:
    """Rewrites the events of the SSE stream only (the poll shows them as they are)."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        if (method != "GET" or not target.split("?", 1)[0].endswith("/events")
                or response.status != 200 or response.text is None):
            return response
        frames = []
        for chunk in response.text.split("\n\n"):
            lines = chunk.split("\n")
            out = []
            for line in lines:
                if line.startswith("data: "):
                    event = json.loads(line[6:])
                    line = "data: " + json.dumps(rewrite(host, event), separators=(",", ":"))
                out.append(line)
            frames.append("\n".join(out))
        return attrs.evolve(response, text="\n\n".join(frames))
    return edge


def _projected_echo(host: SimHost, event: dict[str, Any]) -> dict[str, Any]:
    payload = event.get("payload") or {}
    if event.get("type") == "eval.started" and isinstance(payload.get("fixtureRuns"), dict):
        runs = {k: project(v) for k, v in payload["fixtureRuns"].items()}
        return {**event, "payload": {**payload, "fixtureRuns": runs}}
    return event


def _entries_in_stream(host: SimHost, event: dict[str, Any]) -> dict[str, Any]:
    if event.get("type") != "eval.started":
        return event
    rid = parse_bound(str(event.get("runId")))
    entries = [e.to_json() for _, run, _, kept in host.core.copies.all_entries() if run == rid
               for e in kept]
    return {**event, "payload": {**(event.get("payload") or {}), "x-served": entries}}


# ----------------------------------------------------------------------------- hiding places


def _eval_entries(host: SimHost, run_id: Any) -> list[dict[str, Any]]:
    rid = parse_bound(run_id) if isinstance(run_id, str) else None
    return [e.to_json() for _, run, _, kept in host.core.copies.all_entries() if run == rid
            for e in kept]


def _entries_in_header(host: SimHost, method: str, target: str, headers: dict[str, str],
                       body: bytes | None, response: Response) -> Response:
    """GET /runs/{id} of an eval run carries its entries, base64 JSON, in a header."""
    if (method != "GET" or response.status != 200 or not isinstance(response.json, dict)
            or "runId" not in response.json or "/events" in target):
        return response
    entries = _eval_entries(host, response.json.get("runId"))
    if not entries:
        return response
    packed = base64.b64encode(json.dumps(entries).encode()).decode()
    return attrs.evolve(response, headers={**response.headers, "X-Refsim-Debug": packed})


def _entries_in_string(host: SimHost, method: str, target: str, headers: dict[str, str],
                       body: bytes | None, response: Response) -> Response:
    """GET /runs/{id} of an eval run carries its entries as a JSON string in metadata."""
    if (method != "GET" or response.status != 200 or not isinstance(response.json, dict)
            or "runId" not in response.json or "/events" in target
            or target.endswith("/eval-summary")):
        return response
    entries = _eval_entries(host, response.json.get("runId"))
    if not entries:
        return response
    return attrs.evolve(response, json={**response.json,
                                        "metadata": {"debug": json.dumps(entries)}})


class _EntriesInVendorMember(Echo):
    """eval.started carries the entries served under a vendor member (x-...), which the
    payload's vendor hatch admits."""

    core: HostCore | None = None

    def eval_started(self, payload: dict[str, Any], fixture_runs: dict[str, Any] | None) -> None:
        super().eval_started(payload, fixture_runs)
        assert self.core is not None
        named = set((fixture_runs or {}).values())
        kept = [[e.args, e.response] for source, _, _, entries
                in self.core.copies.all_entries() if source.bound in named for e in entries]
        if kept:
            payload["x-replayed"] = kept


def _wire_vendor_echo(host: SimHost) -> None:
    echo = host.core.components.echo
    assert isinstance(echo, _EntriesInVendorMember)
    echo.core = host.core


# ----------------------------------------------------------------------------- retries, time


class _TrustsItsCache(SourcePolicy):
    """Remembers every run it looked up; asked again for one, it takes it from the cache,
    without asking whose it is."""

    def __init__(self) -> None:
        self.cache: dict[str, RunRecord] = {}

    def assess(self, core: HostView, caller: Owner, value: Any, agent_id: str
               ) -> RunRecord | str:
        if isinstance(value, str) and value in self.cache:
            return super().assess(core, self.cache[value].owner, value, agent_id)
        rid = parse_bound(value)
        run = core.runs.get(rid) if rid is not None else None
        if run is not None and isinstance(value, str):
            self.cache[value] = run
        return super().assess(core, caller, value, agent_id)


def _leaves_a_run(host: SimHost, method: str, target: str, headers: dict[str, str],
                  body: bytes | None, response: Response) -> Response:
    """Starts the eval run, finds a source unusable, fails the run and answers with the one
    refusal: the run exists afterwards (§B: refused before the run starts)."""
    doc = response.json
    if (method != "POST" or target != "/runs" or response.status != 400
            or not isinstance(doc, dict) or doc.get("message") != UNUSABLE_SOURCE.message):
        return response
    owner, request = _caller_and_body(host, headers, body)
    if owner is None or not isinstance(request, dict):
        return response
    core = host.core
    run = core._new_run(owner, "eval:refused", create_command(request))
    core._emit(run, "run.started", core._run_started(run))
    core._finish(run, "failed")
    return response


class _SlowerForeign(SourcePolicy):
    """Takes 5 ms longer to refuse another tenant's run than an id no host minted."""

    def assess(self, core: HostView, caller: Owner, value: Any, agent_id: str
               ) -> RunRecord | str:
        found = super().assess(core, caller, value, agent_id)
        if found == FOREIGN:
            time.sleep(0.005)
        return found


# ----------------------------------------------------------------------------- a second campaign
# Found by a hostile review after the first round: each passed every row then.


class _ForeignKindApart(SourcePolicy):
    """Tells another tenant's run of one kind (`which`) from the rest of §C's reasons."""

    def __init__(self, which: Callable[[RunRecord], bool]) -> None:
        self.which = which

    def assess(self, core: HostView, caller: Owner, value: Any, agent_id: str
               ) -> RunRecord | str:
        found = super().assess(core, caller, value, agent_id)
        if found == FOREIGN:
            rid = parse_bound(value)
            assert rid is not None
            if self.which(core.runs[rid]):
                return FOREIGN_UNMINTED
        return found


class _ApartAs404(RequestRules):
    def unusable_source(self, value: Any, kind: str) -> Refusal:
        return not_found() if kind == FOREIGN_UNMINTED else super().unusable_source(value, kind)


def _foreign_kind_404(which: Callable[[RunRecord], bool]) -> Callable[[], Components]:
    return lambda: Components(sources=_ForeignKindApart(which), rules=_ApartAs404())


class _CountsProbes(SourcePolicy):
    """Counts how often each foreign id is asked for: from the tenth time, it is apart."""

    def __init__(self) -> None:
        self.asked: dict[str, int] = {}

    def assess(self, core: HostView, caller: Owner, value: Any, agent_id: str
               ) -> RunRecord | str:
        found = super().assess(core, caller, value, agent_id)
        if found == FOREIGN and isinstance(value, str):
            self.asked[value] = self.asked.get(value, 0) + 1
            if self.asked[value] >= 10:
                return FOREIGN_UNMINTED
        return found


def _on_the_tenth(refusal: Refusal) -> Callable[[], Components]:
    class Rules(RequestRules):
        def unusable_source(self, value: Any, kind: str) -> Refusal:
            return refusal if kind == FOREIGN_UNMINTED else super().unusable_source(value, kind)
    return lambda: Components(sources=_CountsProbes(), rules=Rules())


class _ForksMissLive(TaskPlanner):
    """A fork of an eval run runs its task's misses against the live tools."""

    def plan(self, core: HostCore, task: Task, modes: tuple[str, ...],
             derived: tuple[FixtureEntry, ...] | None) -> TaskPlan:
        plan = super().plan(core, task, modes, derived)
        run = list(core.runs.values())[-1]  # the run being executed
        if derived is not None and run.parent is not None:
            return TaskPlan(plan.entries, "live")
        return plan


class _DerivesLastEight(Deriver):
    def derive(self, core: HostView, source: RunRecord, agent_id: str
               ) -> tuple[FixtureEntry, ...]:
        return super().derive(core, source, agent_id)[-8:]


def _loose(value: Any, fold: Callable[[Any], Any]) -> Any:
    if isinstance(value, dict):
        return {k: _loose(v, fold) for k, v in value.items() if fold(v) is not _DROPPED}
    if isinstance(value, list):
        return fold([_loose(v, fold) for v in value])
    return fold(value)


_DROPPED = object()


class _LooseMatcher(FixtureMatcher):
    """Matches args after `fold` makes both sides alike: not `argsMatch: exact`."""

    fold: Callable[[Any], Any] = staticmethod(lambda v: v)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "entries", tuple(
            e._replace(args=_loose(e.args, self.fold), key=None) if e.has_args else e
            for e in self.entries))
        super().__attrs_post_init__()

    def select(self, tool: str, args: Any, key: str | None = None) -> FixtureEntry | None:
        return super().select(tool, _loose(args, self.fold), None)


def _loose_matcher(fold: Callable[[Any], Any]) -> Callable[[], Components]:
    matcher = type("Loose", (_LooseMatcher,), {"fold": staticmethod(fold)})
    return lambda: Components(planner=_MatcherPlanner(matcher))


def _as_text(value: Any) -> Any:
    return (str(value) if isinstance(value, int | float) and not isinstance(value, bool)
        else value)


def _sorted_lists(value: Any) -> Any:
    return sorted(value, key=canonical) if isinstance(value, list) else value


def _folded_case(value: Any) -> Any:
    return value.casefold() if isinstance(value, str) else value


def _without_nulls(value: Any) -> Any:
    return _DROPPED if value is None else value


def _entries_packed(pack: Callable[[bytes], str]) -> Edge:
    """GET /runs/{id} of an eval run carries its entries, packed, in a header."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        if (method != "GET" or response.status != 200 or not isinstance(response.json, dict)
                or "runId" not in response.json or "/events" in target):
            return response
        entries = _eval_entries(host, response.json.get("runId"))
        if not entries:
            return response
        packed = pack(json.dumps(entries).encode())
        return attrs.evolve(response, headers={**response.headers, "X-Trace": packed})
    return edge


class _SlowerForeignWaiting(SourcePolicy):
    """5 ms slower to refuse another tenant's run that has not finished."""

    def assess(self, core: HostView, caller: Owner, value: Any, agent_id: str
               ) -> RunRecord | str:
        found = super().assess(core, caller, value, agent_id)
        if found == FOREIGN:
            rid = parse_bound(value)
            if rid is not None and not core.runs[rid].terminal:
                time.sleep(0.005)
        return found


def _is_unusable(response: Response) -> bool:
    return (response.status == 400 and isinstance(response.json, dict)
        and response.json.get("message") == UNUSABLE_SOURCE.message)


def _keyed_accepts_waiting(host: SimHost, method: str, target: str, headers: dict[str, str],
                           body: bytes | None, response: Response) -> Response:
    """A create with an Idempotency-Key is taken down another path, which takes a source
    that has not finished."""
    if (method != "POST" or target != "/runs" or not _is_unusable(response)
            or not any(k.lower() == "idempotency-key" for k in headers)):
        return response
    core = host.core
    saved = core.components
    object.__setattr__(core, "components", attrs.evolve(saved, sources=_AcceptsNonTerminal()))
    try:
        return host.router.handle(method, target, headers, body)
    finally:
        object.__setattr__(core, "components", saved)


def _id_in_request_id(pack: Callable[[str], str]) -> Edge:
    """A refusal's X-Request-Id is random, and carries the supplied ids, packed."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        if method != "POST" or target != "/runs" or not _is_unusable(response):
            return response
        _, doc = _caller_and_body(host, headers, body)
        values = list((doc.get("fixtureRuns") or {}).values()) if isinstance(doc, dict) else []
        tag = ".".join(pack(str(v)) for v in values)
        return attrs.evolve(response, headers={
            **response.headers, "X-Request-Id": f"{uuid.uuid4().hex[:12]}-{tag}"})
    return edge


def _id_in_cookie(host: SimHost, method: str, target: str, headers: dict[str, str],
                  body: bytes | None, response: Response) -> Response:
    """A refusal sets a session cookie: a random salt and the supplied ids, in base32,
    padded to one length (it reads as a token, different every time)."""
    if method != "POST" or target != "/runs" or not _is_unusable(response):
        return response
    _, doc = _caller_and_body(host, headers, body)
    values = list((doc.get("fixtureRuns") or {}).values()) if isinstance(doc, dict) else []
    packed = base64.b32encode(uuid.uuid4().bytes[:7] + "|".join(map(str, values)).encode())
    token = packed.decode().rstrip("=").ljust(120, "A")[:120]
    return attrs.evolve(response, headers={**response.headers,
                                           "Set-Cookie": f"sid={token}; Path=/; HttpOnly"})


def _entries_in_stream_comment(host: SimHost, method: str, target: str,
                               headers: dict[str, str], body: bytes | None,
                               response: Response) -> Response:
    """The SSE stream of an eval run served recorded fixtures opens with a comment line
    that carries its derived entries (no client's event parser sees a comment)."""
    if (method != "GET" or not target.split("?", 1)[0].endswith("/events")
            or response.status != 200 or response.text is None):
        return response
    run_id = _run_id_of(target)
    entries = _eval_entries(host, run_id) if run_id is not None else []
    if not entries:
        return response
    return attrs.evolve(response, text=f": served {json.dumps(entries)}\n\n" + response.text)


def _run_id_of(target: str) -> str | None:
    parts = target.split("?", 1)[0].split("/")
    if len(parts) < 3 or parts[1] != "runs":
        return None
    segment = unquote(parts[2]).split(":", 1)[0]
    if "/" in segment:  # the slash percent-encoded
        return segment
    try:
        return unproject(segment)
    except (ProjectionError, UnicodeError):
        return None


def _scored_clean(host: SimHost, event: dict[str, Any]) -> dict[str, Any]:
    """eval.scored and eval.completed as if nothing had missed."""
    payload = event.get("payload") or {}
    if (event.get("type") in ("eval.scored", "eval.completed")
            and payload.get("fixtureMissCount")):
        return {**event, "payload": {**payload, "fixtureMissCount": 0, "passed": True}}
    return event


def _as_bool(count: Any) -> Any:
    return bool(count) if count in (0, 1) and not isinstance(count, bool) else count


def _misses_as_bool(host: SimHost, method: str, target: str, headers: dict[str, str],
                    body: bytes | None, response: Response) -> Response:
    """fixtureMissCount as a JSON boolean where it is 0 or 1, in the polled events and the
    summary: `true` reads as 1 to a loose client, but it is no count."""
    path = target.split("?", 1)[0]
    doc = response.json
    if method != "GET" or response.status != 200 or not isinstance(doc, dict):
        return response
    if path.endswith("/events/poll") and isinstance(doc.get("events"), list):
        events = [{**e, "payload": {**e["payload"], "fixtureMissCount": _as_bool(
                      e["payload"]["fixtureMissCount"])}}
                  if e.get("type") == "eval.scored" and isinstance(e.get("payload"), dict)
                  and "fixtureMissCount" in e["payload"] else e for e in doc["events"]]
        return Response(response.status, dict(response.headers), {**doc, "events": events})
    if path.endswith("/eval-summary") and isinstance(doc.get("tasks"), list):
        tasks = [{**task, "fixtureMissCount": _as_bool(task["fixtureMissCount"])}
                 if isinstance(task, dict) and "fixtureMissCount" in task else task
                 for task in doc["tasks"]]
        return Response(response.status, dict(response.headers), {**doc, "tasks": tasks})
    return response


def _problem_json_oracle(host: SimHost, method: str, target: str, headers: dict[str, str],
                         body: bytes | None, response: Response) -> Response:
    """Asked for application/problem+json, a refusal of another tenant's existing run is
    403 id_tenant_mismatch (any other request is refused alike)."""
    accept = next((v for k, v in headers.items() if k.lower() == "accept"), "")
    if (method != "POST" or target != "/runs" or not _is_unusable(response)
            or "problem+json" not in accept):
        return response
    if _names_foreign_run(host, headers, body) is not None:
        return refusal_response(tenant_mismatch())
    return response


def _percent_path_skips_owner(host: SimHost, method: str, target: str,
                              headers: dict[str, str], body: bytes | None,
                              response: Response) -> Response:
    """A run read with its id's slash percent-encoded skips the owner check: another
    tenant is answered as the owner would be."""
    path = target.split("?", 1)[0]
    if method != "GET" or "%2f" not in path.lower() or response.status not in (403, 404):
        return response
    run_id = _run_id_of(target)
    rid = parse_bound(run_id) if run_id is not None else None
    owner_key = next((key for key, tenant in host.core.tenants.items()
                      if rid is not None and tenant.owner().tenant == rid.tenant), None)
    if owner_key is None:
        return response
    return _as_key(host, owner_key, method, target, headers, body)


def _names_foreign_run(host: SimHost, headers: dict[str, str], body: bytes | None
                       ) -> str | None:
    """The first existing run of another tenant a create names in fixtureRuns, if any."""
    owner, doc = _caller_and_body(host, headers, body)
    runs = doc.get("fixtureRuns") if isinstance(doc, dict) else None
    for value in runs.values() if isinstance(runs, dict) else ():
        rid = parse_bound(value) if isinstance(value, str) else None
        run = host.core.runs.get(rid) if rid is not None else None
        if owner is not None and run is not None and run.owner.tenant != owner.tenant:
            return str(value)
    return None


def _on_foreign_asks(act: Callable[[Response, int], Response]) -> Edge:
    """An edge that passes each refusal of another tenant's existing run to `act`, with
    how many times this host has been asked for that run (1 the first time); counted per
    host, since two hosts of one seed mint the same ids."""
    asked: weakref.WeakKeyDictionary[SimHost, dict[str, int]] = weakref.WeakKeyDictionary()

    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        if method != "POST" or target != "/runs" or not _is_unusable(response):
            return response
        foreign = _names_foreign_run(host, headers, body)
        if foreign is None:
            return response
        counts = asked.setdefault(host, {})
        counts[foreign] = counts.get(foreign, 0) + 1
        return act(response, counts[foreign])
    return edge


def _localised_for_foreign(host: SimHost, method: str, target: str, headers: dict[str, str],
                           body: bytes | None, response: Response) -> Response:
    """Asked in another language (Accept-Language), the refusal of another tenant's run is
    worded in it (the run store's own message, translated); any other refusal, and every
    refusal asked without the header, reads as the reference host's."""
    if (method != "POST" or target != "/runs" or not _is_unusable(response)
            or not any(k.lower() == "accept-language" for k in headers)
            or _names_foreign_run(host, headers, body) is None):
        return response
    doc = dict(response.json)
    doc["message"] = "fixtureRuns nomme une exécution source inutilisable"
    return attrs.evolve(response, json=doc, text=None)


def _echo_disguised(disguise: Callable[[str], str]) -> Edge:
    """Every unusable-source refusal carries each supplied fixtureRuns value, disguised,
    after a fresh salt, in an X-Trace header of fixed length."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        if method != "POST" or target != "/runs" or not _is_unusable(response):
            return response
        _, doc = _caller_and_body(host, headers, body)
        runs = doc.get("fixtureRuns") if isinstance(doc, dict) else None
        values = [v for v in runs.values() if isinstance(v, str)] if isinstance(runs,
                                                                               dict) else []
        if not values:
            return response
        trace = (uuid.uuid4().hex[:8] + "." + ".".join(disguise(v) for v in values))
        return _with_header(response, "X-Trace", trace[:96].ljust(96, "0"))
    return edge


def _forgets_misses_on_reread() -> Edge:
    """From its second read on, a run's EvalSummary reports no misses: every task's
    fixtureMissCount 0 (a cache rebuilt from the scores, without the misses)."""
    reads: weakref.WeakKeyDictionary[SimHost, dict[str, int]] = weakref.WeakKeyDictionary()

    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        if (method != "GET" or not target.split("?")[0].endswith("/eval-summary")
                or response.status != 200 or not isinstance(response.json, dict)):
            return response
        counts = reads.setdefault(host, {})
        counts[target] = counts.get(target, 0) + 1
        tasks = response.json.get("tasks")
        if counts[target] < 2 or not isinstance(tasks, list):
            return response
        forgot = [{**t, "fixtureMissCount": 0} if isinstance(t, dict) else t for t in tasks]
        return attrs.evolve(response, json={**response.json, "tasks": forgot}, text=None)
    return edge


def _with_header(response: Response, name: str, value: str) -> Response:
    return attrs.evolve(response, headers={**response.headers, name: value})


def _cache_hit_sometimes() -> Edge:
    """Every third refusal of each run of another tenant's carries `X-Cache: hit` (a
    cache in front of the run store); no other refusal ever does."""
    return _on_foreign_asks(lambda r, n: r if n % 3 else _with_header(r, "X-Cache", "hit"))


def _first_ask_marked() -> Edge:
    """The first refusal naming each existing run of another tenant carries a
    Server-Timing entry for the run store's load; later ones, and no other, do not."""
    return _on_foreign_asks(lambda r, n: _with_header(
        r, "Server-Timing", 'runstore;desc="load"') if n == 1 else r)


def _slow_tail_for_foreign() -> Edge:
    """Every fourth refusal of each run of another tenant's takes 30 ms longer (a cold
    read of the run store); the medians hardly move."""
    def act(response: Response, n: int) -> Response:
        if n % 4 == 0:
            time.sleep(0.03)
        return response
    return _on_foreign_asks(act)


def _longer_request_id(host: SimHost, method: str, target: str, headers: dict[str, str],
                       body: bytes | None, response: Response) -> Response:
    """A random X-Request-Id on every refusal, 16 hex characters long for another tenant's
    run and 12 for any other reason."""
    if method != "POST" or target != "/runs" or not _is_unusable(response):
        return response
    foreign = _names_foreign_run(host, headers, body) is not None
    return attrs.evolve(response, headers={
        **response.headers, "X-Request-Id": uuid.uuid4().hex[:16 if foreign else 12]})


# ----------------------------------------------------------------------------- the RFC's classes
# One host per class of specs/classes.yaml the zoo lacked: each takes a member of a class the
# RFC refuses (a value of another type, a path spelling, a compatibility form, a folded key, a
# route without its owner check, a retry cache keyed too loosely).


class _UnwrapsSource(SourcePolicy):
    """Takes a fixtureRuns value of another JSON type for the id it carries: a one-item list
    (`["<id>"]`) or an object's `runId` (`{"runId": "<id>"}`)."""

    def __init__(self, unwrap: Callable[[Any], Any]) -> None:
        self.unwrap = unwrap

    def assess(self, core: HostView, caller: Owner, value: Any, agent_id: str
               ) -> RunRecord | str:
        inner = self.unwrap(value)
        if isinstance(inner, str):
            return super().assess(core, caller, inner, agent_id)
        return super().assess(core, caller, value, agent_id)


def _one_item(value: Any) -> Any:
    return value[0] if isinstance(value, list) and len(value) == 1 else None


def _run_id_member(value: Any) -> Any:
    return value.get("runId") if isinstance(value, dict) else None


def _path_decoded(value: Any) -> Any:
    """A body value decoded as a path segment is (`~2F`, `%2F`): None where it holds no
    escape or does not decode."""
    if not isinstance(value, str) or ("~" not in value and "%" not in value):
        return None
    try:
        return unproject(value)
    except ProjectionError:
        return None


def _nfkc_folded(value: Any) -> Any:
    if not isinstance(value, str):
        return None
    folded = unicodedata.normalize("NFKC", value)
    return folded if folded != value else None


def _fold_key(key: str) -> str:
    """NFKC, then without format characters (zero-width, soft hyphen) or whitespace; case
    is kept (unlike `_KeysLoosely`)."""
    return "".join(c for c in unicodedata.normalize("NFKC", key)
                   if unicodedata.category(c) != "Cf" and not c.isspace())


class _FoldsKeys(RequestRules):
    """Judges each fixtureRuns key after folding it (`_fold_key`)."""

    def keys(self, suite: Suite, fixture_runs: dict[str, Any]) -> Refusal | None:
        return super().keys(suite, {_fold_key(k): v for k, v in fixture_runs.items()})


def _idempotency_key(headers: dict[str, str]) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == "idempotency-key"), None)


class _RetryCacheWithoutSources:
    """An edge in front of the host's Idempotency-Key cache that compares bodies without
    their fixtureRuns: a retry under the key whose body differs only there is sent on as the
    first body, so the host answers it with the first create's 201 and run."""

    def __init__(self) -> None:
        self.first: weakref.WeakKeyDictionary[SimHost, dict[tuple[str, str],
                                                             tuple[str, bytes]]] = (
            weakref.WeakKeyDictionary())

    def before(self, host: SimHost, method: str, target: str, headers: dict[str, str],
               body: bytes | None) -> bytes | None:
        key = _idempotency_key(headers)
        if method != "POST" or target.split("?", 1)[0] != "/runs" or not key or not body:
            return body
        try:
            doc = json.loads(body)
        except ValueError:
            return body
        if not isinstance(doc, dict):
            return body
        auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
        seen = self.first.setdefault(host, {})
        stripped = canonical({k: v for k, v in doc.items() if k != "fixtureRuns"})
        found = seen.get((auth, key))
        if found is None:
            seen[(auth, key)] = (stripped, body)
            return body
        return found[1] if found[0] == stripped else body

    def __call__(self, host: SimHost, method: str, path: str, headers: dict[str, str],
                 body: bytes | None, response: Response) -> Response:
        return response


class _SharedRetryCache(dict[Any, Any]):
    """The router's Idempotency-Key cache keyed on the key alone, whoever asks: another
    tenant that sends the owner's key and body is answered with the owner's run."""

    @staticmethod
    def _key(key: Any) -> Any:
        return key[1] if isinstance(key, tuple) and len(key) == 2 else key

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(self._key(key), default)

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(self._key(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(self._key(key), value)

    def __contains__(self, key: object) -> bool:
        return super().__contains__(self._key(key))


class _TenantRetryCache(_SharedRetryCache):
    """The router's Idempotency-Key cache keyed on the tenant and the key, not the owner
    triple: a key of the tenant scoped to another workspace, sending the owner's key and
    body, is answered with the owner's run."""

    @staticmethod
    def _key(key: Any) -> Any:
        if isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], Owner):
            return (key[0].tenant, key[1])
        return key


def _wire_tenant_cache(host: SimHost) -> None:
    host.router._idempotency = _TenantRetryCache()


def _wire_shared_cache(host: SimHost) -> None:
    host.router._idempotency = _SharedRetryCache()



def _swap(**parts: Callable[[], Any]) -> Callable[[], Components]:
    return lambda: Components(**{name: make() for name, make in parts.items()})


# ---------------------------------------------------------------------- found by a hostile tester
# Faults of the classes issue 39 names, put behind the reference host by a tester who saw
# no zoo and no check: each slipped past check and the machine until its class grew.

def _as_its_owner(when: Callable[[str, str, dict[str, str]], bool], *,
                  same_tenant: bool = False) -> Edge:
    """A refusal of a run's route, answered as the run's owner is where `when(method,
    target, headers)` holds: the one route that forgot to check the owner (`same_tenant`:
    that forgot the workspace, for a caller of the run's tenant scoped to one)."""
    def edge(host: SimHost, method: str, target: str, headers: dict[str, str],
             body: bytes | None, response: Response) -> Response:
        if response.status not in (403, 404) or not when(method, target, headers):
            return response
        run = _run_in_path(host, urlsplit(target).path)
        if same_tenant and run is not None:
            caller = _caller_and_body(host, headers, None)[0]
            if (caller is None or caller.workspace is None
                    or caller.tenant != run.owner.tenant):
                return response
        key = _owner_key(host, run) if run is not None else None
        return response if key is None else _as_key(host, key, method, target, headers,
                                                        body)
    return edge


def _polled_after(method: str, target: str, headers: dict[str, str]) -> bool:
    parts = urlsplit(target)
    after = parse_qs(parts.query).get("afterSequence", ["-1"])[0]
    return method == "GET" and parts.path.endswith("/events/poll") and after.isdigit()


def _etag_before_owner(host: SimHost, method: str, target: str, headers: dict[str, str],
                       body: bytes | None, response: Response) -> Response:
    """If-None-Match weighed before the owner: another tenant's run that exists is 304."""
    conditional = any(k.lower() == "if-none-match" for k in headers)
    run = _run_in_path(host, urlsplit(target).path) if conditional else None
    key = _owner_key(host, run) if run is not None else None
    if method != "GET" or response.status not in (403, 404) or key is None:
        return response
    owner = _as_key(host, key, method, target, headers, body)
    return owner if owner.status == 304 else response


def _bare_segment_any_tenant(host: SimHost, method: str, target: str,
                             headers: dict[str, str], body: bytes | None,
                             response: Response) -> Response:
    """A bare opaque path segment that names none of the caller's runs is looked up in
    every tenant, and the run found is answered as its owner would be."""
    segment = _segment_in_path(urlsplit(target).path)
    if response.status not in (403, 404) or segment is None or not OPAQUE_RE.fullmatch(
            segment):
        return response
    run = next((r for rid, r in host.core.runs.items() if rid.opaque == segment), None)
    key = _owner_key(host, run) if run is not None else None
    if run is None or key is None:
        return response
    return _as_key(host, key, method, target.replace(segment, run.run_id.projected, 1),
                   headers, body)


def _lists_every_tenant_when_filtered(host: SimHost, method: str, target: str,
                                      headers: dict[str, str], body: bytes | None,
                                      response: Response) -> Response:
    """GET /runs?workflowId=...: the filtered listing forgets the owner and shows every
    tenant's matching runs (the unfiltered one is right)."""
    parts = urlsplit(target)
    if (method != "GET" or parts.path != "/runs" or response.status != 200
            or "workflowId" not in parse_qs(parts.query) or not isinstance(response.json,
                                                                            dict)):
        return response
    runs = list(response.json.get("runs", []))
    seen = {r.get("runId") for r in runs}
    for key in list(host.core.tenants):
        other = host.router.handle(method, target, {"Authorization": f"Bearer {key}"}, None)
        if other.status == 200 and isinstance(other.json, dict):
            runs += [r for r in other.json.get("runs", []) if r.get("runId") not in seen]
            seen |= {r.get("runId") for r in other.json.get("runs", [])}
    return Response(200, dict(response.headers), {**response.json, "runs": runs})


def _before_fragment(value: Any) -> Any:
    """`<id>#x` or `<id>?x` read as a URI reference: the id before its fragment or query."""
    if isinstance(value, str) and ("#" in value or "?" in value):
        return value.split("#", 1)[0].split("?", 1)[0]
    return None


class _SlugKeys(RequestRules):
    """Task keys matched as slugs: `both_tasks`, `both.tasks` and `both tasks` name
    `both-tasks` (and the named task then runs on the source's fixtures)."""

    @staticmethod
    def _slug(key: str) -> str:
        return key.replace("_", "-").replace(".", "-").replace(" ", "-")

    def keys(self, suite: Suite, fixture_runs: dict[str, Any]) -> Refusal | None:
        ids = {self._slug(t.task_id): t.task_id for t in suite.tasks}
        return super().keys(suite, {ids.get(self._slug(k), k): v
                                    for k, v in fixture_runs.items()})


class _SplitBrainSources(SourcePolicy):
    """Judges the first value of a task named twice and serves the last (the values a
    lenient parser in front of it, `_NamedTwiceParser`, kept apart)."""

    def __init__(self) -> None:
        self.swap: dict[str, str] = {}

    def assess(self, core: HostView, caller: Owner, value: Any, agent_id: str
               ) -> RunRecord | str:
        found = super().assess(core, caller, value, agent_id)
        other = self.swap.get(value) if isinstance(value, str) else None
        rid = parse_bound(other) if other is not None else None
        run = core.runs.get(rid) if rid is not None else None
        if (isinstance(found, RunRecord) and run is not None and run.terminal
                and agent_id in run.invoked_agents):
            return run
        return found


class _NamedTwiceParser:
    """A lenient parser in front of the host: a fixtureRuns key named twice is kept once,
    its first value (what the host judges), and its last remembered (what it serves)."""

    def before(self, host: SimHost, method: str, target: str, headers: dict[str, str],
               body: bytes | None) -> bytes | None:
        sources = host.core.components.sources
        if not isinstance(sources, _SplitBrainSources):
            return body
        sources.swap.clear()
        if method != "POST" or urlsplit(target).path != "/runs" or not body:
            return body
        twice: dict[str, list[Any]] = {}

        def keep_first(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for k, v in pairs:
                if k in out:
                    twice.setdefault(k, [out[k]]).append(v)
                else:
                    out[k] = v
            return out
        try:
            doc = json.loads(body, object_pairs_hook=keep_first)
        except ValueError:
            return body
        if not twice or not isinstance(doc, dict):
            return body
        for values in twice.values():
            if isinstance(values[0], str) and isinstance(values[-1], str):
                sources.swap[values[0]] = values[-1]
        return json.dumps(doc).encode()

    def __call__(self, host: SimHost, method: str, target: str, headers: dict[str, str],
                 body: bytes | None, response: Response) -> Response:
        return response


def _nfkc(value: Any) -> Any:
    return unicodedata.normalize("NFKC", value) if isinstance(value, str) else value


class _ThirdMissLive(MissPolicy):
    """A fallback after repeated misses: from a tenant's third fail-closed miss on, the miss
    is still counted (fixtureMissCount right, the task fails) but the live tool runs too."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def on_miss(self, core: HostCore, tenant: str, tool: str, args: Any,
                on_miss: str) -> tuple[ToolResult, bool]:
        result, missed = super().on_miss(core, tenant, tool, args, on_miss)
        if missed:
            self.seen[tenant] = self.seen.get(tenant, 0) + 1
            if self.seen[tenant] >= 3:
                core.gateway.call(tenant, tool, args)
        return result, missed


# ----------------------------------------------------------------------------- the zoo

# Why a host that reads the source again on a fork cannot be caught from outside.
REDERIVES = ("while the source is usable, deriving again gives the fork the very entries the "
             "copy holds; once it is erased, the copy is erased with it (Security), so either "
             "way the fork is refused; and v2 has no portable run deletion that would take the "
             "source away alone (RFC 0252's falsifiability table: unwitnessable). Only the "
             "host's resolution and derivation counts show it")

ZOO: tuple[Mutant, ...] = (
    Mutant("ignores-fixture-runs", "§D: the task's fixtures come from the source run",
           _swap(planner=_IgnoresFixtureRuns)),
    Mutant("echoes-id", "§C: the refusal MUST NOT echo the supplied id",
           _swap(rules=_EchoesId)),
    Mutant("foreign-403", "§C: another tenant's run is refused like no run (not 403)",
           _swap(rules=_foreign_refused_as(tenant_mismatch()))),
    Mutant("foreign-404", "§C: another tenant's run is refused like no run (not 404)",
           _swap(rules=_foreign_refused_as(not_found()))),
    Mutant("accepts-foreign-source", "§C: a usable source is readable by the caller's owner",
           _swap(sources=_AcceptsForeign)),
    Mutant("accepts-non-terminal", "§C: a usable source is a terminal run",
           _swap(sources=_AcceptsNonTerminal)),
    Mutant("serves-miss-live", "§D/Security: the task runs onMiss fail; a miss reaches no "
           "live tool", _swap(misses=ServesMissLive)),
    Mutant("merges-suite-fixtures", "§B: a task with suite toolResponses/onMiss is refused "
           "(the two sources are never merged)",
           _swap(rules=MergingRules, planner=MergingPlanner)),
    Mutant("derives-delegates", "§D: derived from the agent's calls, excluding delegates",
           _swap(deriver=DelegateDeriver)),
    Mutant("derives-egress-credential", "§D/SR-1: credential resolved at egress MUST NOT "
           "enter a derived entry", _swap(deriver=_DerivesEgress)),
    Mutant("credential-in-vault-answer", "§D/SR-1: credential material MUST NOT enter a "
           "derived entry (here the vault answer served with the egress credential)",
           _swap(deriver=_CredentialInVaultAnswer)),
    Mutant("reresolves-on-fork", "§E: a fork of the eval run MUST NOT resolve the source "
           "again", _swap(forks=ReresolvesOnFork), inside_only=REDERIVES),
    Mutant("keeps-copy-after-erasure", "Security: the derived copy is erased with its "
           "source", lambda: Components(copies=KeepsCopies)),
    Mutant("omits-echo", "§E: eval.started MUST carry fixtureRuns when the request did",
           _swap(echo=OmitsEcho)),
    Mutant("accepts-live-shadow", "§B: live-shadow among the modes is refused",
           _swap(rules=_AcceptsLiveShadow)),
    Mutant("accepts-without-mode", "§B: fixtureRuns without mode eval is refused",
           _swap(rules=_AcceptsWithoutMode)),
    Mutant("accepts-failed-call-without-fixture-errors", "§C: a failed-call source is usable "
           "only with fixtureErrors (here a host without it takes one)",
           _swap(sources=lambda: _AcceptsKind(FAILED_CALL)),
           profile=lambda p: attrs.evolve(p, fixture_errors=False)),
    Mutant("accepts-unheld-source", "§C: a source whose calls the host does not hold is "
           "refused (here taken, with nothing to derive)", _swap(sources=lambda: _AcceptsKind(
               NOT_HELD, lambda run: not run.calls_erased))),
    Mutant("accepts-empty-map", "§B: an empty fixtureRuns map is refused (here the eval runs "
           "as if none were given)", edge=_AcceptsEmptyMap()),
    Mutant("drops-error-entries", "§D: a call that failed yields an entry with its error "
           "(here failed calls are left out)", _swap(deriver=_DropsErrorEntries)),
    Mutant("words-non-terminal-differently", "§C: every unusable source gets the same refusal",
           _swap(rules=_WordsNonTerminalDifferently)),
    Mutant("serves-out-of-order", "§D/RFC 0244: the first unconsumed match in sequence order",
           lambda: Components(planner=_MatcherPlanner(_LifoMatcher))),
    Mutant("no-per-trial-reset", "§D/RFC 0244: consumption resets at every trial",
           lambda: Components(planner=_MatcherPlanner(_NoResetMatcher))),
    Mutant("never-consumes", "§D/RFC 0244: a served entry is consumed",
           lambda: Components(planner=_MatcherPlanner(_NeverConsumesMatcher))),
    # -- the blind spots
    Mutant("foreign-unminted-403", "§C: another tenant's never-minted id is refused like no "
           "run (not 403, which tells its ids apart)",
           _swap(sources=_TellsForeignIds, rules=_ForeignIds403)),
    Mutant("check-order-oracle", "§C: a §B refusal must not say whether a named foreign run "
           "exists", _swap(rules=_OrderOracle)),
    Mutant("foreign-source-header", "§C: the refusal of another tenant's run is the same "
           "whole response, headers included", edge=_foreign_source_header),
    Mutant("derived-in-snapshot", "§D: derived entries are never on the wire (here under "
           "another member name of GET /runs/{id})", edge=_derived_in_snapshot),
    Mutant("partial-echo", "§C: the refusal MUST NOT echo the supplied id, not even most of "
           "it", _swap(rules=_PartialEcho)),
    Mutant("echo-upper-cased", "§C: the refusal MUST NOT echo the supplied id (here "
           "upper-cased, after a salt, in a header)", edge=_echo_disguised(str.upper)),
    Mutant("echo-reversed", "§C: the refusal MUST NOT echo the supplied id (here reversed, "
           "after a salt, in a header)", edge=_echo_disguised(lambda v: v[::-1])),
    # -- broken parts the tests once kept to themselves
    Mutant("leaks-entries-in-eval-started", "§D: derived entries are never on the wire",
           _swap(echo=_LeaksEntries), wire=_wire_echo),
    Mutant("projects-echo", "§E: the echo is the accepted map verbatim (bound ids, not "
           "projected)", _swap(echo=_ProjectsEcho)),
    Mutant("forgets-misses", "§D/§E: a miss is reported through fixtureMissCount",
           _swap(misses=_ForgetsMisses)),
    Mutant("counts-miss-calls-live", "Security: a miss reaches no live tool, even when it is "
           "counted", _swap(misses=_CountsMissButCallsLive)),
    Mutant("plans-live", "§D: derived fixtures run onMiss fail", _swap(planner=_PlansLive)),
    Mutant("derives-from-source-on-fork", "§E: a fork reads the stored copy, never the "
           "source again", _swap(forks=_DerivesFromSourceOnFork), inside_only=REDERIVES),
    Mutant("runs-live-when-copy-gone", "Security: a fork whose copy is gone is refused, never "
           "run against live tools", _swap(forks=_RunsLiveWhenCopyGone)),
    Mutant("wipes-all-copies", "Security: erasure reaches the source's copies, and only "
           "those", lambda: Components(copies=_WipesAllCopies)),
    Mutant("advertises-without-matching", "§A: recordedFixtures is advertised with "
           "fixtureMatching", edge=_without_matching),
    Mutant("first-invocation-only", "UQ1: every call of every invocation of the agent is "
           "derived", _swap(deriver=_FirstInvocationDeriver)),
    Mutant("every-task-served", "§B: only the named task takes the source's fixtures",
           _swap(planner=_EveryTaskPlanner)),
    Mutant("first-key-only", "§B: every key of fixtureRuns is a taskId of the suite",
           _swap(rules=_FirstKeyOnlyKeys)),
    Mutant("first-conflict-only", "§B: every named task is checked for suite fixtures",
           _swap(rules=_FirstKeyOnlyConflicts)),
    Mutant("first-source-only", "§C: every named source is assessed", _first_source_only),
    # -- quiet violators: each passed every row and the machine before
    Mutant("check-order-oracle-live-shadow", "§C: a §B refusal (here live-shadow) must not "
           "say whether a named run exists", _swap(rules=_OrderOracleLiveShadow)),
    Mutant("entries-in-snapshot-when-served-whole", "§D: derived entries are never on the "
           "wire (here renamed, in GET /runs/{id} of eval runs that missed nothing)",
           edge=_entries_when_served_whole),
    Mutant("rederives-while-usable", "§E: a fork reads the stored copy, never the source "
           "again (here only while the source is there)", _swap(forks=_RederivesWhileUsable),
           inside_only=REDERIVES),
    Mutant("stores-egress-credential", "§D/SR-1: credential material MUST NOT enter a "
           "derived entry (here stored with it, stripped when served)",
           lambda: Components(copies=_StoresCredential),
           inside_only="the stored entries never leave the host and what it serves is "
           "right: only the copy store shows the credential (RFC 0252's falsifiability "
           "table: unwitnessable)"),
    Mutant("keeps-erased-copies", "Security: the copy is erased with its source (here "
           "kept, only no longer served)", lambda: Components(copies=_KeepsErasedCopies),
           inside_only="a fork is refused as it should be: only the copy store shows the "
           "erased content still held (RFC 0252: unwitnessable without portable erasure)"),
    # -- ids and keys close to real ones
    Mutant("accepts-id-in-any-case", "§C: an id that names no run is unknown (here matched "
           "case-folded)", _loosely(lambda v, rid: v.casefold() == rid.casefold())),
    Mutant("accepts-padded-id", "§C: an id that names no run is unknown (here trimmed)",
           _loosely(lambda v, rid: v.strip() == rid)),
    Mutant("accepts-id-prefix", "§C: an id that names no run is unknown (here the one run "
           "it is a prefix of)", _loosely(lambda v, rid: len(v) > 8 and rid.startswith(v))),
    Mutant("accepts-near-miss-key", "§B: a key that is not a taskId is refused (here "
           "matched case-folded and trimmed)", _swap(rules=_KeysLoosely)),
    # -- sources §C calls usable
    Mutant("refuses-eval-run-source", "§C/UQ4: an eval run of the agent is a usable source",
           _refusing(lambda run: run.eval is not None)),
    Mutant("refuses-cancelled-source", "§C: a usable source is any terminal run (here only "
           "completed ones)", _refusing(lambda run: run.status == "cancelled")),
    Mutant("refuses-content-free-source", "§C: a lane with argsHash alone on the wire is a "
           "usable source when its calls are held", _refusing(_content_free_lane)),
    # -- other tenants acting on an eval run
    Mutant("foreign-forks-eval-run", "Security/§C: a tenant that cannot read a run cannot "
           "fork it", edge=_as_owner("fork")),
    Mutant("foreign-reads-eval-summary", "Security/RFC 0081: a tenant that cannot read a "
           "run cannot read its summary", edge=_as_owner("summary")),
    Mutant("foreign-streams-eval-events", "Security: a tenant that cannot read a run cannot "
           "read its events (here on the SSE stream)", edge=_as_owner("stream")),
    Mutant("foreign-erases-eval-run", "Security: a tenant that cannot read a run cannot "
           "erase it", edge=_as_owner("erase")),
    # -- what each channel shows
    Mutant("stream-projects-echo", "§E: eval.started.fixtureRuns is the accepted map "
           "verbatim on every channel (here projected on the SSE stream)",
           edge=_stream_only(_projected_echo)),
    Mutant("stream-leaks-entries", "§D: derived entries are never on the wire (here on the "
           "SSE stream only)", edge=_stream_only(_entries_in_stream)),
    # -- where recorded content can hide
    Mutant("entries-in-header", "§D: derived entries are never on the wire (here base64 in "
           "a header of GET /runs/{id})", edge=_entries_in_header),
    Mutant("entries-in-string", "§D: derived entries are never on the wire (here a JSON "
           "string in the snapshot's metadata)", edge=_entries_in_string),
    Mutant("entries-in-vendor-member", "§D: derived entries are never on the wire (here "
           "under a vendor member of eval.started)", _swap(echo=_EntriesInVendorMember),
           wire=_wire_vendor_echo),
    # -- retries, runs left behind, time
    Mutant("accepts-foreign-on-retry", "§C: another tenant's run is refused, however often "
           "it is asked for (here a cache answers the retry)", _swap(sources=_TrustsItsCache)),
    Mutant("leaves-a-failed-run", "§B: an unusable source is refused before the run starts "
           "(here a failed run is left behind)", edge=_leaves_a_run),
    Mutant("slower-for-foreign-runs", "Security (SHOULD): another tenant's run reads as no "
           "run, in time too (here 5 ms slower to refuse)", _swap(sources=_SlowerForeign),
           timing_only=True),
    # -- a second campaign
    Mutant("foreign-cancelled-refused-apart", "§C: another tenant's run is refused with the "
           "same status and code, whatever it is (here 404 for a cancelled or failed one)",
           _foreign_kind_404(lambda run: run.status in ("cancelled", "failed"))),
    Mutant("foreign-without-agent-refused-apart", "§C: another tenant's run is refused with "
           "the same status and code (here 404 for one that never invoked the agent)",
           _foreign_kind_404(lambda run: not run.invoked_agents)),
    Mutant("code-changes-on-retry", "§C: the same status and code, however often asked "
           "(here another code from the tenth time another tenant's run is named)",
           _on_the_tenth(Refusal("idempotency_key_invalid", "too many attempts"))),
    Mutant("rewords-on-retry", "Security (refsim's SHOULD reading): the same whole answer, "
           "however often asked (here reworded from the tenth time)",
           _on_the_tenth(validation(UNUSABLE_SOURCE.message + "."))),
    Mutant("branch-misses-live", "§D/Security: a fork runs fail-closed too (here its misses "
           "reach the live tools)", _swap(planner=_ForksMissLive)),
    Mutant("derives-last-eight-calls", "§D: each call yields one entry (here the last eight)",
           _swap(deriver=_DerivesLastEight)),
    Mutant("matches-numbers-as-text", "§D/UQ2: argsMatch exact (here 5 matches \"5\")",
           _loose_matcher(_as_text)),
    Mutant("matches-lists-in-any-order", "§D/UQ2: argsMatch exact (here lists in any order)",
           _loose_matcher(_sorted_lists)),
    Mutant("matches-in-any-case", "§D/UQ2: argsMatch exact (here strings case-folded)",
           _loose_matcher(_folded_case)),
    Mutant("matches-without-nulls", "§D/UQ2: argsMatch exact (here null members dropped)",
           _loose_matcher(_without_nulls)),
    Mutant("entries-in-hex-header", "§D: derived entries are never on the wire (here hex in "
           "a header)", edge=_entries_packed(lambda b: b.hex())),
    Mutant("forgets-misses-on-reread", "§E: a miss is reported through fixtureMissCount "
           "(here only the first read of the summary reports it)",
           edge=_forgets_misses_on_reread()),
    Mutant("localised-for-foreign", "§C/Security: another tenant's run is refused as no run "
           "is, whatever the request's negotiable headers (here another message for it "
           "when Accept-Language is sent)", edge=_localised_for_foreign),
    Mutant("entries-percent-encoded-in-header", "§D: derived entries are never on the wire "
           "(here percent-encoded JSON in a header)",
           edge=_entries_packed(lambda b: quote(b.decode(), safe=""))),
    Mutant("entries-compressed-in-header", "§D: derived entries are never on the wire (here "
           "zlib, then base64, in a header)",
           edge=_entries_packed(lambda b: base64.b64encode(zlib.compress(b)).decode())),
    Mutant("slower-for-foreign-waiting-runs", "Security (SHOULD): another tenant's run reads "
           "as no run, in time too (here 5 ms slower for one not finished)",
           _swap(sources=_SlowerForeignWaiting), timing_only=True),
    Mutant("accepts-with-idempotency-key", "§C: a usable source is terminal (here a waiting "
           "one is taken when the create carries an Idempotency-Key)",
           edge=_keyed_accepts_waiting),
    Mutant("echoes-id-base64-in-header", "§C: the refusal MUST NOT echo the supplied id "
           "(here base64 in a random request id)", edge=_id_in_request_id(
               lambda v: base64.urlsafe_b64encode(v.encode()).decode().rstrip("="))),
    Mutant("echoes-id-hex-in-header", "§C: the refusal MUST NOT echo the supplied id (here "
           "hex in a random request id)", edge=_id_in_request_id(lambda v: v.encode().hex())),
    Mutant("longer-request-id-for-foreign", "Security (refsim's SHOULD reading): nothing on "
           "the answer tells another tenant's run from no run (here a random request id, "
           "longer for it)", edge=_longer_request_id),
    Mutant("echoes-id-base32-in-cookie", "§C: the refusal MUST NOT echo the supplied id "
           "(here base32, after a random salt, in a cookie of one length)",
           edge=_id_in_cookie),
    Mutant("entries-in-stream-comment", "§D: derived entries are never on the wire (here in "
           "an SSE comment line)", edge=_entries_in_stream_comment),
    Mutant("stream-hides-misses", "§E: a miss is reported through fixtureMissCount (here "
           "the SSE stream says none missed; the poll and summary are right)",
           edge=_stream_only(_scored_clean)),
    Mutant("misses-as-bool", "§D/§E: fixtureMissCount 0 on a replay, 1 on a drift: a "
           "count (here false and true, in the polled events and the summary)",
           edge=_misses_as_bool),
    Mutant("percent-path-skips-owner", "Security: a tenant that cannot read a run cannot "
           "read its snapshot, events or summary (here it can, with the id's slash "
           "percent-encoded)", edge=_percent_path_skips_owner),
    Mutant("cache-hit-sometimes", "Security (refsim's SHOULD reading): nothing on the answer "
           "tells another tenant's run from no run (here a header on every third refusal "
           "of it)", edge=_cache_hit_sometimes()),
    Mutant("first-ask-marked", "Security (refsim's SHOULD reading): nothing on the answer "
           "tells another tenant's run from no run (here a header on the first refusal of "
           "each)", edge=_first_ask_marked()),
    Mutant("slow-tail-for-foreign", "Security (SHOULD): another tenant's run reads as no run, "
           "in time too (here a quarter of its refusals 30 ms slower)",
           edge=_slow_tail_for_foreign(), timing_only=True),
    Mutant("problem-json-oracle", "§C: every unusable source is refused with the same "
           "status and code (here 403 for another tenant's run when the client asks for "
           "application/problem+json)", edge=_problem_json_oracle),
    # -- the RFC's classes (specs/classes.yaml): members the zoo lacked
    Mutant("accepts-id-in-a-list", "§B/§C wire shape: a fixtureRuns value is a runId, and "
           "any other value is an unusable source (here a one-item list is taken as the id "
           "in it)", _swap(sources=lambda: _UnwrapsSource(_one_item))),
    Mutant("accepts-id-in-an-object", "§B/§C wire shape: a fixtureRuns value is a runId, and "
           "any other value is an unusable source (here an object's runId member is taken)",
           _swap(sources=lambda: _UnwrapsSource(_run_id_member))),
    Mutant("decodes-body-ids-like-path-ids", "§C/wire-facts §C.10: a body carries the bound "
           "form; a value spelt ~2F or %2F names no run (here decoded as a path is)",
           _swap(sources=lambda: _UnwrapsSource(_path_decoded))),
    Mutant("accepts-id-nfkc-folded", "§C: an id that names no run is unknown (here a "
           "full-width or other NFKC-compatible spelling is folded and taken)",
           _swap(sources=lambda: _UnwrapsSource(_nfkc_folded))),
    Mutant("folds-task-keys", "§B: a key that is not a taskId of the suite is refused (here "
           "NFKC-folded and stripped of format characters and whitespace first)",
           _swap(rules=_FoldsKeys)),
    Mutant("foreign-polls-eval-events", "Security: a tenant that cannot read a run cannot "
           "read its events (here on the poll)", edge=_as_owner("poll")),
    Mutant("foreign-reads-eval-snapshot", "Security/§C: a tenant that cannot read a run "
           "cannot read its snapshot", edge=_as_owner("snapshot")),
    Mutant("foreign-cancels-eval-run", "Security: another tenant's run reads as no run on "
           "every route (here its cancellation is answered as the owner's: 409 run_terminal, "
           "not the unknown id's 404)", edge=_as_owner("cancel")),
    Mutant("idempotency-ignores-fixture-runs", "§C/Security: a create naming an unusable "
           "source is refused (here an Idempotency-Key retry whose fixtureRuns differs is "
           "answered with the first create's run)", edge=_RetryCacheWithoutSources()),
    Mutant("idempotency-shared-across-owners", "Security/§C: another tenant's run reads as no "
           "run (here another tenant sending the owner's Idempotency-Key and body gets the "
           "owner's run)", wire=_wire_shared_cache),
    Mutant("poll-continuation-skips-owner", "Security: another tenant's run reads as no run on "
           "every route (here a poll from afterSequence 0 on is answered as to the owner)",
           edge=_as_its_owner(lambda m, t, h: _polled_after(m, t, h))),
    Mutant("etag-before-owner", "Security/§C: another tenant's run reads as no run (here "
           "If-None-Match: * is weighed first, and gets 304 for a run that exists)",
           edge=_etag_before_owner),
    Mutant("bare-segment-any-tenant", "Security/§C: another tenant's run reads as no run "
           "(here a bare opaque path segment finds a run in any tenant)",
           edge=_bare_segment_any_tenant),
    Mutant("lists-foreign-runs-when-filtered", "Security/§C: another tenant's run reads as no "
           "run (here GET /runs?workflowId= lists every tenant's matching runs)",
           edge=_lists_every_tenant_when_filtered),
    Mutant("accepts-id-with-fragment", "§C: an id that names no run is unknown (here `<id>#x` "
           "and `<id>?x` are taken as <id>)",
           _swap(sources=lambda: _UnwrapsSource(_before_fragment))),
    Mutant("slug-folds-task-keys", "§B: a key that is not a taskId is refused (here `_`, `.` "
           "and a space are folded to `-` first)", _swap(rules=_SlugKeys)),
    Mutant("matches-nfkc-folded", "§D/UQ2: argsMatch exact (here strings are NFKC-normalised "
           "before they are compared)", _loose_matcher(_nfkc)),
    Mutant("workspace-blind-routes", "§C/Security: the owner triple reads a run (here a key "
           "scoped to a workspace, refused its tenant's run as a source, reads it on every "
           "route: the routes compare tenants only)",
           edge=_as_its_owner(lambda m, t, h: True, same_tenant=True)),
    Mutant("idempotency-shared-across-workspaces", "§C/Security: a retry is the caller's own "
           "(here the Idempotency-Key cache is keyed by tenant, not the owner triple: a key of "
           "another workspace gets the owner's run)", wire=_wire_tenant_cache),
    Mutant("named-twice-split-brain", "§C: a source the caller cannot use is refused (here "
           "a task named twice in fixtureRuns: the first value is judged, the last served)",
           _swap(sources=_SplitBrainSources), edge=_NamedTwiceParser()),
    Mutant("third-miss-live", "§D/Security: a miss reaches no live tool (here from a tenant's "
           "third miss on it is counted and the live tool runs too)",
           _swap(misses=_ThirdMissLive)),
)


def mutant(name: str) -> Mutant:
    for m in ZOO:
        if m.name == name:
            return m
    raise KeyError(f"no mutant {name!r}; known: {', '.join(m.name for m in ZOO)}")
