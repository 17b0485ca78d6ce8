"""Machine runs against faulty hosts, made once per test process and shared: `against`
shrinks (seconds each, for tests that read the program), `killed` does not (well under a
second, for tests that only need the kill); `saved` is `killed` with the example database
Hypothesis saved its counterexample in (what `shrink_for_display` shrinks from).

Both run the same seed per host, so `killed(name)` is the counterexample the shrinker of
`against(name)` starts from. The seed is the first whose counterexample is longer than
eight steps (a short program then shows the shrinking), found afresh in each test process
rather than fixed: the same seed searches differently under another Hypothesis release
(the `--seed` promise is the same code, Hypothesis included). Without the class sweep: its
programs are shown as written, never shrunk, and these tests are about the search."""

from __future__ import annotations

import functools
from collections.abc import Callable

from hypothesis.database import InMemoryExampleDatabase

from refsim import SimHost
from refsim.check.findings import Row
from refsim.check.runner import PARTS, Target, run_parts
from refsim.testing.fuzz import FuzzResult, run_machine
from refsim.wire.client import HostClient
from refsim.zoo.faulty import mutant
from refsim.zoo.matrices import judge_mutant

STEPS = 20
LONG = 8  # a counterexample longer than this shows shrinking
SEEDS_TRIED = 24


def factory(name: str) -> Callable[[], HostClient]:
    broken = mutant(name)
    return lambda: SimHost(seed=0, components=broken.components())


def _run(name: str, seed_value: int, *, shrink: bool,
         database: InMemoryExampleDatabase | None = None) -> FuzzResult:
    return run_machine(factory(name), max_examples=200, steps=STEPS, seed_value=seed_value,
                       shrink=shrink, database=database, programs=False)


@functools.cache
def saved(name: str) -> tuple[FuzzResult, InMemoryExampleDatabase, int]:
    """The first unshrunk kill longer than `LONG` steps, the database it is saved in
    (shared: do not write to it) and its seed."""
    for seed_value in range(SEEDS_TRIED):
        database = InMemoryExampleDatabase()
        found = _run(name, seed_value, shrink=False, database=database)
        if not found.passed and found.steps > LONG:
            return found, database, seed_value
    raise AssertionError(f"no seed below {SEEDS_TRIED} gives {name} a counterexample longer "
                         f"than {LONG} steps")


def killed(name: str) -> FuzzResult:
    return saved(name)[0]


def seed(name: str) -> int:
    return saved(name)[2]


@functools.cache
def against(name: str) -> FuzzResult:
    return _run(name, seed(name), shrink=True)


# Hosts the machine kills at the kill matrix's budget, for a test that needs a long kill there.
MATRIX_CANDIDATES = ("no-per-trial-reset", "accepts-foreign-source", "reresolves-on-fork",
                     "words-non-terminal-differently", "foreign-403", "serves-miss-live",
                     "keeps-copy-after-erasure", "derives-from-source-on-fork")


@functools.cache
def long_matrix_kill() -> str:
    """A host whose machine kill in `refsim mutants --no-sweep` (its budget and seed,
    unshrunk, the random search alone: an explicit program's kill is shown as written) is
    longer than `LONG` steps: the matrix then has something to shrink."""
    for name in MATRIX_CANDIDATES:
        kill = judge_mutant(mutant(name), machine_examples=25, machine_steps=30,
                            shrink_budget=0, programs=False)
        if kill.machine is not None and not kill.machine.passed and kill.machine.steps > LONG:
            return name
    raise AssertionError(f"none of {MATRIX_CANDIDATES} has a matrix kill over {LONG} steps")


@functools.cache
def checker_rows(name: str) -> tuple[Row, ...]:
    """The in-process checker's rows on a faulty host (`refsim check --mutant NAME`), for
    the tests of the kill matrix, the blind spots and the falsify cache alike."""
    return tuple(run_parts(Target(recipe=mutant(name)), PARTS))
