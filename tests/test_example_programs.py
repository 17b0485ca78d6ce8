"""Every example row of the table (specs/examples/) runs as a program of the stateful
machine: each row step is the machine's `example_step`, its expectations judged as `check`
judges them, the machine's invariants after it; these programs run first, before the class
sweep and anything random, and `fuzz` prints which ran and why the others did not."""

from __future__ import annotations

import io

from hypothesis.database import InMemoryExampleDatabase

from refsim import SimHost
from refsim.check.examples import load_examples, run_example
from refsim.check.findings import Disposition
from refsim.testing.fuzz import FuzzTarget, report, run_machine, run_programs
from refsim.testing.programs import run_program, table
from refsim.testing.stateful import RequirementViolated, example_rows, machine_for
from refsim.zoo.faulty import mutant


def test_every_row_is_a_program_of_the_machine() -> None:
    programs = table()
    assert [p.name for p in programs] == [e.id for e in load_examples()]
    for program, example in zip(programs, load_examples(), strict=True):
        assert program.steps[0].rule == "first_source"
        rows = [s for s in program.steps if s.rule == "example_step"]
        assert len(rows) == len(example.setup) + len(example.requests)
        assert all(s.args == {"row": example.id} for s in rows)


def test_the_reference_host_runs_every_row_but_those_of_other_profiles() -> None:
    machine = machine_for(lambda: SimHost(seed=0))
    assert run_programs(machine) is None
    pinned = {e.id for e in load_examples() if e.profile is not None}
    assert pinned and set(machine.rows_apart) == pinned
    assert all("profile" in why for why in machine.rows_apart.values())
    assert set(machine.rows_run) == set(example_rows()) - pinned
    assert all(machine.programs_run[row] == 1 for row in machine.rows_run)


def test_a_breach_in_a_row_is_the_runs_counterexample_named_by_the_row() -> None:
    # A host the class sweep (run first) lets pass and a table row kills: it serves the
    # first matching entry again and again.
    result = run_machine(mutant("never-consumes").host, max_examples=2, steps=5,
                         seed_value=0, shrink=False, database=InMemoryExampleDatabase())
    assert not result.passed
    assert result.program_name in example_rows()
    assert any(line.startswith("state.example_step(row=") for line in result.pasteable)
    out = io.StringIO()
    report(result, out, FuzzTarget(recipe=mutant("never-consumes")))
    assert f"the example row {result.program_name!r}" in out.getvalue()


def test_the_printed_row_program_fails_again_when_pasted() -> None:
    target = FuzzTarget(recipe=mutant("serves-miss-live"))
    result = run_machine(target.factory(), max_examples=2, steps=5, seed_value=0,
                         shrink=False, database=InMemoryExampleDatabase())
    source = "\n".join([*target.program_header(),
                        *(line for line in result.pasteable if "teardown" not in line)])
    try:
        exec(source, {})  # as a user pastes it
    except RequirementViolated as exc:
        assert exc.requirement_id == result.requirement_id
    else:
        raise AssertionError("the pasted program passed")


def test_the_machine_judges_what_a_row_does_not() -> None:
    """Example 1 says nothing of derived entries on the wire; the machine's invariants,
    after the row's replay step, read every channel of the eval it made and find them."""
    (row,) = [e for e in load_examples() if e.id == "rfc-0252.example-1"]
    faulty = mutant("derived-in-snapshot")
    assert run_example(row, faulty.host()).disposition is Disposition.EXECUTED_PASS
    (program,) = [p for p in table() if p.name == row.id]
    result = run_program(machine_for(faulty.host), program)
    assert not result.passed
    assert result.requirement_id == "refsim.requirement.0252.derived-never-on-wire"
    assert run_program(machine_for(lambda: SimHost(seed=0)), program).passed


def test_a_row_the_host_cannot_run_is_apart_with_why() -> None:
    """Over HTTP (no inside), a row whose requirement no outsider can witness is apart."""
    from tests.test_fuzz_any_host import Recording
    host = Recording(SimHost(seed=0))  # a host seen from outside
    state = machine_for(lambda: host)()
    why = [state.row_apart(e) for e in load_examples()]
    assert any(w is not None and "unwitnessable" in w for w in why)
    assert any(w is None for w in why)
