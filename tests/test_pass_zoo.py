"""The pass side of the zoo: correct hosts, each the reference host with one difference
RFC 0252, OpenWOP v2 or HTTP allows. Every judge must pass every one of them: a row that
fails here is a false verdict of the checker's. The seam-surface table (all seams, none of
refsim's own, the counter alone, none, listed but broken) is judged here too."""

from __future__ import annotations

import collections
import functools
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from refsim import SimHost
from refsim.check.findings import Disposition, Row
from refsim.check.observe import KEY_A, KEY_B, SEAMS
from refsim.check.runner import PARTS, Target, run_parts
from refsim.wire.client import NO_BODY
from refsim.wire.httpclient import HttpClient
from refsim.wire.response import Response
from refsim.zoo.correct import PASS_ZOO, Variant, variant
from refsim.zoo.matrices import judge_variant

NAMES = [v.name for v in PASS_ZOO]


class Outside:
    """A host seen as a host built elsewhere: no `core` for the checker to read (so rows
    that need the inside are listed apart, as over HTTP), in process for speed."""

    def __init__(self, host: SimHost) -> None:
        self._host = host

    @property
    def name(self) -> str:
        return "outside:" + self._host.name

    def request(self, method: str, path: str, *, api_key: str | None = None,
                json: Any = NO_BODY, headers: dict[str, str] | None = None) -> Response:
        return self._host.request(method, path, api_key=api_key, json=json, headers=headers)


def _fails(rows: list[Row]) -> list[tuple[str, str]]:
    return [(r.check_id, r.detail[:300]) for r in rows
            if r.disposition is Disposition.EXECUTED_FAIL]


def _tally(rows: list[Row]) -> collections.Counter[str]:
    return collections.Counter("in process only" if r.apart else r.disposition.value
                               for r in rows)


def test_every_correct_host_names_the_line_that_allows_it() -> None:
    assert len(NAMES) == len(set(NAMES))
    for v in PASS_ZOO:
        assert len(v.allows) > 40 and any(mark in v.allows for mark in (
            "RFC", "§", ".md", "schema", "HTTP", "W3C", "WHATWG")), v.name


# In process (the simulator's inside read too): a few here, every one in the slow tier's
# pass matrix below.
@pytest.mark.parametrize("name", ["tenant-names-like-wire-text", "correlation-id-in-errors",
                                  "content-free-lane", "runs-after-answering",
                                  "no-recorded-fixtures"])
def test_the_checker_passes_correct_hosts_in_process(name: str,
                                                    reference: dict[tuple[str, str], Row]
                                                    ) -> None:
    """Judged as the reference host is, row for row; a host that leaves something out
    (`withholds`) moves rows only to inapplicable or blocked, each naming what it left out."""
    correct = variant(name)
    rows = run_parts(Target(recipe=correct), PARTS)
    assert not _fails(rows), _fails(rows)
    moved = [r for r in rows
             if r.disposition is not reference[(r.requirement_id, r.check_id)].disposition]
    if correct.withholds is None:
        assert moved == [], [(r.check_id, r.disposition.value) for r in moved]
    else:
        left_out = correct.withholds.rpartition(".")[2]
        assert moved, "nothing stood aside for what it leaves out"
        for r in moved:
            assert r.disposition in (Disposition.INAPPLICABLE, Disposition.BLOCKED), r
            assert left_out in r.detail, (r.check_id, r.detail)


@pytest.fixture(scope="module")
def reference() -> dict[tuple[str, str], Row]:
    return {(r.requirement_id, r.check_id): r for r in run_parts(Target(), PARTS)}


@pytest.mark.parametrize("name", NAMES)
def test_the_checker_passes_every_correct_host_from_outside(name: str) -> None:
    rows = run_parts(Target(), PARTS, client=Outside(variant(name).host()), api_key=KEY_A,
                     tenant_b_key=KEY_B)
    assert not _fails(rows), _fails(rows)


# The seam-surface table: what the checker judges on a correct host built elsewhere, with
# the catalog loaded, by the seams it offers.
SURFACES = {"all seams": None, "no refsim seams": "conformance-seams-only",
            "counter only": "counter-seam-only", "none": "no-seams",
            "advertised but broken": "advertised-seams-broken"}


@functools.cache  # the same five runs for every test that reads them
def surface_table() -> dict[str, list[Row]]:
    out = {}
    for column, name in SURFACES.items():
        host = SimHost(seed=0) if name is None else variant(name).host()
        out[column] = run_parts(Target(), PARTS, client=Outside(host), api_key=KEY_A,
                                tenant_b_key=KEY_B)
    return out


def _offered(column: str) -> set[str]:
    name = SURFACES[column]
    host = SimHost(seed=0) if name is None else variant(name).host()
    doc = host.request("GET", "/.well-known/openwop").json
    assert isinstance(doc, dict)
    return set(doc.get("conformance", {}).get("seams", []))


def _withheld(column: str, all_seams: list[Row], rows: list[Row]) -> list[str]:
    """Rows that came out otherwise than with every seam, and not as blocked for a seam the
    host does not offer (or offers broken)."""
    offered = _offered(column)
    broken = column == "advertised but broken"
    full = {(r.requirement_id, r.check_id): r.disposition for r in all_seams}
    wrong = []
    for r in rows:
        if r.disposition is full.get((r.requirement_id, r.check_id)):
            continue
        named = {s for s in SEAMS if f"seam {s} " in r.detail}
        if r.disposition is Disposition.BLOCKED and named and (broken or named - offered):
            continue
        wrong.append(f"{r.check_id}: {r.disposition.value}: {r.detail[:200]}")
    return wrong


def test_the_seam_surface_table() -> None:
    """Taking seams away only blocks the rows that need a seam no longer offered, each
    naming it: nothing else moves, nothing fails, and with every seam nothing is blocked."""
    table = surface_table()
    for column, rows in table.items():
        assert _tally(rows)["executed-fail"] == 0, (column, _tally(rows))
        assert _withheld(column, table["all seams"], rows) == [], column
    assert _tally(table["all seams"])["blocked"] == 0, _tally(table["all seams"])
    # What no seam is offered for is blocked, and says which seam: never judged as a fault.
    assert _tally(table["none"])["blocked"] > 0
    assert _tally(table["advertised but broken"])["blocked"] > 0


def test_the_surface_rule_catches_a_row_blocked_for_a_seam_the_host_offers() -> None:
    table = surface_table()
    row = next(r for r in table["all seams"] if r.disposition is Disposition.EXECUTED_PASS)
    moved = attrs.evolve(row, disposition=Disposition.BLOCKED,
                         detail="the host does not advertise the conformance seam eval-counter "
                                "(discovery conformance.seams), which the check needs")
    assert _withheld("counter only", table["all seams"], [moved])
    assert not _withheld("none", table["all seams"], [moved])


def test_a_seam_listed_but_broken_blocks_with_the_answer_named() -> None:
    rows = run_parts(Target(), PARTS, client=Outside(variant("advertised-seams-broken").host()),
                     api_key=KEY_A, tenant_b_key=KEY_B)
    blocked = [r for r in rows if r.disposition is Disposition.BLOCKED]
    assert blocked and all("seam" in r.detail or "fixture" in r.detail for r in blocked)
    assert any("advertised but answered 404" in r.detail for r in blocked)


@pytest.fixture(scope="module")
def served() -> Iterator[dict[str, str]]:
    urls: dict[str, str] = {}
    servers = []
    try:
        for name in ("request-id-header", "counter-seam-only", "chunked-answers"):
            context = variant(name).served()
            urls[name] = context.__enter__().url
            servers.append(context)
        yield urls
    finally:
        for context in reversed(servers):
            context.__exit__(None, None, None)


@pytest.mark.parametrize("name", ["request-id-header", "counter-seam-only", "chunked-answers"])
def test_the_checker_passes_correct_hosts_over_http(name: str,
                                                    served: dict[str, str]) -> None:
    rows = run_parts(Target(), PARTS, client=HttpClient(served[name]), api_key=KEY_A,
                     tenant_b_key=KEY_B)
    assert not _fails(rows), _fails(rows)
    if name == "counter-seam-only":  # blocked only where a seam it withholds is needed
        assert _withheld("counter only", surface_table()["all seams"], rows) == []


@pytest.mark.slow  # every way of judging, every correct host: minutes
@pytest.mark.parametrize("name", NAMES)
def test_every_correct_host_passes_every_way_it_is_judged(name: str) -> None:
    doc = judge_variant(name)
    bad = {column: cell for column, cell in doc["cells"].items() if not cell["ok"]}
    assert not bad, bad


def test_a_variant_is_the_reference_host_but_for_its_difference() -> None:
    """The request-id host answers as the reference does, header aside: the difference
    is the only one."""
    plain, noisy = SimHost(seed=0), variant("request-id-header").host()
    for host in (plain, noisy):
        r = host.request("POST", "/runs", api_key=KEY_A, json={"workflowId": "conformance-noop"})
        assert r.status == 201
    a = plain.request("GET", "/.well-known/openwop")
    b = noisy.request("GET", "/.well-known/openwop")
    assert a.body == b.body and "X-Request-Id" in b.headers and "X-Request-Id" not in a.headers


def _lookup(name: str) -> Variant:
    return variant(name)


def test_an_unknown_correct_host_is_named_in_the_error() -> None:
    with pytest.raises(KeyError, match="no correct host 'nope'"):
        _lookup("nope")
