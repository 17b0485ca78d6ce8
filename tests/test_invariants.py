"""The invariant rows: all pass on the reference host, the loader refuses malformed rows,
and every check fails against a host with one broken component."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from refsim import SimHost
from refsim.check.findings import Disposition, Finding, Row
from refsim.check.invariants import (
    CHECKS,
    Invariant,
    Probe,
    conjoin,
    load_invariants,
    run_invariants,
)
from refsim.check.observe import REPLAY, SOURCE, Session, SimInspector, eval_body
from refsim.data import paths
from refsim.domain.profile import PROFILES
from refsim.zoo.faulty import mutant

EXPECTED = {
    "eval-fixture-run-tenant-scoped": "openwop.requirement.0252.source-uniform",
    "eval-run-owner-scoped": "refsim.requirement.0252.tenant-isolation",
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
        assert row.check in CHECKS or row.examples
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
    assert {r.check for r in load_invariants() if r.check} == set(CHECKS)


@pytest.mark.parametrize(("prefix", "ids"), [
    ("0252.source-uniform", {"eval-fixture-run-tenant-scoped"}),
    ("openwop.requirement.0252", {"eval-fixture-run-tenant-scoped"}),
    ("refsim.requirement.0252.gone-copy", {"eval-fixture-gone-copy-refused"}),
    ("copy-erased", {"eval-fixture-copy-erased-with-source"}),
    ("no-such-thing", set()),
])
def test_prefix_filters_on_requirement_or_invariant_id(prefix: str, ids: set[str]) -> None:
    assert {r.check_id for r in run_invariants(SimHost, prefix)} == ids


def test_a_check_that_raises_is_a_blocked_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """A check that raises is refsim's fault, not the host's (OpenWOP: a suite-side
    predicate failure records blocked): the row is blocked, naming the exception and the
    refsim file and line that raised it."""
    def broken(probe: Probe) -> list[Finding]:
        raise RuntimeError("boom")
    line = broken.__code__.co_firstlineno + 1
    monkeypatch.setitem(CHECKS, "check_broken", broken)
    row = attrs.evolve(load_invariants()[0], check="check_broken")
    [result] = run_invariants(SimHost, invariants=[row])
    assert result.disposition is Disposition.BLOCKED
    assert "the check check_broken raised RuntimeError: boom" in result.detail
    # The innermost refsim frame: the test's check is no refsim code, so the caller's.
    assert re.search(r"at refsim/check/invariants\.py:\d+ ", result.detail), result.detail
    assert f"test_invariants.py:{line}" not in result.detail


def test_the_innermost_refsim_frame_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where refsim code raised inside the check, that frame is the one named."""
    from refsim.domain import ids

    def broken(probe: Probe) -> list[Finding]:
        ids.project(None)  # type: ignore[arg-type]
        return []
    monkeypatch.setitem(CHECKS, "check_broken", broken)
    row = attrs.evolve(load_invariants()[0], check="check_broken")
    [result] = run_invariants(SimHost, invariants=[row])
    assert result.disposition is Disposition.BLOCKED
    line = next(n for n, text in enumerate(Path(ids.__file__).read_text().splitlines(), 1)
                if "if bound.isascii():" in text)
    assert "raised AttributeError: " in result.detail
    assert f"at refsim/domain/ids.py:{line} " in result.detail, result.detail


def test_check_exits_2_when_a_check_raises(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from refsim.cli import main

    def broken(probe: Probe) -> list[Finding]:
        raise KeyError("runId")
    monkeypatch.setitem(CHECKS, "check_tenant_scoped", broken)
    report = tmp_path / "report.json"
    assert main(["invariants", "eval-fixture-run-tenant-scoped", "--json", str(report)]) == 2
    assert "blocked       openwop.requirement.0252.source-uniform" in capsys.readouterr().out
    [row] = json.loads(report.read_text())["results"]["requirements"]
    assert row["disposition"] == "blocked"
    assert "raised KeyError: 'runId' at refsim/check/invariants.py:" in row["detail"]


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
    ({"requirement_id": "refsim.requirement.0252.no-egress-credential",
      "non_testability_rationale": "none"},
     "eval-fixture-run-tenant-scoped: a protocol-tier row must not be unwitnessable"),
    ({"requirement_id": "refsim.requirement.0252.nothing"},
     "requirement_id 'refsim.requirement.0252.nothing' is no requirement of"),
    ({"check": "check_nothing"},
     "eval-fixture-run-tenant-scoped: check 'check_nothing' is not a check registered"),
    ({"severity": None}, "eval-fixture-run-tenant-scoped: missing required field(s) severity"),
    ({"requirement_id": None},
     "eval-fixture-run-tenant-scoped: missing required field(s) requirement_id"),
    ({"check": None, "examples": None},
     "eval-fixture-run-tenant-scoped: name the `examples` that restate it"),
    ({"example": "refsim.example.0252.echo-verbatim"},
     "eval-fixture-run-tenant-scoped: unknown field(s) example"),
    ({"examples": []}, "examples must be a non-empty list of distinct example row ids"),
    ({"examples": "refsim.example.0252.echo-verbatim"}, "examples must be a non-empty list"),
    ({"examples": ["refsim.example.0252.echo-verbatim"] * 2},
     "examples must be a non-empty list of distinct example row ids"),
    ({"examples": ["refsim.example.0252.nothing"]},
     "example 'refsim.example.0252.nothing' is no row of the example table"),
    ({"examples": ["refsim.example.0252.non-advertising-refuses"]},
     "pins the profile 'no-recorded-fixtures': an invariant judges the target's own host"),
    # A wire check beside a row only the inside can judge: over HTTP it would be half judged.
    ({"examples": ["refsim.example.0252.fork-no-reresolve"]},
     "its parts stand on both sides of the wire"),
    ({"tier": "advisory"}, "eval-fixture-run-tenant-scoped: tier 'advisory' is not one of"),
    ({"severity": "urgent"}, "eval-fixture-run-tenant-scoped: severity 'urgent' is not one of"),
    # Witness classes are written once, in specs/requirements.yaml: a row's own is refused.
    ({"witness": "claims-check"}, "eval-fixture-run-tenant-scoped: unknown field(s) witness"),
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
    with pytest.raises(ValueError, match="eval-fixture-no-egress-credential: its requirement "
                                         "is unwitnessable, so it needs a "
                                         "non_testability_rationale"):
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
# Each is a faulty host of the zoo, where the kill matrix counts it too.


def _probe(host: SimHost) -> Probe:
    inspector = SimInspector(host)
    return Probe(host, Session(host, "hk_test_acme", inspector),
                 Session(host, "hk_test_globex", inspector), inspector)


SABOTAGE: list[tuple[str, str, str]] = [
    ("check_tenant_scoped", "accepts-foreign-source",
     "tenant B's completed source: expected 400 validation_error, got 201"),
    ("check_tenant_scoped", "foreign-unminted-403",
     "tenant B's never-minted id: expected 400 validation_error, got 403"),
    ("check_tenant_scoped", "foreign-cancelled-refused-apart",
     "tenant B's cancelled run: expected 400 validation_error, got 404 not_found"),
    ("check_tenant_scoped", "foreign-without-agent-refused-apart",
     "tenant B's run without the agent: expected 400 validation_error, got 404 not_found"),
    ("check_tenant_scoped", "accepts-with-idempotency-key",
     "asked again under an Idempotency-Key (1): expected 400 validation_error, got 201"),
    ("check_tenant_scoped", "accepts-with-idempotency-key",
     "the run list gained 1 run(s) across the refusal"),
    ("check_foreign_actions", "foreign-forks-eval-run",
     "tenant B asks for tenant A's eval run, a replay fork: answered 201, not a refusal"),
    ("check_foreign_actions", "foreign-reads-eval-summary",
     "tenant B asks for tenant A's eval run, its EvalSummary: answered 200, not a refusal"),
    ("check_foreign_actions", "foreign-erases-eval-run",
     "tenant A's eval run, after tenant B's tries: changed"),
    ("check_summary_content_free", "leaks-entries-in-eval-started", "carries content keys"),
    ("check_no_egress_credential", "derives-egress-credential",
     "egress credential material present"),
    ("check_no_reresolution", "reresolves-on-fork", "the source was resolved again"),
    ("check_no_reresolution", "derives-from-source-on-fork",
     "a replay fork with the source deleted: expected 201, got 404"),
    ("check_copy_erased_with_source", "keeps-copy-after-erasure",
     "derived copy(ies) still stored under the erased source"),
    ("check_copy_erased_with_source", "wipes-all-copies",
     "copies of the other source, untouched by erasing this one: 0, expected 1"),
    ("check_facet_implies_matching", "counts-miss-calls-live",
     "the call whose args match nothing: the live counter moved from 0 to 1"),
    ("check_derived_never_on_wire", "leaks-entries-in-eval-started",
     "carries derived-entry keys ['argsMatch', 'toolResponses']"),
    ("check_derived_never_on_wire", "derived-in-snapshot",
     "the replay: GET /: carries recorded content"),
]


@pytest.mark.parametrize(("check", "name", "why"),
                         [pytest.param(c, n, w, id=f"{c}-{n}") for c, n, w in SABOTAGE])
def test_each_check_fails_on_a_host_with_one_broken_part(check: str, name: str,
                                                         why: str) -> None:
    failed = [f for f in CHECKS[check](_probe(mutant(name).host())) if not f.ok]
    assert failed, f"{check} found nothing wrong with {name}"
    assert any(why in f.message for f in failed), [f.message for f in failed]


def test_every_check_has_a_sabotage() -> None:
    assert {c for c, *_ in SABOTAGE} == set(CHECKS)


# What a row's check no longer says because an example row it names says it: the row fails
# on the defect through that example, and the message names the example.
ROW_SABOTAGE: list[tuple[str, str, str, bool]] = [
    # (invariant, faulty host, what the row says, whether its check alone is blind to it)
    ("eval-recorded-fixtures-implies-matching", "advertises-without-matching",
     "example refsim.example.0252.facet-implies-matching: request: "
     "recordedFixtures is advertised without fixtureMatching", True),
    # Two rows are rows only: what their checks said, the example vocabulary says.
    ("eval-fixture-gone-copy-refused", "keeps-copy-after-erasure",
     "example refsim.example.0252.fork-after-erase: replay: answered 201, not a refusal", True),
    ("eval-fixture-gone-copy-refused", "runs-live-when-copy-gone",
     "example refsim.example.0252.fork-after-erase: branch-of-the-early-branch (counter "
     "'refund' of acme): the live counter moved from 3 to 4", True),
    ("eval-fixture-gone-copy-refused", "wipes-all-copies",
     "example refsim.example.0252.fork-after-erase: another-source-still-forks: expected "
     "201, got 404", True),
    ("eval-fixture-replay-fail-closed", "serves-miss-live",
     "example refsim.example.0252.strays-fail-closed: repeats-and-strays (counter "
     "'recorded-fixtures' of acme): the live counter moved from 1 to 2", True),
    ("eval-fixture-replay-fail-closed", "forgets-misses",
     "example refsim.example.0252.strays-fail-closed: drift: eval.scored[record]."
     "fixtureMissCount is 0, expected 1", True),
    ("eval-fixture-replay-fail-closed", "branch-misses-live",
     "example refsim.example.0252.drift-branch-fails-closed: request (counter "
     "'recorded-fixtures-drift' of acme): the live counter moved", True),
    ("eval-fixture-replay-fail-closed", "plans-live",
     "example refsim.example.0252.fail-closed-no-live-effect: request: (white box) live "
     "calls / egress records went (1, 1) -> (2, 2)", True),
    ("eval-fixture-run-tenant-scoped", "accepts-non-terminal",
     "example refsim.example.0252.non-terminal-refused: while-waiting: expected 400", False),
    ("eval-fixture-run-tenant-scoped", "words-non-terminal-differently",
     "example refsim.example.0252.every-unusable-kind-alike: not-terminal", True),
    ("eval-fixture-runs-echoed", "projects-echo",
     "example refsim.example.0252.echo-verbatim: ", True),
    # The forks while the source is there left the check for the row, which must then say
    # what the check said of them: no derivation from the source again.
    ("eval-fixture-no-reresolution", "rederives-while-usable",
     "example refsim.example.0252.fork-no-reresolve: replay: derivations from run src: 2, "
     "expected 1", True),
]


@pytest.mark.parametrize(("invariant", "name", "why", "blind"),
                         [pytest.param(*r, id=f"{r[0]}-{r[1]}") for r in ROW_SABOTAGE])
def test_a_row_fails_through_the_example_it_names(invariant: str, name: str, why: str,
                                                  blind: bool) -> None:
    [inv] = [i for i in load_invariants() if i.id == invariant]
    [row] = run_invariants(mutant(name).host, invariants=[inv])
    assert row.disposition is Disposition.EXECUTED_FAIL
    assert why in row.detail, row.detail
    if inv.check is not None:
        alone = CHECKS[inv.check](_probe(mutant(name).host()))
        assert all(f.ok for f in alone) is blind, [f.message for f in alone if not f.ok]


def test_the_echo_row_binds_to_its_example_and_fails_on_a_projected_echo() -> None:
    [inv] = [i for i in load_invariants() if i.id == "eval-fixture-runs-echoed"]
    assert inv.check is None and inv.examples == ("refsim.example.0252.echo-verbatim",)
    [row] = run_invariants(mutant("projects-echo").host, "runs-echoed")
    assert row.disposition is Disposition.EXECUTED_FAIL
    assert "differs from the accepted map" in row.detail


def test_a_broken_host_fails_its_row_and_only_the_rows_it_breaks() -> None:
    rows = run_invariants(mutant("serves-miss-live").host)
    failed = {r.check_id for r in rows if not r.passed}
    assert "eval-fixture-replay-fail-closed" in failed
    assert "eval-fixture-run-tenant-scoped" not in failed


# ----------------------------------------------------------------------------- profiles


@pytest.mark.parametrize("name", ["content-free-lane", "no-counter-seam", "no-fixture-errors",
                                  "no-baseline-selection"])
def test_rows_pass_on_every_conforming_profile(name: str) -> None:
    profile = PROFILES[name]
    rows = run_invariants(lambda: SimHost(profile=profile))
    # Without the counter seam, a row whose example reads the live counter is blocked as
    # that example is: the check's inside reading does not stand in for the row's claim.
    unread = "the host does not advertise the conformance seam eval-counter"
    assert [(r.check_id, r.detail) for r in rows if not r.passed and not (
        r.disposition is Disposition.BLOCKED and unread in r.detail)] == []


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


# ----------------------------------------------------------------------------- parts


def _part(disposition: Disposition, detail: str = "why", *findings: Finding,
          apart: bool = False) -> Row:
    req = "refsim.requirement.0252.echo-verbatim"
    if apart:
        return Row.apart_row(req, "x", detail)
    if findings:
        return Row.judged(req, "x", findings)
    return Row.unjudged(req, "x", disposition, detail)


HELD = Finding("refsim.requirement.0252.fork-no-reresolve", True, "held")
BROKE = Finding("refsim.requirement.0252.fork-no-reresolve", False, "broke")
PASS_, FAIL_ = Disposition.EXECUTED_PASS, Disposition.EXECUTED_FAIL


@pytest.mark.parametrize(("parts", "disposition", "in_detail"), [
    # A failed part fails the row, whatever the others say.
    ([_part(PASS_, "", HELD), _part(FAIL_, "", BROKE)], FAIL_, "example two: broke"),
    ([_part(Disposition.BLOCKED), _part(FAIL_, "", BROKE)], FAIL_, "broke"),
    # A blocked part blocks the row: the claim was not all observed.
    ([_part(PASS_, "", HELD), _part(Disposition.BLOCKED, "no counter seam")],
     Disposition.BLOCKED, "example two: no counter seam"),
    # A part that does not apply here leaves the row to the parts that ran, named.
    ([_part(PASS_, "", HELD), _part(Disposition.INAPPLICABLE, "no replay family")],
     PASS_, "not judged here: example two: no replay family"),
    ([_part(Disposition.INAPPLICABLE, "a"), _part(Disposition.INAPPLICABLE, "b")],
     Disposition.INAPPLICABLE, "example one: a; example two: b"),
    ([_part(PASS_, "inside", apart=True), _part(PASS_, "inside too", apart=True)],
     Disposition.SKIPPED, "in process only: example one: inside"),
])
def test_a_row_is_the_conjunction_of_its_parts(parts: list[Row], disposition: Disposition,
                                              in_detail: str) -> None:
    [inv] = [i for i in load_invariants() if i.id == "eval-fixture-runs-echoed"]
    row = conjoin(inv, list(zip(("example one", "example two"), parts, strict=True)))
    assert row.disposition is disposition, row.detail
    assert in_detail in row.detail, row.detail
    assert row.check_id == inv.id
    assert all(f.requirement_id == inv.requirement_id for f in row.findings)
    assert row.apart is (disposition is Disposition.SKIPPED)


def test_a_part_that_failed_without_a_failed_finding_still_fails_the_row() -> None:
    [inv] = [i for i in load_invariants() if i.id == "eval-fixture-runs-echoed"]
    silent = Row.judged(inv.requirement_id, "x", [])  # made no assertion: failed
    row = conjoin(inv, [("example one", _part(PASS_, "", HELD)), ("example two", silent)])
    assert row.disposition is Disposition.EXECUTED_FAIL
    assert "example two" in row.detail and "made no assertion" in row.detail


def test_check_takes_each_named_example_row_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import refsim.check.examples as examples_module
    from refsim.check.runner import Target, run_parts
    ran: list[str] = []
    real = examples_module.run_example

    def counted(example: Any, host: Any, **kwargs: Any) -> Any:
        ran.append(example.id)
        return real(example, host, **kwargs)
    monkeypatch.setattr(examples_module, "run_example", counted)
    rows = run_parts(Target(), ["examples", "invariants"], "echo-verbatim")
    assert ran == ["refsim.example.0252.echo-verbatim"]
    assert [r.check_id for r in rows] == ["refsim.example.0252.echo-verbatim",
                                          "eval-fixture-runs-echoed"]
    assert all(r.passed for r in rows)
    # Alone, the invariant runs its example itself, and judges it the same.
    ran.clear()
    [alone] = run_parts(Target(), ["invariants"], "echo-verbatim")
    assert ran == ["refsim.example.0252.echo-verbatim"] and alone.passed
