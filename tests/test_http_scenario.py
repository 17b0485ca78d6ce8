"""The conformance scenario over HTTP reads exactly as it does in process."""

from __future__ import annotations

from typing import Any

from refsim import SimHost
from refsim.check.scenario import LATENCY, SCENARIO_ROW, SHAPE, ScenarioConfig, run_scenario
from refsim.wire.httpclient import HttpClient
from refsim.wire.server import background

KEY_A, KEY_B = "hk_test_acme", "hk_test_globex"


def rows(found: list[Any]) -> list[tuple[str, str, int]]:
    """Each row's disposition and assertion count; the latency row's count is the clock's
    too (its tail is timed afresh only where the first samples' tails differ). The shape
    row judges refsim's own vectors and sends nothing: beside a host over HTTP it is
    apart (`_shape_apart`), so it is left out of the comparison, and the scenario row,
    which conjoins the legs judged, counts one leg fewer there."""
    return [(r.requirement_id, r.disposition.value,
             -1 if r.requirement_id in (LATENCY, SCENARIO_ROW) else r.assertion_count)
            for r in found if r.requirement_id != SHAPE]


def findings(found: list[Any]) -> list[Any]:
    """Every finding as judged, but the latency row's: its figures are the clock's."""
    return [(r.detail, [(f.ok, f.message, f.observation) for f in r.findings])
            for r in found if r.requirement_id not in (LATENCY, SHAPE, SCENARIO_ROW)]


def _shape_apart(found: list[Any]) -> bool:
    (shape,) = [r for r in found if r.requirement_id == SHAPE]
    return bool(shape.apart)


def test_scenario_over_http_matches_in_process() -> None:
    config = ScenarioConfig(KEY_A, KEY_B)
    in_process = run_scenario(SimHost(), config)
    with background(SimHost()) as server:
        over_http = run_scenario(HttpClient(server.url), config)
    assert server.handler_errors == []
    assert _shape_apart(over_http) and not _shape_apart(in_process)
    assert rows(over_http) == rows(in_process)
    # the same ids are minted on both hosts (seed 0), so even the observations agree
    assert findings(over_http) == findings(in_process)
    assert all(r.passed for r in over_http if not r.apart), [
        (r.requirement_id, r.detail) for r in over_http if not r.passed and not r.apart]


def test_scenario_over_http_on_a_profile_without_the_counter_seam() -> None:
    from refsim.domain.profile import profile_named

    config = ScenarioConfig(KEY_A, KEY_B)
    host = SimHost(profile=profile_named("no-counter-seam"))
    in_process = run_scenario(SimHost(profile=profile_named("no-counter-seam")), config)
    with background(host) as server:
        over_http = run_scenario(HttpClient(server.url), config)
    assert rows(over_http) == rows(in_process)
    assert any(r.disposition.value == "blocked" for r in over_http)
