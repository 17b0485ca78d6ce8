"""The machine's rules that ask for refusals (`RefusalRules`): values that name no usable
source (source-values: of every type and pattern, derived from a seen id, spliced), a
refusal asked for again, the request rules of §B, and refusals of two groups told apart.
How one refusal of an unusable source is judged and remembered for these checks is the
machine state's (`MachineState._refused_unusable`).

A new rule whose request must be refused goes here.
"""

from __future__ import annotations

import random
from typing import Any

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from refsim.check import classes, judges
from refsim.check.differential import alike, asked_apart
from refsim.check.ids import req_id
from refsim.check.observe import eval_body
from refsim.testing.machine.draws import (
    FROM_ID,
    FROM_KEY,
    HEADERS,
    SOURCE_VALUES,
    TASK_KEYS,
    _class_data,
    _op,
)
from refsim.testing.machine.offered import NOOP, SUITE_FIXTURES_SUITE, TWO_TASKS_SUITE
from refsim.testing.machine.state import TASK_ID, MachineState
from refsim.testing.machine.verdicts import judged
from refsim.testing.strategies import suite_script

# Refusals asked again per group to tell two kinds apart, and first asks per group needed
# before their frequencies are compared (as the uniformity rows ask: scenario.py).
BODY_SAMPLES = 4
FIRST_ASKS = 12


# The machine's bundles (`MachineState`'s), named as the rules below name them.
tenants, runs = MachineState.tenants, MachineState.runs


class RefusalRules(MachineState):
    """The rules that ask for refusals, mixed into `RecordedFixturesMachine`."""

    @precondition(lambda self: self.offer.recorded)
    @rule(caller=tenants)
    def refusals_told_apart(self, caller: str) -> None:
        """Security (refsim's SHOULD reading), as the uniformity rows judge it: another
        tenant's run and an id of no run, asked again and again interleaved, are told apart
        by nothing constant within each (`indistinguishable`) nor by how often a value
        shows (`frequencies_alike`); nor are their first asks, where each group has
        FIRST_ASKS of them."""
        kinds = self.kinds_seen.get((caller, "plain"), {})
        anchor = next((kinds[k] for k in ("unknown", "near-id", "spliced") if k in kinds), None)
        other = kinds.get("foreign")
        req = req_id("0252.source-uniform-body")
        rng = random.Random(f"{type(self).examples_run}:{caller}")
        if anchor is not None and other is not None:
            asks = [(anchor[0], anchor[1]), (other[0], other[1])]
            # What tells them apart at BODY_SAMPLES each is asked ALIKE_CONFIRM times more
            # before it counts (as the rows ask): a member order shuffled on every answer
            # is constant within four answers of each group one time in 128.
            found, groups, _ = asked_apart(req, asks, BODY_SAMPLES, rng)
            judged(found)
            if judges.uneven(groups):  # a value that recurs unevenly: ask enough to tell
                for _ in range(judges.FREQUENCY_SAMPLES):
                    for index in rng.sample((0, 1), 2):
                        groups[index][1].append(asks[index][1]())
                judged(judges.frequencies_alike(req, groups))
            self._count("refusal:told-apart")
        firsts = self.first_asks.get(caller, {})
        if all(len(firsts.get(g, ())) >= FIRST_ASKS for g in ("another tenant's run",
                                                               "an id of no run")):
            judged(judges.frequencies_alike(req, [
                (f"{g}, asked once", firsts[g]) for g in ("an id of no run",
                                                          "another tenant's run")]))
            self._count("refusal:first-asks")

    def _refuse_value(self, caller: str, value: Any, kind: str, header: str) -> None:
        """Name `value` as the source: a value that names no usable source is refused as
        every unusable source is (one that happens to be a run's id is replayed)."""
        suite, task, script, _, _ = self._suite(caller, [{"decide": "ok"}], source=False)
        if isinstance(value, str) and value in self.model.runs:
            return  # a member that is a run's id after all: not this class
        self._may_move([caller], script)
        minted = self.inside.run_count() if self.inside is not None else None
        r = self._create(caller, eval_body(suite, {task: value}), header)
        exact = _class_data().id_like(value)
        supplied = [value] if isinstance(value, str) else [
            v for v in (value if isinstance(value, list) else
                        value.values() if isinstance(value, dict) else ())
            if isinstance(v, str)]
        self._refused_unusable(caller, r, supplied, kind, lambda v: eval_body(suite, {task: v}),
                               header=header, exact=exact, minted=minted)

    @precondition(lambda self: self.offer.recorded)
    @rule(caller=tenants, member=SOURCE_VALUES, header=HEADERS)
    def refuse_value(self, caller: str, member: tuple[str, Any], header: str) -> None:
        """source-values: any JSON value that is no run's id, of every type and pattern."""
        name, value = member
        self._drew("source-values", name)
        self._drew("request-headers", header)
        kind = "unknown" if _class_data().id_like(value) else "undecodable"
        self._refuse_value(caller, value, kind, header)

    @precondition(lambda self: self.offer.recorded)
    @rule(run_id=runs, hows=st.lists(FROM_ID, min_size=1, max_size=4, unique=True),
          header=HEADERS, caller=st.one_of(st.none(), tenants))
    def refuse_derived(self, run_id: str, hows: list[str], header: str,
                       caller: str | None) -> None:
        """source-values: an id the caller has seen (its own, unless another tenant is
        drawn), turned into ones that name no run."""
        owner = caller or self.model.runs[run_id].tenant
        for how in hows:
            value = classes.derive(_op(_class_data().from_id, how), run_id)
            if value is None:
                continue
            self._drew("source-values", how)
            self._drew("request-headers", header)
            self._refuse_value(owner, value, "near-id", header)

    @precondition(lambda self: self.offer.recorded)
    @rule(first=runs, second=runs, at=st.integers(0, 64))
    def refuse_spliced(self, first: str, second: str, at: int) -> None:
        """source-values: two seen ids of different tenants spliced, asked by the tenant
        of the head: another tenant's parts next to the caller's."""
        if self.model.runs[first].tenant == self.model.runs[second].tenant:
            return
        caller = self.model.runs[first].tenant
        for op in _class_data().from_two_ids:
            value = classes.derive(op, first, second, at)
            if value is not None:
                self._drew("source-values", op.name)
                self._refuse_value(caller, value, "spliced", "plain")

    @precondition(lambda self: self.offer.recorded)
    @rule(caller=tenants, times=st.integers(1, 12))
    def ask_again(self, caller: str, times: int) -> None:
        """A refusal asked for again, many times: the same answer each time (a host that
        counts the asks, or caches, must not show it)."""
        kinds = self.kinds_seen.get((caller, "plain"), {})
        for kind, ask, first in list(kinds.values()):
            if kind == "unknown" and len(kinds) > 1:
                continue  # asked again beside the others below
            for _ in range(times):
                again = ask()
                judged(judges.refused_as(req_id("0252.source-refused"), again,
                                         f"an unusable source ({kind}), asked again"))
                if judges.signature(again, self._noise()) != judges.signature(
                        first, self._noise()):
                    anchor = next((e for k, e in kinds.items() if k != kind), None)
                    pairs = [(kind, ask), (anchor[0], anchor[1])] if anchor else [(kind, ask)]
                    firsts = [again, anchor[2]] if anchor else [again]
                    if anchor is not None:
                        found = alike(req_id("0252.source-uniform-body"), pairs, firsts,
                                      self._noise())
                        judged(attrs.evolve(found, message=f"asked again, the refusal of "
                                            f"{kind} now differs from {anchor[0]}'s: "
                                            f"{found.message}"))
            self._count("refusal:asked-again")

    @precondition(lambda self: self.offer.recorded)
    @rule(caller=tenants, source_id=runs,
          kind=st.sampled_from(["key-not-task", "suite-fixtures", "without-mode", "live-shadow",
                                "empty-map"]),
          how=st.one_of(st.none(), FROM_ID), key=st.one_of(TASK_KEYS, FROM_KEY))
    def refuse_fields(self, caller: str, source_id: str, kind: str, how: str | None = None,
                      key: tuple[str, Any] | str = ("value 'nope'", "nope")) -> None:
        """§B: each request rule refused with 400 validation_error, whatever source it
        names (a run of any tenant or an id near one: a §B refusal must not tell them
        apart), and for a key, any key that is not a taskId (task-keys)."""
        needs = {"suite-fixtures": SUITE_FIXTURES_SUITE, "without-mode": NOOP,
                 "live-shadow": TWO_TASKS_SUITE, "empty-map": TWO_TASKS_SUITE}
        if kind in needs and not self.offer.fixture(needs[kind]):
            return  # the host does not list the fixture this refusal names
        value: Any = source_id
        if how is not None:
            value = classes.derive(_op(_class_data().from_id, how), source_id) or source_id
        if kind == "key-not-task":
            suite, task, script, _, _ = self._suite(caller, [{"decide": "ok"}], source=False)
            self._may_move([caller], script)
            if isinstance(key, tuple):
                name, bad = key
            else:
                name, bad = key, classes.derive(_op(_class_data().from_key, key), task)
            if not isinstance(bad, str) or bad == task:
                return
            self._drew("task-keys", name)

            def body_of(v: Any) -> Any:
                return eval_body(suite, {bad: v})
        elif kind == "live-shadow":
            # Through evalModes where the host takes it (RFC 0251), else the suite's modes.
            modes: dict[str, Any] = ({"evalModes": ["golden", "live-shadow"]}
                if self.offer.surface.advertises("baselineSelection") else {})

            def body_of(v: Any) -> Any:
                return eval_body(TWO_TASKS_SUITE, {"alpha": v}, **modes)
        else:
            def body_of(v: Any) -> Any:
                return {"suite-fixtures": eval_body(SUITE_FIXTURES_SUITE, {"canned": v}),
                        "without-mode": {"workflowId": NOOP, "fixtureRuns": {TASK_ID: v}},
                        "empty-map": eval_body(TWO_TASKS_SUITE, {})}[kind]
        if kind in needs:  # a host that ran the refused suite anyway moved its counters
            self._may_move([caller, self.model.runs[source_id].tenant],
                           suite_script(needs[kind]))
        r = self._create(caller, body_of(value))
        requirement = {"live-shadow": req_id("0252.live-shadow-refused"),
                       "empty-map": req_id("0252.empty-map-refused"),
                       "suite-fixtures": req_id("0252.suite-fixtures-refused"),
                       }.get(kind, req_id("0252.fields-refused"))
        judged(judges.refused_as(requirement, r, kind))
        self._count("refusal:" + kind)
        if kind == "empty-map":
            return
        # One §B refusal whatever the source it names: the first one for this caller and
        # rule is the anchor; one that reads otherwise is asked again beside it.
        named = self._source_kind(caller, value)
        # All else held equal: a refusal may name the bad key, so each key is its own group.
        held = kind if kind != "key-not-task" else f"{kind} {bad!r}"
        groups = self.field_refusals.setdefault((caller, held), {})
        signature = judges.signature(r, self._noise())
        if signature not in groups and groups:
            first_named, first_ask, first = next(iter(groups.values()))
            found = alike(req_id("0252.source-uniform-body"),
                          [(f"{kind} naming {first_named}", first_ask),
                           (f"{kind} naming {named}", lambda: self._create(caller,
                                                                           body_of(value)))],
                          [first, r], self._noise())
            if not found.ok:
                self.oracles.append(found)
            judged(found)
        groups.setdefault(signature, (named, lambda: self._create(caller, body_of(value)), r))

    def _source_kind(self, caller: str, value: Any) -> str:
        run = self.model.runs.get(value) if isinstance(value, str) else None
        if run is None:
            return "an id of no run"
        return "the caller's run" if run.tenant == caller else "another tenant's run"
