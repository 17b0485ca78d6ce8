"""Explicit programs of the stateful machine, run before anything random: the class sweep,
built from specs/classes.yaml, in which every member of every class is drawn once (each
source value, each id and key derivation, each run state of each owner, each argument
variant, each owner route under each spelling, each idempotent create, each request-header
member), with the machine's invariants checked after every step.

A program is data: steps naming a rule and its arguments, where `Var(name)` is the value an
earlier step returned. Its text is the pasteable program Hypothesis would print.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
from hypothesis.stateful import MultipleResults

from refsim.check import classes
from refsim.check.examples import load_examples
from refsim.domain.agents import HELPER, RECORDER
from refsim.domain.tools import COUNTER, VAULT
from refsim.testing.stateful import (
    COUNTER_INIT,
    FIRST_ASKS,
    RecordedFixturesMachine,
    RequirementViolated,
    machine_parts,
)


@attrs.frozen
class Var:
    """The value an earlier step of the program bound to `name`."""

    name: str

    def __repr__(self) -> str:
        return self.name


@attrs.frozen
class Step:
    rule: str
    args: dict[str, Any]
    targets: tuple[str, ...] = ()

    def text(self) -> str:
        call = "state." + self.rule + "(" + ", ".join(
            f"{k}={v!r}" for k, v in self.args.items()) + ")"
        return (", ".join(self.targets) + " = " + call) if self.targets else call


@attrs.frozen
class Program:
    name: str
    steps: tuple[Step, ...]
    row: str | None = None  # the example row the program runs, where it runs one


@attrs.frozen
class ProgramResult:
    name: str
    passed: bool
    requirement_id: str | None = None
    message: str = ""
    lines: tuple[str, ...] = ()
    steps_run: int = 0
    skipped: int = 0  # steps whose rule the host does not offer (a precondition)
    apart: str | None = None  # why the program's example row cannot run on this host
    observation: Any = None  # what the failed finding quoted (for the evidence)


def _start(*, rich: int = 1, trials: int = 2) -> list[Step]:
    """Every program starts from one usable source per tenant (the machine's initialize
    rule): `own` is the first tenant's, `other` the second's."""
    return [Step("first_source", {"rich": rich, "trials": trials}, ("own", "other"))]



def table() -> tuple[Program, ...]:
    """One program per example row of the table (specs/examples/): from the machine's
    first sources, each step of the row as the machine's `example_step`, the machine's
    invariants after each."""
    return tuple(Program(example.id, (*_start(), *(
        Step("example_step", {"row": example.id}) for _ in range(
            len(example.setup) + len(example.requests)))), row=example.id)
        for example in load_examples())


def sweep(tenants: Sequence[str]) -> tuple[Program, ...]:
    """One program per class of specs/classes.yaml, each member drawn once, by the first of
    `tenants` (the caller) and, where a member needs another tenant, the last."""
    data = classes.load()
    me, them = tenants[0], tenants[-1]
    own, other = Var("own"), Var("other")
    script = list(COUNTER_INIT)
    out: list[Program] = []

    steps = _start()
    steps += [Step("refuse_derived", {"run_id": own, "hows": [op.name], "header": "plain",
                                      "caller": None}) for op in data.from_id]
    steps += [Step("refuse_derived", {"run_id": other, "hows": [op.name], "header": "plain",
                                      "caller": None}) for op in data.from_id]
    steps += [Step("refuse_value", {"caller": me, "member": (classes.value_name(v), v),
                                    "header": "plain"}) for v in data.values]
    steps += [Step("refuse_spliced", {"first": own, "second": other, "at": at})
              for at in range(4)]
    # Another tenant's source recorded once more, so that its recording differs from the
    # caller's (a host that serves the other value of a task named twice then shows it).
    steps.append(Step("record_eval_source", {"tenant": them, "lane": RECORDER,
                                             "script": script, "rich": 1, "trials": 2},
                      ("theirs",)))
    steps += [Step("name_twice", {"source_id": own, "other": Var("theirs"),
                                  "member": m.name}, ("twice",)) for m in data.named_twice]
    out.append(Program("source-values", tuple(steps)))

    steps = _start()
    shapes = {"delegating": [{"delegate": HELPER, "script": [
        {"call": COUNTER, "args": {"op": "inc", "key": "k1"}}]},
        {"call": COUNTER, "args": {"op": "inc", "key": "k2"}}, {"decide": "ok"}],
        "credentialed": [{"call": VAULT, "args": {"query": "q1"}}, {"decide": "ok"}]}
    for label, shaped in shapes.items():
        steps.append(Step("name_state", {"state": "completed-workflow", "foreign": False,
                                         "script": shaped, "header": "plain"}, (label,)))
        steps.append(Step("replay_own", {"source_id": Var(label), "variant": "same",
                                         "trials": 2, "header": "plain"}))
    for index, member in enumerate(data.run_states):
        for foreign in (False, True):
            name = f"s{index}{'f' if foreign else 'o'}"
            steps.append(Step("name_state", {"state": member.name, "foreign": foreign,
                                             "script": script, "header": "plain"}, (name,)))
    out.append(Program("run-states", tuple(steps)))

    steps = _start()
    keys = [(f"value {v!r}", v) for v in data.key_values] + [op.name for op in data.from_key]
    for key in keys:
        steps.append(Step("refuse_fields", {"caller": me, "source_id": own,
                                            "kind": "key-not-task", "how": None, "key": key}))
        for reverse in (False, True):  # the key at fault second, then first
            steps.append(Step("replay_map", {"first": own, "second": own,
                                             "shape": "near-key", "reverse": reverse,
                                             "key": key}))
    for shape in ("both", "one-named", "conflict"):
        for reverse in (False, True):
            for second in (own, other):
                steps.append(Step("replay_map", {"first": own, "second": second,
                                                 "shape": shape, "reverse": reverse,
                                                 "key": "upper-cased"}))
    for kind in ("suite-fixtures", "without-mode", "live-shadow", "empty-map"):
        for source, how in ((own, None), (other, None), (own, "char-appended")):
            steps.append(Step("refuse_fields", {"caller": me, "source_id": source,
                                                "kind": kind, "how": how,
                                                "key": "upper-cased"}))
    out.append(Program("task-keys", tuple(steps)))

    steps = _start(rich=1, trials=1)
    for which in range(len(data.recorded_args)):
        name = f"rich{which}"
        steps.append(Step("record_eval_source", {"tenant": me, "lane": RECORDER,
                                                 "script": script, "rich": which + 1,
                                                 "trials": 1}, (name,)))
        steps += [Step("replay_varied", {"source_id": Var(name), "how": op.name, "which": i})
                  for op in data.arg_variants for i in (which,)]
    out.append(Program("exact-args", tuple(steps)))

    steps = _start()
    steps.append(Step("replay_own", {"source_id": own, "variant": "same", "trials": 1,
                                     "header": "plain"}, ("replayed",)))
    for target in ("replayed", "own"):
        for route in data.routes:
            for spelling in data.spellings:
                steps.append(Step("foreign_route", {"run_id": Var(target), "caller": them,
                                                    "route": route.name,
                                                    "spelling": spelling.name}))
    for target in ("replayed", "own"):
        steps += [Step("foreign_listing", {"run_id": Var(target), "caller": them,
                                           "listing": m.name}) for m in data.listings]
    steps += [Step("workspace_route", {"run_id": own, "route": route.name,
                                       "spelling": spelling.name})
              for route in data.routes for spelling in data.spellings]
    for reuse in data.idempotent:
        for source, second in ((own, other), (other, own)):
            steps.append(Step("idempotent_create", {"source_id": source, "other": second,
                                                    "how": reuse["name"],
                                                    "caller": them if source == own
                                                    else me}, (f"i{len(steps)}",)))
    out.append(Program("owner-routes", tuple(steps)))

    steps = _start()
    for name, _ in data.headers:
        steps.append(Step("replay_as_another_tenant", {"source_id": other, "caller": me,
                                                       "header": name}))
        steps.append(Step("replay_as_another_tenant", {"source_id": own, "caller": them,
                                                       "header": name}))
        steps.append(Step("refuse_derived", {"run_id": own, "hows": ["char-appended"],
                                             "header": name, "caller": None}))
        steps.append(Step("refuse_derived", {"run_id": other, "hows": ["char-appended"],
                                             "header": name, "caller": me}))
    steps.append(Step("name_state", {"state": "waiting-for-input", "foreign": False,
                                     "script": script, "header": "idempotency-key"},
                      ("waiting",)))
    steps.append(Step("ask_again", {"caller": me, "times": 12}))
    steps.append(Step("ask_again", {"caller": them, "times": 12}))
    steps.append(Step("refusals_told_apart", {"caller": me}))
    # First asks: FIRST_ASKS runs of another tenant and as many ids of no run, each named
    # once, interleaved.
    # (each a value not named before: derivations other than the one asked above).
    id_like = [op.name for op in data.from_id if op.name != "char-appended"
               and data.id_like(classes.derive(op, "acme/run-0123456789abcdef"))]
    for index in range(FIRST_ASKS):
        steps.append(Step("name_state", {"state": "never-invoked-the-agent", "foreign": True,
                                         "script": script, "header": "plain"}))
        steps.append(Step("refuse_derived", {
            "run_id": other if (index // len(id_like)) % 2 else own,
            "hows": [id_like[index % len(id_like)]], "header": "plain", "caller": me}))
    steps.append(Step("refusals_told_apart", {"caller": me}))
    out.append(Program("request-headers", tuple(steps)))
    return tuple(out)


# The machine's methods a program may call that Hypothesis never draws at random.
PROGRAM_ONLY = frozenset({"example_step"})


class _Skip(Exception):
    """A step names a value no earlier step bound: skipped."""


def _resolve(value: Any, env: dict[str, Any]) -> Any:
    if isinstance(value, Var):
        if value.name not in env:
            raise _Skip(value.name)
        return env[value.name]
    return value


def run_program(machine: type[RecordedFixturesMachine], program: Program) -> ProgramResult:
    """Run `program` on a fresh machine of `machine`: every step whose rule the host offers
    (its preconditions hold), the invariants after each, the example's teardown at the end.
    A breach ends it with the requirement id and the pasteable program up to there."""
    rules = {rule.function.__name__: rule for rule in machine_parts(machine).rules}
    inits = {rule.function.__name__: rule for rule in machine_parts(machine).initializers}
    lines = [f"state = {machine.__name__}()"]
    env: dict[str, Any] = {}
    state = machine()
    state.narrate = False  # a program's story is its text
    if program.row is not None:
        from refsim.testing.stateful import example_rows
        why = state.row_apart(example_rows()[program.row])
        if why is not None:
            state.__dict__.pop("model")
            state.teardown()
            return ProgramResult(program.name, True, apart=why)
    ran = skipped = 0
    try:
        for step in program.steps:
            rule = rules.get(step.rule) or inits.get(step.rule)
            if rule is None and step.rule in PROGRAM_ONLY:
                pre: tuple[Any, ...] = ()
            elif rule is None:
                raise KeyError(f"the machine has no rule {step.rule!r}")
            else:
                pre = tuple(rule.preconditions)
            try:
                args = {k: _resolve(v, env) for k, v in step.args.items()}
            except _Skip:
                skipped += 1
                continue
            if not all(holds(state) for holds in pre):
                skipped += 1
                continue
            lines.append(step.text())
            got = getattr(state, step.rule)(**args)
            values: Sequence[Any] = (got.values if isinstance(got, MultipleResults)
                                     else () if got is None else (got,))
            for name, value in zip(step.targets, values, strict=False):
                env[name] = value
            ran += 1
            state.after_every_step()
        lines.append("state.teardown()")
        state.teardown()
    except RequirementViolated as exc:
        lines.append("state.teardown()")
        return ProgramResult(program.name, False, exc.requirement_id, str(exc), tuple(lines),
                             ran, skipped, observation=exc.observation)
    finally:
        if "model" in state.__dict__:  # ended by a breach: let it go without judging again
            state.__dict__.pop("model")
            state.teardown()
    return ProgramResult(program.name, True, None, "", tuple(lines), ran, skipped)


__all__ = ["Program", "ProgramResult", "Step", "Var", "run_program", "sweep", "table"]
