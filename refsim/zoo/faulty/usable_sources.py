"""Faulty hosts that take the wrong run as a source, or refuse the right one (RFC 0252 §C): a
source policy that skips the owner or the terminal status, takes a kind §C calls unusable or
refuses one it calls usable, finds a run by an id that is not its id (case-folded, trimmed,
a prefix, unwrapped from a list or an object, decoded like a path, NFKC-folded, cut at a
fragment), assesses only the first source, trusts a cache, or judges one value of a task
named twice and serves another. A new host whose fault is in which runs a create accepts as
sources goes here.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import attrs

from refsim.domain.commands import CreateRun
from refsim.domain.core import Components, HostCore, RequestRules
from refsim.domain.ids import ProjectionError, parse_bound, unproject
from refsim.domain.owners import Owner
from refsim.domain.recorded import FAILED_CALL, NOT_HELD, UNKNOWN, SourcePolicy
from refsim.domain.refusals import Refusal
from refsim.domain.runs import RunRecord
from refsim.domain.view import HostView
from refsim.host import SimHost
from refsim.wire.response import Response
from refsim.zoo.faulty.base import Mutant, _is_unusable, _swap


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


def _before_fragment(value: Any) -> Any:
    """`<id>#x` or `<id>?x` read as a URI reference: the id before its fragment or query."""
    if isinstance(value, str) and ("#" in value or "?" in value):
        return value.split("#", 1)[0].split("?", 1)[0]
    return None


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


# This family's hosts (the package puts them in the zoo's order, its `ORDER`).
HOSTS: tuple[Mutant, ...] = (
    Mutant("accepts-foreign-source", "§C: a usable source is readable by the caller's owner",
           _swap(sources=_AcceptsForeign)),
    Mutant("accepts-non-terminal", "§C: a usable source is a terminal run",
           _swap(sources=_AcceptsNonTerminal)),
    Mutant("accepts-failed-call-without-fixture-errors", "§C: a failed-call source is usable "
           "only with fixtureErrors (here a host without it takes one)",
           _swap(sources=lambda: _AcceptsKind(FAILED_CALL)),
           profile=lambda p: attrs.evolve(p, fixture_errors=False)),
    Mutant("accepts-unheld-source", "§C: a source whose calls the host does not hold is "
           "refused (here taken, with nothing to derive)", _swap(sources=lambda: _AcceptsKind(
               NOT_HELD, lambda run: not run.calls_erased))),
    Mutant("first-source-only", "§C: every named source is assessed", _first_source_only),
    Mutant("accepts-id-in-any-case", "§C: an id that names no run is unknown (here matched "
           "case-folded)", _loosely(lambda v, rid: v.casefold() == rid.casefold())),
    Mutant("accepts-padded-id", "§C: an id that names no run is unknown (here trimmed)",
           _loosely(lambda v, rid: v.strip() == rid)),
    Mutant("accepts-id-prefix", "§C: an id that names no run is unknown (here the one run "
           "it is a prefix of)", _loosely(lambda v, rid: len(v) > 8 and rid.startswith(v))),
    Mutant("refuses-eval-run-source", "§C/UQ4: an eval run of the agent is a usable source",
           _refusing(lambda run: run.eval is not None)),
    Mutant("refuses-cancelled-source", "§C: a usable source is any terminal run (here only "
           "completed ones)", _refusing(lambda run: run.status == "cancelled")),
    Mutant("refuses-content-free-source", "§C: a lane with argsHash alone on the wire is a "
           "usable source when its calls are held", _refusing(_content_free_lane)),
    Mutant("accepts-foreign-on-retry", "§C: another tenant's run is refused, however often "
           "it is asked for (here a cache answers the retry)", _swap(sources=_TrustsItsCache)),
    Mutant("accepts-with-idempotency-key", "§C: a usable source is terminal (here a waiting "
           "one is taken when the create carries an Idempotency-Key)",
           edge=_keyed_accepts_waiting),
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
    Mutant("accepts-id-with-fragment", "§C: an id that names no run is unknown (here `<id>#x` "
           "and `<id>?x` are taken as <id>)",
           _swap(sources=lambda: _UnwrapsSource(_before_fragment))),
    Mutant("named-twice-split-brain", "§C: a source the caller cannot use is refused (here "
           "a task named twice in fixtureRuns: the first value is judged, the last served)",
           _swap(sources=_SplitBrainSources), edge=_NamedTwiceParser()),
)
