"""The machine's strategies: the scripts an agent runs, drawn in as few choices as their
content needs, and what a script can move (`increments`)."""

from __future__ import annotations

import itertools
import math
from typing import Any

from hypothesis import strategies as st

from refsim.domain.agents import HELPER
from refsim.domain.tools import COUNTER, FLAKY, VAULT
from refsim.wire import catalog

# The counter keys a script moves (the checker's tenant keys are `check.observe.KEYS`).
COUNTER_KEYS = ("k1", "k2")

# Scripts are drawn in as few choices as their content needs: Hypothesis's cost (drawing,
# its record of every choice, mutating and shrinking) goes by the number of choices. They
# are drawn whole from tables (`sampled_from` inside a named composite, never a `map`), so
# a printed program shows each script as the literal it is. Nothing edits a drawn script:
# the tables are shared.
#
# A counter step: op (inc, read) x key (k1, k2). `inc k1` first: shrinking goes there.
COUNTER_STEPS: tuple[dict[str, Any], ...] = tuple(
    {"call": COUNTER, "args": {"op": op, "key": key}}
    for op in ("inc", "read") for key in COUNTER_KEYS)
MAX_SCRIPT_CALLS = 4
DECIDE: dict[str, Any] = {"decide": "ok"}


def _counter_scripts() -> tuple[list[dict[str, Any]], ...]:
    """Every script of one to four counter steps and the decision, shortest first, each
    length as often as any other (a short script is listed as many times over as there are
    longer ones per short one); one choice draws a whole script."""
    out: list[list[dict[str, Any]]] = []
    for length in range(1, MAX_SCRIPT_CALLS + 1):
        scripts = [[*steps, DECIDE]
                   for steps in itertools.product(COUNTER_STEPS, repeat=length)]
        repeat = len(COUNTER_STEPS) ** (MAX_SCRIPT_CALLS - length)
        out.extend(script for script in scripts for _ in range(repeat))
    return tuple(out)


_COUNTER_SCRIPTS = st.sampled_from(_counter_scripts())


@st.composite
def counter_scripts(draw: st.DrawFn) -> list[dict[str, Any]]:
    """One script from the table. The table is drawn through a named composite so that the
    strategy's repr is its name: Hypothesis formats a rule's repr, strategies and all, each
    time a drawn rule is not enabled (an event string, hashed), and `sampled_from`'s repr
    spells out its elements (135 kB for this table, about 0.1 ms a retry). The composite
    adds no choice, and the value is the table's own, so it prints as the literal it is."""
    return draw(_COUNTER_SCRIPTS)


COUNTER_SCRIPTS = counter_scripts()


def _any_steps() -> tuple[dict[str, Any], ...]:
    """Any step, one choice each: a counter step, a flaky call (four modes), a vault query
    (two), or a delegation to the helper with one or two counter steps. The four kinds come
    equally often, as from a `one_of` of them; within a kind each variant equally often."""
    kinds: list[list[dict[str, Any]]] = [
        list(COUNTER_STEPS),
        [{"call": FLAKY, "args": {"mode": m}} for m in ("ok", "error", "forbidden",
                                                         "rate_limited")],
        [{"call": VAULT, "args": {"query": q}} for q in ("q1", "q2")],
        [{"delegate": HELPER, "script": list(steps)} for n in (1, 2)
         for steps in itertools.product(COUNTER_STEPS, repeat=n)],
    ]
    per_kind = math.lcm(*(len(kind) for kind in kinds))
    return tuple(step for kind in kinds for step in kind * (per_kind // len(kind)))


ANY_STEPS = _any_steps()
_ANY_STEP_LISTS = st.lists(st.sampled_from(ANY_STEPS), min_size=0, max_size=MAX_SCRIPT_CALLS)


@st.composite
def any_scripts(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Up to four steps of any kind, then the decision. A composite, not a `map`: Hypothesis
    prints a mapped value as the call that made it (`[*[...], DECIDE]`, which names what a
    pasted program does not import), a composite's as the literal it is; and its repr is
    its name (see `counter_scripts`)."""
    return [*draw(_ANY_STEP_LISTS), DECIDE]


ANY_SCRIPTS = any_scripts()


def counter_only(script: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For a foreign host without refsim's extra tools: keep only the counter calls."""
    out: list[dict[str, Any]] = []
    for step in script:
        if step.get("call") == COUNTER or "decide" in step:
            out.append(step)
        elif "delegate" in step:
            out.extend(counter_only(step["script"]))
    return out


def increments(script: list[Any]) -> set[str]:
    """The counter keys a script's calls could move (its `inc` calls, a delegate's too): a
    run of it, live or wrongly served live, moves no other counter."""
    keys: set[str] = set()
    for step in script:
        if not isinstance(step, dict):
            continue
        args = step.get("args")
        if step.get("call") == COUNTER and isinstance(args, dict) and args.get("op") == "inc":
            keys.add(str(args.get("key")))
        keys |= increments(step.get("script") or [])
    return keys


def suite_script(name: str) -> list[Any]:
    """Every step of every task of the catalog suite `name` ([] for a workflow)."""
    if not catalog.is_suite(name):
        return []
    return [step for task in catalog.suite(name)["tasks"]
            for step in task.get("input", {}).get("script", [])]


def drift(script: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same script with one new call the source never made."""
    return [{"call": COUNTER, "args": {"op": "read", "key": "drift"}}, *script]
