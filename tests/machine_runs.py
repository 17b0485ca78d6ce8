"""Machine runs against faulty hosts, made once per test session and shared: `against`
shrinks (tens of seconds each, for tests that read the program), `killed` does not (about
a second, for tests that only need the kill)."""

from __future__ import annotations

import functools

from refsim import SimHost
from refsim.check.zoo import mutant
from refsim.testing.fuzz import FuzzResult, run_machine


@functools.cache
def against(name: str) -> FuzzResult:
    broken = mutant(name)
    return run_machine(lambda: SimHost(seed=0, components=broken.components()),
                       max_examples=200, steps=20, seed_value=0)


@functools.cache
def killed(name: str) -> FuzzResult:
    broken = mutant(name)
    return run_machine(lambda: SimHost(seed=0, components=broken.components()),
                       max_examples=200, steps=20, seed_value=0, shrink=False)
