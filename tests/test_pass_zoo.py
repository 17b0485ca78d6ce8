"""The pass side of the zoo: correct hosts, each the reference host with one difference
RFC 0252, OpenWOP v2 or HTTP allows. Every judge must pass every one of them: a row that
fails here is a false verdict of the checker's. The seam-surface table (all seams, none of
refsim's own, the counter alone, none, listed but broken) is judged here too."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

import pytest

from refsim import SimHost
from refsim.check.findings import Disposition, Row
from refsim.check.observe import KEY_A, KEY_B
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
def test_the_checker_passes_correct_hosts_in_process(name: str) -> None:
    rows = run_parts(Target(recipe=variant(name)), PARTS)
    assert not _fails(rows), _fails(rows)
    tally = _tally(rows)
    if name == "no-recorded-fixtures":  # nothing to judge: it says so, row by row
        assert tally["inapplicable"] >= 50, tally
    else:
        assert tally["executed-pass"] >= 30, tally  # it judged, not just stood aside


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


def surface_table() -> dict[str, collections.Counter[str]]:
    out = {}
    for column, name in SURFACES.items():
        host = SimHost(seed=0) if name is None else variant(name).host()
        out[column] = _tally(run_parts(Target(), PARTS, client=Outside(host), api_key=KEY_A,
                                       tenant_b_key=KEY_B))
    return out


def test_the_seam_surface_table() -> None:
    table = surface_table()
    for column, tally in table.items():
        assert tally["executed-fail"] == 0, (column, tally)
    assert table["counter only"]["executed-pass"] >= 48, table["counter only"]
    assert table["no refsim seams"]["executed-pass"] >= table["counter only"]["executed-pass"]
    # What no seam is offered for is blocked, and says which seam: never judged as a fault.
    assert table["none"]["blocked"] > 0 and table["advertised but broken"]["blocked"] > 0


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
    if name == "counter-seam-only":
        assert _tally(rows)["executed-pass"] >= 48


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
