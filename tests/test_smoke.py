from __future__ import annotations

from refsim import SimHost
from refsim.cli import main

from .conftest import KEY_A, RECORDER


def test_smoke_command_exits_zero(capsys: object) -> None:
    assert main(["smoke"]) == 0


def test_replay_moves_no_counter_and_drift_fails_closed(host: SimHost) -> None:
    def count() -> int:
        r = host.request("GET", "/conformance/seams/eval-counter?key=recorded-fixtures",
                         api_key=KEY_A)
        return int(r.json["count"])

    src = host.request("POST", "/runs", api_key=KEY_A, json={
        "mode": "eval", "evalSuiteRef": "conformance-eval-recorded-source", "agentId": RECORDER})
    assert src.status == 201
    assert count() == 1
    for suite, misses, passed in (("conformance-eval-recorded-replay", 0, True),
                                  ("conformance-eval-recorded-drift", 1, False)):
        r = host.request("POST", "/runs", api_key=KEY_A, json={
            "mode": "eval", "evalSuiteRef": suite, "agentId": RECORDER,
            "fixtureRuns": {"record": src.json["runId"]}})
        assert r.status == 201
        summary = host.request("GET", r.json["statusUrl"] + "/eval-summary", api_key=KEY_A).json
        assert summary["tasks"][0]["fixtureMissCount"] == misses
        assert summary["tasks"][0]["passed"] is passed
        assert count() == 1
