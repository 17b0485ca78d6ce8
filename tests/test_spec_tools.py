"""`refsim diff` and `refsim falsify` (issue 13): the pair client, the printed programs, the
RFC's falsifiability table as data and the computed one."""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from refsim.check.observe import KEY_A, inspector_of
from refsim.check.registry import load_registry
from refsim.cli import main
from refsim.host import SimHost
from refsim.testing.diff import (
    DIFF_ID,
    Pair,
    PairClient,
    WireDifference,
    every_reading,
    report,
    run_diff,
    summary_line,
)
from refsim.testing.fuzz import run_machine
from refsim.zoo import falsify
from refsim.zoo.faulty import ZOO, Mutant, mutant

# What `refsim diff --assume merge-suite-fixtures=merge` printed (seed 0), pasted verbatim.
MERGE_PROGRAM = """\
from refsim.testing.diff import pair_machine
RecordedFixturesMachine = pair_machine(assume=['merge-suite-fixtures=merge'])
state = RecordedFixturesMachine()
tenants_0 = state.add_tenant(name='initech')
runs_0 = state.record_noop_run(tenant=tenants_0)
state.refuse_fields(caller=tenants_0, kind='suite-fixtures', source_id=runs_0)
"""


def _run_program(text: str) -> WireDifference:
    with pytest.raises(WireDifference) as caught:
        exec(compile(text, "<printed program>", "exec"), {})
    return caught.value


def test_the_printed_merge_program_shows_the_difference_on_both_hosts() -> None:
    found = _run_program(MERGE_PROGRAM).difference
    assert found.method == "POST" and found.path == "/runs"
    assert (found.a.status, found.a.body["error"]) == (400, "validation_error")
    assert "never merged" in found.a.body["message"]
    assert found.b.body != found.a.body


def test_the_reference_against_itself_shows_no_difference() -> None:
    result = run_diff(Pair(), max_examples=15, steps=10)
    out = io.StringIO()
    report(result, out)
    assert result.difference is None and result.error is None
    assert "no wire-observable difference in 15 examples × 10 steps" in out.getvalue()  # noqa: RUF001
    assert result.fuzz.machine.steps_taken > 0
    assert "none found in 15 examples" in summary_line(result)


def test_a_pair_that_differs_only_inside_shows_no_difference() -> None:
    """reresolves-on-fork differs from the reference, for every program the machine can
    write, only in the resolution count (the checker tells them apart through the erase
    seam's retention lapse, which the machine does not use)."""
    inside_only = mutant("reresolves-on-fork")
    result = run_machine(lambda: PairClient(SimHost(seed=0), inside_only.host()),
                         max_examples=15, steps=15, seed_value=0)
    assert result.passed, result.message
    assert result.machine.branches["erase"] > 0


def test_the_pair_compares_events_after_mapping_minted_ids() -> None:
    pair = PairClient(SimHost(seed=0), SimHost(seed=0))
    body = {"mode": "eval", "evalSuiteRef": "conformance-eval-recorded-source",
            "agentId": "conformance.eval:recorder"}
    created = pair.request("POST", "/runs", api_key=KEY_A, json=body)
    assert created.status == 201 and pair.a_to_b == {created.json["runId"]: created.json["runId"]}
    assert inspector_of(pair) is None  # the machine sees a host behind the wire
    # Another seed mints other run, event, invocation and call ids: mapped, they agree.
    reseeded = PairClient(SimHost(seed=0), SimHost(seed=1))
    delegating = {"workflowId": "conformance-agent-call", "inputs": {
        "agentId": "conformance.eval:recorder", "script": [
            {"delegate": "refsim.agents:helper", "script": [
                {"call": "conformance.eval:counter", "args": {"op": "inc", "key": "k1"}}]},
            {"decide": "ok"}]}}
    source = reseeded.request("POST", "/runs", api_key=KEY_A, json=delegating)
    assert source.status == 201 and len(reseeded.a_to_b) == 1
    (a_id, b_id), = reseeded.a_to_b.items()
    assert a_id != b_id
    replay = {**body, "evalSuiteRef": "conformance-eval-recorded-replay",
              "fixtureRuns": {"record": a_id}}
    assert reseeded.request("POST", "/runs", api_key=KEY_A, json=replay).status in (201, 400)
    # A reading that changes the events: the delegate's calls derived.
    other = Pair(("fixture-errors=not-advertised",))
    make_a, make_b = other.hosts()
    with pytest.raises(WireDifference) as caught:
        PairClient(make_a(), make_b()).request("GET", "/.well-known/openwop")
    assert caught.value.requirement_id == DIFF_ID and caught.value.difference.what == "body"


def test_every_assumable_alternative_can_be_diffed() -> None:
    from refsim.check.assume import assumables
    pairs = {p.assume[0] for p in every_reading()}
    assert pairs == {f"{r.id}={v}" for r in assumables().values() for v in r.alternatives}


def test_diff_cli_writes_json(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "d.json"
    assert main(["diff", "--assume", "fixture-errors=not-advertised", "--max-examples", "5",
                 "--steps", "5", "--json", str(path)]) == 1  # a difference: exit 1
    out = capsys.readouterr().out
    assert "DIFFERENCE after 0 step(s): GET /.well-known/openwop" in out
    doc = json.loads(path.read_text())
    assert doc["found"] and doc["rows"][0]["id"] == "fixture-errors"
    assert doc["difference"]["a"]["status"] == 200


def test_diff_that_never_reaches_a_critical_branch_is_inconclusive(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Two readings that differ only where a fork meets an erased source: a search that
    never forked cannot say they agree (exit 2, not 0)."""
    assert main(["diff", "--assume", "gone-copy-code=run_expired", "--max-examples", "2",
                 "--steps", "1"]) == 2  # one step: a fork needs a tenant step before it
    out = capsys.readouterr().out
    assert "no wire-observable difference" in out
    assert "INCONCLUSIVE: critical branches never reached: " in out and "fork:" in out


def test_diff_exits_zero_only_when_none_found_and_nothing_left_unreached(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import refsim.testing.diff as diff_module

    class Settled:
        found, inconclusive = False, None

    def settled(*args: Any, **kwargs: Any) -> Settled:
        return Settled()
    monkeypatch.setattr(diff_module, "run_diff", settled)
    monkeypatch.setattr(diff_module, "report", lambda result, out: print("none", file=out))
    assert main(["diff", "--assume", "gone-copy-code=run_expired"]) == 0
    Settled.inconclusive = "critical branches never reached: fork:gone"  # type: ignore[assignment]
    assert main(["diff", "--assume", "gone-copy-code=run_expired"]) == 2
    Settled.found = True
    assert main(["diff", "--assume", "gone-copy-code=run_expired"]) == 1


@pytest.mark.slow
def test_merge_diff_prints_a_short_program_that_reproduces() -> None:
    result = run_diff(Pair(("merge-suite-fixtures=merge",)))
    assert result.difference is not None and result.fuzz.steps <= 6
    assert _run_program("\n".join(result.program)).difference.what == result.difference.what


# ----------------------------------------------------------------------------- falsify


def test_the_outside_client_has_no_inside_and_withholds_seams() -> None:
    client = falsify.OutsideClient(SimHost(seed=0), ("counter",))
    assert inspector_of(client) is None
    seams = client.request("GET", "/.well-known/openwop").json["conformance"]["seams"]
    assert "eval-counter" in seams and "runs:erase" not in seams
    r = client.request("POST", "/conformance/seams/runs/acme~2Frun-x:erase", api_key=KEY_A)
    assert (r.status, r.json["error"]) == (404, "not_found")
    assert client.request("GET", "/conformance/seams/eval-counter?key=k",
                          api_key=KEY_A).status == 200


def test_the_rfc_table_maps_onto_registry_ids() -> None:
    rows = falsify.load_rfc_table()
    assert len(rows) == 10
    reg = load_registry()
    assert all(r in reg for row in rows for r in row["requirements"])
    by_id = {row["id"]: row for row in rows}
    assert by_id["no-re-resolution"]["verdict"] == "unwitnessable"
    assert by_id["copy-erased-with-source"]["requirements"] == [
        "refsim.requirement.0252.copy-erased-with-source",
        "refsim.requirement.0252.gone-copy-refused"]


def test_a_faulty_host_is_killed_through_the_erase_seam() -> None:
    host = falsify.judge_host(mutant("keeps-copy-after-erasure"), "gone-copy")
    level = falsify._level(host["levels"], "refsim.requirement.0252.gone-copy-refused")
    assert level is not None and level[0] == falsify.SEAM and level[3] == ["erase"]


def test_disagreement_rules() -> None:
    assert falsify.disagreement("unwitnessable", falsify.SEAM)
    assert falsify.disagreement("witnessable-gated", falsify.INSIDE)
    assert falsify.disagreement("witnessable-gated", falsify.NONE)
    assert falsify.disagreement("witnessable-gated", falsify.WIRE) is None
    assert falsify.disagreement("unwitnessable", falsify.INSIDE) is None


def test_the_cache_covers_the_zoo_the_registry_and_the_rfc_table() -> None:
    doc = falsify.load_cache()
    assert doc is not None, "run `refsim falsify --write specs/falsified.json`"
    assert [h["host"] for h in doc["hosts"]] == [m.name for m in ZOO]
    assert [h["host"] for h in doc["raw"]] == [m.name for m in ZOO]
    assert [q["id"] for q in doc["requirements"]] == [q.id for q in load_registry().requirements]
    assert [(r["id"], r["verdict"], r["requirements"]) for r in doc["rfc"]] == [
        (r["id"], r["verdict"], r["requirements"]) for r in falsify.load_rfc_table()]
    assert {h["host"]: tuple(h["requirements"]) for h in doc["hosts"]} == falsify.load_breaks()
    reg = load_registry()
    for q in doc["requirements"]:
        if not q["kills"]:  # said why: it judges no host, or it is no RFC 0252 line
            hostless = reg.requirement(q["id"]).hostless
            assert q["verdict"] == (f"hostless: {hostless}" if hostless else
                                    f"no faulty host (not an RFC 0252 line: {q['section']})"
                                    if not reg.requirement(q["id"]).rules
                                    else "no faulty host: not falsified"), q["id"]
    rfc = {r["id"]: r for r in doc["rfc"]}
    security = rfc["copy-erased-with-source"]["refsim"]
    assert security["level"] == falsify.SEAM and security["seams"] == ["erase"]
    assert security["program"]["program"] and security["program"]["requirementId"]
    # §E: no outside party can take the source away alone (v2 has no portable deletion;
    # erasure takes the copy with it), so a re-resolving fork shows only inside, as the
    # RFC says (the checker no longer judges by refsim's non-RFC retention-lapse scope).
    reresolve = rfc["no-re-resolution"]["refsim"]
    assert reresolve["level"] == falsify.INSIDE
    assert falsify.disagreement(rfc["no-re-resolution"]["verdict"], reresolve["level"]) is None
    assert rfc["client-never-sends"]["refsim"]["verdict"] == "no faulty host: not falsified"
    assert falsify.table(doc["raw"]) == {k: v for k, v in doc.items()} | {
        "rfc": [{**r, "refsim": {k: v for k, v in r["refsim"].items() if k != "program"}}
                for r in doc["rfc"]]}, "stale: run `refsim falsify --write specs/falsified.json`"


def test_the_security_rows_killing_program_kills_from_outside() -> None:
    doc = falsify.load_cache()
    assert doc is not None
    program = next(r for r in doc["rfc"] if r["id"] == "copy-erased-with-source")[
        "refsim"]["program"]
    from refsim.testing.stateful import RequirementViolated
    with pytest.raises(RequirementViolated) as caught:
        exec(compile("\n".join(program["program"]), "<killing program>", "exec"), {})
    assert caught.value.requirement_id == program["requirementId"]


def test_the_cache_is_current_for_the_erasure_hosts() -> None:
    doc = falsify.load_cache()
    assert doc is not None
    raw = {h["host"]: h["levels"] for h in doc["raw"]}
    gone = "refsim.requirement.0252.gone-copy-refused"
    for name in ("keeps-copy-after-erasure", "runs-live-when-copy-gone", "wipes-all-copies"):
        fresh = falsify.judge_host(mutant(name), "gone-copy")["levels"]
        level = falsify._level(fresh, gone)
        assert level is not None and level[:2] == (falsify.SEAM, "wire + erase seam"), name
        assert falsify._level(raw[name], gone) == level, f"{name}: specs/falsified.json is stale"


STALE = "stale: run `refsim falsify --write specs/falsified.json`, then `refsim doc`"


def _raw() -> dict[str, dict[str, Any]]:
    doc = falsify.load_cache()
    assert doc is not None, STALE
    return {h["host"]: h for h in doc["raw"]}


# The cache is current when every host's levels, judged afresh, are its `raw` entry (the
# inside level beside the checker's kill in test_mutants, the outside ones here) and the
# table is what `falsify.table` makes of `raw` (test_the_cache_covers_...): that is
# `falsify.compute(programs=False)`, one host per test.
@pytest.mark.slow
@pytest.mark.parametrize("faulty", ZOO, ids=lambda m: m.name)
def test_the_cache_is_current_outside(faulty: Mutant) -> None:
    fresh = {"host": faulty.name, "breaks": faulty.breaks,
             "levels": falsify.outside_levels(faulty)}
    problems = falsify.stale(_raw().get(faulty.name, {}), fresh, inside=False)
    assert not problems, STALE + ":\n" + "\n".join(problems)


def test_compute_is_the_table_of_every_host_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    """`compute` (over processes, as `refsim falsify` runs it) is `table` over `judge_host`
    for the zoo in its order: with `judge_host` answering from the cache, the cache."""
    raw = _raw()
    judged: list[str] = []

    def from_cache(faulty: Mutant, prefix: str | None = None) -> dict[str, Any]:
        judged.append(faulty.name)
        return copy.deepcopy(raw[faulty.name])

    monkeypatch.setattr(falsify, "judge_host", from_cache)
    cached = falsify.load_cache()
    assert cached is not None
    for row in cached["rfc"]:
        row["refsim"].pop("program", None)
    assert falsify.compute(jobs=1, programs=False) == cached
    assert judged == [m.name for m in ZOO]
    assert falsify.compute(jobs=2, programs=False) == cached


def test_a_stale_cache_fails_the_currency_checks() -> None:
    doc = falsify.load_cache()
    assert doc is not None
    entry = next(h for h in doc["raw"] if h["host"] == "keeps-copy-after-erasure")
    gone = "refsim.requirement.0252.gone-copy-refused"
    assert gone in entry["levels"]["seams"] and gone in entry["levels"]["inside"]
    same = copy.deepcopy(entry)
    assert falsify.stale(entry, same) == []

    def doctored(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        fresh: dict[str, Any] = copy.deepcopy(entry)
        change(fresh)
        return fresh

    def drop_inside(h: dict[str, Any]) -> None:
        h["levels"]["inside"].pop(gone)

    def reword_seams(h: dict[str, Any]) -> None:
        h["levels"]["seams"][gone] += " (reworded)"

    def kill_on_the_wire(h: dict[str, Any]) -> None:
        h["levels"]["wire"][gone] = "a check that now fails on the wire"

    def no_seam_levels(h: dict[str, Any]) -> None:
        for level in [name for name in h["levels"] if name.startswith("only:")]:
            del h["levels"][level]

    def rebreak(h: dict[str, Any]) -> None:
        h["breaks"] = "something else"

    for change, inside, outside in ((drop_inside, True, False), (reword_seams, False, True),
                                    (kill_on_the_wire, False, True),
                                    (no_seam_levels, False, True), (rebreak, True, True)):
        fresh = doctored(change)
        assert falsify.stale(entry, fresh), change.__name__
        assert bool(falsify.stale(entry, fresh, outside=False)) is inside, change.__name__
        assert bool(falsify.stale(entry, fresh, inside=False)) is outside, change.__name__
    # Another run id minted where the cache quoted one is no change (which id a host mints
    # depends on how many runs it made first); another observation around it is.
    quoted = copy.deepcopy(entry)
    quoted["levels"]["seams"][gone] = "the run list gained 1 run(s): acme/run-0123456789abcdefghij"
    minted = copy.deepcopy(quoted)
    minted["levels"]["seams"][gone] = "the run list gained 1 run(s): acme/run-zyxwvutsrq9876543210"
    assert falsify.stale(quoted, minted) == []
    minted["levels"]["seams"][gone] = "the run list gained 2 run(s): acme/run-zyxwvutsrq9876543210"
    assert falsify.stale(quoted, minted)
    # A table not rebuilt from the raw levels (or raw levels edited under it) fails too.
    table = {k: v for k, v in doc.items()} | {
        "rfc": [{**r, "refsim": {k: v for k, v in r["refsim"].items() if k != "program"}}
                for r in doc["rfc"]]}
    assert falsify.table(doc["raw"]) == table
    edited = copy.deepcopy(doc["raw"])
    next(h for h in edited if h["host"] == entry["host"])["levels"]["wire"][gone] = "x"
    assert falsify.table(edited) != table


def _with_headers(make: Callable[[int], dict[str, str]]) -> SimHost:
    """A reference host whose answers carry headers `make(n)` for the n-th answer."""
    import attrs as _attrs
    count = [0]

    def edge(host: SimHost, method: str, path: str, headers: dict[str, str],
             body: bytes | None, response: Any) -> Any:
        count[0] += 1
        return _attrs.evolve(response, headers={**response.headers, **make(count[0])})
    return SimHost(seed=0, edge=edge)


def test_diff_compares_headers_and_sets_aside_what_varies_on_every_answer() -> None:
    # A header both hosts send, with another value on B: a difference.
    pair = PairClient(_with_headers(lambda n: {"Cache-Control": "no-store"}),
                      _with_headers(lambda n: {"Cache-Control": "max-age=60"}))
    with pytest.raises(WireDifference) as raised:
        pair.request("GET", "/.well-known/openwop")
    assert raised.value.difference.what == "header cache-control"
    # A request id on both, new on every answer: noise once seen to vary.
    noisy = PairClient(_with_headers(lambda n: {"X-Request-Id": f"a-{n}"}),
                       _with_headers(lambda n: {"X-Request-Id": f"b-{n}"}))
    with pytest.raises(WireDifference):  # first sight: one value each, and they differ
        noisy.request("GET", "/.well-known/openwop")
    noisy.request("GET", "/.well-known/openwop")  # now seen to vary: set aside
    # A header only one host sends is representation, not a different answer.
    vendor = PairClient(SimHost(seed=0), _with_headers(lambda n: {"X-Powered-By": "b"}))
    vendor.request("GET", "/.well-known/openwop")


@pytest.mark.parametrize("reading", ["gone-copy-code=run_expired",
                                     "gone-copy-code=eval_recorded_fixtures_gone"])
def test_diff_finds_a_fork_of_an_erased_source_at_the_default_budget(reading: str) -> None:
    """Readings that differ only where a fork meets an erased source: the diff machine's
    chained step (source, replay, erase, fork) reaches it at the default budget."""
    result = run_diff(Pair((reading,)))
    assert result.difference is not None, result.inconclusive
    assert result.difference.path.endswith(":fork") and result.difference.what == "status"
    assert result.fuzz.steps <= 4


def test_two_sided_names_a_survivor_and_witnesses_only_when_every_violator_is_killed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A row is witnessable at a level only if every violator is killed there on the row's
    own ids: one violator killed on another id, or not at all, is a survivor and the
    disagreement's witness."""
    own, other = "openwop.requirement.0252.echo-x", "openwop.requirement.0252.other"
    monkeypatch.setattr(falsify, "load_faults", lambda: {
        "killed-on-wire": falsify.Fault((own,)), "killed-with-counter": falsify.Fault((own,)),
        "killed-elsewhere": falsify.Fault((own,)), "unrelated": falsify.Fault((other,))})

    def host(name: str, levels: dict[str, dict[str, str]]) -> dict[str, Any]:
        return {"host": name, "breaks": "", "levels": levels}
    row = {"id": "echo", "requirement": "§E echo", "verdict": "witnessable-gated",
           "requirements": [own]}
    raw = [host("killed-on-wire", {"wire": {own: "f"}, "seams": {own: "f"}, "inside": {own: "f"}}),
           host("killed-with-counter", {"wire": {}, "seams": {own: "f"},
                                        "only:counter": {own: "f"}, "only:erase": {},
                                        "only:resolve": {}, "inside": {own: "f"}}),
           host("unrelated", {"wire": {}, "seams": {}, "inside": {}})]
    (got,) = falsify.two_sided({"rfc": [row], "raw": raw})
    assert got["violators"] == ["killed-on-wire", "killed-with-counter"]
    assert got["survivors"]["wire"] == ["killed-with-counter"]
    assert got["witnessableAt"] == "only:counter" and got["disagreement"] is None
    # A violator killed only on another requirement id survives everywhere: it witnesses
    # that the RFC's "witnessable-gated" is not earned by this zoo.
    raw.append(host("killed-elsewhere", {"wire": {other: "f"}, "seams": {other: "f"},
                                         "inside": {other: "f"}}))
    (got,) = falsify.two_sided({"rfc": [row], "raw": raw})
    assert got["survivors"]["only:counter"] == ["killed-elsewhere"]
    assert got["witnessableAt"] is None
    assert "killed-elsewhere" in got["disagreement"]
    # The RFC's "unwitnessable" disagrees only when every violator dies short of the inside.
    unwitnessable = {**row, "verdict": "unwitnessable"}
    (got,) = falsify.two_sided({"rfc": [unwitnessable], "raw": raw[:2]})
    assert got["disagreement"] is not None and "wire + counter seam" in got["disagreement"]


def test_every_reading_names_the_steps_it_touches_and_an_untaken_one_is_inconclusive(
        ) -> None:
    from refsim.check.assume import BUILDERS
    from refsim.testing.diff import TOUCHES, DiffResult
    from refsim.testing.fuzz import FuzzResult
    from refsim.testing.stateful import CRITICAL
    assert set(TOUCHES) == {row for row, _ in BUILDERS}
    counted = set(CRITICAL) | {"probe:suite-fixtures-without-onMiss"}
    assert {b for branches in TOUCHES.values() for b in branches} <= counted

    def result(probes: int) -> DiffResult:
        machine = type("Machine", (), {"branches": {**{b: 1 for b in CRITICAL},
                                                    "probe:suite-fixtures-without-onMiss":
                                                    probes}})
        fuzz = FuzzResult(True, None, "", (), (), machine)
        return DiffResult(Pair(("default-on-miss=live",)), 10, 5, 0, None, fuzz)
    untaken = result(0)
    assert untaken.touched == {"probe:suite-fixtures-without-onMiss": 0}
    assert untaken.inconclusive is not None and "never taken" in untaken.inconclusive
    assert result(3).inconclusive is None


def test_two_sided_leaves_out_readings_and_judges_a_fault_only_where_it_lives(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A host that breaks only refsim's reading of an open point is no violator of the RFC's
    row (listed apart); a host whose fault lives on a seam is correct, so no survivor, where
    that seam is not offered."""
    own = "openwop.requirement.0252.echo-x"
    nowhere: dict[str, dict[str, str]] = {
        "wire": {}, "seams": {}, "only:counter": {}, "only:erase": {}, "only:resolve": {},
        "inside": {}}
    raw = [{"host": "reading-only", "breaks": "", "levels": nowhere},
           {"host": "on-the-erase-seam", "breaks": "",
            "levels": {**nowhere, "seams": {own: "f"}, "only:erase": {own: "f"},
                       "inside": {own: "f"}}}]
    faults = {"reading-only": falsify.Fault((own,), reading="erasure-scope"),
              "on-the-erase-seam": falsify.Fault((own,), needs="erase")}
    monkeypatch.setattr(falsify, "load_faults", lambda: faults)
    row = {"id": "echo", "requirement": "§E echo", "verdict": "witnessable-gated",
           "requirements": [own]}
    (got,) = falsify.two_sided({"rfc": [row], "raw": raw})
    assert got["violators"] == ["on-the-erase-seam"] and got["readings"] == ["reading-only"]
    assert got["survivors"]["wire"] == [] and got["survivors"]["only:counter"] == []
    # A level where no violator's fault lives witnesses nothing: the first that shows one.
    assert got["witnessableAt"] == "only:erase" and got["disagreement"] is None
    # Judged everywhere, the same host survives the wire: the fault's home decides.
    faults["on-the-erase-seam"] = falsify.Fault((own,))
    (got,) = falsify.two_sided({"rfc": [row], "raw": raw})
    assert got["survivors"]["wire"] == ["on-the-erase-seam"]
    assert got["witnessableAt"] == "only:erase"
    # Over the requirement alone, a reading-only host counts: the requirement is refsim's.
    assert falsify.survivors_of([own], raw, faults)["survivors"]["inside"] == ["reading-only"]


def test_the_register_witness_classes_are_what_the_zoo_shows() -> None:
    """specs/requirements.yaml is the one register of witness classes, and the class it gives
    each requirement is what the cached two-sided verdict over that id shows: every violator
    dies at a level the class allows, and at none weaker than it allows. A violator no check
    kills on its own id fails this too."""
    doc = falsify.load_cache()
    assert doc is not None
    wrong = [(q["id"], q["witness"], q["witnessableAt"],
              {lv: h for lv, h in q["survivors"].items() if h})
             for q in falsify.requirement_levels(doc) if not q["agrees"]]
    assert wrong == []


def test_the_register_check_fails_on_a_class_the_zoo_contradicts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    doc = falsify.load_cache()
    assert doc is not None
    fork = "refsim.requirement.0252.fork-no-reresolve"
    reg = load_registry()
    faults = falsify.load_faults()
    monkeypatch.setattr(falsify, "load_faults", lambda: faults)
    claimed = attrs.evolve(reg.requirement(fork), witness="seam-gated")
    fake = type("Reg", (), {"requirements": [claimed]})()
    monkeypatch.setattr(falsify, "load_registry", lambda: fake)
    (got,) = falsify.requirement_levels(doc)
    assert not got["agrees"] and got["witnessableAt"] == "inside"
    assert "reresolves-on-fork" in got["survivors"]["seams"]


def test_every_rfc_0252_must_has_a_violator() -> None:
    """Every MUST and MUST NOT requirement that stands for RFC 0252 lines has a zoo host
    built to break it (not only refsim's reading of it), unless it judges no host at all."""
    faults = falsify.load_faults()
    broken = {rid for f in faults.values() if f.reading is None for rid in f.breaks}
    bare = [q.id for q in load_registry().requirements
            if q.level in ("MUST", "MUST NOT") and q.rules and not q.hostless
            and q.id not in broken]
    assert bare == []


def test_a_rules_rfc_verdict_is_the_rfc_tables() -> None:
    """A rule's `rfc_verdict` is the verdict of the RFC's falsifiability table (quoted in
    specs/falsifiability.yaml) for the rows its requirements sit in."""
    rows: dict[str, set[str]] = {}
    for row in falsify.load_rfc_table():
        for rid in row["requirements"]:
            rows.setdefault(rid, set()).add(row["verdict"])
    wrong = []
    for rule in load_registry().rules:
        verdicts = {v for rid in rule.covered_by for v in rows.get(rid, ())}
        if verdicts and rule.rfc_verdict not in verdicts:
            wrong.append((rule.id, rule.rfc_verdict, sorted(verdicts)))
    assert wrong == []


def test_diff_sends_b_a_member_named_twice_as_a_was_sent_it() -> None:
    """The pair client maps A's ids onto B's through the JSON text: an object that names a
    member twice (source-values named-twice) reaches B so, not folded to its last value
    (which made every representation-only correct host differ from the reference)."""
    import json

    from refsim.check.classes import NamedTwice
    from refsim.testing.diff import _map_json
    body = {"fixtureRuns": NamedTwice([("record", "acme/run-a"), ("record", "acme/run-b")])}
    mapped = _map_json(body, {"acme/run-a": "acme/run-x"})
    assert json.dumps(mapped) == ('{"fixtureRuns": {"record": "acme/run-x", '
                                  '"record": "acme/run-b"}}')
    assert _map_json({"a": 1}, {"x": "y"}) == {"a": 1}
