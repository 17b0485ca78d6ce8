"""Machine runs against faulty hosts, made once per test process and shared: `against`
shrinks (seconds each, for tests that read the program), `killed` does not (well under a
second, for tests that only need the kill); `saved` is `killed` with the example database
Hypothesis saved its counterexample in (what `shrink_for_display` shrinks from).

Both run the same seed per host, so `killed(name)` is the counterexample the shrinker of
`against(name)` starts from. The seeds are fixed for a first counterexample longer than
eight steps (a short program then shows the shrinking) that shrinks quickly: the shrinker's
cost is the example it starts from."""

from __future__ import annotations

import functools
from collections.abc import Callable

from hypothesis.database import InMemoryExampleDatabase

from refsim import SimHost
from refsim.check.findings import Row
from refsim.check.runner import PARTS, Target, run_parts
from refsim.check.zoo import mutant
from refsim.testing.fuzz import FuzzResult, run_machine
from refsim.wire.client import HostClient

SEEDS = {
    "words-non-terminal-differently": 6,
    "accepts-foreign-source": 10,
    "keeps-copy-after-erasure": 4,
    "serves-miss-live": 4,
}


STEPS = 20


def factory(name: str) -> Callable[[], HostClient]:
    broken = mutant(name)
    return lambda: SimHost(seed=0, components=broken.components())


def _run(name: str, *, shrink: bool, database: InMemoryExampleDatabase | None = None
         ) -> FuzzResult:
    return run_machine(factory(name), max_examples=200, steps=STEPS,
                       seed_value=SEEDS.get(name, 0), shrink=shrink, database=database)


@functools.cache
def against(name: str) -> FuzzResult:
    return _run(name, shrink=True)


@functools.cache
def saved(name: str) -> tuple[FuzzResult, InMemoryExampleDatabase]:
    """The unshrunk kill and the database it is saved in (shared: do not write to it)."""
    database = InMemoryExampleDatabase()
    return _run(name, shrink=False, database=database), database


def killed(name: str) -> FuzzResult:
    return saved(name)[0]


@functools.cache
def checker_rows(name: str) -> tuple[Row, ...]:
    """The in-process checker's rows on a faulty host (`refsim check --mutant NAME`), for
    the tests of the kill matrix, the blind spots and the falsify cache alike."""
    return tuple(run_parts(Target(mutant=mutant(name)), PARTS))
