"""OpenWOP v2 listRuns (GET /runs, family runList): the caller's own runs in creation
order, paged by an opaque cursor, filtered by workflowId and status; bad paging input is
400 validation_error, no key is 401, and a refused create lists nothing."""

from __future__ import annotations

from typing import Any

import pytest

from refsim import Response, SimHost
from refsim.wire.errors import is_registered
from refsim.wire.limits import PAGE_MAX_BYTES, RUN_LIST_DEFAULT_LIMIT, RUN_LIST_MAX_LIMIT

from .conftest import KEY_A, KEY_B

NOOP = {"workflowId": "conformance-noop"}
WAIT = {"workflowId": "conformance-wait-input"}


def create(host: SimHost, key: str, body: dict[str, Any]) -> str:
    r = host.request("POST", "/runs", api_key=key, json=body)
    assert r.status == 201, r.json
    run_id: str = r.json["runId"]
    return run_id


def listed(host: SimHost, key: str, query: str = "") -> Response:
    return host.request("GET", "/runs" + query, api_key=key)


def walk(host: SimHost, key: str, query: str) -> tuple[list[str], int]:
    """Every run id over all pages, following nextCursor, and how many pages it took."""
    ids: list[str] = []
    cursor: str | None = None
    for pages in range(1, 200):
        r = listed(host, key, query + (f"&cursor={cursor}" if cursor else ""))
        assert r.status == 200, r.json
        ids += [run["runId"] for run in r.json["runs"]]
        cursor = r.json.get("nextCursor")
        if cursor is None:
            return ids, pages
        assert isinstance(cursor, str) and cursor
    raise AssertionError("the cursors never ended")


def assert_validation(r: Response) -> None:
    assert r.status == 400, r.json
    assert r.json["error"] == "validation_error"
    assert is_registered(r.json["error"], r.status)


def test_discovery_advertises_run_list_next_to_replay(host: SimHost) -> None:
    r = host.request("GET", "/.well-known/openwop")
    assert r.status == 200
    assert r.json["runList"] == {"status": "stable", "since": "2.0",
                                 "witness": "witnessable-gated"}
    assert r.json["runList"] == r.json["replay"]
    # deterministic: another host with the same seed serves the same bytes
    again = SimHost(seed=0).request("GET", "/.well-known/openwop")
    assert again.body == r.body and again.headers["ETag"] == r.headers["ETag"]


def test_empty_host_lists_no_runs_and_no_cursor(host: SimHost) -> None:
    r = listed(host, KEY_A)
    assert r.status == 200
    assert r.json == {"runs": []}
    assert r.headers["OpenWOP-Version"] == "2.0"


def test_a_caller_lists_its_own_runs_only(host: SimHost) -> None:
    mine = [create(host, KEY_A, NOOP) for _ in range(3)]
    theirs = [create(host, KEY_B, NOOP) for _ in range(2)]
    mine.append(create(host, KEY_A, WAIT))

    acme = listed(host, KEY_A)
    assert acme.status == 200 and "nextCursor" not in acme.json
    assert [run["runId"] for run in acme.json["runs"]] == mine
    assert all(run["owner"]["tenant"] == "acme" for run in acme.json["runs"])
    assert not set(theirs) & {run["runId"] for run in acme.json["runs"]}

    globex = listed(host, KEY_B)
    assert [run["runId"] for run in globex.json["runs"]] == theirs
    assert "globex" not in acme.body.decode() and "acme" not in globex.body.decode()


def test_each_entry_is_the_run_snapshot(host: SimHost) -> None:
    run_id = create(host, KEY_A, {**NOOP, "tags": ["t1"], "metadata": {"k": "v"}})
    entry = listed(host, KEY_A).json["runs"][0]
    snapshot = host.request("GET", "/runs/" + run_id.replace("/", "~2F"), api_key=KEY_A)
    assert snapshot.status == 200
    assert entry == snapshot.json
    assert {"runId", "workflowId", "status"} <= set(entry)
    assert entry["tags"] == ["t1"] and entry["metadata"] == {"k": "v"}


@pytest.mark.parametrize("limit", [1, 2, 3, 7])
def test_paging_walks_every_run_once_in_creation_order(host: SimHost, limit: int) -> None:
    created = []
    for index in range(7):
        created.append(create(host, KEY_A, NOOP if index % 2 else WAIT))
        create(host, KEY_B, NOOP)  # another tenant's runs between the caller's
    ids, pages = walk(host, KEY_A, f"?limit={limit}")
    assert ids == created
    assert pages == -(-len(created) // limit)  # full pages, then the rest: no empty page


def test_a_page_holds_at_most_limit_runs_and_defaults_to_fifty(host: SimHost) -> None:
    created = [create(host, KEY_A, NOOP) for _ in range(RUN_LIST_DEFAULT_LIMIT + 3)]
    first = listed(host, KEY_A)
    assert len(first.json["runs"]) == RUN_LIST_DEFAULT_LIMIT == 50
    assert "nextCursor" in first.json
    rest = listed(host, KEY_A, "?cursor=" + first.json["nextCursor"])
    assert [run["runId"] for run in first.json["runs"] + rest.json["runs"]] == created
    assert "nextCursor" not in rest.json
    most = listed(host, KEY_A, f"?limit={RUN_LIST_MAX_LIMIT}")
    assert most.status == 200 and len(most.json["runs"]) == len(created) <= 100


def test_the_cursor_names_no_run_and_survives_later_runs(host: SimHost) -> None:
    created = [create(host, KEY_A, NOOP) for _ in range(3)]
    first = listed(host, KEY_A, "?limit=2")
    cursor = first.json["nextCursor"]
    # opaque and carrying no run id, the caller's or anyone's
    assert all(part not in cursor for rid in created for part in rid.split("/"))
    created.append(create(host, KEY_B, NOOP))
    created.append(create(host, KEY_A, NOOP))
    rest = listed(host, KEY_A, "?limit=2&cursor=" + cursor)
    assert [run["runId"] for run in rest.json["runs"]] == [created[2], created[4]]
    assert "nextCursor" not in rest.json


def test_another_tenants_cursor_reveals_none_of_its_runs(host: SimHost) -> None:
    for _ in range(3):
        create(host, KEY_B, NOOP)
    mine = create(host, KEY_A, NOOP)
    cursor = listed(host, KEY_B, "?limit=1").json["nextCursor"]
    r = listed(host, KEY_A, "?cursor=" + cursor)
    assert r.status == 200
    assert [run["runId"] for run in r.json["runs"]] == [mine]


def test_filters_by_workflow_id_and_status(host: SimHost) -> None:
    noop = [create(host, KEY_A, NOOP) for _ in range(3)]
    wait = [create(host, KEY_A, WAIT) for _ in range(3)]
    create(host, KEY_B, NOOP)
    create(host, KEY_B, WAIT)
    cancelled = wait[1]
    r = host.request("POST", "/runs/" + cancelled.replace("/", "~2F") + "/cancel",
                     api_key=KEY_A)
    assert r.status == 200 and r.json["status"] == "cancelled"

    by_workflow = listed(host, KEY_A, "?workflowId=conformance-noop").json["runs"]
    assert [run["runId"] for run in by_workflow] == noop
    assert {run["workflowId"] for run in by_workflow} == {"conformance-noop"}

    waiting = listed(host, KEY_A, "?status=waiting-input").json["runs"]
    assert [run["runId"] for run in waiting] == [wait[0], wait[2]]
    assert ([run["runId"] for run in listed(host, KEY_A, "?status=cancelled").json["runs"]]
        == [cancelled])
    both = listed(host, KEY_A, "?workflowId=conformance-noop&status=completed").json["runs"]
    assert [run["runId"] for run in both] == noop
    assert (listed(host, KEY_A, "?workflowId=conformance-noop&status=cancelled").json
        == {"runs": []})
    assert listed(host, KEY_A, "?workflowId=no-such-workflow").json == {"runs": []}

    # paging under a filter keeps it: the cursor resumes among the matching runs
    ids, pages = walk(host, KEY_A, "?limit=1&workflowId=conformance-wait-input")
    assert ids == wait and pages == 3


@pytest.mark.parametrize("limit", ["0", "101", "x", "-1", "1.5", "", "1e2", "9999999999999"])
def test_malformed_limit_is_400_validation_error(host: SimHost, limit: str) -> None:
    create(host, KEY_A, NOOP)
    r = listed(host, KEY_A, "?limit=" + limit)
    if limit == "":  # an empty parameter is no parameter (the default)
        assert r.status == 200 and len(r.json["runs"]) == 1
        return
    assert_validation(r)


@pytest.mark.parametrize("cursor", ["x", "0", "not-a-cursor", "A" * 32, "%FF" * 4,
                                    "MjAyNi0wMS0wMVQwMDowMDowMC4wMDFa=", "_" * 32])
def test_malformed_cursor_is_400_validation_error(host: SimHost, cursor: str) -> None:
    create(host, KEY_A, NOOP)
    create(host, KEY_A, NOOP)
    assert listed(host, KEY_A, "?limit=1").json["nextCursor"] != cursor
    assert_validation(listed(host, KEY_A, "?limit=1&cursor=" + cursor))


def test_no_key_or_an_unknown_key_is_401(host: SimHost) -> None:
    create(host, KEY_A, NOOP)
    for r in (host.request("GET", "/runs"), host.request("GET", "/runs?limit=x"),
              host.request("GET", "/runs", api_key="hk_no_such_key")):
        assert r.status == 401
        assert r.json["error"] == "unauthenticated"
        assert "runs" not in r.json


def test_a_refused_create_adds_nothing_to_the_list(host: SimHost) -> None:
    kept = create(host, KEY_A, NOOP)
    before = listed(host, KEY_A).json
    refused = host.request("POST", "/runs", api_key=KEY_A, json={
        **NOOP, "fixtureRuns": {"x": "acme/run-0000000000000000"}})
    assert refused.status == 400
    also = host.request("POST", "/runs", api_key=KEY_A, json={"workflowId": "no-such"})
    assert also.status == 400
    after = listed(host, KEY_A).json
    assert after == before
    assert [run["runId"] for run in after["runs"]] == [kept]


def test_other_methods_on_runs_are_not_listing(host: SimHost) -> None:
    r = host.request("DELETE", "/runs", api_key=KEY_A)
    assert r.status == 404 and r.json["error"] == "not_found"


def test_large_snapshots_split_pages_by_bytes_not_only_by_limit(host: SimHost) -> None:
    blob = "x" * (PAGE_MAX_BYTES // 3)
    created = [create(host, KEY_A, {**NOOP, "metadata": {"blob": blob}}) for _ in range(4)]
    first = listed(host, KEY_A, "?limit=100")
    assert first.status == 200
    assert 1 <= len(first.json["runs"]) < 4 and "nextCursor" in first.json
    assert len(first.body) <= PAGE_MAX_BYTES
    ids, _ = walk(host, KEY_A, "?limit=100")
    assert ids == created


def test_a_page_renders_only_the_runs_it_can_hold_and_one_more(
        host: SimHost, monkeypatch: pytest.MonkeyPatch) -> None:
    """Work per page is bounded by its bytes, not by `limit`: with runs of 600 kB of
    metadata each, a page of limit 100 renders 2 of 10 runs (one held, one that did not
    fit), not all 10."""
    from refsim.wire import render
    blob = "x" * (PAGE_MAX_BYTES * 6 // 10)
    for _ in range(10):
        create(host, KEY_A, {**NOOP, "metadata": {"blob": blob}})
    rendered: list[str] = []
    real = render.snapshot

    def counting(run: Any) -> Any:
        rendered.append(run.run_id.bound)
        return real(run)
    monkeypatch.setattr(render, "snapshot", counting)
    page = listed(host, KEY_A, "?limit=100")
    assert page.status == 200 and len(page.json["runs"]) == 1 and "nextCursor" in page.json
    assert len(rendered) == 2
