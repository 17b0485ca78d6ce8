"""The fast paths of the domain say the same as the plain code they replaced: canonical
JSON, the logical clock, minted ids, the matcher, the paused collector."""

from __future__ import annotations

import gc
import json
import random
import weakref
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim import SimHost
from refsim.cli.bench import LoopAgent, record_and_replay
from refsim.domain import canonical as canonical_module
from refsim.domain.canonical import canonical, is_json_value
from refsim.domain.clock import EPOCH, LogicalClock
from refsim.domain.core import gc_paused
from refsim.domain.fixtures import FixtureEntry, FixtureMatcher
from refsim.domain.ids import OPAQUE_RE, IdMinter
from refsim.wire import schemas
from refsim.wire.schemas import valid_script

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=4),
    max_leaves=20)


def _plain_canonical(value: Any) -> str:
    """The reference: walk the value, then the documented encoder."""
    return json.dumps(canonical_module._numbers(value), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False, allow_nan=False)


@pytest.mark.slow  # hundreds of Hypothesis examples
@settings(max_examples=300, deadline=None)
@given(JSON)
def test_canonical_equals_the_plain_walk_then_dump(value: Any) -> None:
    assert canonical(value) == _plain_canonical(value)


def test_canonical_writes_integral_floats_as_integers() -> None:
    assert (canonical({"b": [2.0, 1.5, "x.y", -0.0], "a": 1e15}) ==
        '{"a":1000000000000000,"b":[2,1.5,"x.y",0]}')
    assert canonical(2.0**53) == "9007199254740992.0"  # outside the integer range: kept


def test_values_that_are_not_json_are_still_refused() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    assert not is_json_value(cycle)
    assert not is_json_value({"a": float("nan")})
    assert not is_json_value({"a": {1, 2}})
    assert not is_json_value({1: 1, "a": 2})  # keys that do not sort


def test_the_clock_formats_every_tick_as_strftime_would() -> None:
    clock = LogicalClock()
    for tick in range(1, 3500):
        moment = EPOCH + timedelta(milliseconds=tick)
        expected = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
        assert clock.now() == expected
    clock.ticks = 86_400_000 * 40 - 2  # jumps are fine: the cached second is re-checked
    assert clock.now() == "2026-02-09T23:59:59.999Z"
    assert clock.now() == "2026-02-10T00:00:00.000Z"


def test_minted_ids_fit_the_grammar_across_pool_refills() -> None:
    minter = IdMinter(3)
    seen = set()
    for i in range(2000):  # several refills of the character and hex pools
        opaque = minter.opaque(24 if i % 2 else 20)
        assert OPAQUE_RE.fullmatch(opaque) and "~" not in opaque
        uuid = minter.uuid_like()
        assert len(uuid) == 36 and uuid[14] == "4" and uuid[19] == "a"
        seen.add(opaque)
    assert len(seen) == 2000
    long = minter.opaque(128)
    assert OPAQUE_RE.fullmatch(long) and len(long) == 128


def test_the_matcher_serves_calls_to_tools_no_exact_entry_names_without_canonical() -> None:
    entries = (FixtureEntry("t", {"a": 1}, True, "exact"), FixtureEntry("loose", None, False, 7))
    matcher = FixtureMatcher(entries)
    assert matcher.select("loose", {"whatever": object()}) == entries[1]  # never encoded
    assert matcher.select("loose", None) is None  # consumed
    assert matcher.select("t", {"a": 1.0}) == entries[0]
    assert matcher.select("t", {"a": 1}) is None
    assert matcher.lookups == 4 and matcher.consumed == 2


def test_gc_is_paused_inside_a_run_and_resumed_after() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # re-entrant: the outer pause still holds
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # off before, off after
    finally:
        gc.enable()


def test_a_pause_leaves_objects_the_program_froze_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 10_000
        young = [[i] for i in range(1000)]  # tracked: a freeze inside the pause takes them
        with gc_paused():
            pass
        # Not == frozen: another thread (xdist's, a server's) may free a few frozen objects
        # meanwhile. An unfreeze would leave 0, a second freeze at least 1000 more.
        assert frozen - 1000 < gc.get_freeze_count() <= frozen
        assert len(young) == 1000
    finally:
        gc.unfreeze()


def test_what_a_pause_allocated_is_left_to_the_collector_to_take_in() -> None:
    gc.collect()
    with gc_paused():
        held = [{"payload": {"n": i}} for i in range(5000)]
    # Young, as if the collector had never been off: it promotes them by its own count,
    # not straight to the oldest generation behind it.
    assert not any(o is held for o in gc.get_objects(generation=2))
    assert gc.get_freeze_count() == 0  # nothing frozen
    assert len(held) == 5000


def _tracked() -> int:
    gc.freeze()
    count = gc.get_freeze_count()
    gc.unfreeze()
    return count


def test_cyclic_garbage_made_between_runs_is_still_collected() -> None:
    """A pause used to move everything to the oldest generation behind the collector's
    back (freeze, unfreeze): it never ran a full collection again, and cycles swept there
    piled up (a long fuzzing run or a served host grew without bound)."""
    gc.collect()
    collected: list[int] = []

    class Node:
        pass

    kept: list[Any] = []
    per_run = _tracked() // 100 + 1  # each run keeps a hundredth of the heap, tracked
    for _ in range(60):
        node = Node()
        node.self = node  # type: ignore[attr-defined]
        weakref.finalize(node, collected.append, 1)
        del node  # cyclic garbage, made outside any run
        with gc_paused():
            kept.append([[i] for i in range(per_run)])
    assert collected, "cycles made between runs are never collected"
    assert len(kept) == 60


def test_a_run_leaves_the_collector_as_it_found_it() -> None:
    host = SimHost(seed=0)

    class Watcher:
        seen: bool | None = None

        def run(self, ctx: Any, task_input: Any) -> Any:
            Watcher.seen = gc.isenabled()
            return "recorded"

    host.register_agent("test.watcher", Watcher())
    r = host.request("POST", "/runs", api_key="hk_test_acme", json={
        "mode": "eval", "evalSuiteRef": "conformance-eval-recorded-source",
        "agentId": "test.watcher"})
    assert r.status == 201
    assert Watcher.seen is False
    assert gc.isenabled()


def test_the_bench_workload_replays_cleanly_and_deterministically() -> None:
    first, second = record_and_replay(300), record_and_replay(300)
    assert first.host.event_log() == second.host.event_log()
    served = [e for run in first.host.core.runs.values() for e in run.events
              if e.type == "agent.tool-returned"]
    assert len(served) == 600  # 300 live, 300 replayed
    assert first.host.core.gateway.live_calls == 300  # the replay moved nothing
    assert LoopAgent(0).run(None, None) == "recorded"


def test_same_seed_same_bytes_for_a_large_random_workload() -> None:
    rng = random.Random(5)
    script = [{"call": "conformance.eval:counter",
               "args": {"op": rng.choice(["inc", "read"]), "key": f"k{rng.randrange(9)}"}}
              for _ in range(190)]
    logs = []
    for _ in range(2):
        host = SimHost(seed=9)
        r = host.request("POST", "/runs", api_key="hk_test_acme", json={
            "workflowId": "conformance-agent-call",
            "inputs": {"agentId": "conformance.eval:recorder", "script": script}})
        assert r.status == 201
        logs.append(host.event_log())
    assert logs[0] == logs[1] and len(logs[0]) > 50_000


def test_script_verdicts_are_remembered_and_agree_with_the_schema() -> None:
    good = [{"call": "conformance.eval:counter", "args": {"op": "inc", "key": "k"}},
            {"decide": "ok"}]
    bad = [{"call": "conformance.eval:counter", "unexpected": 1}]
    for script in (good, bad, [], [{"decide": 1.0}]):
        expected = schemas.is_valid("script.schema.json", script)
        assert valid_script(script) is expected
        assert valid_script(script) is expected  # the remembered verdict
    assert valid_script(good) and not valid_script(bad)
    assert not valid_script([{"call": float("nan")}])  # not JSON: validated, not remembered
