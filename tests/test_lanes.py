"""`check --base-url` in lanes: the same rows and verdicts as one after another, each lane
on tenants of its own, the latency leg with the host alone, and one after another (said
why) where the host cannot mint tenants."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from refsim import SimHost
from refsim.check.findings import Row
from refsim.check.lanes import Floor, mint
from refsim.check.observe import KEY_A, KEY_B
from refsim.check.runner import PARTS, Target, run_parts
from refsim.check.scenario import LATENCY
from refsim.cli import main
from refsim.wire.client import NO_BODY
from refsim.wire.httpclient import HttpClient
from refsim.wire.response import Response
from refsim.wire.server import background, delayed
from refsim.wire.trace import Trace, recording
from refsim.zoo.correct import variant


def _verdicts(rows: list[Row]) -> list[tuple[str, str, str, int]]:
    """Each row's verdict and assertion count (the latency leg's count says whether the
    machine's noise showed a tail worth timing afresh: its verdict alone)."""
    return [(r.requirement_id, r.check_id, r.disposition.value,
             0 if r.requirement_id == LATENCY else len(r.findings)) for r in rows]


def _check(url: str, lanes: int, said: list[str] | None = None) -> list[Row]:
    return run_parts(Target(), PARTS, client=HttpClient(url), api_key=KEY_A,
                     tenant_b_key=KEY_B, lanes=lanes,
                     say=None if said is None else said.append)


def test_lanes_give_the_rows_and_verdicts_of_one_after_another() -> None:
    said: list[str] = []
    with background(SimHost(seed=0)) as one, background(SimHost(seed=0)) as eight:
        alone = _check(one.url, 1)
        side = _check(eight.url, 8, said)
    assert said and said[0].startswith("8 lanes side by side")
    assert _verdicts(side) == _verdicts(alone)
    assert any(r.passed for r in side)


def test_lanes_overlap_the_rows_and_the_latency_leg_has_the_host_alone() -> None:
    """Against a host 10 ms away: rows overlap in time (the lanes do run side by side),
    and while the latency leg runs no exchange of another row is in flight."""
    trace = Trace(limit=100_000)
    with background(SimHost(seed=0), wrap_app=delayed(0.01)) as server, recording(trace):
        rows = _check(server.url, 8)
    assert all(r.disposition.value != "executed-fail" for r in rows)
    spans = [(e.segment, e.started, e.started + e.elapsed) for e in trace.exchanges]
    timed = [(s, t0, t1) for s, t0, t1 in spans if s.startswith(LATENCY)]
    others = [(s, t0, t1) for s, t0, t1 in spans if not s.startswith(LATENCY)]
    assert timed and others
    start, end = min(t0 for _, t0, _ in timed), max(t1 for _, _, t1 in timed)
    assert not [o for o in others if o[1] < end and o[2] > start]
    overlapping = sum(1 for (s1, _, a1), (s2, b0, _) in itertools.pairwise(others)
                      if s1 != s2 and b0 < a1)
    assert overlapping > 10


def test_a_host_without_the_tenants_seam_is_checked_one_row_after_another() -> None:
    said: list[str] = []
    correct = variant("counter-seam-only")
    with correct.served() as server:
        rows = _check(server.url, 8, said)
    assert said == ["one row after another: the host does not advertise the conformance "
                    "seam tenants, through which each lane gets tenants of its own"]
    assert rows and not [r for r in rows if r.disposition.value == "executed-fail"]


def test_each_lane_mints_tenants_of_its_own() -> None:
    with background(SimHost(seed=0)) as server:
        client = HttpClient(server.url)
        lanes = mint(client, KEY_A, 3, True)
        assert isinstance(lanes, list) and len(lanes) == 3
        keys = [k for lane in lanes for k in lane.values()]
        assert len(set(keys)) == 6 and KEY_A not in keys and KEY_B not in keys
        one = mint(client, KEY_A, 2, False)
        assert isinstance(one, list) and all(set(lane) == {"acme"} for lane in one)


def test_the_floor_gives_a_leg_the_host_alone() -> None:
    floor = Floor()
    events: list[str] = []
    go = threading.Event()

    def row() -> None:
        with floor.shared():
            events.append("row in")
            go.wait(5)
            time.sleep(0.05)
            events.append("row out")

    def leg() -> None:
        with floor.shared():
            go.set()
            with floor.alone():
                events.append("alone in")
                time.sleep(0.02)
                events.append("alone out")

    first = threading.Thread(target=row)
    first.start()
    while "row in" not in events:
        time.sleep(0.001)
    second = threading.Thread(target=leg)
    second.start()
    time.sleep(0.01)
    late = threading.Thread(target=row)  # arrives while the leg waits: held back
    late.start()
    for t in (first, second, late):
        t.join(5)
    assert events[:4] == ["row in", "row out", "alone in", "alone out"]
    assert events[4:] == ["row in", "row out"]


def test_the_floor_refuses_alone_outside_shared_or_twice() -> None:
    floor = Floor()
    with pytest.raises(RuntimeError), floor.alone():
        pass
    with floor.shared(), floor.alone():
        with pytest.raises(RuntimeError), floor.alone():
            pass
    with floor.shared():  # the floor is as it was: shared again at once
        pass


@pytest.mark.parametrize("text", ["0", "33", "x"])
def test_lanes_outside_one_to_thirty_two_is_a_usage_error(
        text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["check", "--base-url", "http://127.0.0.1:9", "--lanes", text])
    assert stopped.value.code == 2
    assert "a whole number from 1 to 32" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["wipes-all-copies", "foreign-unminted-403", "echoes-id"])
def test_a_faulty_host_s_red_rows_in_lanes_are_those_of_one_after_another(name: str) -> None:
    """A red row of a lane is judged again on the caller's tenants with the host alone:
    a fault that reaches across tenants (erasing one tenant's source wipes every copy;
    an unminted id under another existing tenant refused apart) shows in the rows that
    show it one after another, not in a row whose lane another lane disturbed."""
    from refsim.zoo.faulty import mutant
    faulty = mutant(name)
    reds = []
    for lanes in (1, 8):
        with background(faulty.host()) as server:
            rows = _check(server.url, lanes)
        reds.append([(r.requirement_id, r.check_id) for r in rows
                     if r.disposition.value == "executed-fail"])
    assert reds[0] and reds[1] == reds[0]


class _Unhonoured:
    """The reference host, whose tenants seam mints keys it then refuses."""

    def __init__(self) -> None:
        self.host = SimHost(seed=0)

    @property
    def name(self) -> str:
        return "unhonoured"

    def request(self, method: str, path: str, *, api_key: str | None = None,
                json: Any = NO_BODY, headers: dict[str, str] | None = None) -> Response:
        if (api_key or "").startswith("hk_lane_"):
            return Response(401, {"content-type": "application/json"},
                            {"error": "unauthenticated", "message": "unknown key"})
        answer: Response = self.host.request(method, path, api_key=api_key, json=json,
                                             headers=headers)
        return answer


def test_lanes_whose_minted_keys_are_refused_fall_back_to_one_after_another() -> None:
    said: list[str] = []
    rows = run_parts(Target(), PARTS, client=_Unhonoured(), api_key=KEY_A,
                     tenant_b_key=KEY_B, lanes=4, say=said.append)
    assert said and said[0].startswith("one row after another: a lane's minted tenants "
                                       "cannot drive a row: the host refuses the key")
    alone = run_parts(Target(), PARTS, client=_Unhonoured(), api_key=KEY_A,
                      tenant_b_key=KEY_B, lanes=1)
    assert rows and _verdicts(rows) == _verdicts(alone)


class _CallerSeams:
    """A host (the reference host, or a faulty one) whose seams mint tenants and register
    suites for the caller's keys alone: a lane's keys get 403 there (`refused`: "tenants",
    "eval-suites")."""

    def __init__(self, host: Any, refused: str) -> None:  # no `host`: seen from outside
        self._inner, self.refused = host, refused

    @property
    def name(self) -> str:
        return "caller-seams"

    def request(self, method: str, path: str, *, api_key: str | None = None,
                json: Any = NO_BODY, headers: dict[str, str] | None = None) -> Response:
        if (path.startswith(f"/conformance/seams/{self.refused}")
                and (api_key or "").startswith("hk_lane_")
                and not (isinstance(json, dict) and "workspace" in json)):
            return Response(403, {"content-type": "application/json"},
                            {"error": "forbidden", "message": "only the operator's keys"})
        answer: Response = self._inner.request(method, path, api_key=api_key, json=json,
                                               headers=headers)
        return answer


@pytest.mark.parametrize(("name", "refused"), [
    ("idempotency-shared-across-workspaces", "tenants"), (None, "tenants"),
    ("matches-in-any-case", "eval-suites"), (None, "eval-suites")])
def test_a_class_its_lane_s_keys_judge_less_of_is_judged_as_one_after_another(
        name: str | None, refused: str) -> None:
    """A sampled class drawn on a lane's tenants whose keys a seam refuses (a workspace of
    another tenant not minted: a faulty host that passed so; a suite not registered:
    blocked) is drawn again on the caller's: the verdicts of one after another."""
    from refsim.zoo.faulty import mutant
    verdicts = []
    for lanes in (1, 8):
        host = SimHost(seed=0) if name is None else mutant(name).host()
        rows = run_parts(Target(), ("sampled",), client=_CallerSeams(host, refused),
                         api_key=KEY_A, tenant_b_key=KEY_B, lanes=lanes)
        verdicts.append(_verdicts(rows))
    assert verdicts[1] == verdicts[0]
    if name is not None:
        assert any(v[2] == "executed-fail" for v in verdicts[0])


def test_rows_a_lane_s_keys_left_unjudged_are_judged_as_one_after_another() -> None:
    """The runs seams (erase, resolve) for the caller's keys alone: example rows that erase
    or resolve a source are blocked in a lane, and judged again on the caller's tenants
    they pass, as one after another."""
    parts = ("conformance", "examples", "invariants")
    verdicts = [_verdicts(run_parts(Target(), parts, client=_CallerSeams(
        SimHost(seed=0), "runs"), api_key=KEY_A, tenant_b_key=KEY_B, lanes=lanes))
        for lanes in (1, 8)]
    assert verdicts[1] == verdicts[0]
    assert not [v for v in verdicts[0] if v[2] in ("blocked", "executed-fail")]


def test_the_lanes_keys_are_redacted_as_the_caller_s(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`--trace` writes every row's exchanges: the keys the lanes minted (in the seam's
    bodies and every lane row's Authorization) are replaced as the caller's are."""
    from refsim.zoo.faulty import mutant
    monkeypatch.setenv("OPENWOP_API_KEY", KEY_A)
    monkeypatch.setenv("OPENWOP_TEST_TENANT_B_API_KEY", KEY_B)
    trace, report = tmp_path / "T", tmp_path / "r.json"
    with background(mutant("echoes-id").host()) as server:
        assert main(["check", "--base-url", server.url, "--trace", str(trace),
                     "--json", str(report)]) == 1
    written = "".join(p.read_text(encoding="utf-8") for p in sorted(trace.glob("*.har")))
    assert "$OPENWOP_KEY_LANE_0_ACME" in written
    assert "hk_lane_" not in written + report.read_text(encoding="utf-8")


class _MintsWith200(_Unhonoured):
    """The reference host, whose tenants seam answers 200 where refsim's says 201."""

    def request(self, method: str, path: str, *, api_key: str | None = None,
                json: Any = NO_BODY, headers: dict[str, str] | None = None) -> Response:
        answer: Response = self.host.request(method, path, api_key=api_key, json=json,
                                             headers=headers)
        if path == "/conformance/seams/tenants" and answer.status == 201:
            return Response(200, answer.headers, answer.json)
        return answer


def test_a_seam_that_mints_with_any_2xx_gets_lanes() -> None:
    said: list[str] = []
    mint_ok = mint(_MintsWith200(), KEY_A, 2, True)
    assert isinstance(mint_ok, list) and len(mint_ok) == 2
    run_parts(Target(), ["examples"], "0252.empty-map", client=_MintsWith200(),
              api_key=KEY_A, tenant_b_key=KEY_B, lanes=2, say=said.append)
    assert said and said[0].startswith("2 lanes side by side")
