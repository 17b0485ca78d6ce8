"""The kill matrix: every faulty host of the zoo against the checker and the machine.

A mutant survives when no check fails on it; `refsim mutants` exits 1 if any does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs

from refsim.check.findings import Disposition
from refsim.check.runner import PARTS, Target, run_parts
from refsim.check.zoo import ZOO, Mutant
from refsim.host import SimHost
from refsim.testing.fuzz import FuzzResult, run_machine

MACHINE_SEEDS = (0, 1, 2)


@attrs.frozen
class Kill:
    mutant: Mutant
    checker: tuple[str, ...]  # requirement ids of the checker rows that failed
    machine: FuzzResult | None

    @property
    def killed(self) -> bool:
        return bool(self.checker) or (self.machine is not None and not self.machine.passed)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mutant": self.mutant.name, "breaks": self.mutant.breaks,
                               "killed": self.killed, "checker": list(self.checker)}
        if self.machine is not None:
            out["machine"] = None if self.machine.passed else {
                "requirementId": self.machine.requirement_id, "steps": self.machine.steps,
                "message": self.machine.message}
        return out


def judge_mutant(mutant: Mutant, *, machine_examples: int, machine_steps: int) -> Kill:
    target = Target(base_components=mutant.components())
    rows = run_parts(target, PARTS)
    failed = sorted({r.requirement_id for r in rows
                     if r.disposition is Disposition.EXECUTED_FAIL})
    result = None
    # A few seeds, not one: the same seed explores differently from one process to the
    # next (see the closing note of issue 4), and a kill should not hang on one path.
    for seed_value in MACHINE_SEEDS if machine_examples > 0 else ():
        result = run_machine(lambda: SimHost(seed=0, components=mutant.components()),
                             max_examples=machine_examples, steps=machine_steps,
                             seed_value=seed_value)
        if not result.passed:
            break
    return Kill(mutant, tuple(failed), result)


def kill_matrix(mutants: Sequence[Mutant] = ZOO, *, machine_examples: int = 100,
                machine_steps: int = 30) -> list[Kill]:
    return [judge_mutant(m, machine_examples=machine_examples, machine_steps=machine_steps)
            for m in mutants]


def _short(requirement_id: str) -> str:
    return requirement_id.removeprefix("openwop.requirement.").removeprefix(
        "refsim.requirement.").removeprefix("openwop.scenario.")


def print_matrix(kills: Sequence[Kill], out: TextIO) -> int:
    for kill in kills:
        verdict = "killed " if kill.killed else "SURVIVED"
        print(f"{verdict} {kill.mutant.name}  ({kill.mutant.breaks})", file=out)
        if kill.checker:
            print("    checker: " + ", ".join(_short(r) for r in kill.checker), file=out)
        if kill.machine is not None:
            if kill.machine.passed:
                print("    machine: no counterexample", file=out)
            else:
                print(f"    machine: {_short(kill.machine.requirement_id or '?')} in "
                      f"{kill.machine.steps} step(s)", file=out)
    survivors = [k.mutant.name for k in kills if not k.killed]
    print(f"\n{len(kills) - len(survivors)}/{len(kills)} faulty hosts killed", file=out)
    if survivors:
        print("survivors: " + ", ".join(survivors), file=out)
    return 1 if survivors else 0


def write_json(kills: Sequence[Kill], path: str | Path) -> None:
    Path(path).write_text(json.dumps({"mutants": [k.to_json() for k in kills]}, indent=2)
                          + "\n", encoding="utf-8")
