"""The invariant rows: all pass on the reference host, the loader refuses malformed rows,
and every check fails against a host with one broken component."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from refsim import HostProfile, SimHost, paths
from refsim.check.findings import Disposition, Finding
from refsim.check.invariants import CHECKS, Invariant, load_invariants, run_invariants
from refsim.check.session import REPLAY, SOURCE, Session, eval_body
from refsim.check.zoo import KeepsCopies, OmitsEcho, ReresolvesOnFork, ServesMissLive
from refsim.domain.core import (
    Components,
    Echo,
    ForkPolicy,
    HostCore,
    MissPolicy,
    TaskPlan,
    TaskPlanner,
)
from refsim.domain.fixtures import FixtureEntry
from refsim.domain.ids import parse_bound, project
from refsim.domain.owners import Owner
from refsim.domain.profile import PROFILES
from refsim.domain.recorded import CopyStore, Deriver, SourcePolicy
from refsim.domain.runs import RunRecord
from refsim.domain.suites import Task
from refsim.domain.tools import ToolResult

EXPECTED = {
    "eval-fixture-run-tenant-scoped": "openwop.requirement.0252.source-uniform",
    "eval-summary-no-content-leak": "refsim.requirement.0252.summary-content-free",
    "eval-fixture-replay-fail-closed": "refsim.requirement.0252.fail-closed-miss",
    "eval-fixture-no-egress-credential": "refsim.requirement.0252.no-egress-credential",
    "eval-fixture-no-reresolution": "refsim.requirement.0252.fork-no-reresolve",
    "eval-fixture-copy-erased-with-source": "refsim.requirement.0252.copy-erased-with-source",
    "eval-fixture-gone-copy-refused": "refsim.requirement.0252.gone-copy-refused",
    "eval-fixture-runs-echoed": "refsim.requirement.0252.echo-verbatim",
    "eval-recorded-fixtures-implies-matching": "refsim.requirement.0252.facet-implies-matching",
    "eval-derived-never-on-wire": "refsim.requirement.0252.derived-never-on-wire",
}


# ----------------------------------------------------------------------------- the rows


def test_every_invariant_passes_on_the_reference_host() -> None:
    rows = run_invariants(SimHost)
    assert {r.check_id: r.requirement_id for r in rows} == EXPECTED
    for row in rows:
        assert row.disposition is Disposition.EXECUTED_PASS, f"{row.check_id}: {row.detail}"
        assert row.scenario_id == "invariants"
        assert row.assertion_count >= 5, row.check_id  # a check that barely looks is no check
        assert all(f.requirement_id == row.requirement_id for f in row.findings)


def test_rows_follow_the_openwop_rules() -> None:
    rows = load_invariants()
    assert [r.id for r in rows] == list(EXPECTED)
    for row in rows:
        assert row.check in CHECKS
        assert not (row.tier == "protocol" and row.witness == "unwitnessable")
        if row.witness == "unwitnessable":
            assert row.tier == "reference-impl" and row.non_testability_rationale
        assert "RFC 0252" in row.note
    by_id = {r.id: r for r in rows}
    assert by_id["eval-fixture-run-tenant-scoped"].tier == "protocol"
    assert by_id["eval-fixture-run-tenant-scoped"].severity == "critical"
    assert by_id["eval-fixture-no-egress-credential"].witness == "unwitnessable"
    assert by_id["eval-derived-never-on-wire"].witness == "negative-existence"


def test_every_test_glob_resolves() -> None:
    for row in load_invariants():
        for glob in row.tests:
            assert list(paths.ROOT.glob(glob)), f"{row.id}: {glob} matches no file"


def test_every_registered_check_is_bound_to_a_row() -> None:
    assert {r.check for r in load_invariants()} == set(CHECKS)


@pytest.mark.parametrize(("prefix", "ids"), [
    ("0252.source-uniform", {"eval-fixture-run-tenant-scoped"}),
    ("openwop.requirement.0252", {"eval-fixture-run-tenant-scoped"}),
    ("refsim.requirement.0252.gone-copy", {"eval-fixture-gone-copy-refused"}),
    ("copy-erased", {"eval-fixture-copy-erased-with-source"}),
    ("no-such-thing", set()),
])
def test_prefix_filters_on_requirement_or_invariant_id(prefix: str, ids: set[str]) -> None:
    assert {r.check_id for r in run_invariants(SimHost, prefix)} == ids


def test_a_check_that_raises_is_a_failed_row(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(host: SimHost) -> list[Finding]:
        raise RuntimeError("boom")
    monkeypatch.setitem(CHECKS, "check_broken", broken)
    row = attrs.evolve(load_invariants()[0], check="check_broken")
    [result] = run_invariants(SimHost, invariants=[row])
    assert result.disposition is Disposition.EXECUTED_FAIL
    assert "boom" in result.detail


# ----------------------------------------------------------------------------- the loader


def _rows() -> list[dict[str, Any]]:
    doc = yaml.safe_load((paths.INVARIANTS / "invariants.yaml").read_text(encoding="utf-8"))
    return list(doc["invariants"])


def _load(tmp_path: Path, rows: list[dict[str, Any]]) -> list[Invariant]:
    file = tmp_path / "invariants.yaml"
    file.write_text(yaml.safe_dump({"invariants": rows}), encoding="utf-8")
    return load_invariants(file)


def _edit(index: int, **changes: Any) -> list[dict[str, Any]]:
    rows = _rows()
    for key, value in changes.items():
        if value is None:
            rows[index].pop(key, None)
        else:
            rows[index][key] = value
    return rows


def test_the_loader_round_trips_the_shipped_file(tmp_path: Path) -> None:
    assert _load(tmp_path, _rows()) == load_invariants()


@pytest.mark.parametrize(("changes", "message"), [
    ({"witness": "unwitnessable", "non_testability_rationale": "none"},
     "eval-fixture-run-tenant-scoped: a protocol-tier row must not be unwitnessable"),
    ({"check": "check_nothing"},
     "eval-fixture-run-tenant-scoped: check 'check_nothing' is not a check registered"),
    ({"severity": None}, "eval-fixture-run-tenant-scoped: missing required field(s) severity"),
    ({"requirement_id": None, "check": None},
     "eval-fixture-run-tenant-scoped: missing required field(s) requirement_id, check"),
    ({"tier": "advisory"}, "eval-fixture-run-tenant-scoped: tier 'advisory' is not one of"),
    ({"severity": "urgent"}, "eval-fixture-run-tenant-scoped: severity 'urgent' is not one of"),
    ({"witness": "seen-it"}, "eval-fixture-run-tenant-scoped: witness 'seen-it' is not one of"),
    ({"tests": []}, "eval-fixture-run-tenant-scoped: a protocol-tier row needs at least one"),
    ({"tests": "tests/test_invariants.py"}, "tests must be a list"),
    ({"requirement_id": "0252.source-uniform"}, "requirement_id '0252.source-uniform' is not"),
    ({"witnes": "claims-check"}, "eval-fixture-run-tenant-scoped: unknown field(s) witnes"),
    ({"note": ""}, "eval-fixture-run-tenant-scoped: note must be a non-empty string"),
])
def test_the_loader_refuses_a_malformed_row(tmp_path: Path, changes: dict[str, Any],
                                            message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        _load(tmp_path, _edit(0, **changes))


def test_unwitnessable_needs_a_rationale(tmp_path: Path) -> None:
    index = list(EXPECTED).index("eval-fixture-no-egress-credential")
    with pytest.raises(ValueError, match="eval-fixture-no-egress-credential: witness "
                                         "unwitnessable needs a non_testability_rationale"):
        _load(tmp_path, _edit(index, non_testability_rationale=None))


def test_the_loader_refuses_duplicates_and_rows_without_an_id(tmp_path: Path) -> None:
    rows = _rows()
    with pytest.raises(ValueError, match="eval-fixture-run-tenant-scoped: the id appears more"):
        _load(tmp_path, [*rows, rows[0]])
    with pytest.raises(ValueError, match=r"invariant #0: missing required field\(s\) id"):
        _load(tmp_path, _edit(0, id=None))
    with pytest.raises(ValueError, match="expected a mapping with an 'invariants' list"):
        file = tmp_path / "bare.yaml"
        file.write_text(yaml.safe_dump(rows), encoding="utf-8")
        load_invariants(file)


# ----------------------------------------------------------------------------- broken hosts
# Each is the reference host with exactly one part swapped for a broken twin.


class AcceptsForeignSource(SourcePolicy):
    """§C: reads another tenant's completed run as if it were the caller's."""

    def assess(self, core: HostCore, caller: Owner, value: Any, agent_id: str
               ) -> RunRecord | str:
        rid = parse_bound(value)
        run = core.runs.get(rid) if rid is not None else None
        if run is not None and run.terminal and not caller.can_read(run.owner):
            return super().assess(core, run.owner, value, agent_id)
        return super().assess(core, caller, value, agent_id)


class LeaksDerivedEntries(Echo):
    """§D: puts the derived entries of the named sources into eval.started."""

    core: HostCore | None = None

    def eval_started(self, payload: dict[str, Any], fixture_runs: dict[str, Any] | None) -> None:
        super().eval_started(payload, fixture_runs)
        assert self.core is not None
        named = set((fixture_runs or {}).values())
        payload["toolResponses"] = [e.to_json() for source, _, _, entries
                                    in self.core.copies.all_entries()
                                    if source.bound in named for e in entries]


class ProjectsEcho(Echo):
    """§E: echoes the ids in their path projection, not verbatim."""

    def eval_started(self, payload: dict[str, Any], fixture_runs: dict[str, Any] | None) -> None:
        if fixture_runs is not None:
            payload["fixtureRuns"] = {k: project(v) for k, v in fixture_runs.items()}


class ForgetsMisses(MissPolicy):
    """§D/§E: fails the call closed but never counts the miss."""

    def on_miss(self, core: HostCore, tenant: str, tool: str, args: Any,
                on_miss: str) -> tuple[ToolResult, bool]:
        result, _ = super().on_miss(core, tenant, tool, args, on_miss)
        return result, False


class CountsMissButCallsLive(MissPolicy):
    """§D/Security: counts the miss and answers fixture_miss, yet calls the live tool."""

    def on_miss(self, core: HostCore, tenant: str, tool: str, args: Any,
                on_miss: str) -> tuple[ToolResult, bool]:
        core.gateway.call(tenant, tool, args)
        return ToolResult("error", error={"code": "fixture_miss", "message": "x"}), True


class PlansLive(TaskPlanner):
    """§D: serves derived fixtures under onMiss live instead of fail."""

    def plan(self, core: HostCore, task: Task, modes: tuple[str, ...],
             derived: tuple[FixtureEntry, ...] | None) -> TaskPlan:
        plan = super().plan(core, task, modes, derived)
        return TaskPlan(plan.entries, "live") if derived is not None else plan


class DerivesEgress(Deriver):
    """SR-1: copies the egress record (with its injected credential) into each entry."""

    def derive(self, core: HostCore, source: RunRecord, agent_id: str
               ) -> tuple[FixtureEntry, ...]:
        egress = [attrs.asdict(r) for r in core.gateway.egress]
        return tuple(attrs.evolve(e, response={"result": e.response, "egress": egress})
                     for e in super().derive(core, source, agent_id))


class DerivesFromSourceOnFork(ForkPolicy):
    """§E: ignores the stored copy and derives from the source again, looking the run up
    directly, so the resolution count never moves."""

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


class RunsLiveWhenCopyGone(ForkPolicy):
    """Security: a fork whose copy is gone runs with no fixtures, against live tools."""

    def copies(self, core: HostCore, run: RunRecord) -> dict[str, tuple[FixtureEntry, ...]] | None:
        return super().copies(core, run) or {}


class WipesAllCopies(CopyStore):
    """Security: erasing one source erases every other source's copies as well."""

    def erase_source(self, source: Any) -> int:
        count = self.count_for(source)
        self._by_source.clear()
        return count


def _with(**parts: Any) -> Callable[[], SimHost]:
    return lambda: SimHost(components=Components(**parts))


def _leaky() -> SimHost:
    echo = LeaksDerivedEntries()
    host = SimHost(components=Components(echo=echo))
    echo.core = host.core
    return host


class _AdvertisesWithoutMatching(HostProfile):
    """A profile that lies in discovery: the real HostProfile cannot be configured so."""

    def agents_family(self) -> dict[str, Any] | None:
        family = super().agents_family()
        assert family is not None
        family["evalSuite"].pop("fixtureMatching", None)
        family["evalSuite"]["recordedFixtures"] = True
        return family


SABOTAGE: list[tuple[str, str, Callable[[], SimHost], str]] = [
    ("check_tenant_scoped", "accepts-foreign", _with(sources=AcceptsForeignSource()),
     "tenant B's completed source: expected 400 validation_error, got 201"),
    ("check_summary_content_free", "leaks-entries", _leaky, "carries content keys"),
    ("check_fail_closed", "serves-live", _with(misses=ServesMissLive()),
     "the live counter moved"),
    ("check_fail_closed", "forgets-misses", _with(misses=ForgetsMisses()),
     "fixtureMissCount is 0, expected 1"),
    ("check_fail_closed", "plans-live", _with(planner=PlansLive()),
     "live tool state (counters, egress, live calls) across both replays: changed"),
    ("check_no_egress_credential", "derives-egress", _with(deriver=DerivesEgress()),
     "egress credential material present"),
    ("check_no_reresolution", "re-derives", _with(forks=ReresolvesOnFork()),
     "the source was resolved again"),
    ("check_no_reresolution", "derives-from-source", _with(forks=DerivesFromSourceOnFork()),
     "a replay fork with the source deleted from the host: expected 201"),
    ("check_copy_erased_with_source", "keeps-copies", _with(copies=KeepsCopies),
     "derived copy(ies) still stored under the erased source"),
    ("check_copy_erased_with_source", "wipes-all", _with(copies=WipesAllCopies),
     "erasing one source reached another source's copy"),
    ("check_gone_copy_refused", "keeps-copies", _with(copies=KeepsCopies),
     "a replay fork of the eval run: answered 201, not a refusal"),
    ("check_gone_copy_refused", "runs-live", _with(forks=RunsLiveWhenCopyGone()),
     "the live counter moved"),
    ("check_runs_echoed", "projects", _with(echo=ProjectsEcho()),
     "eval.started.fixtureRuns differs from the accepted map"),
    ("check_runs_echoed", "omits", _with(echo=OmitsEcho()),
     "eval.started carries no fixtureRuns although the request did"),
    ("check_facet_implies_matching", "no-matching",
     lambda: SimHost(profile=_AdvertisesWithoutMatching()),
     "recordedFixtures is advertised without fixtureMatching"),
    ("check_facet_implies_matching", "counts-miss-calls-live",
     _with(misses=CountsMissButCallsLive()),
     "the call whose args match nothing: the live counter moved from 0 to 1"),
    ("check_derived_never_on_wire", "leaks-entries", _leaky,
     "carries derived-entry keys ['argsMatch', 'tool', 'toolResponses']"),
]


@pytest.mark.parametrize(("check", "make_host", "why"),
                         [pytest.param(c, m, w, id=f"{c}-{n}") for c, n, m, w in SABOTAGE])
def test_each_check_fails_on_a_host_with_one_broken_part(
        check: str, make_host: Callable[[], SimHost], why: str) -> None:
    failed = [f for f in CHECKS[check](make_host()) if not f.ok]
    assert failed, f"{check} found nothing wrong with a broken host"
    assert any(why in f.message for f in failed), [f.message for f in failed]


def test_every_check_has_a_sabotage() -> None:
    assert {c for c, *_ in SABOTAGE} == set(CHECKS)


def test_a_broken_host_fails_its_row_and_only_the_rows_it_breaks() -> None:
    rows = {r.check_id: r for r in run_invariants(_with(misses=ServesMissLive()))}
    assert not rows["eval-fixture-replay-fail-closed"].passed
    assert rows["eval-fixture-run-tenant-scoped"].passed
    assert rows["eval-fixture-no-egress-credential"].passed


# ----------------------------------------------------------------------------- profiles


@pytest.mark.parametrize("name", ["content-free-lane", "no-counter-seam", "no-fixture-errors",
                                  "no-baseline-selection"])
def test_rows_pass_on_every_conforming_profile(name: str) -> None:
    profile = PROFILES[name]
    rows = run_invariants(lambda: SimHost(profile=profile))
    assert [r.check_id for r in rows if not r.passed] == []


@pytest.mark.parametrize("name", ["no-recorded-fixtures", "no-eval"])
def test_rows_are_inapplicable_without_recorded_fixtures(name: str) -> None:
    profile = PROFILES[name]
    rows = {r.check_id: r for r in run_invariants(lambda: SimHost(profile=profile))}
    facet = rows.pop("eval-recorded-fixtures-implies-matching")
    assert facet.passed  # nothing advertised, nothing implied: still judged
    for row in rows.values():
        assert row.disposition is Disposition.INAPPLICABLE
        assert "recordedFixtures" in row.detail


def test_a_host_that_holds_no_calls_fails_the_positive_controls() -> None:
    # It advertises recordedFixtures yet can use no source (the RFC's implementation note
    # says it SHOULD NOT advertise): refusing everything alike must not pass as uniformity.
    profile = PROFILES["unheld-calls"]
    [row] = run_invariants(lambda: SimHost(profile=profile), "tenant-scoped")
    assert row.disposition is Disposition.EXECUTED_FAIL
    assert "positive control: the caller's own completed source" in row.detail


def test_erased_content_cannot_come_back_through_an_eval_run_it_fed() -> None:
    host = SimHost()
    a = Session(host, "hk_test_acme")
    source = str(a.create(eval_body(SOURCE)).json["runId"])
    fed = str(a.create(eval_body(REPLAY, {"record": source})).json["runId"])
    assert a.erase(source).status == 200
    again = a.create(eval_body(REPLAY, {"record": fed}))
    assert again.status == 400, "S's erased answers were derived again through the eval run"
