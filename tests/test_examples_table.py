"""The example table (specs/examples/*.yaml): every row passes on the reference host, the
loader refuses malformed rows by name, and rows fail on hosts broken where they look."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from refsim import SimHost
from refsim.check.examples import Example, load_examples, run_example, run_examples
from refsim.check.findings import Disposition, Row
from refsim.check.registry import load_registry
from refsim.check.runner import Target, run_parts
from refsim.cli import main
from refsim.domain.profile import profile_named
from refsim.zoo.faulty import mutant

EXAMPLES = load_examples()


def reference(profile: str | None) -> SimHost:
    """The reference host, or the profile a row pins."""
    return SimHost(seed=0, profile=profile_named(profile or "reference"))


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
    assert refsim
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
    ("    title: a probe\n", "    title: a probe\n    withholds: [fixtureErrors]\n",
     "a row that withholds members names a profile without them"),
    ("    title: a probe\n",
     "    title: a probe\n    profile: reference\n    withholds: [fixtureErrors]\n",
     "a row that withholds members names a profile without them"),
    ("    title: a probe\n", "    title: a probe\n    withholds: [recordedFixtures]\n",
     "withholds must list some of"),
    ("    title: a probe\n", "    title: a probe\n    every_host: yes please\n",
     "every_host must be true or false, got 'yes please'"),
    ("    title: a probe\n", "    title: a probe\n    every_host: true\n    profile: reference\n",
     "a row judged on every host names no profile"),
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


def broken(name: str) -> Any:
    """Hosts of the zoo's faulty host `name`, under the profile a row asks for."""
    return lambda profile: mutant(name).host(profile=profile_named(profile or "reference"))


def failures(example_id: str, name: str) -> list[str]:
    example = by_id(example_id)
    row = run_example(example, broken(name)(example.profile))
    assert row.disposition is Disposition.EXECUTED_FAIL
    return [f.message for f in row.findings if not f.ok]


@pytest.mark.parametrize("example_id", ["rfc-0252.example-3",
                                        "refsim.example.0252.every-unusable-kind-alike",
                                        "refsim.example.0252.no-echo-mixed-map",
                                        "refsim.example.0252.tenant-isolation"])
def test_rows_fail_on_a_host_whose_refusal_names_the_id(example_id: str) -> None:
    found = failures(example_id, "echoes-id")
    assert any("echoes the supplied id" in m for m in found)


def test_identical_fails_on_a_host_whose_refusal_names_the_id() -> None:
    found = failures("rfc-0252.example-3", "echoes-id")
    assert any("tell the groups apart by body" in m for m in found)


@pytest.mark.parametrize("example_id", ["refsim.example.0252.echo-verbatim",
                                        "rfc-0252.example-1"])
def test_echo_rows_fail_on_a_host_that_does_not_echo(example_id: str) -> None:
    found = failures(example_id, "omits-echo")
    assert any("carries no fixtureRuns" in m for m in found)


def test_the_sabotage_is_narrow() -> None:
    """The broken echo breaks the echo rows and leaves the refusal rows alone."""
    rows = run_examples(broken("omits-echo"), "0252.source-uniform")
    assert rows and all(r.passed for r in rows)


# ------------------------------------------------------------------------------ the target profile


PINNED = {e.id: e.profile for e in EXAMPLES if e.profile is not None}
# Rows that need a usable source of the recorder made by a workflow or eval run of the target.
NEEDS_A_HELD_RECORDER_SOURCE = ["rfc-0252.example-1", "rfc-0252.example-2",
                                "rfc-0252.example-3",
                                "refsim.example.0252.every-invocation-derived",
                                "refsim.example.0252.unnamed-task-unaffected",
                                "refsim.example.0252.several-tasks-several-sources"]


def test_a_row_names_a_profile_only_when_it_says_so(tmp_path: Path) -> None:
    assert by_id("rfc-0252.example-1").profile is None
    assert PINNED["refsim.example.0252.unheld-calls"] == "unheld-calls"
    assert PINNED["refsim.example.0252.non-advertising-refuses"] == "no-recorded-fixtures"
    (tmp_path / "p.yaml").write_text(GOOD_ROW.replace(
        "    title: a probe\n", "    title: a probe\n    profile: reference\n"), encoding="utf-8")
    (pinned,) = load_examples(tmp_path)
    assert pinned.profile == "reference"


def test_unpinned_rows_are_inapplicable_on_a_host_without_recorded_fixtures() -> None:
    rows = run_parts(Target(profile="no-recorded-fixtures"), ["examples"])
    assert [r.check_id for r in rows] == [e.id for e in EXAMPLES]
    every_host = {e.id for e in EXAMPLES if e.every_host}
    assert every_host
    for row in rows:
        if row.check_id in PINNED:  # a fact about the host it names: it runs there
            assert row.passed, (row.check_id, row.detail)
        elif row.check_id in every_host:  # a claim about discovery, which every host makes
            assert row.passed, (row.check_id, row.detail)
        else:
            assert row.disposition is Disposition.INAPPLICABLE, (row.check_id, row.detail)
            assert row.findings == ()
            assert "refsim:no-recorded-fixtures" in row.detail
            assert "agents.evalSuite.recordedFixtures" in row.detail
    assert any(r.disposition is Disposition.INAPPLICABLE for r in rows)


def test_unpinned_rows_run_on_the_target_profile_and_fail_honestly() -> None:
    rows = {r.check_id: r for r in run_parts(Target(profile="unheld-calls"), ["examples"])}
    for example_id in NEEDS_A_HELD_RECORDER_SOURCE:
        row = rows[example_id]
        assert row.disposition is Disposition.EXECUTED_FAIL, (example_id, row.detail)
        assert "answered 400" in row.detail or "got 400" in row.detail, row.detail
    # Rows pinned to a profile still run there, whatever the target.
    for example_id in ("refsim.example.0252.content-free-lane",
                       "refsim.example.0252.failed-call-without-fixture-errors"):
        assert rows[example_id].passed, rows[example_id].detail


def test_examples_cli_reports_the_profile_it_ran(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["examples", "--profile", "unheld-calls"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "refsim against refsim:unheld-calls"
    assert "executed-fail openwop.requirement.0252.source-replayed (rfc-0252.example-1)" in out
    assert main(["examples", "--profile", "no-recorded-fixtures"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "refsim against refsim:no-recorded-fixtures"
    assert "inapplicable  openwop.requirement.0252.source-replayed (rfc-0252.example-1)" in out
    assert " 0 executed-fail" in out


# ------------------------------------------------------------------------------ more sabotage


def test_uq1_row_fails_on_a_host_deriving_only_the_first_invocation() -> None:
    components = "first-invocation-only"
    found = failures("refsim.example.0252.every-invocation-derived", components)
    assert any("two-tasks-source: eval.scored[both-tasks].fixtureMissCount is 1, expected 0"
               in m for m in found), found
    assert any("three-trials-source: eval.scored[three-trials].fixtureMissCount is 4, "
               "expected 0" in m for m in found), found
    # The table had no other witness: every source of its other rows has one invocation.
    assert run_example(by_id("refsim.example.0252.repeated-calls-in-order"),
                       broken(components)(None)).passed


def test_unnamed_task_row_fails_on_a_host_applying_fixtures_to_every_task() -> None:
    components = "every-task-served"
    found = failures("refsim.example.0252.unnamed-task-unaffected", components)
    assert any("alpha-named: eval.scored[beta].fixtureMissCount is 1, expected 0" in m
               for m in found), found
    assert any("alpha-named: eval.scored[beta].passed is False, expected True" in m
               for m in found), found
    assert any("unnamed-goes-live (counter 'unnamed' of acme)" in m for m in found), found
    # The table had no other witness: its multi-task rows name every task.
    assert run_example(by_id("refsim.example.0252.several-tasks-several-sources"),
                       broken(components)(None)).passed


@pytest.mark.parametrize(("example_id", "components", "label", "only_first_seen"), [
    ("refsim.example.0252.unknown-key-second", "first-key-only",
     "unknown-key-second", ["rfc-0252.example-4", "refsim.example.0252.refused-before-start"]),
    ("refsim.example.0252.suite-fixtures-second",
     "first-conflict-only", "canned-second",
     ["rfc-0252.example-5", "refsim.example.0252.suite-fixtures"]),
    ("refsim.example.0252.unusable-source-second", "first-source-only", "unknown-second",
     ["rfc-0252.example-3", "refsim.example.0252.every-unusable-kind-alike"]),
])
def test_second_key_rows_fail_on_a_host_that_looks_only_at_the_first_key(
        example_id: str, components: str, label: str, only_first_seen: list[str]) -> None:
    found = failures(example_id, components)
    assert any(m.startswith(f"{label}: ") and "201" in m for m in found), found
    # The rows that had the offending key alone (or first) pass on the same broken host.
    for other in only_first_seen:
        row: Row = run_example(by_id(other), broken(components)(by_id(other).profile))
        assert row.passed, (other, row.detail)


def test_the_vocabulary_documents_itself_and_has_one_manual() -> None:
    """Every action kind is a class with what it sends; every key says what it means; the
    only manual is REFERENCE.md's generated section: the table files' headers and the
    runner's docstring point there instead of copying it."""
    from refsim.check import examples
    from refsim.check.expectations import EXPECTATIONS
    from refsim.data import paths

    kinds = set(examples.ActionKind.__subclasses__())
    assert {type(k) for k in examples.ACTIONS.values()} == kinds
    assert all(len(k.doc) > 30 and k.name in examples.ACTIONS for k in examples.ACTIONS.values())
    for keys in (examples.TOP_KEYS, examples.ROW_KEYS, examples.REQUEST_KEYS):
        assert all(len(means) > 8 for means in keys.values())
    copies = [examples.__doc__ or ""]
    for path in sorted((paths.SPECS / "examples").glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        copies.append(text[: text.index("\n\n")])  # the header comment
    for text in copies:
        named = [n for n in [*examples.ACTIONS, *EXPECTATIONS] if n in text]
        assert len(named) <= 1, named  # a copy of the vocabulary names them all
        assert "REFERENCE.md" in text


def test_a_row_judged_on_every_host_fails_where_the_gate_would_have_hidden_it() -> None:
    # A host that advertises recordedFixtures without fixtureMatching does not open the
    # gate: a gated row would be inapplicable on the very host its claim is about.
    [row] = run_examples(lambda profile: mutant("advertises-without-matching").host(),
                         examples=[e for e in EXAMPLES if e.every_host])
    assert row.disposition is Disposition.EXECUTED_FAIL
    assert "recordedFixtures is advertised without fixtureMatching" in row.detail


def test_a_missing_seam_blocks_a_row_but_hides_no_breach_the_wire_shows() -> None:
    from refsim.domain.profile import PROFILES
    [row_def] = [e for e in EXAMPLES if e.id == "refsim.example.0252.fork-after-erase"]
    unseen = "does not advertise the conformance seam eval-counter"
    # A correct host without the counter seam: the live counter cannot be read, so the row
    # is blocked, naming the seam, though every claim the wire carries held.
    [correct] = run_examples(lambda p: SimHost(profile=PROFILES["no-counter-seam"]),
                             examples=[row_def])
    assert correct.disposition is Disposition.BLOCKED and unseen in correct.detail
    # A faulty one: the fork the wire shows accepted fails the row, and the detail still
    # says what could not be judged.
    [faulty] = run_examples(lambda p: mutant("keeps-copy-after-erasure").host(
        profile=PROFILES["no-counter-seam"]), examples=[row_def])
    assert faulty.disposition is Disposition.EXECUTED_FAIL
    assert "replay: answered 201, not a refusal" in faulty.detail
    assert "and not judged: " in faulty.detail and unseen in faulty.detail


def test_a_row_that_raises_is_blocked_not_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A row whose run raises is refsim's fault, never the host's: blocked, naming the
    exception and where refsim raised it (a traceback once escaped `refsim check`)."""
    from refsim.check import examples

    def broken(self: Any) -> Any:
        raise IndexError("list index out of range")
    monkeypatch.setattr(examples.RowRun, "run", broken)
    example = load_examples()[0]
    row = run_example(example, SimHost(seed=0))
    assert row.disposition is Disposition.BLOCKED
    assert f"the row {example.id} raised IndexError" in row.detail
    assert "refsim's fault, not the host's" in row.detail
