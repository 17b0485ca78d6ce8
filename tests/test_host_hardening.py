"""Host behaviours a review turned up: each test failed on the host before its fix."""

from __future__ import annotations

import itertools

from refsim import Response, SimHost
from refsim.check.observe import REPLAY, SOURCE, Session, eval_body, run_path

KEY_A, KEY_B = "hk_test_acme", "hk_test_globex"


def _source_and_eval(host: SimHost) -> tuple[Session, str, str]:
    a = Session(host, KEY_A)
    src = str(a.create(eval_body(SOURCE)).json["runId"])
    ev = a.create(eval_body("conformance.openwop.evals.recorded-replay", {"record": src}))
    assert ev.status == 201
    return a, src, str(ev.json["runId"])


def test_a_branch_fork_reruns_the_suite_it_recorded_not_what_the_ref_names_now() -> None:
    host = SimHost(seed=0)
    a, _, ev = _source_and_eval(host)
    shadow = {"suiteId": "conformance.openwop.evals.recorded-replay", "version": "9.9.9",
              "modes": ["golden"], "tasks": [{
                  "taskId": "record", "input": {"script": [
                      {"call": "conformance.eval:counter", "args": {"op": "inc", "key": "shadow"}},
                      {"decide": "ok"}]},
                  "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "ok"}},
                  "fixtures": {"toolResponses": [], "onMiss": "live"}}]}
    r = host.request("POST", "/conformance/seams/eval-suites", api_key=KEY_A,
                     json={"suite": shadow})
    assert r.status == 409 and r.json["error"] == "version_conflict"  # no shadowing built-ins
    fork = a.fork(ev, "branch")
    assert fork.status == 201
    started = [e for e in a.events(str(fork.json["runId"])) if e["type"] == "eval.started"]
    assert started[0]["payload"]["suiteVersion"] == "1.0.0"
    assert a.counter("shadow") == 0


def test_erasing_the_eval_run_erases_the_copy_it_keeps_for_its_forks() -> None:
    host = SimHost(seed=0)
    a, _, ev = _source_and_eval(host)
    erased = a.erase(ev)
    assert erased.status == 200 and erased.json["derivedCopiesErased"] == 1
    for mode in ("replay", "branch"):
        fork = a.fork(ev, mode)
        assert fork.status == 404 and fork.json["error"] == "replay_source_missing"


def test_lone_surrogates_are_refused_as_not_i_json() -> None:
    host = SimHost(seed=0)
    for body in (b'{"workflowId": "conformance-noop", "metadata": {"x": "\\ud800"}}',
                 b'{"workflowId": "conformance-noop", "metadata": {"\\udc00": 1}}'):
        r = host.request_raw("POST", "/runs", headers={"Authorization": "Bearer " + KEY_A},
                             body=body)
        assert r.status == 400 and "surrogate" in r.json["message"]
    assert not host.core.runs


def test_only_listed_protocol_versions_are_spoken() -> None:
    host = SimHost(seed=0)
    for value, status in (("2", 200), ("2.0", 200), ("2.1", 406), ("2.99", 406), ("3", 406)):
        r = host.request("GET", "/.well-known/openwop", headers={"OpenWOP-Version": value})
        assert r.status == status, value
        assert r.header("OpenWOP-Version") == "2.0"


def test_the_tenant_seam_never_mints_a_second_key_for_an_existing_tenant() -> None:
    host = SimHost(seed=0)
    theirs = Session(host, KEY_B).create(eval_body(SOURCE))
    r = host.request("POST", "/conformance/seams/tenants", api_key=KEY_A,
                     json={"name": "globex", "apiKey": "acme-minted-globex-key"})
    assert r.status == 400
    got = host.request("GET", run_path(str(theirs.json["runId"])),
                       api_key="acme-minted-globex-key")
    assert got.status == 401
    again = host.request("POST", "/conformance/seams/tenants", api_key=KEY_A,
                         json={"name": "globex", "apiKey": KEY_B})
    assert again.status == 201  # the tenant as it is: idempotent


def test_a_response_is_a_copy_that_cannot_rewrite_the_host() -> None:
    first, second = SimHost(seed=0), SimHost(seed=0)
    for host in (first, second):
        Session(host, KEY_A).create(eval_body(SOURCE))
    run_id = next(iter(first.core.runs)).bound
    page = first.request("GET", run_path(run_id, "/events/poll"), api_key=KEY_A).json
    called = next(e for e in page["events"] if e["type"] == "agent.tool-called")
    called["payload"]["inputs"]["key"] = "changed"
    assert first.event_log() == second.event_log()
    replay = Session(first, KEY_A).create(eval_body(REPLAY, {"record": run_id}))
    assert replay.status == 201
    assert Session(first, KEY_A).summary(str(replay.json["runId"]))["tasks"][0][
        "fixtureMissCount"] == 0


def test_a_source_id_with_a_lone_surrogate_gets_the_uniform_refusal() -> None:
    """RFC 0252 §C: an undecodable id is refused like every unusable source, one fixed
    body; a lone surrogate in the id is no reason for a refusal of its own."""
    host = SimHost(seed=0)

    def replay(value: bytes) -> Response:
        return host.request_raw(
            "POST", "/runs", headers={"Authorization": "Bearer " + KEY_A},
            body=b'{"mode": "eval", "evalSuiteRef": "conformance-eval-recorded-replay", '
                 b'"agentId": "conformance.eval:recorder", "fixtureRuns": {"record": "'
                 + value + b'"}}')
    unknown = replay(b"acme/run-00000000000000000000")
    assert unknown.status == 400 and unknown.json["error"] == "validation_error"
    for value in (b"acme/run-\\ud800abc", b"\\udfff", b"acme/\\udc00/x"):
        refused = replay(value)
        assert refused.body == unknown.body, (value, refused.body)
    # Elsewhere in the body, it is still no I-JSON: the key of the map included.
    key = host.request_raw(
        "POST", "/runs", headers={"Authorization": "Bearer " + KEY_A},
        body=b'{"mode": "eval", "evalSuiteRef": "conformance-eval-recorded-replay", '
             b'"agentId": "conformance.eval:recorder", "fixtureRuns": {"\\ud800": "x/y"}}')
    assert key.status == 400 and "surrogate" in key.json["message"]
    assert not host.core.runs


def test_the_erase_seam_has_one_scope_that_reaches_every_copy() -> None:
    """The Security SHOULD by default: no scope lets copies outlive the source's content."""
    host = SimHost(seed=0)
    a = Session(host, KEY_A)
    source = a.create(eval_body(SOURCE))
    assert source.status == 201
    ev = a.create(eval_body(REPLAY, {"record": source.json["runId"]}))
    assert ev.status == 201
    path = "/conformance/seams" + run_path(source.json["runId"], ":erase")
    lapse = host.request("POST", path + "?scope=held-calls", api_key=KEY_A, json={})
    assert lapse.status == 400 and lapse.json["error"] == "validation_error"
    assert len(list(host.core.copies.all_entries())) == 1  # the refused scope erased nothing
    erased = host.request("POST", path, api_key=KEY_A, json={})
    assert erased.status == 200 and erased.json["derivedCopiesErased"] >= 1
    assert list(host.core.copies.all_entries()) == []


def test_every_seam_is_advertised_and_listed_in_the_host_author_page() -> None:
    from pathlib import Path
    readme = (Path(__file__).resolve().parent.parent / "docs" / "host-author.md").read_text(
        encoding="utf-8")
    seams = SimHost(seed=0).request("GET", "/.well-known/openwop").json["conformance"]["seams"]
    after = readme[readme.index("**The seams.**"):].splitlines()
    start = next(i for i, ln in enumerate(after) if ln.startswith("|"))
    table = itertools.takewhile(lambda ln: ln.startswith("|"), after[start:])
    rows = [ln for ln in table if ln.startswith("| `")]  # the seams table, no later one
    listed = {ln.split("`")[1] for ln in rows}
    assert listed == set(seams)
    # ...and every seam the router answers is one of them (each row's path is served).
    for row in rows:
        method, path = row.split("`")[3].split(" ", 1)
        path = path.split("?")[0].replace("{runId}", "acme~2Frun-none")
        r = SimHost(seed=0).request(method, path, api_key=KEY_A,
                                    **({"json": {}} if method == "POST" else {}))
        assert r.status != 404 or r.json["error"] != "not_found" or "run" in path, (path, r.body)
