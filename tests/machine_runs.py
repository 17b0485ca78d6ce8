"""Machine runs against faulty hosts, made once per test process and shared: `against`
shrinks (seconds each, for tests that read the program), `killed` does not (well under a
second, for tests that only need the kill).

Both run the same seed per host, so `killed(name)` is the counterexample the shrinker of
`against(name)` starts from. The seeds are fixed for a first counterexample longer than
eight steps (a short program then shows the shrinking) that shrinks quickly: the shrinker's
cost is the example it starts from."""

from __future__ import annotations

import functools

from refsim import SimHost
from refsim.check.findings import Row
from refsim.check.runner import PARTS, Target, run_parts
from refsim.check.zoo import mutant
from refsim.testing.fuzz import FuzzResult, run_machine

SEEDS = {
    "words-non-terminal-differently": 8,
    "accepts-foreign-source": 10,
    "keeps-copy-after-erasure": 4,
    "serves-miss-live": 4,
}


def _run(name: str, *, shrink: bool) -> FuzzResult:
    broken = mutant(name)
    return run_machine(lambda: SimHost(seed=0, components=broken.components()),
                       max_examples=200, steps=20, seed_value=SEEDS.get(name, 0),
                       shrink=shrink)


@functools.cache
def against(name: str) -> FuzzResult:
    return _run(name, shrink=True)


@functools.cache
def killed(name: str) -> FuzzResult:
    return _run(name, shrink=False)


@functools.cache
def checker_rows(name: str) -> tuple[Row, ...]:
    """The in-process checker's rows on a faulty host (`refsim check --mutant NAME`), for
    the tests of the kill matrix, the blind spots and the falsify cache alike."""
    return tuple(run_parts(Target(mutant=mutant(name)), PARTS))
