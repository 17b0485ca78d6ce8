"""Faulty hosts that replay the wrong fixtures (RFC 0252 §D, RFC 0244, UQ1, UQ2): a task that
ignores its source or another task that takes it, entries derived wrongly (delegates kept,
failed calls dropped, one invocation or the last eight calls only, the egress credential or
vault secret inside), a matcher that serves out of order, never consumes or never resets, or
matches args loosely (not `argsMatch: exact`), and discovery that advertises recorded
fixtures without fixtureMatching. A new host whose fault is in deriving the entries or
matching calls against them goes here.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable
from typing import Any

import attrs

from refsim.domain.canonical import canonical
from refsim.domain.core import Components, HostCore, TaskPlan, TaskPlanner
from refsim.domain.fixtures import FixtureEntry, FixtureMatcher
from refsim.domain.ids import parse_bound
from refsim.domain.readings import DelegateDeriver
from refsim.domain.recorded import Deriver
from refsim.domain.runs import RunRecord
from refsim.domain.suites import Task
from refsim.domain.tools import VAULT, vault_credential
from refsim.domain.view import HostView
from refsim.host import SimHost
from refsim.wire.response import Response
from refsim.zoo.faulty.base import Mutant, _swap


class _IgnoresFixtureRuns(TaskPlanner):
    def plan(self, core: HostCore, task: Task, modes: tuple[str, ...],
             derived: tuple[FixtureEntry, ...] | None) -> TaskPlan:
        return super().plan(core, task, modes, None)


class _DropsErrorEntries(Deriver):
    def derive(self, core: HostView, source: RunRecord, agent_id: str
               ) -> tuple[FixtureEntry, ...]:
        return tuple(e for e in super().derive(core, source, agent_id) if not e.is_error)


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


def _nfkc(value: Any) -> Any:
    return unicodedata.normalize("NFKC", value) if isinstance(value, str) else value


# This family's hosts (the package puts them in the zoo's order, its `ORDER`).
HOSTS: tuple[Mutant, ...] = (
    Mutant("ignores-fixture-runs", "§D: the task's fixtures come from the source run",
           _swap(planner=_IgnoresFixtureRuns)),
    Mutant("derives-delegates", "§D: derived from the agent's calls, excluding delegates",
           _swap(deriver=DelegateDeriver)),
    Mutant("derives-egress-credential", "§D/SR-1: credential resolved at egress MUST NOT "
           "enter a derived entry", _swap(deriver=_DerivesEgress)),
    Mutant("credential-in-vault-answer", "§D/SR-1: credential material MUST NOT enter a "
           "derived entry (here the vault answer served with the egress credential)",
           _swap(deriver=_CredentialInVaultAnswer)),
    Mutant("drops-error-entries", "§D: a call that failed yields an entry with its error "
           "(here failed calls are left out)", _swap(deriver=_DropsErrorEntries)),
    Mutant("serves-out-of-order", "§D/RFC 0244: the first unconsumed match in sequence order",
           lambda: Components(planner=_MatcherPlanner(_LifoMatcher))),
    Mutant("no-per-trial-reset", "§D/RFC 0244: consumption resets at every trial",
           lambda: Components(planner=_MatcherPlanner(_NoResetMatcher))),
    Mutant("never-consumes", "§D/RFC 0244: a served entry is consumed",
           lambda: Components(planner=_MatcherPlanner(_NeverConsumesMatcher))),
    Mutant("advertises-without-matching", "§A: recordedFixtures is advertised with "
           "fixtureMatching", edge=_without_matching),
    Mutant("first-invocation-only", "UQ1: every call of every invocation of the agent is "
           "derived", _swap(deriver=_FirstInvocationDeriver)),
    Mutant("every-task-served", "§B: only the named task takes the source's fixtures",
           _swap(planner=_EveryTaskPlanner)),
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
    Mutant("matches-nfkc-folded", "§D/UQ2: argsMatch exact (here strings are NFKC-normalised "
           "before they are compared)", _loose_matcher(_nfkc)),
)
