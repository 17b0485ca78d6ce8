"""Runs the stateful machine and reports: a counterexample with its requirement id and a
pasteable program, or the step and branch counts of a clean run."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

import attrs
from hypothesis import HealthCheck, seed, settings
from hypothesis.stateful import get_state_machine_test

from refsim.testing.stateful import (
    RecordedFixturesMachine,
    RequirementViolated,
    machine_for,
    unreached,
)
from refsim.wire.client import HostClient

INVARIANT_CALLS = ("live_state_agrees", "erasure_reaches_copies", "refusals_uniform")


@attrs.frozen
class FuzzResult:
    passed: bool
    requirement_id: str | None
    message: str
    program: tuple[str, ...]
    narrative: tuple[str, ...]
    machine: type[RecordedFixturesMachine]

    @property
    def steps(self) -> int:
        """Rule steps in the (shrunk) counterexample, not counting invariant checks."""
        return sum(1 for line in self.program if line.startswith(("state.", "runs_", "evals_",
                                                                  "tenants_"))
                   and "teardown" not in line
                   and not any(f"state.{name}()" in line for name in INVARIANT_CALLS))


def run_machine(factory: Callable[[], HostClient], *, max_examples: int, steps: int,
                seed_value: int | None = None, extended: bool = True,
                keys: dict[str, str] | None = None) -> FuzzResult:
    machine = machine_for(factory, extended=extended, keys=keys)
    config = settings(max_examples=max_examples, stateful_step_count=steps, deadline=None,
                      database=None, print_blob=False,
                      suppress_health_check=list(HealthCheck))
    test = get_state_machine_test(machine, settings=config)
    if seed_value is not None:
        test = seed(seed_value)(test)
    try:
        test()
    except RequirementViolated as exc:
        notes = tuple(getattr(exc, "__notes__", ()))
        program = tuple(line for line in notes if _is_program(line))
        narrative = tuple(line for line in notes if not _is_program(line)
                          and not line.startswith(("Falsifying", "Failing", "Explanation",
                                                   "    ")))
        return FuzzResult(False, exc.requirement_id, str(exc), program, narrative, machine)
    return FuzzResult(True, None, "", (), (), machine)


def _is_program(line: str) -> bool:
    return line.startswith(("state", "runs_", "evals_", "tenants_"))


def report(result: FuzzResult, out: TextIO) -> int:
    machine = result.machine
    if not result.passed:
        print(f"COUNTEREXAMPLE for {result.requirement_id}", file=out)
        print(f"  {result.message}", file=out)
        print("\nWhat happened:", file=out)
        for line in result.narrative:
            print(f"  {line}", file=out)
        print(f"\nThe program ({result.steps} steps), pasteable into a test:", file=out)
        print("  from refsim.testing.stateful import RecordedFixturesMachine", file=out)
        for line in result.program:
            if any(f"state.{name}()" in line for name in INVARIANT_CALLS):
                continue
            print(f"  {line}", file=out)
        return 1
    print(f"passed: {machine.examples_run} example(s), {machine.steps_taken} step(s), "
          f"{machine.requests_made} request(s)", file=out)
    for branch, count in sorted(machine.branches.items()):
        print(f"  {branch:<28} {count}", file=out)
    missing = unreached(machine.branches)
    if missing:
        print("FAILED: critical branches never reached: " + ", ".join(missing), file=out)
        return 1
    return 0
