"""The kill matrix: every faulty host of the zoo against the checker (in process, and over
HTTP through a served copy of it and `check --base-url`, the row that killed it in process
asked first) and against the machine.

A mutant survives when nothing kills it; `refsim mutants` exits 1 if any does. Hosts are
spread over processes; the machine stops at its first counterexample and decides the kill
without shrinking (only "is it killed" matters there); each kill is then shrunk for display
within a budget of seconds, in the same process, and shown beside its unshrunk count.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs
from hypothesis.database import InMemoryExampleDatabase

from refsim.check.findings import Disposition, Row
from refsim.check.runner import PARTS, Target, run_parts
from refsim.progress import Progress, Stopped, run_all
from refsim.testing.fuzz import FuzzResult, Shrunk, run_machine, shrink_for_display
from refsim.zoo.faulty import ZOO, Mutant, mutant

# One seed by default: the checker already kills every host, and the machine column says
# which it also kills on its own within the budget (`--machine-examples`).
MACHINE_SEEDS = (0,)
# Seconds to shrink each machine kill for display (`--shrink-budget`). A whole shrink takes
# 2-18 s a kill here; one second gets most kills to the count a whole shrink ends on, and
# keeps the matrix well inside its 90 s (`refsim bench`).
SHRINK_BUDGET = 1.0


@attrs.frozen
class Side:
    """What one way of judging a faulty host found: the failed requirement ids, each with
    its first failing finding; or why it was not tried."""

    failed: tuple[str, ...] = ()
    findings: dict[str, str] = attrs.Factory(dict)
    skipped: str | None = None

    @property
    def killed(self) -> bool:
        return bool(self.failed)

    def to_json(self) -> dict[str, Any]:
        if self.skipped is not None:
            return {"skipped": self.skipped}
        return {"killed": self.killed, "checker": list(self.failed),
                "findings": dict(self.findings)}

    @staticmethod
    def of(rows: Sequence[Row]) -> Side:
        failed = [r for r in rows if r.disposition is Disposition.EXECUTED_FAIL]
        findings: dict[str, str] = {}
        for row in failed:
            first = next((f.message for f in row.findings if not f.ok), row.detail)
            findings.setdefault(row.requirement_id, f"{row.check_id}: {first}"[:400])
        return Side(tuple(sorted({r.requirement_id for r in failed})), findings)


@attrs.frozen
class Kill:
    mutant: Mutant
    checker: tuple[str, ...]  # requirement ids of the in-process checker rows that failed
    machine: FuzzResult | None  # the unshrunk run: the kill rests on it
    findings: dict[str, str] = attrs.Factory(dict)
    http: Side | None = None
    shrunk: Shrunk | None = None  # the machine's kill shrunk for display

    @property
    def killed(self) -> bool:
        return (bool(self.checker) or (self.machine is not None and not self.machine.passed)
            or (self.http is not None and self.http.killed))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mutant": self.mutant.name, "breaks": self.mutant.breaks,
                               "killed": self.killed, "checker": list(self.checker),
                               "findings": dict(self.findings)}
        if self.mutant.timing_only:
            out["timingOnly"] = True
        if self.http is not None:
            out["http"] = self.http.to_json()
        if self.machine is not None:
            out["machine"] = None if self.machine.passed else self._machine_json(self.machine)
        return out

    def _machine_json(self, found: FuzzResult) -> dict[str, Any]:
        """The machine's kill: `steps`, `message` and `program` as shown (shrunk when the
        shrink gave the same requirement id), `unshrunkSteps` as found."""
        shrunk = self.shrunk if self.shrunk is not None else Shrunk(found, found, 0.0)
        shown = shrunk.shown
        out: dict[str, Any] = {
            "requirementId": found.requirement_id, "steps": shown.steps,
            "message": shown.message, "unshrunkSteps": found.steps,
            "shrinkBudget": shrunk.budget, "shrinkSeconds": round(shrunk.seconds, 2),
            "shrinkComplete": shrunk.complete, "shrunk": shrunk.shrunk,
            "program": list(shown.pasteable)}
        if found.program_name is not None:  # an explicit program: shown as written
            out["explicitProgram"] = found.program_name
        if shrunk.note is not None:
            out["shrinkNote"] = shrunk.note
        return out


def over_http(faulty: Mutant, all_rows: bool = False, first: Row | None = None) -> Side:
    """Serve the faulty host (as `refsim serve --mutant` does) and run `check --base-url`
    (to its first failing row, unless `all_rows`). `first`: the row that killed it in
    process, asked first on a host of its own (`run_like`); where that row finds nothing
    on the wire, the whole check runs on a fresh host, as without it."""
    if faulty.inside_only is not None:
        return Side(skipped=faulty.inside_only)
    from refsim.check.observe import KEY_A, KEY_B
    from refsim.check.runner import run_like
    from refsim.check.scenario import LATENCY
    from refsim.wire.httpclient import HttpClient
    from refsim.wire.server import background
    # Not the latency leg: a statistical judge asked twice (alone, then in the whole check)
    # would have two chances at a host that one `check --base-url` gives one.
    if first is not None and not all_rows and first.check_id != LATENCY:
        with background(faulty.host()) as server:
            rows = run_like(first, HttpClient(server.url), tenant_b_key=KEY_B, api_key=KEY_A)
        if any(r.disposition is Disposition.EXECUTED_FAIL for r in rows):
            return Side.of(rows)
    with background(faulty.host()) as server:
        rows = run_parts(Target(), PARTS, client=HttpClient(server.url), api_key=KEY_A,
                         tenant_b_key=KEY_B, first_fail=not all_rows)
    return Side.of(rows)


def judge_mutant(faulty: Mutant, *, machine_examples: int, machine_steps: int,
                 http: bool = False, shrink_budget: float = 0.0,
                 programs: bool = True, all_rows: bool = False) -> Kill:
    """The checker's verdict on `faulty`, and the machine's: a search without shrinking
    decides the kill (the same seeds and budget whatever `shrink_budget`), then its
    counterexample is shrunk for display within `shrink_budget` seconds (0: not shrunk).
    `programs=False`: the random search alone, without the explicit programs first. The
    checker stops at a host's first failing row, in process and over HTTP, unless
    `all_rows` (then every requirement each column breaks is named)."""
    rows = run_parts(Target(recipe=faulty), PARTS, first_fail=not all_rows)
    side = Side.of(rows)
    killer = next((r for r in rows if r.disposition is Disposition.EXECUTED_FAIL), None)
    result = shrunk = None
    for seed_value in MACHINE_SEEDS if machine_examples > 0 else ():
        # A fresh database per search: Hypothesis saves the failure it finds there, and
        # the shrink replays it from there.
        found_in = InMemoryExampleDatabase()
        result = run_machine(lambda: faulty.host(), max_examples=machine_examples,
                             steps=machine_steps, seed_value=seed_value, shrink=False,
                             database=found_in, programs=programs and seed_value == (
                                 MACHINE_SEEDS[0]))
        if not result.passed:
            shrunk = shrink_for_display(lambda: faulty.host(), result, found_in,
                                        budget=shrink_budget, steps=machine_steps,
                                        seed_value=seed_value)
            break
    return Kill(faulty, side.failed, result, side.findings,
                over_http(faulty, all_rows, killer) if http else None, shrunk)


def _judge_json(name: str, machine_examples: int, machine_steps: int, http: bool,
                shrink_budget: float, programs: bool = True, all_rows: bool = False
                ) -> dict[str, Any]:
    return judge_mutant(mutant(name), machine_examples=machine_examples,
                        machine_steps=machine_steps, http=http, shrink_budget=shrink_budget,
                        programs=programs, all_rows=all_rows).to_json()


def kill_matrix(mutants: Sequence[Mutant] = ZOO, *, machine_examples: int = 100,
                machine_steps: int = 30, http: bool = False,
                shrink_budget: float = SHRINK_BUDGET) -> list[Kill]:
    return [judge_mutant(m, machine_examples=machine_examples, machine_steps=machine_steps,
                         http=http, shrink_budget=shrink_budget) for m in mutants]


def kill_matrix_json(mutants: Sequence[Mutant] = ZOO, *, machine_examples: int = 30,
                     machine_steps: int = 30, http: bool = True, jobs: int | None = None,
                     shrink_budget: float = SHRINK_BUDGET,
                     progress: Progress | None = None, programs: bool = True,
                     all_rows: bool = False) -> dict[str, Any]:
    """The matrix as its JSON document, with the hosts spread over `jobs` processes (each
    host's machine kill shrunk for display in the process that found it). Ctrl-C raises
    `Stopped` with the document of the hosts judged by then, marked partial."""
    jobs = jobs or min(len(mutants), os.cpu_count() or 1)
    names = [m.name for m in mutants]
    args = [(n, machine_examples, machine_steps, http, shrink_budget, programs, all_rows)
            for n in names]
    # A host whose fault is in time sleeps through much of its judging (`run_all`).
    docs, stopped = run_all(_judge_json, args, jobs=jobs, progress=progress,
                            label=lambda a: str(a[0]),
                            waits=lambda a: mutant(str(a[0])).timing_only)
    doc = to_document(docs)
    if stopped:
        doc["partial"] = {"judged": len(docs), "of": len(names)}
        raise Stopped(doc, len(docs), len(names))
    return doc


def to_document(docs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    columns = sorted({r for d in docs for r in [*d["checker"],
                                               *((d.get("http") or {}).get("checker", []))]}
                     | {d["machine"]["requirementId"] for d in docs
                        if d.get("machine") and d["machine"].get("requirementId")})
    return {"mutants": list(docs), "requirements": columns}


# ----------------------------------------------------------------------------- the pass matrix

PASS_COLUMNS = ("check in process", "check over HTTP", "fuzz in process", "fuzz over HTTP",
                "diff vs reference")
# The machine's budget on a correct host: it must print no counterexample (unreached
# branches are no failure of the host). Over HTTP the budget is smaller: each step is
# several round trips. The explicit programs (every example row, the class sweep: 800
# steps, 4,400 requests) run over HTTP only where a variant's answers differ on the wire
# from those it gives in process (an ASGI wrapper): elsewhere the column "fuzz in process"
# ran them on the same answers, and refsim's own server carries answers to the machine as
# it carries the reference host's, which tests/test_http_fuzz.py fuzzes with the programs.
# They were two thirds of a correct host's cost.
PASS_FUZZ = (15, 15)
PASS_FUZZ_HTTP = (5, 12)
PASS_DIFF = (10, 12)


def _rows_cell(rows: Sequence[Row]) -> dict[str, Any]:
    failed = [r for r in rows if r.disposition is Disposition.EXECUTED_FAIL]
    counts: dict[str, int] = {}
    for r in rows:
        key = "in process only" if r.apart else r.disposition.value
        counts[key] = counts.get(key, 0) + 1
    return {"ok": not failed, "counts": counts,
            "failed": {r.check_id: r.detail[:300] for r in failed}}


def _fuzz_cell(result: FuzzResult) -> dict[str, Any]:
    if result.passed:
        return {"ok": True, "steps": result.machine.steps_taken}
    return {"ok": False, "requirementId": result.requirement_id,
            "message": result.message[:300], "program": list(result.pasteable)}


def judge_variant(name: str, *, http: bool = True, machine: bool = True,
                  diff: bool = True) -> dict[str, Any]:
    """One correct host through every way refsim judges: the checker in process and over
    HTTP, the machine in process and over HTTP, and `refsim diff` against the reference
    host. A cell that fails is a defect of the checker (or the machine, or diff)."""
    from refsim.check.observe import KEY_A, KEY_B
    from refsim.testing.diff import Pair, run_diff
    from refsim.testing.fuzz import FuzzTarget
    from refsim.wire.httpclient import HttpClient
    from refsim.zoo.correct import variant
    correct = variant(name)
    cells: dict[str, Any] = {}
    if correct.outside_only is None:
        cells["check in process"] = _rows_cell(run_parts(Target(recipe=correct), PARTS))
    else:  # judged from outside in process too (the reason is the variant's)
        from refsim.zoo.falsify import OutsideClient
        cells["check in process"] = _rows_cell(run_parts(
            Target(), PARTS, client=OutsideClient(correct.host()), api_key=KEY_A,
            tenant_b_key=KEY_B))
    if http:  # as `check --base-url` runs: in its default lanes, where the host has them
        from refsim.check.lanes import DEFAULT_LANES
        with correct.served() as server:
            cells["check over HTTP"] = _rows_cell(run_parts(
                Target(), PARTS, client=HttpClient(server.url), api_key=KEY_A,
                tenant_b_key=KEY_B, lanes=DEFAULT_LANES))
    if machine:
        examples, steps = PASS_FUZZ
        factory = FuzzTarget(recipe=correct).factory()
        if correct.outside_only is not None:  # seen from outside in process too, as check
            from refsim.zoo.falsify import OutsideClient

            def factory() -> Any:
                return OutsideClient(correct.host())
        cells["fuzz in process"] = _fuzz_cell(run_machine(
            factory, max_examples=examples, steps=steps, seed_value=0, shrink=False))
        if http:
            examples, steps = PASS_FUZZ_HTTP
            with correct.served() as server:
                client = HttpClient(server.url)
                cells["fuzz over HTTP"] = _fuzz_cell(run_machine(
                    lambda: client, max_examples=examples, steps=steps, seed_value=0,
                    shrink=False, keys={"acme": KEY_A, "globex": KEY_B},
                    programs=correct.asgi is not None))
    if diff and correct.diff is not None:
        # A difference a client sees, and the RFC allows: diff is right to find it.
        cells["diff vs reference"] = {"ok": True, "skipped": True, "allowed": correct.diff}
    elif diff:
        # A difference of representation only (noise, id shapes, framing, time): diff
        # must find nothing a client would call a difference.
        examples, steps = PASS_DIFF
        found = run_diff(Pair(variant=correct), max_examples=examples, steps=steps, seed=0)
        cell: dict[str, Any] = {"ok": found.error is None and found.difference is None,
                                "found": found.difference is not None}
        if found.difference is not None:
            d = found.difference
            cell["difference"] = f"{d.method} {d.path.split('?')[0]}: {d.what}"
        if found.error is not None:
            cell["error"] = found.error
        cells["diff vs reference"] = cell
    return {"variant": name, "allows": correct.allows, "cells": cells,
            "passed": all(c["ok"] for c in cells.values())}


def pass_matrix_json(names: Sequence[str] | None = None, *, http: bool = True,
                     machine: bool = True, diff: bool = True, jobs: int | None = None,
                     progress: Progress | None = None) -> list[dict[str, Any]]:
    """Every correct host judged, spread over `jobs` processes; Ctrl-C raises `Stopped`
    with the hosts judged by then."""
    from refsim.zoo.correct import PASS_ZOO, variant
    chosen = list(names) if names is not None else [v.name for v in PASS_ZOO]
    jobs = jobs or min(len(chosen), os.cpu_count() or 1)
    docs, stopped = run_all(_judge_variant_json, [(n, http, machine, diff) for n in chosen],
                            jobs=jobs, progress=progress, label=lambda a: str(a[0]),
                            waits=lambda a: variant(str(a[0])).waits,
                            # a wrapped app runs the machine's programs over HTTP too
                            long=lambda a: variant(str(a[0])).asgi is not None)
    if stopped:
        raise Stopped(docs, len(docs), len(chosen))
    return docs


def _judge_variant_json(name: str, http: bool, machine: bool, diff: bool) -> dict[str, Any]:
    return judge_variant(name, http=http, machine=machine, diff=diff)


def print_pass_matrix(docs: Sequence[dict[str, Any]], out: TextIO) -> int:
    """The pass matrix: a row per correct host, a column per way of judging it. Exit 1 if
    any cell fails: that is a false verdict of refsim's, never a fault of the host."""
    width = max((len(d["variant"]) for d in docs), default=10)
    heads = ["in proc", "HTTP", "fuzz", "fuzz HTTP", "diff"]
    print(f"{'correct host':<{width}}  " + "  ".join(f"{h:<9}" for h in heads), file=out)
    bad = []
    for d in docs:
        cells = [d["cells"].get(c) for c in PASS_COLUMNS]
        marks = ["-" if c is None else "allowed" if c.get("skipped") else "pass" if c["ok"]
                 else "FAIL" for c in cells]
        print(f"{d['variant']:<{width}}  " + "  ".join(f"{m:<9}" for m in marks), file=out)
        for column, cell in zip(PASS_COLUMNS, cells, strict=True):
            if cell is None or cell["ok"]:
                continue
            bad.append(d["variant"])
            why = (cell.get("failed") or cell.get("message") or cell.get("difference")
                or cell.get("error"))
            print(f"    {column}: {why}", file=out)
    failing = sorted(set(bad))
    print(f"\n{len(docs) - len(failing)}/{len(docs)} correct hosts passed every way they "
          "were judged", file=out)
    if failing:
        print("FALSE VERDICTS on: " + ", ".join(failing), file=out)
    return 1 if failing else 0


def _short(requirement_id: str) -> str:
    return requirement_id.removeprefix("openwop.requirement.").removeprefix(
        "refsim.requirement.").removeprefix("openwop.scenario.")


def print_matrix(kills: Sequence[Kill] | dict[str, Any], out: TextIO) -> int:
    docs = kills["mutants"] if isinstance(kills, dict) else [k.to_json() for k in kills]
    width = max((len(d["mutant"]) for d in docs), default=10)
    print(f"{'faulty host':<{width}}  {'in process':<10}  {'over HTTP':<10}  machine", file=out)
    for d in docs:
        http = d.get("http")
        over = "-" if http is None else ("n/a" if "skipped" in http else
                                         "killed" if http.get("killed") else "NOT")
        machine = d.get("machine", "absent")
        seen = "-" if machine == "absent" else ("nothing" if machine is None else
                                                f"{machine['steps']} step(s)")
        inproc = "killed" if d["checker"] else "NOT"
        verdict = "" if d["killed"] else "   SURVIVED"
        print(f"{d['mutant']:<{width}}  {inproc:<10}  {over:<10}  {seen}{verdict}", file=out)
        print(f"    breaks {d['breaks']}", file=out)
        if d["checker"]:
            print("    in process: " + ", ".join(_short(r) for r in d["checker"]), file=out)
        if http is not None and "skipped" in http:
            print(f"    over HTTP: not tried, {http['skipped']}", file=out)
        elif http is not None and http.get("checker"):
            print("    over HTTP: " + ", ".join(_short(r) for r in http["checker"]), file=out)
        if isinstance(machine, dict):
            print(f"    machine: {_short(machine.get('requirementId') or '?')} in "
                  f"{machine['steps']} step(s){_shrink_note(machine)}", file=out)
    survivors = [d["mutant"] for d in docs if not d["killed"]]
    http_docs = [d for d in docs if d.get("http") is not None]
    print(f"\n{len(docs) - len(survivors)}/{len(docs)} faulty hosts killed", file=out)
    judged = [d for d in docs if d.get("machine", "absent") != "absent"]
    if judged:
        unkilled = [d for d in judged if d["machine"] is None]
        timing = [str(d["mutant"]) for d in unkilled if d.get("timingOnly")]
        others = [str(d["mutant"]) for d in unkilled if not d.get("timingOnly")]
        print(f"the machine alone: {len(judged) - len(unkilled)}/{len(judged)} killed"
              + (f"; timing-only, left to the latency rows: {', '.join(timing)}"
                 if timing else "")
              + (f"; missed: {', '.join(others)}" if others else ""), file=out)
    if http_docs:
        tried = [d for d in http_docs if "skipped" not in d["http"]]
        killed = sum(1 for d in tried if d["http"].get("killed"))
        print(f"over HTTP: {killed}/{len(tried)} of the hosts whose fault can show on the wire "
              f"killed; {len(http_docs) - len(tried)} only in process (reason above)", file=out)
        missed = [d["mutant"] for d in tried if not d["http"].get("killed")]
        if missed:
            print("NOT killed over HTTP: " + ", ".join(missed), file=out)
            survivors += [m for m in missed if m not in survivors]
    if survivors:
        print("survivors: " + ", ".join(survivors), file=out)
    return 1 if survivors else 0


def _shrink_note(machine: dict[str, Any]) -> str:
    """How the machine's step count came about: nothing when it was not shrunk for display
    (budget 0, or a document from before shrinking)."""
    budget = machine.get("shrinkBudget")
    if not budget or "unshrunkSteps" not in machine:
        return ""
    seconds = f"{machine.get('shrinkSeconds', 0):.1f} s"
    note = machine.get("shrinkNote")
    if not machine.get("shrunk"):
        return f" ({note or 'not shrunk'}; {seconds})"
    ran_out = "" if machine.get("shrinkComplete") else f", budget of {budget:g} s ran out"
    return (f" (shrunk from {machine['unshrunkSteps']} in {seconds}{ran_out}"
            + (f"; {note})" if note else ")"))


def write_json(kills: Sequence[Kill] | dict[str, Any], path: str | Path) -> None:
    doc = kills if isinstance(kills, dict) else to_document([k.to_json() for k in kills])
    Path(path).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
