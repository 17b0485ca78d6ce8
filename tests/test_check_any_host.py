"""One checker for any host: the whole table over HTTP, the blind-spot classes killed in
process and over HTTP, and no false positives on a host that has been used before."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from refsim import SimHost
from refsim.check.findings import Disposition, Row
from refsim.check.observe import DRIFT, KEY_A, KEY_B, SEAMS, SOURCE, Session, eval_body
from refsim.check.runner import PARTS, Target, run_parts
from refsim.cli import main
from refsim.wire.asgi import RawHandler
from refsim.wire.httpclient import HttpClient
from refsim.wire.response import Response
from refsim.wire.server import background
from refsim.zoo.faulty import ZOO, mutant

from .machine_runs import checker_rows

# Each blind-spot class: its faulty host, and the requirement id it must fail.
BLIND_SPOTS = [
    ("foreign-unminted-403", "openwop.requirement.0252.source-refused"),
    ("check-order-oracle", "refsim.requirement.0252.source-uniform-body"),
    ("foreign-source-header", "refsim.requirement.0252.source-uniform-body"),
    ("derived-in-snapshot", "refsim.requirement.0252.derived-never-on-wire"),
    ("partial-echo", "refsim.requirement.0252.no-echo"),
]


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with background(SimHost(seed=0)) as server:
        yield server.url


class _Switch:
    """One server for many hosts: it answers with whichever host was put in last."""

    def __init__(self) -> None:
        self.host: RawHandler = SimHost(seed=0)

    def request_raw(self, method: str, path: str, *, headers: dict[str, str] | None = None,
                    body: bytes | None = None) -> Response:
        return self.host.request_raw(method, path, headers=headers, body=body)


@pytest.fixture(scope="module")
def switch() -> Iterator[tuple[_Switch, str]]:
    handler = _Switch()
    with background(handler) as server:
        yield handler, server.url
    assert server.handler_errors == []


def _serve(switch: tuple[_Switch, str], host: RawHandler) -> str:
    """Put a fresh host behind the shared server; its URL (a new client, a new connection)."""
    handler, url = switch
    handler.host = host
    return url


@pytest.fixture(scope="module")
def reference_rows() -> dict[str, Row]:
    return {r.check_id: r for r in run_parts(Target(), PARTS)}


def _remote(url: str) -> list[Row]:
    return run_parts(Target(), PARTS, client=HttpClient(url), api_key=KEY_A,
                     tenant_b_key=KEY_B)


def _failed(rows: list[Row]) -> set[str]:
    return {r.requirement_id for r in rows if r.disposition is Disposition.EXECUTED_FAIL}


def test_check_base_url_runs_the_whole_table_and_lists_the_inside_apart(
        served: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    code = main(["check", "--base-url", served, "--api-key", KEY_A, "--tenant-b-api-key", KEY_B,
                 "--json", str(out)])
    text = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert code == 0, text
    # Every row the wire can witness is judged and passes, but what does not apply to this
    # host (as in process: the next test): none is blocked.
    assert {r["disposition"] for r in doc["results"]["requirements"]} <= {"executed-pass",
                                                                          "inapplicable"}
    apart = doc["inProcessOnly"]
    # Apart are exactly the example rows that say why only the inside can judge them
    # (a profile pin, an unwitnessable requirement, claims that read the inside), and
    # invariant rows whose checks read the inside.
    from refsim.check.examples import load_examples
    from refsim.check.invariants import load_invariants
    examples = {e.id: e for e in load_examples()}
    ids = {a["checkId"] for a in apart}
    assert {i for i in ids if i in examples} == {e.id for e in examples.values()
                                                 if e.needs_inside() is not None}
    # ... and the shape row, which judges refsim's own schema vectors and sends the host
    # nothing (no pass beside a host over HTTP).
    assert ids - set(examples) <= {i.id for i in load_invariants()} | {
        "openwop.requirement.0252.shape"}
    assert all(a["reason"].startswith("in process only: ") and len(a["reason"]) > 40
               for a in apart)
    assert "In process only, not run on this host" in text
    passed = {r["checkId"] for r in doc["results"]["requirements"]}
    assert not passed & {a["checkId"] for a in apart}


def test_each_row_run_over_http_gets_its_in_process_disposition(
        served: str, reference_rows: dict[str, Row]) -> None:
    here = {check: r.disposition for check, r in reference_rows.items()}
    from refsim.check.examples import load_examples
    withholding = {e.id for e in load_examples() if e.withholds}
    there = [r for r in _remote(served) if not r.apart]
    assert there and withholding
    for row in there:
        if row.check_id in withholding:  # judged in process on its profile without the
            # member; the reference behind HTTP advertises it, so there it says nothing
            assert row.disposition is Disposition.INAPPLICABLE
            assert "the row judges a host without it" in row.detail
            continue
        assert row.disposition is here[row.check_id], (row.check_id, row.detail)


def _traffic(url: str) -> None:
    """Legitimate use between checks: live runs of the drift and source suites (they move
    the counter keys the legs watch) and other tenants' runs."""
    client = HttpClient(url)
    a, b = Session(client, KEY_A), Session(client, KEY_B)
    for session in (a, b):
        assert session.create(eval_body(DRIFT)).status == 201
        assert session.create(eval_body(SOURCE)).status == 201
        assert session.workflow("conformance-agent-call", {
            "agentId": "conformance.eval:recorder", "script": [
                {"call": "conformance.eval:counter",
                 "args": {"op": "inc", "key": "recorded-fixtures-drift"}}]}).status == 201


@pytest.mark.slow  # three runs of the whole table over HTTP
def test_check_passes_three_times_in_a_row_with_traffic_in_between() -> None:
    with background(SimHost(seed=3)) as server:
        for _ in range(3):
            rows = _remote(server.url)
            assert not _failed(rows), [(r.check_id, r.detail) for r in rows
                                       if r.disposition is Disposition.EXECUTED_FAIL]
            _traffic(server.url)


@pytest.mark.parametrize(("name", "requirement"), BLIND_SPOTS)
def test_each_blind_spot_is_killed_in_process(name: str, requirement: str,
                                              reference_rows: dict[str, Row]) -> None:
    faulty = checker_rows(name)
    reference = reference_rows
    failing = [r for r in faulty if r.requirement_id == requirement
               and r.disposition is Disposition.EXECUTED_FAIL]
    assert failing, f"{name} passes {requirement}"
    for row in failing:  # the reference host passes the very rows that caught it
        assert reference[row.check_id].passed


# Every host whose fault shows on the wire, the blind spots each on its own requirement id:
# the whole table over HTTP per host (a second or more each), so in the slow tier.
@pytest.mark.slow
@pytest.mark.parametrize("faulty", [m for m in ZOO if m.inside_only is None],
                         ids=lambda m: m.name)
def test_every_host_whose_fault_shows_on_the_wire_is_killed_over_http(
        faulty: Any, switch: tuple[_Switch, str]) -> None:
    failed = _failed(_remote(_serve(switch, faulty.host())))
    assert failed, f"{faulty.name} survives check --base-url"
    requirement = dict(BLIND_SPOTS).get(faulty.name)
    assert requirement is None or requirement in failed, (faulty.name, sorted(failed))


def test_every_blind_spot_shows_on_the_wire() -> None:
    """So the sweep above tries each blind spot over HTTP."""
    assert all(mutant(name).inside_only is None for name, _ in BLIND_SPOTS)


def test_hosts_only_the_inside_can_kill_say_why() -> None:
    inside = [m for m in ZOO if m.inside_only is not None]
    assert inside and all(len(m.inside_only or "") > 40 for m in inside)


def _without_fixtures(host: SimHost, method: str, target: str, headers: dict[str, str],
                      body: bytes | None, response: Response) -> Response:
    if target.startswith("/.well-known/openwop") and isinstance(response.json, dict):
        doc = dict(response.json)
        doc["fixtures"] = [f for f in doc["fixtures"] if not f.startswith("conformance-eval")]
        return Response(response.status, dict(response.headers), doc)
    return response


def test_an_advertised_capability_left_untested_is_named_and_strict_exits_2(
        capsys: pytest.CaptureFixture[str]) -> None:
    with background(SimHost(seed=0, edge=_without_fixtures)) as server:
        args = ["conformance", "--base-url", server.url, "--api-key", KEY_A,
                "--tenant-b-api-key", KEY_B]
        # The legs are inapplicable there, and the shape row sends nothing (apart over
        # HTTP): no row observed a claim, which is no pass (it was exit 0 on the shape
        # row's vectors alone).
        assert main(args) == 2
        out = capsys.readouterr().out
        assert "inapplicable" in out and "untested: agents.evalSuite.recordedFixtures" in out
        assert "no row observed a claim of RFC 0252" in out
        assert main([*args, "--strict"]) == 2
        # With the rows that do observe it (the facet rows read discovery): untested, named.
        assert main(["check", *args[1:]]) == 0
        assert "untested: agents.evalSuite.recordedFixtures" in capsys.readouterr().out
        assert main(["check", *args[1:], "--strict"]) == 2


@pytest.mark.slow  # two more runs of most of the table over HTTP
def test_examples_and_invariants_take_the_remote_options(served: str) -> None:
    for part in ("examples", "invariants"):
        assert main([part, "--base-url", served, "--api-key", KEY_A,
                     "--tenant-b-api-key", KEY_B]) == 0


def test_without_a_second_tenant_rows_that_need_one_are_blocked(served: str) -> None:
    rows = run_parts(Target(), ("examples",), client=HttpClient(served), api_key=KEY_A,
                     tenant_b_key=None)
    blocked = [r for r in rows if r.disposition is Disposition.BLOCKED]
    assert blocked and all("globex" in r.detail for r in blocked)


def _without_seams(host: SimHost, method: str, target: str, headers: dict[str, str],
                   body: bytes | None, response: Response) -> Response:
    """A host that offers no conformance seam: none in discovery, 404 on every seam path."""
    if target.startswith("/conformance/seams"):
        return Response(404, {"Content-Type": "application/json", "OpenWOP-Version": "2.0"},
                        {"error": "not_found", "message": "no such path on this host"})
    if target.startswith("/.well-known/openwop") and isinstance(response.json, dict):
        doc = dict(response.json)
        doc["conformance"] = {"seamsProfile": "openwop-conformance-seams-v2", "seams": []}
        return Response(response.status, dict(response.headers), doc)
    return response


def test_a_host_without_seams_gets_blocked_rows_never_failed_ones(served: str) -> None:
    """Without seams, exactly the rows that used one are blocked, each naming a seam; every
    other row comes out as it does with them."""
    with background(SimHost(seed=0, edge=_without_seams)) as server:
        rows = _remote(server.url)
    assert not _failed(rows), [(r.check_id, r.detail) for r in rows
                               if r.disposition is Disposition.EXECUTED_FAIL]
    full = {(r.requirement_id, r.check_id): r.disposition for r in _remote(served)}
    moved = [r for r in rows if r.disposition is not full[(r.requirement_id, r.check_id)]]
    assert moved and all(r.disposition is Disposition.BLOCKED for r in moved), moved
    assert all(any(f"seam {s} " in r.detail for s in SEAMS) for r in moved)
    assert any(r.passed for r in rows if r.scenario_id == "rfc-0252-examples")


def _discovery_unreadable(host: SimHost, method: str, target: str, headers: dict[str, str],
                          body: bytes | None, response: Response) -> Response:
    """Discovery answered 200 in bytes no JSON reader takes (a gzip body sent unasked)."""
    if target.startswith("/.well-known/openwop"):
        return Response(200, {"Content-Type": "application/json", "Content-Encoding": "gzip"},
                        None, "\x1f\x8b\x08\x00 not json")
    return response


def test_a_discovery_document_that_cannot_be_read_blocks_every_host_row() -> None:
    """What the host advertises is unknown, so no host row applies or not: each is blocked
    (bundle-fatal), never inapplicable (which certifies) nor passed."""
    rows = _remote_rows(SimHost(seed=0, edge=_discovery_unreadable))
    host_rows = [r for r in rows
                 if r.requirement_id != "openwop.requirement.0252.shape" and not r.apart]
    assert host_rows and all(r.disposition is Disposition.BLOCKED for r in host_rows), sorted(
        {(r.requirement_id, r.disposition.value) for r in host_rows
         if r.disposition is not Disposition.BLOCKED})
    assert all("could not be read" in (r.detail or "") for r in host_rows)


def _remote_rows(host: SimHost) -> list[Row]:
    with background(host) as server:
        return _remote(server.url)
