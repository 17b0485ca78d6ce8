"""The requirement registry: every obligation witnessed, every emitted id registered.

The registry and the checks are held to each other both ways: a check that files a row under
an unregistered id fails here, and so does a registry entry naming a check that does not exist.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

import refsim
from refsim.check import scenario
from refsim.check.findings import Row
from refsim.check.registry import (
    DEFAULT_PATH,
    Registry,
    Requirement,
    load_registry,
    short_id,
)
from refsim.check.scenario import ScenarioConfig, run_scenario

EXPECTED_RULES = (
    [f"R{n}" for n in range(1, 7)] + [f"R7{c}" for c in "abcdef"]
    + [f"R{n}" for n in range(8, 23)] + [f"S{n}" for n in range(1, 6)]
    + [f"UQ{n}" for n in range(1, 6)] + ["IMPL1"])
P, S = "openwop.requirement.0252.", "refsim.requirement.0252."
EXPECTED_REQUIREMENTS = (
    [P + leg for leg in ("shape", "source-replayed", "drift-fails-closed", "source-refused",
                         "source-uniform", "fields-refused")]
    + ["openwop.scenario.v2-eval-recorded-fixtures"]
    + [S + name for name in (
        "facet-implies-matching", "non-advertising-refuses", "refused-before-start",
        "empty-map-refused", "live-shadow-refused", "suite-fixtures-refused",
        "usable-source-accepted", "source-uniform-body", "source-uniform-latency", "no-echo",
        "non-terminal-refused",
        "not-held-refused", "failed-call-needs-fixture-errors", "content-free-lane-usable",
        "derive-agent-calls-only", "derive-sequence-order", "derive-exact-args",
        "derive-error-entries", "fail-closed-miss", "per-trial-reset", "no-egress-credential",
        "derived-never-on-wire", "summary-content-free", "echo-verbatim", "fork-no-reresolve",
        "miss-count-reported", "copy-erased-with-source", "gone-copy-refused",
        "tenant-isolation")]
    + ["refsim.requirement.0251.baseline-uniform", "refsim.requirement.0251.eval-modes-subset"]
    + ["refsim.requirement.wire.registered-codes"])


@pytest.fixture(scope="module")
def registry() -> Registry:
    return load_registry()


@pytest.fixture(scope="module")
def scenario_rows() -> list[Row]:
    return run_scenario(refsim.SimHost(), ScenarioConfig("hk_test_acme", "hk_test_globex"))


def scenario_check(row: Row) -> str:
    """The registry's name for a scenario row: `scenario:` and the id without its prefix."""
    return "scenario:" + short_id(row.requirement_id).removeprefix("openwop.scenario.")


def checks_of(registry: Registry, kind: str) -> dict[str, set[str]]:
    """check name -> the requirement ids that list it, for one kind of check."""
    out: dict[str, set[str]] = {}
    for req in registry.requirements:
        for name in req.checks:
            if name.startswith(kind + ":"):
                out.setdefault(name, set()).add(req.id)
    return out


def assert_both_ways(registry: Registry, kind: str, emitted: Iterable[tuple[str, str]]) -> None:
    """Each (check, requirement id) a check emits is listed, and each listed one is emitted."""
    emitted = set(emitted)
    listed = {(name, rid) for name, rids in checks_of(registry, kind).items() for rid in rids}
    missing = sorted(emitted - listed)
    assert not missing, ("these checks file rows under a requirement whose `checks` does not "
                         f"list them (add them to specs/requirements.yaml): {missing}")
    dangling = sorted(listed - emitted)
    assert not dangling, f"specs/requirements.yaml lists checks that emit no such row: {dangling}"


# -- the registry as shipped ----------------------------------------------------------------------

def test_registry_loads_every_rule_and_requirement(registry: Registry) -> None:
    assert sorted(r.id for r in registry.rules) == sorted(EXPECTED_RULES)
    assert sorted(registry.ids) == sorted(EXPECTED_REQUIREMENTS)
    assert load_registry() is registry  # cached


def test_every_obligation_has_a_check(registry: Registry) -> None:
    gaps = registry.uncovered()
    assert not gaps, "MUST/SHOULD rules no check witnesses: " + "; ".join(map(str, gaps))


def test_only_unwitnessable_obligations_with_a_rationale_go_uncovered(registry: Registry
                                                                      ) -> None:
    exempt = [r.id for r in registry.rules if r.is_obligation and not registry.covering(r)]
    assert exempt == ["R3"]
    assert registry.rule("R3").rfc_verdict == "unwitnessable" and registry.rule("R3").rationale


def test_levels_follow_the_rfc(registry: Registry) -> None:
    levels = {r.id: r.level for r in registry.rules}
    assert levels["R2"] == "MUST" and levels["R3"] == "MUST NOT" and levels["R4"] == "MAY"
    assert levels["R11"] == levels["R21"] == levels["R18"] == "MUST NOT"
    assert levels["S3"] == "SHOULD" and levels["IMPL1"] == "SHOULD NOT"
    assert all(levels[f"R7{c}"] == "MUST" for c in "abcdef")
    assert all(levels[f"UQ{n}"] == "DEF" for n in range(1, 6))


def test_witness_classes_follow_the_falsifiability_table(registry: Registry) -> None:
    # The RFC's table calls these four unwitnessable, and the shapes witnessable unaided.
    for rid in ("R3", "R18", "R21", "S3"):
        assert registry.rule(rid).rfc_verdict == "unwitnessable", rid
    for rid in ("R1", "R5", "R6"):
        assert registry.rule(rid).rfc_verdict == "witnessable-unaided", rid
    assert registry.requirement(P + "shape").witness == "witnessable-unaided"
    for leg in ("source-replayed", "drift-fails-closed", "source-refused", "source-uniform",
                "fields-refused"):
        assert registry.requirement(P + leg).witness == "witnessable-gated", leg


# -- every id a check emits is registered ---------------------------------------------------------

def test_scenario_ids_are_registered(registry: Registry, scenario_rows: list[Row]) -> None:
    ids = {r.requirement_id for r in scenario_rows}
    assert ids == {*scenario.LEGS, scenario.UNIFORM_BODY, scenario.LATENCY,
                   scenario.SCENARIO_ROW}
    assert registry.unknown_ids(ids) == []


def test_example_ids_are_registered(registry: Registry) -> None:
    from refsim.check.examples import load_examples
    examples = load_examples()
    assert examples, "the RFC example table is empty"
    assert registry.unknown_ids(e.requirement_id for e in examples) == []


def test_invariant_ids_are_registered(registry: Registry) -> None:
    from refsim.check.invariants import load_invariants
    invariants = load_invariants()
    assert invariants
    assert registry.unknown_ids(i.requirement_id for i in invariants) == []


def test_machine_ids_are_registered(registry: Registry) -> None:
    import re

    import refsim.testing.stateful as stateful
    from refsim.check.ids import req_id
    # The machine is assembled in stateful.py from its sibling modules.
    text = "\n".join(path.read_text(encoding="utf-8")
                     for path in sorted(Path(stateful.__file__).parent.rglob("*.py")))
    shorts = set(re.findall(r'req_id\("([a-z0-9.-]+)"\)', text))
    assert shorts
    assert registry.unknown_ids(req_id(s) for s in shorts) == []


# -- the checks a requirement lists exist, and file rows under it ---------------------------------

def test_scenario_checks_match_the_scenario_both_ways(registry: Registry,
                                                      scenario_rows: list[Row]) -> None:
    assert_both_ways(registry, "scenario",
                     ((scenario_check(r), r.requirement_id) for r in scenario_rows))


def test_invariant_checks_match_the_invariants_both_ways(registry: Registry) -> None:
    from refsim.check.invariants import load_invariants
    assert_both_ways(registry, "invariant",
                     ((f"invariant:{i.id}", i.requirement_id) for i in load_invariants()))


def test_example_checks_match_the_example_table_both_ways(registry: Registry) -> None:
    from refsim.check.examples import load_examples
    assert_both_ways(registry, "example",
                     ((f"example:{e.id}", e.requirement_id) for e in load_examples()))


def test_sampled_checks_match_the_classes_both_ways(registry: Registry) -> None:
    from refsim.check.classes import CLASS_NAMES
    from refsim.check.sampled import requirement
    assert_both_ways(registry, "sampled", ((f"sampled:{c}", requirement(c)) for c in CLASS_NAMES))


def test_machine_checks_name_rules_or_invariants_of_the_machine(registry: Registry) -> None:
    from refsim.testing.stateful import RecordedFixturesMachine, machine_parts
    invariants = machine_parts(RecordedFixturesMachine).invariants
    assert [i.function.__name__ for i in invariants] == ["after_every_step"]
    for name in checks_of(registry, "machine"):
        check = name.removeprefix("machine:")
        prop = getattr(RecordedFixturesMachine, check, None)
        marks = set(vars(prop)) if prop is not None and hasattr(prop, "__dict__") else set()
        assert marks & {"hypothesis_stateful_rule", "hypothesis_stateful_invariant"} or (
            callable(prop) and check in RecordedFixturesMachine.AFTER_EVERY_STEP), (
            f"{name} is not a rule of RecordedFixturesMachine nor a check after every step")


# -- queries --------------------------------------------------------------------------------------

def test_unknown_ids(registry: Registry) -> None:
    assert registry.unknown_ids([P + "shape", "refsim.requirement.0252.nope", P + "shape",
                                 "openwop.requirement.0252.nope"]) == [
        "openwop.requirement.0252.nope", "refsim.requirement.0252.nope"]


def test_matching_short_prefixes(registry: Registry) -> None:
    ids = [q.id for q in registry.matching("0252.source")]
    assert ids == [P + "source-replayed", P + "source-refused", P + "source-uniform",
                   S + "source-uniform-body", S + "source-uniform-latency"]
    assert [q.id for q in registry.matching(P + "shape")] == [P + "shape"]
    assert [q.id for q in registry.matching("0251")] == [
        "refsim.requirement.0251.baseline-uniform", "refsim.requirement.0251.eval-modes-subset"]
    assert {q.id for q in registry.matching("refused")} >= {P + "source-refused",
                                                            S + "gone-copy-refused"}
    assert registry.matching("no-such-thing") == []


def test_format_list_prints_every_requirement_and_rule(registry: Registry) -> None:
    text = registry.format_list()
    for req in registry.requirements:
        assert req.id in text
        for name in req.checks:
            assert name in text
    lines = text.splitlines()
    for rule in registry.rules:
        assert any(line.strip().startswith(rule.id + " ") for line in lines), rule.id
    assert "not covered (unwitnessable)" in text
    assert text.rstrip().endswith("0 uncovered obligation(s)")


def test_requirement_str_and_short(registry: Registry) -> None:
    req = registry.requirement(P + "source-uniform")
    assert isinstance(req, Requirement) and req.short == "0252.source-uniform"
    assert str(req).startswith(P + "source-uniform (§C, MUST)")


# -- the validator --------------------------------------------------------------------------------

def minimal() -> dict[str, Any]:
    return {
        "rules": [
            {"id": "R1", "section": "§A", "level": "MUST", "text": "a rule", "rfc_verdict":
             "witnessable-gated", "covered_by": ["refsim.requirement.0252.one"]},
            {"id": "R2", "section": "§A", "level": "DEF", "text": "a definition",
             "rfc_verdict": "witnessable-unaided", "covered_by": []},
        ],
        "requirements": [
            {"id": "refsim.requirement.0252.one", "title": "one", "section": "§A",
             "level": "MUST", "witness": "witnessable-gated", "rules": ["R1"],
             "checks": ["scenario:0252.one"]},
        ],
    }


def load(tmp_path: Path, data: dict[str, Any]) -> Registry:
    path = tmp_path / "requirements.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return Registry.from_path(path)


def test_validator_accepts_the_minimal_file(tmp_path: Path) -> None:
    reg = load(tmp_path, minimal())
    assert reg.uncovered() == [] and reg.unchecked() == []


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d["rules"][0].update(level="MUSTT"), r"rule R1: unknown level 'MUSTT'"),
    (lambda d: d["rules"][1].update(rfc_verdict="visible"),
     r"rule R2: unknown rfc_verdict 'visible'"),
    (lambda d: d["requirements"][0].update(level="must"),
     r"requirement refsim\.requirement\.0252\.one: unknown level 'must'"),
    (lambda d: d["rules"][0]["covered_by"].append("refsim.requirement.0252.ghost"),
     r"rule R1: covered_by names unknown requirement 'refsim\.requirement\.0252\.ghost'"),
    (lambda d: d["requirements"][0]["rules"].append("R99"),
     r"requirement refsim\.requirement\.0252\.one: rules names unknown rule 'R99'"),
    (lambda d: d["rules"].append(copy.deepcopy(d["rules"][1])), r"duplicate rule id 'R2'"),
    (lambda d: d["requirements"].append(copy.deepcopy(d["requirements"][0])),
     r"duplicate requirement id 'refsim\.requirement\.0252\.one'"),
    (lambda d: d["rules"][0].update(covered_by=[]),
     r"requirement refsim\.requirement\.0252\.one: rules names R1, whose covered_by does not"),
    (lambda d: d["requirements"][0].update(rules=[]),
     r"rule R1: covered_by names refsim\.requirement\.0252\.one, whose rules do not list R1"),
    (lambda d: d["rules"][1].update(rfc_verdict="unwitnessable"),
     r"rule R2: rfc_verdict unwitnessable needs a rationale"),
    (lambda d: d["requirements"][0].update(checks=["pytest:test_x"]),
     r"check 'pytest:test_x' is not <kind>:<name>"),
    (lambda d: d["requirements"][0].update(id="requirement.one"),
     r"requirements\[0\]|requirement requirement\.one: id"),
    (lambda d: d["rules"][0].update(text=""), r"rule R1: 'text' must be a non-empty string"),
    (lambda d: d["rules"][0].pop("section"), r"rule R1: 'section' must be a non-empty string"),
    (lambda d: d.pop("requirements"), r"top-level 'requirements' must be a list"),
])
def test_validator_names_the_bad_entry(tmp_path: Path, edit: Any, message: str) -> None:
    data = minimal()
    edit(data)
    with pytest.raises(ValueError, match=message):
        load(tmp_path, data)


def test_uncovered_names_a_must_whose_requirement_has_no_check(tmp_path: Path) -> None:
    data = minimal()
    data["requirements"][0]["checks"] = []
    reg = load(tmp_path, data)
    assert [r.id for r in reg.uncovered()] == ["R1"]
    assert "UNCOVERED" in reg.format_list()
    assert [q.id for q in reg.unchecked()] == ["refsim.requirement.0252.one"]


def test_uncovered_names_a_should_with_no_requirement(tmp_path: Path) -> None:
    data = minimal()
    data["rules"].append({"id": "S3", "section": "Security", "level": "SHOULD",
                          "text": "erase the copy", "rfc_verdict": "seam-gated"})
    assert [r.id for r in load(tmp_path, data).uncovered()] == ["S3"]


def test_uncovered_exempts_only_unwitnessable_with_a_rationale(tmp_path: Path) -> None:
    data = minimal()
    data["rules"].append({"id": "R3", "section": "§A", "level": "MUST NOT",
                          "text": "a client obligation", "rfc_verdict": "unwitnessable",
                          "rationale": "no host shows what a client sends elsewhere"})
    data["rules"].append({"id": "R4", "section": "§A", "level": "MUST NOT",
                          "text": "gated but unchecked", "rfc_verdict": "witnessable-gated",
                          "rationale": "a rationale alone does not exempt"})
    assert [r.id for r in load(tmp_path, data).uncovered()] == ["R4"]


def test_the_shipped_file_is_the_default_path() -> None:
    assert DEFAULT_PATH.name == "requirements.yaml" and DEFAULT_PATH.is_file()


def test_values_built_in_python_are_validated_too() -> None:
    from refsim.check.registry import Rule
    with pytest.raises(ValueError):
        Rule("R1", "§A", "OUGHT", "x", "witnessable-gated")
    with pytest.raises(ValueError):
        Requirement("refsim.requirement.0252.x", "x", "§A", "MUST", "seen")
    one = Requirement("refsim.requirement.0252.x", "x", "§A", "MUST", "witnessable-gated")
    with pytest.raises(ValueError, match="duplicate requirement id"):
        Registry((), (one, one))
