"""Faulty hosts whose refusal of an unusable source tells its reasons apart (RFC 0252 §C and
Security): another tenant's run refused with its own status, code or wording, apart from an
id no host minted, by the order of the §B checks, in a header, after the tenth ask, in
another language, for problem+json, by a longer request id, or in time. A new host whose
refusal lets a caller learn whether another tenant's run exists (or why a source is
unusable) goes here; one that echoes the supplied id goes in `echoed_ids`.
"""

from __future__ import annotations

import time
import uuid
import weakref
from collections.abc import Callable
from typing import Any

import attrs

from refsim.domain.commands import CreateEval, CreateRun
from refsim.domain.core import Components, HostCore, RequestRules
from refsim.domain.ids import parse_bound
from refsim.domain.owners import Owner
from refsim.domain.recorded import FOREIGN, NOT_TERMINAL, UNKNOWN, SourcePolicy
from refsim.domain.refusals import UNUSABLE_SOURCE, Refusal, not_found, tenant_mismatch, validation
from refsim.domain.runs import RunRecord
from refsim.domain.view import HostView
from refsim.host import Edge, SimHost
from refsim.wire.response import Response
from refsim.wire.router import refusal_response
from refsim.zoo.faulty.base import Mutant, _caller_and_body, _is_unusable, _swap, _with_header


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


# The verdict this module's source policies give another tenant's id to set it apart (its
# rules then refuse it their own way): a kind of unusable source §C does not have.
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


def _foreign_source_header(host: SimHost, method: str, target: str, headers: dict[str, str],
                           body: bytes | None, response: Response) -> Response:
    """Adds a header to a refusal only when a named source is another tenant's run."""
    if (method != "POST" or not target.startswith("/runs") or response.status != 400
            or _names_foreign_run(host, headers, body) is None):
        return response
    return _with_header(response, "OpenWOP-Source-Scope", "other-tenant")


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


class _SlowerForeign(SourcePolicy):
    """Takes 5 ms longer to refuse another tenant's run than an id no host minted."""

    def assess(self, core: HostView, caller: Owner, value: Any, agent_id: str
               ) -> RunRecord | str:
        found = super().assess(core, caller, value, agent_id)
        if found == FOREIGN:
            time.sleep(0.005)
        return found


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


# This family's hosts (the package puts them in the zoo's order, its `ORDER`).
HOSTS: tuple[Mutant, ...] = (
    Mutant("foreign-403", "§C: another tenant's run is refused like no run (not 403)",
           _swap(rules=_foreign_refused_as(tenant_mismatch()))),
    Mutant("foreign-404", "§C: another tenant's run is refused like no run (not 404)",
           _swap(rules=_foreign_refused_as(not_found()))),
    Mutant("words-non-terminal-differently", "§C: every unusable source gets the same refusal",
           _swap(rules=_WordsNonTerminalDifferently)),
    Mutant("foreign-unminted-403", "§C: another tenant's never-minted id is refused like no "
           "run (not 403, which tells its ids apart)",
           _swap(sources=_TellsForeignIds, rules=_ForeignIds403)),
    Mutant("check-order-oracle", "§C: a §B refusal must not say whether a named foreign run "
           "exists", _swap(rules=_OrderOracle)),
    Mutant("foreign-source-header", "§C: the refusal of another tenant's run is the same "
           "whole response, headers included", edge=_foreign_source_header),
    Mutant("check-order-oracle-live-shadow", "§C: a §B refusal (here live-shadow) must not "
           "say whether a named run exists", _swap(rules=_OrderOracleLiveShadow)),
    Mutant("slower-for-foreign-runs", "Security (SHOULD): another tenant's run reads as no "
           "run, in time too (here 5 ms slower to refuse)", _swap(sources=_SlowerForeign),
           timing_only=True),
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
    Mutant("localised-for-foreign", "§C/Security: another tenant's run is refused as no run "
           "is, whatever the request's negotiable headers (here another message for it "
           "when Accept-Language is sent)", edge=_localised_for_foreign),
    Mutant("slower-for-foreign-waiting-runs", "Security (SHOULD): another tenant's run reads "
           "as no run, in time too (here 5 ms slower for one not finished)",
           _swap(sources=_SlowerForeignWaiting), timing_only=True),
    Mutant("longer-request-id-for-foreign", "Security (refsim's SHOULD reading): nothing on "
           "the answer tells another tenant's run from no run (here a random request id, "
           "longer for it)", edge=_longer_request_id),
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
)
