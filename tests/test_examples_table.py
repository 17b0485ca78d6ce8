"""The example table (specs/examples/*.yaml): every row passes on the reference host, the
loader refuses malformed rows by name, and rows fail on hosts broken where they look."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from refsim import SimHost
from refsim.check.examples import Example, load_examples, run_example, run_examples
from refsim.check.findings import Disposition
from refsim.check.registry import load_registry
from refsim.domain.core import Components, Echo, RequestRules
from refsim.domain.profile import profile_named
from refsim.domain.refusals import Refusal, validation

EXAMPLES = load_examples()

def reference(profile: str) -> SimHost:
    return SimHost(seed=0, profile=profile_named(profile))


def by_id(example_id: str) -> Example:
    return next(e for e in EXAMPLES if e.id == example_id)


# ------------------------------------------------------------------------------ the table


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.id)
def test_row_passes_on_the_reference_host(example: Example) -> None:
    row = run_example(example, reference(example.profile))
    failed = [str(f) for f in row.findings if not f.ok]
    assert row.disposition is Disposition.EXECUTED_PASS, (row.detail, failed)
    assert row.assertion_count > 0
    assert row.check_id == example.id and row.requirement_id == example.requirement_id


def test_rows_use_only_registered_requirement_ids() -> None:
    registered = load_registry().ids
    unknown = {e.id: e.requirement_id for e in EXAMPLES if e.requirement_id not in registered}
    assert not unknown


def test_the_rfc_table_is_six_rows_and_comes_first() -> None:
    rfc = [e for e in EXAMPLES if e.source == "rfc"]
    assert [e.id for e in rfc] == [f"rfc-0252.example-{n}" for n in range(1, 7)]
    assert EXAMPLES[:6] == rfc
    refsim = [e for e in EXAMPLES if e.source == "refsim"]
    assert 25 <= len(refsim) <= 40
    assert all(e.id.startswith("refsim.example.0252.") for e in refsim)


def test_rfc_rows_1_to_3_use_a_task_named_refund_flow() -> None:
    for n in (1, 2, 3):
        maps = [r.action.args.get("fixture_runs") or {} for r in by_id(
            f"rfc-0252.example-{n}").requests]
        assert any("refund-flow" in m for m in maps)


def test_run_examples_gives_one_row_per_example() -> None:
    rows = run_examples(reference)
    assert [r.check_id for r in rows] == [e.id for e in EXAMPLES]
    assert all(r.scenario_id == "rfc-0252-examples" for r in rows)


@pytest.mark.parametrize(("prefix", "expected"), [
    ("0252.source", {"openwop.requirement.0252.source-replayed",
                     "openwop.requirement.0252.source-refused",
                     "openwop.requirement.0252.source-uniform",
                     "refsim.requirement.0252.source-uniform-body"}),
    ("openwop.requirement.0252.fields-refused", {"openwop.requirement.0252.fields-refused"}),
    ("refsim.requirement.0251", {"refsim.requirement.0251.baseline-uniform",
                                 "refsim.requirement.0251.eval-modes-subset"}),
])
def test_prefix_selects_by_requirement_id(prefix: str, expected: set[str]) -> None:
    rows = run_examples(reference, prefix)
    assert {r.requirement_id for r in rows} == expected


def test_prefix_selects_by_example_id() -> None:
    rows = run_examples(reference, "rfc-0252.example-3")
    assert [r.check_id for r in rows] == ["rfc-0252.example-3"]


def test_a_row_that_asserts_nothing_fails() -> None:
    empty = Example("refsim.example.0252.empty", "refsim", "refsim.requirement.0252.no-echo",
                    "asserts nothing", "reference", (), ())
    row = run_example(empty, reference("reference"))
    assert row.disposition is Disposition.EXECUTED_FAIL
    assert "no assertion" in row.detail


def test_a_failing_setup_step_fails_the_row_there(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(textwrap.dedent("""\
        examples:
          - id: refsim.example.0252.bad-setup
            source: refsim
            requirement_id: refsim.requirement.0252.no-echo
            title: the setup's eval names no suite
            setup:
              - create_eval: {as: src, suite: no-such-suite}
            request:
              create_eval: {suite: refsim-eval-trials, fixture_runs: {record: $src}}
            expect: {status: 201}
        """), encoding="utf-8")
    (example,) = load_examples(tmp_path)
    row = run_example(example, reference("reference"))
    assert row.disposition is Disposition.EXECUTED_FAIL
    assert "setup 1 (create_eval): answered 400" in row.detail


# ------------------------------------------------------------------------------ the loader


GOOD_ROW = """\
examples:
  - id: refsim.example.0252.probe
    source: refsim
    requirement_id: refsim.requirement.0252.no-echo
    title: a probe
    setup:
      - create_workflow: {as: src, workflow: conformance-noop}
    requests:
      - label: first
        create_eval: {suite: refsim-eval-trials, fixture_runs: {record: $src}}
        expect: {status: 400, error: validation_error, no_echo: [$src]}
"""


def test_the_probe_row_itself_loads(tmp_path: Path) -> None:
    (tmp_path / "probe.yaml").write_text(GOOD_ROW, encoding="utf-8")
    (example,) = load_examples(tmp_path)
    assert run_example(example, reference("reference")).passed


@pytest.mark.parametrize(("old", "new", "complaint"), [
    ("no_echo: [$src]", "no_eccho: [$src]", "unknown expectation 'no_eccho'"),
    ("- create_workflow:", "- frobnicate:", "unknown action 'frobnicate'"),
    ("fixture_runs: {record: $src}", "fixture_runs: {record: $srcc}",
     "$srcc names no run captured earlier"),
    ("refsim.requirement.0252.no-echo", "refsim.requirement.0252.made-up",
     "requirement_id 'refsim.requirement.0252.made-up' is not in the requirement registry"),
    ("expect: {status: 400,", "expect: {identical_to: zeroth, status: 400,",
     "'zeroth' is no earlier request's label"),
    ("workflow: conformance-noop}", "workflow: conformance-noop, colour: red}",
     "unknown argument(s) ['colour']"),
    ("    title: a probe\n", "    title: a probe\n    profile: no-such-profile\n",
     "unknown profile 'no-such-profile'"),
    ("expect: {status: 400, error: validation_error, no_echo: [$src]}",
     "expect: {error: validation_error}", "every request states the `status`"),
    ("    title: a probe\n", "    title: a probe\n    colour: red\n",
     "unknown row key(s) ['colour']"),
    ("workflow: conformance-noop}", "workflow: conformance-noop, key: [acme]}",
     "key ['acme'] names no tenant"),
    ("no_echo: [$src]}", "no_echo: [$src], counter_unchanged: {key: k, tenant: {a: 1}}}",
     "tenant {'a': 1} is unknown"),
])
def test_loader_names_file_row_and_problem(tmp_path: Path, old: str, new: str,
                                           complaint: str) -> None:
    assert old in GOOD_ROW
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD_ROW.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        load_examples(tmp_path)
    message = str(caught.value)
    assert not isinstance(caught.value, KeyError)
    assert str(bad) in message
    assert "refsim.example.0252.probe" in message
    assert complaint in message


def test_loader_refuses_an_invalid_inline_suite(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(GOOD_ROW.replace(
        "    setup:\n", "    setup:\n      - register_suite: {suite: {suiteId: nope}}\n"),
        encoding="utf-8")
    with pytest.raises(ValueError, match=r"refsim\.example\.0252\.probe.*not a valid eval suite"):
        load_examples(tmp_path)


# ------------------------------------------------------------------------------ sabotage


class LeakyRules(RequestRules):
    """Says why, and names the id: a different body per value, with the id in it."""

    def unusable_source(self, value: Any, kind: str) -> Refusal:
        return validation(f"unknown run {value}")


class SilentEcho(Echo):
    def eval_started(self, payload: dict[str, Any], fixture_runs: dict[str, Any] | None) -> None:
        return None


def broken(components: Components) -> Any:
    return lambda profile: SimHost(seed=0, profile=profile_named(profile),
                                   components=components)


def failures(example_id: str, components: Components) -> list[str]:
    example = by_id(example_id)
    row = run_example(example, broken(components)(example.profile))
    assert row.disposition is Disposition.EXECUTED_FAIL
    return [f.message for f in row.findings if not f.ok]


@pytest.mark.parametrize("example_id", ["rfc-0252.example-3",
                                        "refsim.example.0252.every-unusable-kind-alike",
                                        "refsim.example.0252.no-echo-mixed-map",
                                        "refsim.example.0252.tenant-isolation"])
def test_rows_fail_on_a_host_whose_refusal_names_the_id(example_id: str) -> None:
    found = failures(example_id, Components(rules=LeakyRules()))
    assert any("echoes the supplied id" in m for m in found)


def test_identical_fails_on_a_host_whose_refusal_names_the_id() -> None:
    found = failures("rfc-0252.example-3", Components(rules=LeakyRules()))
    assert any("are not byte-identical" in m for m in found)


@pytest.mark.parametrize("example_id", ["refsim.example.0252.echo-verbatim",
                                        "rfc-0252.example-1"])
def test_echo_rows_fail_on_a_host_that_does_not_echo(example_id: str) -> None:
    found = failures(example_id, Components(echo=SilentEcho()))
    assert any("carries no fixtureRuns" in m for m in found)


def test_the_sabotage_is_narrow() -> None:
    """The broken echo breaks the echo rows and leaves the refusal rows alone."""
    rows = run_examples(broken(Components(echo=SilentEcho())), "0252.source-uniform")
    assert rows and all(r.passed for r in rows)
