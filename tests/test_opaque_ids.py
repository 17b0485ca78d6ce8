"""Ids are opaque to the checker (issue 39, point 4): nothing in refsim.check takes a run id
apart beyond a `/` it holds, so a host whose ids have another shape is never crashed on,
and a case that needs "an id shaped like mine" is made from ids the host minted or said
not to apply. A bare UUID is no legal runId (ids.schema.json: `<tenantId>/<opaque>`), so
the host that mints one here is a test fixture, not a correct host of the zoo."""

from __future__ import annotations

import json
import random
import re
import uuid
from typing import Any

import pytest

from refsim import SimHost
from refsim.check.findings import Disposition
from refsim.check.invariants import load_invariants, run_invariants
from refsim.check.observe import KEY_A, KEY_B, TENANT_A, TENANT_B
from refsim.check.runner import PARTS, Target, run_parts
from refsim.check.scenario import near_misses, unknown_ids
from refsim.domain.ids import RunId, parse_segment, project, seen_parts, spliced
from refsim.wire.client import NO_BODY
from refsim.wire.response import Response
from refsim.zoo.correct import variant

UUID = "3f2b8c1e-9d4a-4c6b-a1e2-7f8090a1b2c3"
OTHER_UUID = "9a0b1c2d-3e4f-4a5b-8c6d-7e8f90a1b2c3"


@pytest.mark.parametrize("run_id, head, tail", [
    ("acme/run-0123456789abcdefghij", "acme/", "run-0123456789abcdefghij"),
    ("anon:sess.3f9c_acme/r." + "x" * 126, "anon:sess.3f9c_acme/", "r." + "x" * 126),
    (f"{OTHER_UUID}/{UUID}", f"{OTHER_UUID}/", UUID),
    (UUID, "", UUID),
    ("", "", ""),
])
def test_an_id_is_taken_apart_only_at_a_slash_it_holds(run_id: str, head: str,
                                                       tail: str) -> None:
    assert seen_parts(run_id) == (head, tail)
    assert head + tail == run_id


def test_ids_are_spliced_only_where_both_carry_a_tenant_part() -> None:
    assert spliced("acme/run-aaaaaaaaaaaaaaaaaaaa", "globex/run-bbbbbbbbbbbbbbbbbbbb") == (
        "acme/run-bbbbbbbbbbbbbbbbbbbb")
    assert spliced(UUID, OTHER_UUID) is None  # nothing to splice: no tenant part
    assert spliced("acme/run-aaaaaaaaaaaaaaaaaaaa", OTHER_UUID) is None
    assert spliced("acme/run-aaaaaaaaaaaaaaaaaaaa", "acme/run-bbbbbbbbbbbbbbbbbbbb") is None


def test_unknown_and_near_miss_ids_of_a_bare_id_host_name_no_real_run() -> None:
    forms = dict((v, k) for k, v in unknown_ids("", ""))
    assert "another tenant's never-minted id" not in forms.values()  # no tenant part
    assert UUID not in forms
    misses = near_misses(UUID)
    assert misses and all(v != UUID for _, v in misses)
    assert all(v.strip() == UUID or len(v) in (len(UUID) - 1, len(UUID), len(UUID) + 1)
               for _, v in misses)
    assert not any(v.endswith("/") for _, v in misses)


# ----------------------------------------------------------------------------- a bare-id host


_BOUND_IN_TEXT = re.compile(r"(acme|globex)(?:/|~2F)([A-Za-z0-9._-]{16,128})")


class BareIdHost:
    """The reference host behind a front that shows each run id as a bare UUID (and takes
    the UUIDs back): a host whose ids carry no tenant segment, seen from outside only (no
    `core` for the checker to read)."""

    def __init__(self, seed: int = 0) -> None:
        self._host = SimHost(seed=seed)
        self._rng = random.Random(seed)
        self._bare: dict[str, str] = {}  # bound -> bare
        self._bound: dict[str, str] = {}  # bare -> bound

    @property
    def name(self) -> str:
        return "outside:bare-uuid-ids"

    def minted(self, bare: str) -> str | None:
        return self._bound.get(bare)

    def _bare_of(self, match: re.Match[str]) -> str:
        bound = f"{match.group(1)}/{match.group(2)}"
        if RunId(match.group(1), match.group(2)) not in self._host.core.runs:
            return match.group(0)
        if bound not in self._bare:
            bare = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
            self._bare[bound], self._bound[bare] = bare, bound
        return self._bare[bound]

    def _out(self, text: str) -> str:
        return _BOUND_IN_TEXT.sub(self._bare_of, text)

    def _in(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._bound.get(value, value)
        if isinstance(value, dict):
            return {k: self._in(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._in(v) for v in value]
        return value

    def _in_path(self, path: str, tenant: str | None) -> str:
        """A bare id in a path names the caller's own run or none: another tenant's reads
        as an id of no run (as an unknown bare id does), never as a 403 that tells it
        exists."""
        def bound(match: re.Match[str]) -> str:
            found = self._bound.get(match.group(1))
            if found is None or found.split("/", 1)[0] != tenant:
                return match.group(0)
            return "runs/" + project(found)
        return re.sub(r"runs/([0-9a-f-]{36})", bound, path)

    def request(self, method: str, path: str, *, api_key: str | None = None,
                json: Any = NO_BODY, headers: dict[str, str] | None = None) -> Response:
        body = json if json is NO_BODY else self._in(json)
        caller = self._host.core.caller(api_key) if api_key else None
        tenant = caller.tenant if caller is not None else None
        r = self._host.request(method, self._in_path(path, tenant), api_key=api_key,
                               json=body, headers=headers)
        if r.text is not None:
            return Response(r.status, dict(r.headers), r.json, self._out(r.text))
        if r.json is None:
            return r
        return Response.of_bytes(r.status, dict(r.headers),
                                 self._out(_dumps(r.json)).encode("utf-8"))


def _dumps(doc: Any) -> str:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def test_the_bare_id_host_mints_bare_uuids_and_resolves_them() -> None:
    host = BareIdHost()
    made = host.request("POST", "/runs", api_key=KEY_A, json={"workflowId": "conformance-noop"})
    assert made.status == 201
    rid = made.json["runId"]
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
                        rid)
    assert parse_segment(rid) is None  # no bound id, and the reference grammar's no opaque
    assert host.request("GET", f"/runs/{rid}", api_key=KEY_A).json["runId"] == rid
    # another tenant reads it as no run (404), not a 403 that would tell it exists
    assert host.request("GET", f"/runs/{rid}", api_key=KEY_B).status == 404
    assert rid in made.json["eventsUrl"]


@pytest.fixture(scope="module")
def bare_rows() -> list[Any]:
    return run_invariants(BareIdHost, "eval-fixture-run-tenant-scoped",
                          keys={TENANT_A: KEY_A, TENANT_B: KEY_B})


def test_the_tenant_scoped_check_does_not_crash_on_bare_ids(bare_rows: list[Any]) -> None:
    """The row that raised IndexError on `foreign.run_id.split("/", 1)[1]` is judged: it
    passes, and says which of its cases do not apply to bare ids."""
    [row] = bare_rows
    assert row.disposition is Disposition.EXECUTED_PASS, row.detail
    said = [f.message for f in row.findings if "does not apply to this host's id shape"
            in f.message]
    assert any(m.startswith("tenant B's never-minted id") for m in said), said
    assert any(m.startswith("tenant B's opaque segment under the caller's tenant")
               for m in said), said


def test_no_row_raises_on_a_bare_id_host() -> None:
    """Every row is judged or stood aside for a reason of the host's: none is blocked
    because refsim raised, and none fails (no row judges the runId grammar on the wire,
    and nothing else of this host differs from the reference)."""
    rows = run_parts(Target(), PARTS, client=BareIdHost(), api_key=KEY_A, tenant_b_key=KEY_B)
    raised = [(r.check_id, r.detail) for r in rows if "raised" in r.detail]
    assert raised == []
    bad = [(r.check_id, r.disposition.value, r.detail[:200]) for r in rows
           if r.disposition in (Disposition.EXECUTED_FAIL, Disposition.BLOCKED)]
    assert bad == []


@pytest.mark.parametrize("name", ["uuid-tenants-uuid-run-ids", "anon-tenants-full-length-ids"])
def test_the_tenant_scoped_check_splices_ids_of_other_legal_shapes(name: str) -> None:
    """Where ids carry a tenant part, the cases shaped like the host's ids are asked (made
    from the ids it minted), none said not to apply."""
    [row] = run_invariants(lambda: variant(name).host(), "eval-fixture-run-tenant-scoped")
    assert row.passed, row.detail
    assert not [f for f in row.findings if "does not apply" in f.message]
    assert any(f.message.startswith("tenant B's opaque segment under the caller's tenant")
               for f in row.findings)


def test_the_invariant_row_exists() -> None:
    assert any(i.id == "eval-fixture-run-tenant-scoped" for i in load_invariants())
