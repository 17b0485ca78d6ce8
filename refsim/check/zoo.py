"""The zoo: faulty hosts, each breaking exactly one RFC 0252 rule by swapping one component.

Every mutant is the reference host with one part replaced, never a switch inside the
real host. Its docstring names the line it breaks; `refsim mutants` must kill them all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from refsim.domain.canonical import canonical
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
from refsim.domain.ids import parse_bound
from refsim.domain.owners import Owner
from refsim.domain.readings import DelegateDeriver, MergingPlanner, MergingRules
from refsim.domain.recorded import (
    FAILED_CALL,
    FOREIGN,
    NOT_TERMINAL,
    CopyStore,
    Deriver,
    SourcePolicy,
)
from refsim.domain.refusals import Refusal, not_found, tenant_mismatch, validation
from refsim.domain.runs import RunRecord
from refsim.domain.suites import Task
from refsim.domain.tools import ToolResult


@attrs.frozen
class Mutant:
    name: str
    breaks: str  # the RFC line, in a few words
    components: Callable[[], Components]

    @property
    def doc(self) -> str:
        return self.breaks


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
    def fixture_runs_gate(self, core: HostCore, body: dict[str, Any]) -> Refusal | None:
        if "fixtureRuns" in body and body.get("mode") != "eval":
            return None
        return super().fixture_runs_gate(core, body)


class _AcceptsForeign(SourcePolicy):
    def assess(self, core: HostCore, caller: Owner, value: Any, agent_id: str
               ) -> RunRecord | str:
        rid = parse_bound(value)
        run = core.runs.get(rid) if rid is not None else None
        if run is not None and not caller.can_read(run.owner):
            return super().assess(core, run.owner, value, agent_id)
        return super().assess(core, caller, value, agent_id)


class _AcceptsNonTerminal(SourcePolicy):
    def assess(self, core: HostCore, caller: Owner, value: Any, agent_id: str
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


class _AcceptsFailedCalls(SourcePolicy):
    def assess(self, core: HostCore, caller: Owner, value: Any, agent_id: str
               ) -> RunRecord | str:
        found = super().assess(core, caller, value, agent_id)
        if found == FAILED_CALL:
            rid = parse_bound(value)
            assert rid is not None
            return core.runs[rid]
        return found


class ServesMissLive(MissPolicy):
    def on_miss(self, core: HostCore, tenant: str, tool: str, args: Any,
                on_miss: str) -> tuple[ToolResult, bool]:
        return core.gateway.call(tenant, tool, args), False


class _DerivesEgress(Deriver):
    def derive(self, core: HostCore, source: RunRecord, agent_id: str
               ) -> tuple[FixtureEntry, ...]:
        entries = super().derive(core, source, agent_id)
        egress = {r.tool: dict(r.headers) for r in core.gateway.egress
                  if r.tenant == source.owner.tenant}
        return tuple(attrs.evolve(e, response={"answer": e.response, "egress": egress[e.tool]})
                     if e.tool in egress and not e.is_error else e for e in entries)


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

    def select(self, tool: str, args: Any) -> FixtureEntry | None:
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
    def select(self, tool: str, args: Any) -> FixtureEntry | None:
        found = super().select(tool, args)
        super().reset()
        return found


class _MatcherPlanner(TaskPlanner):
    """The reference planner with another matcher class."""

    def __init__(self, matcher: type[FixtureMatcher]) -> None:
        self.matcher = matcher

    def make_matcher(self, entries: tuple[FixtureEntry, ...]) -> FixtureMatcher:
        return self.matcher(entries)


def _swap(**parts: Callable[[], Any]) -> Callable[[], Components]:
    return lambda: Components(**{name: make() for name, make in parts.items()})


# ----------------------------------------------------------------------------- the zoo

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
    Mutant("reresolves-on-fork", "§E: a fork of the eval run MUST NOT resolve the source "
           "again", _swap(forks=ReresolvesOnFork)),
    Mutant("keeps-copy-after-erasure", "Security: the derived copy is erased with its "
           "source", lambda: Components(copies=KeepsCopies)),
    Mutant("omits-echo", "§E: eval.started MUST carry fixtureRuns when the request did",
           _swap(echo=OmitsEcho)),
    Mutant("accepts-live-shadow", "§B: live-shadow among the modes is refused",
           _swap(rules=_AcceptsLiveShadow)),
    Mutant("accepts-without-mode", "§B: fixtureRuns without mode eval is refused",
           _swap(rules=_AcceptsWithoutMode)),
    Mutant("accepts-failed-call-without-fixture-errors", "§C: a failed-call source is usable "
           "only with fixtureErrors", _swap(sources=_AcceptsFailedCalls)),
    Mutant("words-non-terminal-differently", "§C: every unusable source gets the same refusal",
           _swap(rules=_WordsNonTerminalDifferently)),
    Mutant("serves-out-of-order", "§D/RFC 0244: the first unconsumed match in sequence order",
           lambda: Components(planner=_MatcherPlanner(_LifoMatcher))),
    Mutant("no-per-trial-reset", "§D/RFC 0244: consumption resets at every trial",
           lambda: Components(planner=_MatcherPlanner(_NoResetMatcher))),
    Mutant("never-consumes", "§D/RFC 0244: a served entry is consumed",
           lambda: Components(planner=_MatcherPlanner(_NeverConsumesMatcher))),
)


def mutant(name: str) -> Mutant:
    for m in ZOO:
        if m.name == name:
            return m
    raise KeyError(f"no mutant {name!r}; known: {', '.join(m.name for m in ZOO)}")
