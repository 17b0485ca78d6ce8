"""A stateful Hypothesis machine for RFC 0252 over any `HostClient`.

It records sources of every kind, replays them, asks for every refusal, forks and erases,
and after every step checks the host against a model: usability both ways, refusal
uniformity, fail-closed replay, the echo, isolation, erasure and no re-resolution.

    from refsim.testing.stateful import machine_for
    TestRecordedFixtures = machine_for(lambda: SimHost(seed=0)).TestCase

This module assembles the machine (`RecordedFixturesMachine`) and is the one to import it
from; its parts are in `refsim/testing/machine/`, each a mixin or what the mixins share:

    machine/verdicts.py    how a step fails (`judged`, `RequirementViolated`), narration
    machine/offered.py     what the host offers the machine (`Offered`), `CRITICAL`
    machine/draws.py       the classes of specs/classes.yaml as strategies, the lanes
    machine/state.py       the state and plumbing every rule shares (`MachineState`)
    machine/sources.py     rules that make runs: sources, tenants, run states
    machine/replays.py     rules that replay, map several keys, erase and fork
    machine/refusals.py    rules that ask for refusals
    machine/owners.py      rules on the owner's routes (owner-routes)
    machine/table_rows.py  the example table's rows as programs (`example_step`)
    machine/invariants.py  the checks after every step

Hypothesis collects rules, invariants and initializers from every base class, by name.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any, cast

from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test

from refsim.check.observe import nonce
from refsim.domain.ids import RunId, parse_bound
from refsim.testing.machine.draws import LANES as LANES
from refsim.testing.machine.invariants import AfterEveryStep
from refsim.testing.machine.offered import CRITICAL as CRITICAL
from refsim.testing.machine.offered import Offered as Offered
from refsim.testing.machine.owners import OwnerRouteRules
from refsim.testing.machine.refusals import BODY_SAMPLES as BODY_SAMPLES
from refsim.testing.machine.refusals import FIRST_ASKS as FIRST_ASKS
from refsim.testing.machine.refusals import RefusalRules
from refsim.testing.machine.replays import ReplayRules
from refsim.testing.machine.sources import COUNTER_INIT as COUNTER_INIT
from refsim.testing.machine.sources import SourceRules
from refsim.testing.machine.state import TENANTS
from refsim.testing.machine.state import WATCHED_KEYS as WATCHED_KEYS
from refsim.testing.machine.state import settle_constants as settle_constants
from refsim.testing.machine.table_rows import ExampleRowRules
from refsim.testing.machine.table_rows import example_rows as example_rows
from refsim.testing.machine.verdicts import JUDGED as JUDGED
from refsim.testing.machine.verdicts import RequirementViolated as RequirementViolated
from refsim.testing.machine.verdicts import expect as expect
from refsim.testing.machine.verdicts import focused_on as focused_on
from refsim.testing.machine.verdicts import note as note
from refsim.testing.model import Entry
from refsim.wire.client import HostClient


class RecordedFixturesMachine(SourceRules, ReplayRules, RefusalRules, OwnerRouteRules,
                              ExampleRowRules, AfterEveryStep):
    """Subclass via `machine_for(factory)`; the default drives a fresh `SimHost(seed=0)`."""


def attr_tuple(entry: Entry) -> list[Any]:
    return [entry.tool, entry.args, entry.response, entry.is_error]


def _rid(run_id: str) -> RunId:
    """The simulator's id of a run it created (the bound form always parses there)."""
    parsed = parse_bound(run_id)
    assert parsed is not None, f"not a bound run id: {run_id!r}"
    return parsed


def machine_for(factory: Callable[[], HostClient], *, extended: bool = True,
                keys: dict[str, str] | None = None,
                name: str = "RecordedFixturesMachine") -> type[RecordedFixturesMachine]:
    """A machine class over hosts from `factory` (a fresh host per example, or one
    long-lived host over HTTP); `keys` maps tenant labels to API keys."""
    settle_constants()
    return type(name, (RecordedFixturesMachine,), {
        "client_factory": staticmethod(factory), "extended": extended,
        "tenant_keys": dict(keys or TENANTS), "offered": None, "noise": None, "broken": set(),
        "branches": collections.Counter(), "drawn": collections.Counter(),
        "programs_run": collections.Counter(), "judged_counts": collections.Counter(),
        "rows_run": collections.Counter(), "rows_apart": {}, "requests_made": 0,
        "run_nonce": nonce(),
        "http_sent": 0, "steps_taken": 0,
        "examples_run": 0, "kept": None})


def machine_test(machine: type[RuleBasedStateMachine],
                 config: Any) -> Callable[[], None]:
    """Hypothesis's test function for a machine class under `config` (a `settings`):
    `get_state_machine_test`, typed (some Hypothesis releases leave it unannotated)."""
    make = cast(Callable[..., Callable[[], None]], get_state_machine_test)
    return make(machine, settings=config)


def machine_parts(machine: type[RuleBasedStateMachine]) -> Any:
    """The rules, invariants and bundles Hypothesis reads off a machine class."""
    return cast(Any, machine).setup_state()


def unreached(branches: collections.Counter[str]) -> list[str]:
    return [b for b in CRITICAL if branches[b] == 0]


__all__ = ["CRITICAL", "RecordedFixturesMachine", "RequirementViolated", "focused_on",
           "machine_for", "machine_parts", "machine_test", "settle_constants", "unreached"]
