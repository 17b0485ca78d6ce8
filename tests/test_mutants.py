"""The kill matrix: the checker kills every faulty host; the machine alone kills the
uniformity, fail-closed, isolation and erasure ones with short counterexamples."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from refsim.check import falsify
from refsim.check.mutants import Side, kill_matrix, print_matrix, write_json
from refsim.check.zoo import ZOO, Mutant, mutant

from .machine_runs import against, checker_rows, killed


def test_the_zoo_has_at_least_twenty_six_documented_faulty_hosts() -> None:
    assert len(ZOO) >= 26
    assert len({m.name for m in ZOO}) == len(ZOO)
    for m in ZOO:
        assert any(mark in m.breaks for mark in ("§", "Security", "UQ")), m.name


@pytest.fixture(scope="module")
def falsified() -> dict[str, dict[str, Any]]:
    doc = falsify.load_cache()
    assert doc is not None, "run `refsim falsify --write specs/falsified.json`"
    return {h["host"]: h for h in doc["raw"]}


# The whole table on every faulty host (a fifth of a second each): the slow tier. The fast
# one keeps the blind spots' in-process kills (test_check_any_host) and the machine's.
@pytest.mark.slow
@pytest.mark.parametrize("faulty", ZOO, ids=lambda m: m.name)
def test_the_checker_kills_each_faulty_host(faulty: Mutant,
                                            falsified: dict[str, dict[str, Any]]) -> None:
    rows = checker_rows(faulty.name)  # what judge_mutant's checker runs
    assert Side.of(rows).killed, f"{faulty.name} survives the checker"
    # The same rows are `refsim falsify`'s inside level of the host: the cache holds them
    # (its outside levels are judged in test_spec_tools).
    fresh = {"host": faulty.name, "breaks": faulty.breaks,
             "levels": {"inside": falsify.inside_level(rows)}}
    problems = falsify.stale(falsified.get(faulty.name, {}), fresh, outside=False)
    assert not problems, ("stale: run `refsim falsify --write specs/falsified.json`, then "
                          "`refsim doc`:\n" + "\n".join(problems))


CRITICAL_KILLS = [
    ("words-non-terminal-differently", "refsim.requirement.0252.source-uniform-body"),
    ("serves-miss-live", "refsim.requirement.0252.fail-closed-miss"),
    ("accepts-foreign-source", "openwop.requirement.0252.source-refused"),
    ("keeps-copy-after-erasure", "refsim.requirement.0252.copy-erased-with-source"),
]


@pytest.mark.parametrize(("name", "requirement"), CRITICAL_KILLS)
def test_the_machine_alone_kills_the_critical_faulty_hosts(name: str, requirement: str) -> None:
    result = killed(name)  # only the kill matters here: no shrinking
    assert not result.passed, f"the machine found nothing wrong with {name}"
    assert result.requirement_id == requirement


@pytest.mark.slow
@pytest.mark.parametrize(("name", "requirement"), [
    pytest.param(name, requirement, marks=pytest.mark.xdist_group(f"shrink-{name}"))
    for name, requirement in CRITICAL_KILLS])
def test_a_machine_kill_shrinks_to_a_short_program(name: str, requirement: str) -> None:
    unshrunk = killed(name)  # the counterexample the shrinker starts from
    assert unshrunk.steps > 8, f"{name}: pick a seed with a longer first counterexample"
    result = against(name)
    assert not result.passed, f"the machine found nothing wrong with {name}"
    assert result.requirement_id == requirement
    assert result.steps <= 8, "\n".join(result.program)


def test_the_matrix_report_and_json(tmp_path: Path) -> None:
    chosen = [mutant("echoes-id"), mutant("omits-echo")]
    kills = kill_matrix(chosen, machine_examples=0)
    out = io.StringIO()
    assert print_matrix(kills, out) == 0
    assert "2/2 faulty hosts killed" in out.getvalue()
    path = tmp_path / "kills.json"
    write_json(kills, path)
    doc = json.loads(path.read_text())
    assert [m["mutant"] for m in doc["mutants"]] == ["echoes-id", "omits-echo"]
    assert all(m["killed"] and m["checker"] for m in doc["mutants"])


def test_a_surviving_mutant_fails_the_matrix() -> None:
    from refsim.check.mutants import Kill
    survivor = Kill(mutant("echoes-id"), (), None)
    out = io.StringIO()
    assert print_matrix([survivor], out) == 1
    assert "survivors: echoes-id" in out.getvalue()
