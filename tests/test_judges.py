"""Each judge passes a good observation and fails the exact defect it exists for.

Judges are pure, so every observation here is built by hand as a `Response` or an event list.
Tests marked `xfail(strict=True)` pin judge defects found in review: when a judge is fixed,
its xfail starts passing, strict mode turns that into a failure, and the marker comes off.
"""

from __future__ import annotations

import copy
import inspect
import json
import sys
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refsim.check import judges
from refsim.check.findings import Finding
from refsim.check.judges import echoes as judges_echo
from refsim.check.scenario import load_vectors
from refsim.domain.ids import project
from refsim.domain.refusals import UNUSABLE_SOURCE_MESSAGE
from refsim.wire.response import Response

REQ = "refsim.requirement.0252.test"
AGENT = "conformance.eval:recorder"
DELEGATE = "conformance.eval:delegate"
COUNTER = "conformance.eval:counter"
OPAQUE = "run-abcdefghij0123456789"
SOURCE_ID = f"acme/{OPAQUE}"
FOREIGN_ID = "globex/run-zyxwvutsrq9876543210"
REFUSAL = {"error": "validation_error", "message": UNUSABLE_SOURCE_MESSAGE}
SECRET = "sk-live-0252-egress-credential"


def resp(status: int, body: Any = None, headers: dict[str, str] | None = None,
         text: str | None = None) -> Response:
    return Response(status, headers or {"OpenWOP-Version": "2.0"}, body, text)


def refusal(message: str = UNUSABLE_SOURCE_MESSAGE, status: int = 400,
            code: str = "validation_error", **extra: Any) -> Response:
    return resp(status, {"error": code, "message": message, **extra})


def ok_all(found: Finding | list[Finding]) -> bool:
    items = found if isinstance(found, list) else [found]
    return bool(items) and all(f.ok for f in items)


def failed(found: Finding | list[Finding]) -> list[Finding]:
    items = found if isinstance(found, list) else [found]
    return [f for f in items if not f.ok]


def ev(seq: int, type_: str, **payload: Any) -> dict[str, Any]:
    return {"sequence": seq, "type": type_, "payload": payload}


def calls(start: int, agent: str, answers: list[tuple[dict[str, Any], Any]]
          ) -> list[dict[str, Any]]:
    out = []
    for i, (inputs, outcome) in enumerate(answers):
        cid = f"call-{agent}-{i}"
        out.append(ev(start + 2 * i, "agent.tool-called", agentId=agent, toolName=COUNTER,
                      callId=cid, inputs=inputs))
        out.append(ev(start + 2 * i + 1, "agent.tool-returned", agentId=agent,
                      toolName=COUNTER, callId=cid, outcome=outcome))
    return out


INC = ({"op": "inc", "key": "recorded-fixtures"}, {"key": "recorded-fixtures", "count": 1})
READ = ({"op": "read", "key": "recorded-fixtures"}, {"key": "recorded-fixtures", "count": 1})


def eval_log(fixture_runs: dict[str, str] | None = None, misses: int = 0,
             passed: bool = True, answers: list[tuple[dict[str, Any], Any]] | None = None
             ) -> list[dict[str, Any]]:
    started: dict[str, Any] = {"suiteId": "conformance.openwop.evals.recorded-replay",
                               "suiteVersion": "1.0.0", "taskCount": 1, "modes": ["golden"]}
    if fixture_runs is not None:
        started["fixtureRuns"] = fixture_runs
    body = calls(2, AGENT, answers if answers is not None else [INC, READ])
    n = 2 + len(body)
    return [ev(0, "run.started"), ev(1, "eval.started", **started), *body,
            ev(n, "eval.scored", taskId="record", score=1.0 if passed else 0.0, passed=passed,
               fixtureMissCount=misses),
            ev(n + 1, "eval.completed", aggregateScore=1.0 if passed else 0.0, passed=passed,
               taskCount=1, passedCount=1 if passed else 0),
            ev(n + 2, "run.completed")]


def summary(misses: int = 0, passed: bool = True) -> dict[str, Any]:
    return {"suiteId": "conformance.openwop.evals.recorded-replay", "suiteVersion": "1.0.0",
            "aggregateScore": 1.0 if passed else 0.0, "passed": passed, "taskCount": 1,
            "passedCount": 1 if passed else 0,
            "tasks": [{"taskId": "record", "score": 1.0 if passed else 0.0, "passed": passed,
                       "fixtureMissCount": misses}]}


# -- coverage of this file itself ---------------------------------------------------------------

def _judge_names() -> list[str]:
    """Public functions of refsim.check.judges (defined in the modules of the package) that
    return findings."""
    names = []
    for name, fn in inspect.getmembers(judges, inspect.isfunction):
        if name.startswith("_") or not fn.__module__.startswith(judges.__name__):
            continue
        if "Finding" in str(inspect.signature(fn).return_annotation):
            names.append(name)
    return sorted(names)


def test_every_judge_has_a_pass_and_a_fail_test() -> None:
    here = [n for n in dir(sys.modules[__name__]) if n.startswith("test_")]
    for name in _judge_names():
        assert f"test_{name}_passes" in here, f"judge {name} has no passing test"
        assert f"test_{name}_fails" in here or any(
            n.startswith(f"test_{name}_fails") for n in here), f"judge {name} has no failing test"


def test_the_judge_finder_finds_every_public_function_of_findings() -> None:
    """What the rule above ranges over: every public judge, whichever form its findings
    take (one, or a list)."""
    found = set(_judge_names())
    assert {"created", "refused", "miss_count", "no_foreign_run_ids"} <= found
    assert "scored" not in found and "id_forms" not in found  # helpers return no finding


# -- helpers the judges stand on ----------------------------------------------------------------

def test_id_forms_covers_bound_projected_percent_and_opaque() -> None:
    forms = judges.id_forms(SOURCE_ID)
    assert {SOURCE_ID, project(SOURCE_ID), f"acme%2F{OPAQUE}", f"acme%2f{OPAQUE}",
            f"acme\\/{OPAQUE}", OPAQUE} <= forms


def test_of_type_and_scored_pick_the_events_asked_for() -> None:
    log = eval_log()
    assert [e["type"] for e in judges.of_type(log, "agent.tool-called")] == [
        "agent.tool-called"] * 2
    assert judges.scored(log, "record") == log[-3]["payload"]
    assert judges.scored(log, "other") is None


# -- created --------------------------------------------------------------------------------------

def test_created_passes() -> None:
    assert ok_all(judges.created(REQ, resp(201, {"runId": SOURCE_ID}), "the replay"))


def test_created_fails_on_a_refusal() -> None:
    found = judges.created(REQ, refusal(), "the replay")
    assert not found.ok and "expected 201, got 400" in found.message


# -- refused --------------------------------------------------------------------------------------

def test_refused_passes() -> None:
    found = judges.refused(REQ, refusal(), "an unknown id")
    assert len(found) == 2 and ok_all(found)


def test_refused_fails_on_a_403() -> None:
    found = judges.refused(REQ, refusal(status=403, code="id_tenant_mismatch",
                                        message="not your tenant"), "tenant B's run")
    # The envelope itself is fine (403 id_tenant_mismatch is registered); the status is not.
    assert [f.ok for f in found] == [False, True]
    assert "expected 400 validation_error, got 403 id_tenant_mismatch" in found[0].message


def test_refused_fails_on_an_unregistered_code() -> None:
    gone = refusal(status=404, code="eval_recorded_fixtures_gone", message="copy gone")
    found = judges.refused(REQ, gone, "a fork whose copy is gone", status=404,
                           code="eval_recorded_fixtures_gone")
    # Status and code are what was asked for, but the code is in no registry.
    assert [f.ok for f in found] == [True, False]
    assert "registered" in found[1].message


def test_refused_fails_on_a_non_envelope_body() -> None:
    found = judges.refused(REQ, resp(400, text="Bad Request"), "an unknown id")
    assert [f.ok for f in found] == [False, False]
    assert "not a {error, message, details?} envelope" in found[1].message


def test_refused_fails_on_an_envelope_with_extra_keys() -> None:
    found = judges.refused(REQ, refusal(runId=SOURCE_ID), "an unknown id")
    assert [f.ok for f in found] == [True, False]


# -- envelope -------------------------------------------------------------------------------------

def test_envelope_passes() -> None:
    assert ok_all(judges.envelope(REQ, refusal(), "x"))
    assert ok_all(judges.envelope(REQ, refusal(status=404, code="acme.copy_gone"), "vendor"))


def test_envelope_fails_on_missing_message_or_wrong_status() -> None:
    assert failed(judges.envelope(REQ, resp(400, {"error": "validation_error"}), "x"))
    assert failed(judges.envelope(REQ, resp(400, {"error": "validation_error", "message": ""}),
                                  "x"))
    # A registered code at a status the registry does not give it.
    found = judges.envelope(REQ, refusal(status=404), "x")
    assert not found.ok and "at status 404" in found.message


def test_envelope_fails_on_a_list_body() -> None:
    assert failed(judges.envelope(REQ, resp(400, [REFUSAL]), "x"))


# -- no_echo --------------------------------------------------------------------------------------

def test_no_echo_passes() -> None:
    assert ok_all(judges.no_echo(REQ, refusal(), [SOURCE_ID], "an unknown id"))


@pytest.mark.parametrize("leak", [
    SOURCE_ID,                            # bound
    project(SOURCE_ID),                   # acme~2Frun-...
    f"acme%2F{OPAQUE}",                   # percent-encoded
    f"acme\\/{OPAQUE}",                   # JSON-escaped slash
    OPAQUE,                               # the opaque segment alone
])
def test_no_echo_fails_on_the_id_in_any_form(leak: str) -> None:
    found = judges.no_echo(REQ, refusal(f"no source {leak} here"), [SOURCE_ID], "unknown id")
    assert not found.ok and "echoes the supplied id" in found.message


def test_no_echo_fails_on_the_id_in_details_or_a_header() -> None:
    in_details = refusal(details={"field": "fixtureRuns.record", "value": project(SOURCE_ID)})
    assert failed(judges.no_echo(REQ, in_details, [SOURCE_ID], "details"))
    in_header = resp(400, REFUSAL, {"X-Debug-Run": f"acme~2F{OPAQUE}"})
    assert failed(judges.no_echo(REQ, in_header, [SOURCE_ID], "header"))


# -- uniform --------------------------------------------------------------------------------------

def test_uniform_passes() -> None:
    pair = [("an unknown id", refusal()), ("tenant B's run", refusal())]
    assert ok_all(judges.uniform(REQ, pair, exact=True))
    assert ok_all(judges.uniform(REQ, pair, exact=False))


def test_uniform_fails_exact_on_differing_messages() -> None:
    pair = [("an unknown id", refusal("no such run")),
            ("tenant B's run", refusal("that run belongs to another tenant"))]
    assert not judges.uniform(REQ, pair, exact=True).ok
    # Same status and code: the loose comparison lets it through.
    assert judges.uniform(REQ, pair, exact=False).ok


def test_uniform_fails_exact_on_details_present_for_one() -> None:
    pair = [("an unknown id", refusal()), ("tenant B's run", refusal(details={"reason": "x"}))]
    assert not judges.uniform(REQ, pair, exact=True).ok


def test_uniform_fails_loose_on_403_versus_400() -> None:
    pair = [("an unknown id", refusal()),
            ("tenant B's run", refusal(status=403, code="id_tenant_mismatch"))]
    found = judges.uniform(REQ, pair, exact=False)
    assert not found.ok and "differ" in found.message


def test_uniform_fails_with_fewer_than_two_refusals() -> None:
    assert not judges.uniform(REQ, [("an unknown id", refusal())], exact=False).ok


# -- echo -----------------------------------------------------------------------------------------

def test_echo_passes() -> None:
    mapping = {"record": SOURCE_ID}
    assert ok_all(judges.echo(REQ, eval_log(dict(mapping)), mapping))


def test_echo_fails_on_a_missing_map() -> None:
    found = judges.echo(REQ, eval_log(None), {"record": SOURCE_ID})
    assert not found.ok and "carries no fixtureRuns" in found.message


def test_echo_fails_on_an_altered_map() -> None:
    for altered in ({"record": project(SOURCE_ID)},          # projected, not the bound form
                    {"record": FOREIGN_ID},                  # another source
                    {"record": SOURCE_ID, "extra": SOURCE_ID}):
        assert not judges.echo(REQ, eval_log(altered), {"record": SOURCE_ID}).ok


def test_echo_fails_without_exactly_one_eval_started() -> None:
    log = eval_log({"record": SOURCE_ID})
    twice = [*log, ev(len(log), "eval.started", **log[1]["payload"])]
    assert not judges.echo(REQ, twice, {"record": SOURCE_ID}).ok
    none = [e for e in log if e["type"] != "eval.started"]
    assert not judges.echo(REQ, none, {"record": SOURCE_ID}).ok


def test_echo_fails_with_a_message_that_says_what_is_wrong() -> None:
    found = judges.echo(REQ, eval_log({"record": FOREIGN_ID}), {"record": SOURCE_ID})
    assert not found.ok and "echoes the accepted map verbatim" not in found.message


# -- outcomes_equal -------------------------------------------------------------------------------

def test_outcomes_on_wire_tells_a_content_free_lane_apart() -> None:
    log = eval_log()
    assert judges.outcomes_on_wire(log, AGENT)
    stripped = [{**e, "payload": {k: v for k, v in e["payload"].items()
                                  if k not in ("outcome", "error")}}
                if e["type"] == "agent.tool-returned" else e for e in log]
    assert not judges.outcomes_on_wire(stripped, AGENT)
    assert not judges.outcomes_on_wire(log, DELEGATE)


def test_outcomes_equal_passes() -> None:
    found = judges.outcomes_equal(REQ, eval_log(), eval_log({"record": SOURCE_ID}), AGENT)
    assert len(found) == 3 and ok_all(found)


def test_outcomes_equal_passes_ignoring_a_delegates_calls() -> None:
    replay = eval_log({"record": SOURCE_ID})
    replay += calls(len(replay), DELEGATE, [(INC[0], {"key": "recorded-fixtures", "count": 9})])
    assert ok_all(judges.outcomes_equal(REQ, eval_log(), replay, AGENT))


def test_outcomes_equal_fails_when_an_outcome_differs() -> None:
    # A host that ignored fixtureRuns answered the inc live: the counter moved to 2.
    live = ({"op": "inc", "key": "recorded-fixtures"}, {"key": "recorded-fixtures", "count": 2})
    found = judges.outcomes_equal(REQ, eval_log(), eval_log(answers=[live, READ]), AGENT)
    assert [f.ok for f in found] == [True, False, True]
    assert "call 0: the replayed outcome differs" in found[1].message


def test_named_twice_passes() -> None:
    """Refused as an unusable source is, or taken and served the usable run's recording."""
    assert ok_all(judges.named_twice(REQ, refusal(), eval_log(), [], AGENT, "twice"))
    taken = judges.named_twice(REQ, resp(201, {"runId": "acme/run-x"}), eval_log(),
                               eval_log({"record": SOURCE_ID}), AGENT, "twice")
    assert ok_all(taken) and "taken (201)" in taken[0].message


def test_named_twice_fails_when_the_other_runs_recording_is_served() -> None:
    """A host that judged the usable value and served the other (another tenant's run,
    recorded with another count): the outcomes differ from the usable run's."""
    other = ({"op": "inc", "key": "recorded-fixtures"}, {"key": "recorded-fixtures", "count": 7})
    found = judges.named_twice(REQ, resp(201, {"runId": "acme/run-x"}), eval_log(),
                               eval_log(answers=[other, READ]), AGENT, "twice")
    assert failed(found) and "twice: call 0: the replayed outcome differs" in " ".join(
        f.message for f in found)
    assert failed(judges.named_twice(REQ, resp(404, {"error": "not_found", "message": "x"}),
                                     eval_log(), [], AGENT, "twice"))


def test_outcomes_equal_fails_when_an_error_replaces_the_outcome() -> None:
    replay = eval_log()
    returned = next(e for e in replay if e["type"] == "agent.tool-returned")
    del returned["payload"]["outcome"]
    returned["payload"]["error"] = {"code": "fixture_miss", "message": "miss"}
    assert failed(judges.outcomes_equal(REQ, eval_log(), replay, AGENT))


def test_outcomes_equal_fails_when_a_call_is_missing() -> None:
    found = judges.outcomes_equal(REQ, eval_log(), eval_log(answers=[INC]), AGENT)
    assert not found[0].ok and "returned 1 call(s), the source 2" in found[0].message


def test_outcomes_equal_fails_on_an_empty_source() -> None:
    found = judges.outcomes_equal(REQ, eval_log(answers=[]), eval_log(), AGENT)
    assert len(found) == 1 and not found[0].ok


def test_outcomes_equal_fails_when_there_is_nothing_to_compare() -> None:
    def bare(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for e in log:
            e["payload"].pop("outcome", None)
            e["payload"].pop("inputs", None)
        return log
    found = judges.outcomes_equal(REQ, bare(eval_log()), bare(eval_log()), AGENT)
    assert failed(found)


# -- counters and re-resolution -------------------------------------------------------------------

def test_counter_unchanged_passes() -> None:
    assert judges.counter_unchanged(REQ, 2, 2, "the replay").ok


def test_counter_unchanged_fails_when_the_counter_moved() -> None:
    found = judges.counter_unchanged(REQ, 2, 3, "the replay")
    assert not found.ok and "moved from 2 to 3" in found.message


def test_counter_moved_passes() -> None:
    assert judges.counter_moved(REQ, 0, 2, "the source run").ok


def test_counter_moved_fails_when_the_counter_stood_still() -> None:
    found = judges.counter_moved(REQ, 1, 1, "the source run")
    assert not found.ok and "cannot witness replay" in found.message


def test_no_reresolution_passes() -> None:
    assert judges.no_reresolution(REQ, 1, 1, "the fork").ok


def test_no_reresolution_fails_when_the_source_was_resolved_again() -> None:
    found = judges.no_reresolution(REQ, 1, 2, "the fork")
    assert not found.ok and "resolved again (1 -> 2)" in found.message


# -- miss_count and passed_is ---------------------------------------------------------------------

def test_miss_count_passes() -> None:
    assert ok_all(judges.miss_count(REQ, eval_log(misses=1), summary(misses=1), "record", 1))


def test_miss_count_fails_when_scored_and_summary_disagree() -> None:
    found = judges.miss_count(REQ, eval_log(misses=0), summary(misses=1), "record", 1)
    assert [f.ok for f in found] == [False, True]
    found = judges.miss_count(REQ, eval_log(misses=1), summary(misses=0), "record", 1)
    assert [f.ok for f in found] == [True, False]


def test_miss_count_fails_when_the_count_is_absent() -> None:
    log = eval_log(misses=1)
    del log[-3]["payload"]["fixtureMissCount"]
    bare = summary(misses=1)
    del bare["tasks"][0]["fixtureMissCount"]
    assert [f.ok for f in judges.miss_count(REQ, log, bare, "record", 1)] == [False, False]
    assert [f.ok for f in judges.miss_count(REQ, eval_log(), None, "record", 0)] == [True, False]


def test_miss_count_fails_on_a_boolean_count() -> None:
    log = eval_log()
    log[-3]["payload"]["fixtureMissCount"] = True
    bad = summary()
    bad["tasks"][0]["fixtureMissCount"] = True
    assert failed(judges.miss_count(REQ, log, bad, "record", 1))


def test_passed_is_passes() -> None:
    assert ok_all(judges.passed_is(REQ, eval_log(misses=1, passed=False),
                                   summary(misses=1, passed=False), "record", False))


def test_passed_is_fails_when_a_miss_still_passed() -> None:
    found = judges.passed_is(REQ, eval_log(misses=1, passed=True),
                             summary(misses=1, passed=False), "record", False)
    assert [f.ok for f in found] == [False, True]


def test_passed_is_fails_on_a_truthy_non_boolean() -> None:
    bad = summary()
    bad["tasks"][0]["passed"] = 1
    assert [f.ok for f in judges.passed_is(REQ, eval_log(), bad, "record", True)] == [True, False]


# -- content_free ---------------------------------------------------------------------------------

def test_content_free_passes() -> None:
    assert ok_all(judges.content_free(REQ, summary(), eval_log({"record": SOURCE_ID})))


def test_content_free_fails_on_output_in_eval_scored() -> None:
    log = eval_log()
    log[-3]["payload"]["output"] = {"key": "recorded-fixtures", "count": 1}
    bad = failed(judges.content_free(REQ, summary(), log))
    assert len(bad) == 1 and "eval.scored carries content keys ['output']" in bad[0].message


def test_content_free_fails_on_derived_entries_in_eval_started() -> None:
    log = eval_log({"record": SOURCE_ID})
    log[1]["payload"]["x-derived"] = {"toolResponses": [{"tool": COUNTER, "response": 1}]}
    assert failed(judges.content_free(REQ, summary(), log))


def test_content_free_fails_on_an_extra_summary_key() -> None:
    extra = summary()
    extra["notes"] = "the agent said hello"
    bad = failed(judges.content_free(REQ, extra, eval_log()))
    assert [f.message for f in bad] == ["the EvalSummary matches the closed summary schema"]


def test_content_free_fails_on_content_in_a_summary_task() -> None:
    leaky = summary()
    leaky["tasks"][0]["toolResponses"] = [{"tool": COUNTER, "response": {"count": 1}}]
    bad = failed(judges.content_free(REQ, leaky, eval_log()))
    assert len(bad) == 2  # the closed schema, and the content keys


def test_content_free_passes_a_task_named_like_a_content_key() -> None:
    log = eval_log({"output": SOURCE_ID})
    log[-3]["payload"]["taskId"] = "output"
    tasks = summary()
    tasks["tasks"][0]["taskId"] = "output"
    assert ok_all(judges.content_free(REQ, tasks, log))


# -- eval_order -----------------------------------------------------------------------------------

def test_eval_order_passes() -> None:
    assert ok_all(judges.eval_order(REQ, eval_log()))


def test_eval_order_fails_on_scored_after_completed() -> None:
    log = eval_log()
    scored_at, completed_at = len(log) - 3, len(log) - 2
    log[scored_at], log[completed_at] = log[completed_at], log[scored_at]
    for i, e in enumerate(log):
        e["sequence"] = i
    bad = failed(judges.eval_order(REQ, log))
    assert len(bad) == 1 and "between started and completed" in bad[0].message


def test_eval_order_fails_on_a_sequence_gap_or_a_second_started() -> None:
    gap = eval_log()
    gap[3]["sequence"] = 99
    assert failed(judges.eval_order(REQ, gap))
    log = eval_log()
    twice = [*log[:2], ev(2, "eval.started", **log[1]["payload"]),
             *({**e, "sequence": e["sequence"] + 1} for e in log[2:])]
    assert failed(judges.eval_order(REQ, twice))


def test_eval_order_fails_without_any_eval_scored() -> None:
    log = [e for e in eval_log() if e["type"] != "eval.scored"]
    log[-1], log[-2] = log[-2], log[-1]          # run.completed before eval.completed
    for i, e in enumerate(log):
        e["sequence"] = i
    assert failed(judges.eval_order(REQ, log))


# -- facet_implies_matching -----------------------------------------------------------------------

def discovery(**facet: Any) -> dict[str, Any]:
    return {"protocolVersions": ["2.0"], "preferredVersion": "2.0",
            "agents": {"status": "stable", "since": "2.0", "witness": "witnessable-gated",
                       "evalSuite": {"modes": ["golden"], **facet}}}


def test_facet_implies_matching_passes() -> None:
    assert judges.facet_implies_matching(
        REQ, discovery(recordedFixtures=True, fixtureMatching=True)).ok
    # Nothing advertised, nothing implied.
    assert judges.facet_implies_matching(REQ, discovery()).ok
    assert judges.facet_implies_matching(REQ, {"protocolVersions": ["2.0"]}).ok


def test_facet_implies_matching_fails_without_fixture_matching() -> None:
    for facet in ({"recordedFixtures": True},
                  {"recordedFixtures": True, "fixtureMatching": False},
                  {"recordedFixtures": True, "fixtureMatching": "true"}):
        found = judges.facet_implies_matching(REQ, discovery(**facet))
        assert not found.ok and "without fixtureMatching" in found.message


# -- no_secret_in ---------------------------------------------------------------------------------

def test_no_secret_in_passes() -> None:
    entries = [{"tool": "conformance.eval:egress", "args": {"q": "x"}, "argsMatch": "exact",
                "response": {"ok": True}}]
    assert judges.no_secret_in(REQ, entries, [SECRET, ""], "derived entries").ok


def test_no_secret_in_fails_on_an_egress_credential() -> None:
    entries = [{"tool": "conformance.eval:egress",
                "args": {"q": "x", "headers": {"Authorization": f"Bearer {SECRET}"}},
                "argsMatch": "exact", "response": {"ok": True}}]
    found = judges.no_secret_in(REQ, entries, [SECRET], "derived entries")
    assert not found.ok and found.observation == {"found": [SECRET]}


def test_no_secret_in_fails_on_a_non_ascii_credential() -> None:
    secret = "clé-secrète-0252"
    assert not judges.no_secret_in(REQ, [{"args": {"k": secret}}], [secret], "entries").ok


# -- schema_vector --------------------------------------------------------------------------------

def test_schema_vector_passes() -> None:
    vectors = load_vectors()
    assert vectors and ok_all([judges.schema_vector(REQ, v) for v in vectors])


def test_schema_vector_fails_on_a_wrong_valid_flag() -> None:
    for vector in load_vectors()[:4]:
        flipped = copy.deepcopy(vector)
        flipped["valid"] = not vector["valid"]
        found = judges.schema_vector(REQ, flipped)
        assert not found.ok and vector["id"] in found.message


# -- robustness: a judge meets whatever a host sends ----------------------------------------------

def test_judges_fail_rather_than_raise_on_a_non_object_payload() -> None:
    log = eval_log({"record": SOURCE_ID})
    log[1]["payload"] = ["not", "an", "object"]
    assert failed(judges.echo(REQ, log, {"record": SOURCE_ID}))


def test_eval_order_fails_rather_than_raises_without_a_sequence() -> None:
    log = eval_log()
    del log[1]["sequence"]
    assert failed(judges.eval_order(REQ, log))


# -- blind spots: the whole response, partial echoes, order, content -------------------------

def test_uniform_fails_exact_on_a_header_only_one_refusal_carries() -> None:
    plain = refusal()
    marked = resp(400, dict(REFUSAL), {"OpenWOP-Version": "2.0", "X-Scope": "other-tenant"})
    found = judges.uniform(REQ, [("unknown", plain), ("foreign", marked)], exact=True)
    assert not found.ok and "header(s) x-scope" in found.message


def test_uniform_exact_ignores_only_the_date_header() -> None:
    a = resp(400, dict(REFUSAL), {"OpenWOP-Version": "2.0", "Date": "Mon"})
    b = resp(400, dict(REFUSAL), {"OpenWOP-Version": "2.0", "Date": "Tue"})
    assert judges.uniform(REQ, [("a", a), ("b", b)], exact=True).ok


def test_no_echo_fails_on_most_of_the_id() -> None:
    partial = SOURCE_ID[:-3]
    assert not judges.no_echo(REQ, refusal(f"cannot use {partial}"), [SOURCE_ID], "x").ok


def test_no_echo_fails_on_eight_characters_of_the_opaque_segment() -> None:
    assert not judges.no_echo(REQ, refusal(f"... {OPAQUE[4:12]} ..."), [SOURCE_ID], "x").ok


def test_no_echo_fails_on_a_fully_percent_encoded_or_json_escaped_id() -> None:
    from urllib.parse import quote
    assert not judges.no_echo(REQ, refusal(quote(SOURCE_ID, safe="")), [SOURCE_ID], "x").ok
    escaped = "".join(f"\\u{ord(c):04x}" for c in SOURCE_ID)
    assert not judges.no_echo(REQ, resp(400, None, text=escaped), [SOURCE_ID], "x").ok


def test_no_echo_passes_on_seven_characters() -> None:
    assert judges.no_echo(REQ, refusal(f"about {OPAQUE[4:11]}"), [SOURCE_ID], "x").ok



@pytest.mark.parametrize("start", [0, 1, 2])
@pytest.mark.parametrize("pack", ["b64", "urlsafe", "hex", "HEX"])
def test_no_echo_fails_on_the_id_packed_in_base64_or_hex(pack: str, start: int) -> None:
    """Inside a longer packed text, from any byte alignment, the id still shows."""
    import base64
    raw = f"{'x' * start}source={SOURCE_ID};scope=tenant".encode()
    packed = {"b64": base64.b64encode(raw).decode(), "HEX": raw.hex().upper(),
              "urlsafe": base64.urlsafe_b64encode(raw).decode(), "hex": raw.hex()}[pack]
    found = judges.no_echo(REQ, resp(400, REFUSAL, {"X-Trace-State": packed}), [SOURCE_ID],
                           "header")
    assert not found.ok and "echoes the supplied id" in found.message


@pytest.mark.parametrize("disguise", ["upper", "reversed"])
def test_no_echo_fails_on_the_id_upper_cased_or_reversed(disguise: str) -> None:
    """After a salt, in a header: an upper-cased or reversed id is still the id."""
    shown = {"upper": SOURCE_ID.upper(), "reversed": SOURCE_ID[::-1]}[disguise]
    found = judges.no_echo(REQ, resp(400, REFUSAL, {"X-Trace": "9f3ab2c1." + shown}),
                           [SOURCE_ID], "header")
    assert not found.ok and "echoes the supplied id" in found.message
    # Text every refusal carries (the control shows it too) is no echo, read either way.
    control = resp(400, REFUSAL, {"X-Trace": "9f3ab2c1." + shown})
    assert judges.no_echo(REQ, control, [SOURCE_ID], "header", [control]).ok


def test_no_echo_passes_on_packed_text_without_the_id() -> None:
    import base64
    other = base64.b64encode(f"source={FOREIGN_ID}".encode()).decode()
    assert judges.no_echo(REQ, resp(400, REFUSAL, {"X-Trace-State": other}), [SOURCE_ID],
                          "header").ok

def test_echo_passes_a_map_in_another_member_order() -> None:
    """A JSON object is unordered (RFC 8259 §4): the echo is the map, not its order."""
    want = {"beta": SOURCE_ID, "alpha": FOREIGN_ID}
    assert judges.echo(REQ, eval_log(dict(sorted(want.items()))), want).ok
    assert not judges.echo(REQ, eval_log({"alpha": SOURCE_ID, "beta": FOREIGN_ID}), want).ok


@pytest.mark.parametrize("start", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("alphabet", ["b32", "b32-lower", "b32hex"])
def test_no_echo_fails_on_the_id_in_base32_after_a_salt(alphabet: str, start: int) -> None:
    import base64
    raw = bytes(range(7, 7 + start)) + f"|{SOURCE_ID}|".encode()
    packed = {"b32": base64.b32encode(raw).decode(), "b32hex": base64.b32hexencode(raw).decode(),
              "b32-lower": base64.b32encode(raw).decode().lower()}[alphabet]
    cookie = resp(400, REFUSAL, {"Set-Cookie": f"sid={packed.rstrip('=')}; Path=/"})
    found = judges.no_echo(REQ, cookie, [SOURCE_ID], "cookie")
    assert not found.ok and "echoes the supplied id" in found.message
    other = base64.b32encode(bytes(range(7, 7 + start)) + b"|initech/zz9yy8xx7ww6vv5u|").decode()
    assert judges.no_echo(REQ, resp(400, REFUSAL, {"Set-Cookie": f"sid={other}"}),
                          [SOURCE_ID], "cookie").ok


def test_eval_events_alike_passes() -> None:
    log = eval_log({"record": SOURCE_ID})
    stream = [*log, ev(len(log), "vendor.heartbeat")]
    assert judges.eval_events_alike(REQ, log, stream).ok


def test_eval_events_alike_fails() -> None:
    log = [ev(0, "eval.scored", taskId="record", fixtureMissCount=1, passed=False)]
    hidden = [ev(0, "eval.scored", taskId="record", fixtureMissCount=0, passed=True)]
    found = judges.eval_events_alike(REQ, log, hidden)
    assert not found.ok and "different eval events" in found.message
    assert not judges.eval_events_alike(REQ, log, []).ok


def test_nothing_minted_passes() -> None:
    assert judges.nothing_minted(REQ, refusal(), "x").ok
    assert judges.nothing_minted(REQ, refusal(), "x", 3, 3).ok


def test_nothing_minted_fails_on_a_named_run_or_more_runs() -> None:
    assert not judges.nothing_minted(REQ, resp(400, {**REFUSAL, "runId": SOURCE_ID}), "x").ok
    located = resp(400, dict(REFUSAL), {"Location": "/runs/x"})
    assert not judges.nothing_minted(REQ, located, "x").ok
    assert not judges.nothing_minted(REQ, refusal(), "x", 3, 4).ok


def test_counter_delta_passes() -> None:
    assert judges.counter_delta(REQ, 7, 7, 0, "drift").ok
    assert judges.counter_delta(REQ, 7, 8, 1, "source").ok


def test_counter_delta_fails() -> None:
    assert not judges.counter_delta(REQ, 7, 8, 0, "drift").ok
    assert not judges.counter_delta(REQ, None, 8, 0, "drift").ok


SOURCE_CALLS = calls(2, AGENT, [INC, READ])
DRIFT_CALLS = calls(2, AGENT, [({"op": "inc", "key": "other"}, {"key": "other", "count": 1}),
                               READ])


def test_no_recorded_content_passes() -> None:
    content = judges.recorded_content(SOURCE_CALLS, AGENT)
    made = judges.recorded_content(DRIFT_CALLS, AGENT)
    snapshot = resp(200, {"runId": SOURCE_ID, "status": "completed"})
    assert ok_all(judges.no_recorded_content(REQ, [("snapshot", snapshot)], content, made))


def test_no_recorded_content_fails_on_a_recorded_call_under_any_name() -> None:
    content = judges.recorded_content(SOURCE_CALLS, AGENT)
    made = judges.recorded_content(DRIFT_CALLS, AGENT)
    leaky = resp(200, {"runId": SOURCE_ID, "provenance": [
        {"calls": [{"tool": COUNTER, "args": {"key": "recorded-fixtures", "op": "inc"}}]}]})
    found = failed(judges.no_recorded_content(REQ, [("snapshot", leaky)], content, made))
    assert found and "never made" in found[0].message


def test_no_recorded_content_fails_when_nothing_can_be_looked_for() -> None:
    content = judges.recorded_content(SOURCE_CALLS, AGENT)
    assert failed(judges.no_recorded_content(REQ, [("x", resp(200, {}))], content, content))


def test_no_derived_entries_passes() -> None:
    assert judges.no_derived_entries(REQ, '{"runId": "x"}', "snapshot").ok


def test_no_derived_entries_passes_a_vendor_member_naming_a_tool() -> None:
    """A bare `tool` member is no entry (a vendor member may name one)."""
    text = '{"payload": {"toolName": "c", "x-host": {"tool": "c"}}}'
    assert judges.no_derived_entries(REQ, text, "poll").ok


def test_no_derived_entries_fails() -> None:
    assert not judges.no_derived_entries(REQ, '{"toolResponses": []}', "snapshot").ok


def test_absent_passes() -> None:
    assert judges.absent(REQ, resp(404, {"error": "not_found", "message": "m"}), "export").ok


def test_absent_fails() -> None:
    assert not judges.absent(REQ, resp(200, {"entries": []}), "export").ok


def test_no_content_in_passes() -> None:
    assert judges.no_content_in(REQ, {"score": 1}, ["marker"], "summary").ok


def test_no_content_in_fails() -> None:
    assert not judges.no_content_in(REQ, {"note": "a marker"}, ["marker"], "summary").ok


def test_present_in_passes() -> None:
    assert judges.present_in(REQ, [{"a": "the marker"}], "marker", "control").ok


def test_present_in_fails() -> None:
    assert not judges.present_in(REQ, [], "marker", "control").ok


def test_unchanged_passes() -> None:
    assert judges.unchanged(REQ, {"a": 1}, {"a": 1}, "state").ok


def test_unchanged_fails() -> None:
    assert not judges.unchanged(REQ, {"a": 1}, {"a": 2}, "state").ok


def test_refused_registered_passes() -> None:
    assert ok_all(judges.refused_registered(REQ, refusal(status=404,
                                                         code="replay_source_missing"), "x"))


def test_refused_registered_fails() -> None:
    assert failed(judges.refused_registered(REQ, resp(201, {"runId": SOURCE_ID}), "fork"))
    assert failed(judges.refused_registered(REQ, refusal(code="eval_recorded_fixtures_gone",
                                                         status=404), "fork"))


def test_copies_gone_passes() -> None:
    assert ok_all(judges.copies_gone(REQ, [("acme/other", [{"response": "kept"}])],
                                     SOURCE_ID, ["erased"]))


def test_copies_gone_fails() -> None:
    assert failed(judges.copies_gone(REQ, [(SOURCE_ID, [{"response": "erased"}])],
                                     SOURCE_ID, ["erased"]))


_ID_PARTS = st.sampled_from(["acme/run-", "run-", "abcdefghij", "0123456789", "~2F", "%2F",
                             "\\u002f", "\x00", "/", "é", "x"])


@settings(max_examples=300, deadline=None)
@given(supplied=st.lists(_ID_PARTS, min_size=1, max_size=5).map("".join),
       text=st.lists(st.one_of(_ID_PARTS, st.sampled_from(['"', " ", "\n"])),
                     max_size=12).map("".join))
def test_echoed_finds_what_a_search_of_each_decoding_finds(supplied: str, text: str) -> None:
    """`echoed` searches the decodings joined (one search per window): the same windows as
    searching each decoding alone, a NUL in the id or the text included."""
    texts = judges._decodings(text)
    alone = sorted(w for w in judges._id_windows(supplied) if any(w in t for t in texts))
    assert judges.echoed(text, supplied) == alone


# -- judging differentially: what the refused id decides, not what varies anyway -------------

def _noisy(body: dict[str, Any], n: int, **headers: str) -> Response:
    """A refusal as a host with per-answer noise sends it: a request id, a correlation id."""
    noisy = {**body, "details": {"correlationId": f"c-{n:04d}"}}
    return resp(400, noisy, {"OpenWOP-Version": "2.0", "X-Request-Id": f"r-{n:04d}",
                             **headers})


def test_indistinguishable_passes() -> None:
    """What differs between the groups varies within each: noise, no oracle."""
    groups = [("unknown", [_noisy(REFUSAL, i) for i in range(3)]),
              ("foreign", [_noisy(REFUSAL, 10 + i) for i in range(3)])]
    assert ok_all(judges.indistinguishable(REQ, groups))


def test_indistinguishable_fails_on_a_header_that_separates_the_groups() -> None:
    groups = [("unknown", [_noisy(REFUSAL, i) for i in range(3)]),
              ("foreign", [_noisy(REFUSAL, 10 + i, **{"OpenWOP-Source-Scope": "other"})
                           for i in range(3)])]
    found = judges.indistinguishable(REQ, groups)
    assert not found.ok and "openwop-source-scope" in found.message


def test_indistinguishable_fails_on_a_body_member_that_separates_the_groups() -> None:
    groups = [("unknown", [_noisy(REFUSAL, i) for i in range(3)]),
              ("foreign", [_noisy({**REFUSAL, "message": "not yours"}, 10 + i)
                           for i in range(3)])]
    assert not judges.indistinguishable(REQ, groups).ok



def test_indistinguishable_fails_on_a_length_that_separates_the_groups() -> None:
    """A request id fresh on every answer is noise; one longer for another tenant's run
    tells the groups apart by its length."""
    groups = [("unknown", [_noisy(REFUSAL, i) for i in range(3)]),
              ("foreign", [_noisy(REFUSAL, 10 + i, **{"X-Request-Id": f"r-{i:04d}-extra"})
                           for i in range(3)])]
    found = judges.indistinguishable(REQ, groups)
    assert not found.ok and "length of header x-request-id" in found.message

def test_indistinguishable_fails_without_two_samples_a_group() -> None:
    assert not judges.indistinguishable(REQ, [("a", [refusal()]), ("b", [refusal()])]).ok


def test_uniform_sets_the_host_noise_aside() -> None:
    a, b = _noisy(REFUSAL, 1), _noisy(REFUSAL, 2)
    assert not judges.uniform(REQ, [("a", a), ("b", b)], exact=True).ok
    noise = judges.noise_of([_noisy(REFUSAL, 7), _noisy(REFUSAL, 8), _noisy(REFUSAL, 9)])
    assert {"header x-request-id", "body /details/correlationId", "body"} <= noise
    assert judges.uniform(REQ, [("a", a), ("b", b)], exact=True, noise=noise).ok
    other = _noisy({**REFUSAL, "message": "no such run"}, 3)
    assert not judges.uniform(REQ, [("a", a), ("other", other)], exact=True, noise=noise).ok


def test_latency_alike_passes() -> None:
    """Samples of one distribution."""
    import random
    rng = random.Random(7)
    a = [rng.uniform(0.001, 0.004) for _ in range(24)]
    b = [rng.uniform(0.001, 0.004) for _ in range(24)]
    assert judges.latency_alike(REQ, ("unknown", a), ("foreign", b)).ok


def test_latency_tail_alike_passes() -> None:
    import random
    rng = random.Random(3)
    a = [rng.uniform(0.001, 0.004) for _ in range(96)]
    b = [rng.uniform(0.001, 0.004) for _ in range(96)]
    assert judges.latency_tail_alike(REQ, ("unknown", a), ("foreign", b)).ok


def test_latency_tail_alike_fails_when_a_quarter_of_one_group_is_slow() -> None:
    """The medians hardly move; the tail tells."""
    import random
    rng = random.Random(3)
    a = [rng.uniform(0.001, 0.004) for _ in range(96)]
    b = [rng.uniform(0.001, 0.004) + (0.03 if i % 4 == 0 else 0) for i in range(96)]
    assert judges.latency_alike(REQ, ("unknown", a[:24]), ("foreign", b[:24])).ok
    found = judges.latency_tail_alike(REQ, ("unknown", a), ("foreign", b))
    assert not found.ok and "foreign is refused slow more often" in found.message


def test_a_tail_on_a_busy_machine_is_timed_afresh() -> None:
    """On a quiet machine no first sample lies beyond the tail line, so nothing more is
    timed. On a busy one both groups have slow samples: a quarter of one group 30 ms slower
    then differs little in 24 samples (7 beyond the line against 3, Fisher p about 0.29,
    which a screen on the difference let pass unjudged), yet a tail exists, so it is timed
    afresh."""
    import random
    rng = random.Random(3)
    quiet_a = [rng.uniform(0.001, 0.004) for _ in range(24)]
    quiet_b = [rng.uniform(0.001, 0.004) for _ in range(24)]
    assert not judges.tail_seen(quiet_a, quiet_b)
    busy_a = [0.002 + (0.05 if i in (2, 9, 17) else 0) for i in range(24)]  # 3 stalled
    busy_b = [0.002 + (0.03 if i % 4 == 0 else 0) + (0.05 if i == 13 else 0)
              for i in range(24)]  # 6 slow, and 1 stalled
    line = sorted(busy_a + busy_b)[36] + judges.LATENCY_MIN_EFFECT
    beyond = sum(x > line for x in busy_a), sum(x > line for x in busy_b)
    assert beyond == (3, 7) and judges.fisher_exact(3, 24, 7, 24) > 0.2
    assert judges.tail_seen(busy_a, busy_b)


def _tail_findings() -> tuple[Finding, Finding, Finding]:
    import random
    rng = random.Random(3)
    a = [rng.uniform(0.001, 0.004) for _ in range(96)]
    b = [rng.uniform(0.001, 0.004) + (0.03 if i % 4 == 0 else 0) for i in range(96)]
    median = judges.latency_alike(REQ, ("unknown", a[:24]), ("foreign", b[:24]))
    even_tail = judges.latency_tail_alike(REQ, ("unknown", a), ("foreign", a[::-1]))
    slow_tail = judges.latency_tail_alike(REQ, ("unknown", a), ("foreign", b))
    assert median.ok and even_tail.ok and not slow_tail.ok
    return median, even_tail, slow_tail


def test_latency_and_tail_passes() -> None:
    """A pair of groups gives one finding whether or not its tail was timed, so a row
    judges alike (same digest) on a quiet machine and a busy one."""
    median, even_tail, _ = _tail_findings()
    untimed = judges.latency_and_tail(median, None)
    assert untimed.ok and "no tail was timed" in untimed.message
    timed = judges.latency_and_tail(median, even_tail)
    assert timed.ok and set(timed.observation) == {"medians", "tail"}


def test_latency_and_tail_fails_on_the_medians_or_the_tail() -> None:
    median, even_tail, slow_tail = _tail_findings()
    told = judges.latency_and_tail(median, slow_tail)
    assert not told.ok and "refused slow more often" in told.message
    assert set(told.observation) == {"medians", "tail"}
    slower = judges.latency_alike(REQ, ("unknown", [0.002] * 24), ("foreign", [0.012] * 24))
    assert not slower.ok and judges.latency_and_tail(slower, even_tail) == slower


def test_fisher_exact_matches_known_values() -> None:
    assert judges.fisher_exact(3, 4, 1, 4) == pytest.approx(0.4857, abs=1e-4)  # tea tasting
    assert judges.fisher_exact(2, 4, 2, 4) == pytest.approx(1.0)
    assert judges.fisher_exact(24, 24, 0, 24) < 1e-12


def test_frequencies_alike_passes() -> None:
    """A header on some answers of both groups, at random, is noise."""
    import random
    rng = random.Random(5)

    def ans() -> Response:
        extra = {"X-Served-By": "canary"} if rng.random() < 0.3 else {}
        return resp(400, REFUSAL, {"OpenWOP-Version": "2.0", **extra})
    groups = [("unknown", [ans() for _ in range(64)]), ("foreign", [ans() for _ in range(64)])]
    found = judges.frequencies_alike(REQ, groups)
    assert found.ok and "no value that recurs shows more often" in found.message


def test_frequencies_alike_fails_on_a_header_on_a_third_of_one_group() -> None:
    plain = [refusal() for _ in range(64)]
    marked = [resp(400, REFUSAL, {"OpenWOP-Version": "2.0", "X-Cache": "hit"}) if i % 3 == 0
              else refusal() for i in range(64)]
    assert judges.uneven([("unknown", plain[:4]), ("foreign", marked[:4])])
    assert judges.indistinguishable(REQ, [("unknown", plain[:4]), ("foreign", marked[:4])]).ok
    found = judges.frequencies_alike(REQ, [("unknown", plain), ("foreign", marked)])
    assert not found.ok and "x-cache = 'hit' (more often on foreign" in found.message
    assert not judges.uneven([("unknown", plain[:4]), ("foreign", plain[4:8])])


def test_latency_alike_fails_when_one_group_is_slower() -> None:
    import random
    rng = random.Random(7)
    a = [rng.uniform(0.001, 0.004) for _ in range(24)]
    b = [x + 0.005 for x in (rng.uniform(0.001, 0.004) for _ in range(24))]
    found = judges.latency_alike(REQ, ("unknown", a), ("foreign", b))
    assert not found.ok and "tells the groups apart" in found.message


def test_latency_alike_passes_a_difference_too_small_to_use() -> None:
    a = [0.000010 + i * 1e-7 for i in range(24)]
    b = [0.000020 + i * 1e-7 for i in range(24)]  # significant, and 10 microseconds
    assert judges.latency_alike(REQ, ("unknown", a), ("foreign", b)).ok


def test_latency_alike_fails_on_too_few_samples() -> None:
    assert not judges.latency_alike(REQ, ("a", [0.1] * 3), ("b", [0.1] * 3)).ok


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=8, max_size=30),
       st.lists(st.floats(0, 1, allow_nan=False), min_size=8, max_size=30))
def test_mann_whitney_is_symmetric_and_bounded(a: list[float], b: list[float]) -> None:
    u_ab, p_ab = judges.mann_whitney(a, b)
    u_ba, p_ba = judges.mann_whitney(b, a)
    assert 0 <= p_ab <= 1 and abs(p_ab - p_ba) < 1e-9
    assert abs(u_ab + u_ba - len(a) * len(b)) < 1e-9


def test_mann_whitney_false_alarms_at_about_its_level() -> None:
    """Samples of one distribution: the judge's threshold is crossed about as often as
    its level says (a loose bound; the documented rate is LATENCY_ALPHA)."""
    import random
    rng = random.Random(0)
    runs, alarms = 2000, 0
    for _ in range(runs):
        a = [rng.expovariate(1.0) for _ in range(24)]
        b = [rng.expovariate(1.0) for _ in range(24)]
        alarms += judges.mann_whitney(a, b)[1] < 0.01
    assert alarms / runs < 0.02


def test_no_echo_sets_aside_text_every_refusal_carries() -> None:
    tenant = "validation-errors"
    supplied = f"{tenant}/run-0252unknown0000000"
    control = judges.control_value(supplied)
    assert not set(judges._id_windows(supplied)) & set(judges._id_windows(control))
    r = refusal()  # "validation_error" shares runs of characters with the tenant's name
    assert not judges.no_echo(REQ, r, [supplied], "plain").ok
    assert judges.no_echo(REQ, r, [supplied], "with a control", [refusal()]).ok


def test_no_echo_fails_on_an_echo_a_control_does_not_carry() -> None:
    supplied = "validation-errors/run-0252unknown0000000"
    echoing = refusal(f"cannot use {supplied}")
    control = refusal(f"cannot use {judges.control_value(supplied)}")
    assert not judges.no_echo(REQ, echoing, [supplied], "echo", [control]).ok


def test_no_new_runs_passes() -> None:
    assert judges.no_new_runs(REQ, ["acme/a", "acme/b"], ["acme/b"], "refusal").ok


def test_no_new_runs_sets_aside_runs_of_workflows_no_refusal_makes() -> None:
    before = {"acme/a": "eval:s"}
    after = {"acme/a": "eval:s", "acme/b": "conformance-noop", "acme/c": None}
    found = judges.no_new_runs(REQ, before, after, "x", frozenset({"conformance-noop"}))
    assert not found.ok and "acme/c" in found.message and "acme/b" not in found.message
    quiet = {"acme/a": "eval:s", "acme/b": "conformance-noop"}
    found = judges.no_new_runs(REQ, before, quiet, "x", frozenset({"conformance-noop"}))
    assert found.ok and "1 new run(s) of other workflows set aside" in found.message
    assert not judges.no_new_runs(REQ, before, quiet, "x").ok


def test_no_new_runs_fails_when_a_refusal_left_a_run() -> None:
    found = judges.no_new_runs(REQ, ["acme/a"], ["acme/a", "acme/c"], "refusal")
    assert not found.ok and "acme/c" in found.message
    assert not judges.no_new_runs(REQ, None, ["acme/a"], "refusal").ok


_CALLS = [(INC[0], INC[1]), (READ[0], READ[1])]


def test_no_entries_on_wire_passes() -> None:
    """A run's own tool events carry its calls' inputs and answers apart."""
    log = {"events": eval_log()}
    assert ok_all(judges.no_entries_on_wire(REQ, [("poll", log)], _CALLS, _CALLS))


def test_no_entries_on_wire_fails_an_entry_under_other_names() -> None:
    snapshot = {"runId": SOURCE_ID, "provenance": [{"in": INC[0], "out": INC[1]}]}
    found = judges.no_entries_on_wire(REQ, [("snapshot", snapshot)], _CALLS, _CALLS)
    assert failed(found) and "recorded content" in failed(found)[0].message


def test_no_entries_on_wire_fails_an_entry_inside_a_string_or_a_header() -> None:
    import base64
    import json as _json
    entries = _json.dumps([{"tool": COUNTER, "args": READ[0], "response": READ[1]}])
    as_string = {"runId": SOURCE_ID, "metadata": {"debug": entries}}
    assert failed(judges.no_entries_on_wire(REQ, [("string", as_string)], _CALLS, _CALLS))
    header = resp(200, {"runId": SOURCE_ID}, {"X-Debug": base64.b64encode(
        entries.encode()).decode()})
    assert failed(judges.no_entries_on_wire(REQ, [("header", header)], _CALLS, _CALLS))



@pytest.mark.parametrize("pack", ["hex", "zlib-base64", "gzip-base64", "urlsafe", "percent"])
def test_no_entries_on_wire_fails_entries_packed_in_a_header(pack: str) -> None:
    import base64
    import gzip
    import json as _json
    import zlib
    from urllib.parse import quote
    raw = _json.dumps([{"tool": COUNTER, "args": READ[0], "response": READ[1]}]).encode()
    packed = {"hex": raw.hex(), "zlib-base64": base64.b64encode(zlib.compress(raw)).decode(),
              "gzip-base64": base64.b64encode(gzip.compress(raw)).decode(),
              "urlsafe": base64.urlsafe_b64encode(raw).decode(),
              "percent": quote(raw.decode(), safe="")}[pack]
    header = resp(200, {"runId": SOURCE_ID}, {"X-Fixtures": packed})
    assert failed(judges.no_entries_on_wire(REQ, [("header", header)], _CALLS, _CALLS))
    plain = resp(200, {"runId": SOURCE_ID}, {"X-Fixtures": raw.hex()[:40]})
    assert ok_all(judges.no_entries_on_wire(REQ, [("header", plain)], _CALLS, _CALLS))

def test_no_entries_on_wire_fails_entries_in_an_event_stream_comment_or_after_words() -> None:
    import json as _json
    entries = _json.dumps([{"name": COUNTER, "input": READ[0], "result": READ[1]}])
    frame = "id: 1\nevent: eval.started\ndata: {\"type\": \"eval.started\"}\n\n"
    sse = {"Content-Type": "text/event-stream"}
    for body in (f": served {entries}\n\n{frame}", f"{frame}event: x\rid: {entries}\r\r"):
        stream = resp(200, None, sse, text=body)
        assert failed(judges.no_entries_on_wire(REQ, [("stream", stream)], _CALLS, _CALLS))
    clean = resp(200, None, sse, text=": ping\n\n" + frame)
    assert ok_all(judges.no_entries_on_wire(REQ, [("stream", clean)], _CALLS, _CALLS))
    worded = {"runId": SOURCE_ID, "note": f"served from cache {entries} at boot"}
    assert failed(judges.no_entries_on_wire(REQ, [("note", worded)], _CALLS, _CALLS))


def test_no_entries_on_wire_fails_a_call_the_run_never_made() -> None:
    answer = {"key": "recorded-fixtures", "count": 7}
    recorded = [INC, (READ[0], answer)]
    drift = {"events": [ev(0, "eval.started", note=answer)]}
    assert failed(judges.no_entries_on_wire(REQ, [("drift", drift)], recorded, [INC]))


# -- alike: the differential judge of refusals, asking again --------------------------------

def _asker(make: Callable[[int], Response]) -> tuple[Callable[[], Response], list[int]]:
    asked: list[int] = []

    def ask() -> Response:
        asked.append(1)
        return make(len(asked) * 7 + id(asked) % 5)
    return ask, asked


def test_alike_asks_again_and_passes_when_what_differed_is_noise() -> None:
    from refsim.check.differential import ALIKE_SAMPLES, alike
    unknown, asked_u = _asker(lambda n: _noisy(REFUSAL, n))
    foreign, asked_f = _asker(lambda n: _noisy(REFUSAL, 1000 + n))
    found = alike(REQ, [("unknown", unknown), ("foreign", foreign)],
                  [_noisy(REFUSAL, 1), _noisy(REFUSAL, 2)])
    assert found.ok, found.message
    assert len(asked_u) == len(asked_f) == ALIKE_SAMPLES
    assert "asked again" in found.message


def test_alike_asks_more_before_a_value_that_only_happened_to_stay_apart_counts() -> None:
    """A header that takes one of two values at random stays apart in 4 answers each once
    in 128 tries (seen over HTTP: members in a random order): 4 + 16 answers tell."""
    from refsim.check.differential import ALIKE_CONFIRM, ALIKE_SAMPLES, alike

    def flips(first: str) -> Callable[[], Response]:
        asked: list[int] = []

        def ask() -> Response:
            asked.append(1)
            value = first if len(asked) <= ALIKE_SAMPLES else "ab"[len(asked) % 2]
            return _noisy(REFUSAL, len(asked), **{"X-Shard": value})
        return ask
    found = alike(REQ, [("unknown", flips("a")), ("foreign", flips("b"))],
                  [_noisy(REFUSAL, 1, **{"X-Shard": "a"}),
                   _noisy(REFUSAL, 2, **{"X-Shard": "b"})])
    assert found.ok, found.message
    assert f"asked again {ALIKE_SAMPLES + ALIKE_CONFIRM} times" in found.message


def test_alike_fails_on_what_stays_apart_when_asked_again() -> None:
    from refsim.check.differential import alike
    unknown, _ = _asker(lambda n: _noisy(REFUSAL, n))
    foreign, _ = _asker(lambda n: _noisy(REFUSAL, n, **{"X-Scope": "tenant"}))
    found = alike(REQ, [("unknown", unknown), ("foreign", foreign)],
                  [_noisy(REFUSAL, 1), _noisy(REFUSAL, 2, **{"X-Scope": "tenant"})])
    assert not found.ok and "header x-scope" in found.message


def test_alike_does_not_ask_again_when_first_sight_is_alike() -> None:
    from refsim.check.differential import alike
    unknown, asked = _asker(lambda n: refusal())
    assert alike(REQ, [("a", unknown), ("b", unknown)], [refusal(), refusal()]).ok
    assert asked == []


def test_alike_does_not_ask_again_after_an_acceptance() -> None:
    from refsim.check.differential import alike
    ask, asked = _asker(lambda n: refusal())
    found = alike(REQ, [("a", ask), ("b", ask)], [refusal(), resp(201, {"runId": SOURCE_ID})])
    assert not found.ok and asked == []


# -- the machine's judges (refsim.testing.stateful judges through these, as the rows do) ------

def test_refused_as_passes() -> None:
    assert ok_all(judges.refused_as(REQ, refusal(), "unusable"))


def test_refused_as_fails_on_another_status_or_code() -> None:
    assert failed(judges.refused_as(REQ, resp(201, {"runId": SOURCE_ID}), "unusable"))
    assert failed(judges.refused_as(REQ, refusal(code="not_found", status=404), "unusable"))


def test_answered_passes() -> None:
    assert ok_all(judges.answered(REQ, resp(200, {}), 200, "resolving"))


def test_answered_fails() -> None:
    assert failed(judges.answered(REQ, resp(409, {}), 200, "resolving"))


def test_code_registered_passes() -> None:
    assert ok_all(judges.code_registered(REQ, refusal()))
    assert ok_all(judges.code_registered(REQ, resp(200, {})))  # a success needs no code


def test_code_registered_fails_on_a_code_unregistered_or_at_another_status() -> None:
    assert failed(judges.code_registered(REQ, refusal(code="bad_source")))
    assert failed(judges.code_registered(REQ, refusal(status=404)))


def test_refused_registered_any_passes() -> None:
    assert ok_all(judges.refused_registered_any(REQ, refusal(), "a fork of a gone copy"))
    assert ok_all(judges.refused_registered_any(
        REQ, refusal(status=404, code="not_found"), "a fork of a gone copy"))


def test_refused_registered_any_fails_on_a_success_or_an_unregistered_code() -> None:
    assert failed(judges.refused_registered_any(REQ, resp(201, {"runId": "x"}), "a fork"))
    assert failed(judges.refused_registered_any(REQ, refusal(code="gone_copy"), "a fork"))


def test_no_foreign_run_ids_passes() -> None:
    others = [("acme", SOURCE_ID, (OPAQUE,)), ("globex", FOREIGN_ID, ("run-zyxwvutsrq98",))]
    assert ok_all(judges.no_foreign_run_ids(REQ, f'{{"runId": "{SOURCE_ID}"}}', "acme",
                                            others))


def test_no_foreign_run_ids_fails_on_another_tenants_id_in_any_form() -> None:
    others = [("globex", FOREIGN_ID, tuple(judges.id_forms(FOREIGN_ID)))]
    found = judges.no_foreign_run_ids(REQ, f"see {project(FOREIGN_ID)}", "acme", others)
    assert failed(found) and FOREIGN_ID in found.message


def test_scored_once_passes() -> None:
    assert ok_all(judges.scored_once(REQ, eval_log()))


def test_scored_once_fails_on_none_or_two() -> None:
    log = eval_log()
    assert failed(judges.scored_once(REQ, [e for e in log if e["type"] != "eval.scored"]))
    assert failed(judges.scored_once(REQ, [*log, *judges.of_type(log, "eval.scored")]))


def test_scored_miss_count_passes() -> None:
    assert ok_all(judges.scored_miss_count(REQ, eval_log(misses=2), "record", 2))


def test_scored_miss_count_fails_on_another_count_or_a_bool() -> None:
    assert failed(judges.scored_miss_count(REQ, eval_log(misses=1), "record", 0))
    log = eval_log()
    judges.of_type(log, "eval.scored")[0]["payload"]["fixtureMissCount"] = True
    assert failed(judges.scored_miss_count(REQ, log, "record", 1))


def test_scored_passed_passes() -> None:
    assert ok_all(judges.scored_passed(REQ, eval_log(passed=False), "record", False))


def test_scored_passed_fails() -> None:
    assert failed(judges.scored_passed(REQ, eval_log(passed=True), "record", False))
    assert failed(judges.scored_passed(REQ, eval_log(), "other-task", True))










def test_suite_taken_passes() -> None:
    assert ok_all(judges.suite_taken(REQ, True, "s"))


def test_suite_taken_fails() -> None:
    assert failed(judges.suite_taken(REQ, False, "s"))


# -- controls and counts (the invariants' and the demo's verdicts) ---------------------------

def test_completed_passes() -> None:
    assert ok_all(judges.completed(REQ, True, "the source run"))


def test_completed_fails() -> None:
    assert failed(judges.completed(REQ, False, "the source run"))


def test_run_status_is_passes() -> None:
    assert ok_all(judges.run_status_is(REQ, "waiting-input", "waiting-input", "B's run"))


def test_run_status_is_fails() -> None:
    assert failed(judges.run_status_is(REQ, "completed", "waiting-input", "B's run"))
    assert failed(judges.run_status_is(REQ, None, "waiting-input", "B's run"))


def test_readable_passes() -> None:
    assert ok_all(judges.readable(REQ, {"tasks": []}, "the summary"))


def test_readable_fails() -> None:
    assert failed(judges.readable(REQ, None, "the summary"))


def test_count_is_passes() -> None:
    assert ok_all(judges.count_is(REQ, 2, 2, "copies"))


def test_count_is_fails() -> None:
    found = judges.count_is(REQ, 4, 3, "acme's live counter k1")
    assert failed(found) and found.message == "acme's live counter k1: 4, expected 3"
    assert failed(judges.count_is(REQ, 1, 0, "derived copies of an erased source"))


def test_at_least_passes() -> None:
    assert ok_all(judges.at_least(REQ, 3, 1, "resolutions"))


def test_at_least_fails() -> None:
    assert failed(judges.at_least(REQ, 0, 1, "resolutions"))


def test_same_as_passes() -> None:
    assert ok_all(judges.same_as(REQ, {"b": 1, "a": [2]}, {"a": [2], "b": 1}, "the entry"))


def test_same_as_fails() -> None:
    assert failed(judges.same_as(REQ, {"count": 41}, {"count": 42}, "the entry"))
    entries = [["counter", {"op": "inc"}, {"count": 1}, False]]
    assert failed(judges.same_as(REQ, entries * 2, entries, "an entry too many"))
    assert failed(judges.same_as(REQ, [1, 2], [2, 1], "another order"))


def test_done_passes() -> None:
    assert ok_all(judges.done(REQ, True, "the source was deleted"))


def test_done_fails() -> None:
    assert failed(judges.done(REQ, False, "the source was deleted"))


def test_any_present_in_passes() -> None:
    assert ok_all(judges.any_present_in(REQ, [{"h": f"Bearer {SECRET}"}], ["x", SECRET], "log"))


def test_any_present_in_fails() -> None:
    assert failed(judges.any_present_in(REQ, [{"h": "Bearer other"}], ["x", SECRET], "log"))


def test_nothing_of_run_passes() -> None:
    assert ok_all(judges.nothing_of_run(REQ, refusal(), OPAQUE, [{"count": 7}], "B's try"))


def test_nothing_of_run_fails_on_the_id_or_its_content() -> None:
    assert failed(judges.nothing_of_run(REQ, resp(200, {"runId": SOURCE_ID}), OPAQUE, [],
                                        "B's try"))
    assert failed(judges.nothing_of_run(REQ, resp(200, {"out": {"count": 7}}), OPAQUE,
                                        [{"count": 7}], "B's try"))


def test_event_validates_passes() -> None:
    log = eval_log(fixture_runs={"record": SOURCE_ID})
    assert ok_all(judges.event_validates(REQ, log, "eval.started",
                                         "eval-events.schema.json#/$defs/evalStarted", "x"))


def test_event_validates_fails_on_none_or_a_bad_payload() -> None:
    log = eval_log(fixture_runs={"record": SOURCE_ID})
    schema = "eval-events.schema.json#/$defs/evalStarted"
    assert failed(judges.event_validates(REQ, log[2:], "eval.started", schema, "x"))
    judges.of_type(log, "eval.started")[0]["payload"]["fixtureRuns"] = "not a map"
    assert failed(judges.event_validates(REQ, log, "eval.started", schema, "x"))


def test_erased_as_reported_passes() -> None:
    r = resp(200, {"erased": True, "derivedCopiesErased": 2})
    assert ok_all(judges.erased_as_reported(REQ, r, 2))


def test_erased_as_reported_fails_on_a_miscount_or_no_erasure() -> None:
    assert failed(judges.erased_as_reported(REQ, resp(200, {"erased": True,
                                                           "derivedCopiesErased": 1}), 2))
    assert failed(judges.erased_as_reported(REQ, resp(404, {"error": "not_found"}), 0))


def test_no_outcomes_on_wire_passes() -> None:
    log = [e for e in eval_log() if e["type"] != "agent.tool-returned"]
    assert ok_all(judges.no_outcomes_on_wire(REQ, log, AGENT, "after erasure"))


def test_no_outcomes_on_wire_fails() -> None:
    assert failed(judges.no_outcomes_on_wire(REQ, eval_log(), AGENT, "after erasure"))


def test_byte_identical_passes() -> None:
    assert ok_all(judges.byte_identical(REQ, b"{}", b"{}", "the refusal"))


def test_byte_identical_fails() -> None:
    assert failed(judges.byte_identical(REQ, b"{ }", b"{}", "the refusal"))


def test_succeeded_passes() -> None:
    assert ok_all(judges.succeeded(REQ, resp(201, {"runId": "x"}), 201, "setup 1"))
    assert ok_all(judges.succeeded(REQ, resp(204, None), None, "setup 1"))  # any 2xx


def test_succeeded_fails() -> None:
    assert failed(judges.succeeded(REQ, resp(200, {}), 201, "setup 1"))
    assert failed(judges.succeeded(REQ, refusal(), None, "setup 1"))


def test_could_not_go_on_passes() -> None:
    """It has no passing form: a check that stopped short never passes by omission."""
    assert not judges.could_not_go_on(REQ, "the source run", "never created").ok


def test_could_not_go_on_fails() -> None:
    found = judges.could_not_go_on(REQ, "the source run", "never created")
    assert failed(found) and found.message == "the source run: never created"


def test_leg_passed_passes() -> None:
    assert ok_all(judges.leg_passed(REQ, "openwop.requirement.0252.shape", "executed-pass",
                                    True))


def test_leg_passed_fails() -> None:
    assert failed(judges.leg_passed(REQ, "openwop.requirement.0252.shape", "executed-fail",
                                    False))


def test_summary_reread_alike_passes() -> None:
    """The same report in another form (member order, 0.0 for 0) is the same report."""
    first = {"passed": False, "tasks": [{"taskId": "a", "fixtureMissCount": 1, "passed": False,
                                         "score": 0}]}
    again = {"tasks": [{"score": 0.0, "passed": False, "fixtureMissCount": 1.0,
                        "taskId": "a"}], "passed": False}
    assert judges.summary_reread_alike(REQ, first, again).ok


def test_summary_reread_alike_fails_a_miss_forgotten_on_the_second_read() -> None:
    first = {"passed": False, "tasks": [{"taskId": "a", "fixtureMissCount": 1, "passed": False,
                                         "score": 0}]}
    again = {"passed": False, "tasks": [{"taskId": "a", "fixtureMissCount": 0, "passed": False,
                                         "score": 0}]}
    found = judges.summary_reread_alike(REQ, first, again)
    assert not found.ok and "read again reports otherwise" in found.message


UUID_A, UUID_B = "3f2b8c1e-9d4a-4b7e-8c21-5a6f0e9d1b33", "9a1c0d7e-2b3f-4c5d-8e6f-7a8b9c0d1e2f"


def test_not_asked_passes() -> None:
    assert judges.not_asked("r", "a case", [UUID_A, UUID_B]).ok


def test_not_asked_fails() -> None:
    """Said not to apply where an id does carry a tenant part: refsim's own slip."""
    found = judges.not_asked("r", "a case", [UUID_A, "acme/run-0123456789abcdef"])
    assert not found.ok and "carries a tenant part" in found.message


def test_no_echo_passes_unsearched_on_an_answer_byte_for_byte_another_values() -> None:
    value = "acme/run-0123456789abcdef"
    echoing = Response.of_bytes(400, {"Content-Type": "application/json"}, json.dumps(
        {"error": "validation_error", "message": value}).encode())
    assert judges.no_echo("r", echoing, [value], "x", same_as=echoing).ok
    other = Response.of_bytes(400, {"Content-Type": "application/json"},
                              b'{"error":"validation_error"}')
    assert not judges.no_echo("r", echoing, [value], "x", same_as=other).ok


# The content judges' short cuts (a shape before an encoding, one search over the joined
# decodings) find exactly what the plain search finds: drawn documents, against the plain
# search written out here.
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(
    [1.0, 2.5]) | st.sampled_from(["a", "b", "refund", "\x00", "\ufffe", "x\x00y"]),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
        st.sampled_from(["args", "outcome", "k", "v"]), kids, max_size=3), max_leaves=12)


def _entries_plainly(documents: list[tuple[str, Any]], calls: list[tuple[Any, Any]],
                     made: list[tuple[Any, Any]]) -> list[tuple[list[str], list[str]]]:
    from refsim.domain.canonical import canonical
    pairs = {(canonical(i), canonical(o)) for i, o in calls}
    allowed = {canonical(v) for call in made for v in call}
    loose = {canonical(v) for call in calls for v in call
             if isinstance(v, dict | list) and v and canonical(v) not in allowed}
    out = []
    for _, doc in documents:
        entries: set[str] = set()
        strays: set[str] = set()
        for part in judges._readable(doc):
            for value in judges._unpacked(part):
                if isinstance(value, dict) and len(value) >= 2:
                    members = {canonical(v) for v in value.values()}
                    entries |= {f"{i} -> {o}" for i, o in pairs if i in members and o in members}
                if isinstance(value, dict | list) and value and canonical(value) in loose:
                    strays.add(canonical(value))
        out.append((sorted(entries), sorted(strays)))
    return out


@settings(max_examples=300, deadline=None)
@given(docs=st.lists(_JSON, min_size=1, max_size=3),
       calls=st.lists(st.tuples(_JSON, _JSON), min_size=1, max_size=3),
       made=st.lists(st.tuples(_JSON, _JSON), max_size=2))
def test_no_entries_on_wire_finds_what_the_plain_search_finds(
        docs: list[Any], calls: list[tuple[Any, Any]], made: list[tuple[Any, Any]]) -> None:
    documents = [(f"doc {n}", d) for n, d in enumerate(docs)]
    # and each again as JSON text inside a member: the judge parses what it carries
    documents += [(f"text {n}", {"note": json.dumps(d)}) for n, d in enumerate(docs)]
    found = judges.no_entries_on_wire("r", documents, calls, made)
    got = [(f.observation["entries"], f.observation["strays"]) for f in found]
    assert got == _entries_plainly(documents, calls, made)


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.sampled_from("ab~%0\x00\ufffe\U0010fffeZ"), max_size=40),
       supplied=st.text(st.sampled_from("ab0\x00\ufffe\U0010fffe\U0010ffff\ufdd0"),
                        min_size=4, max_size=14))
def test_echoed_joins_the_decodings_apart_whichever_separator_the_id_holds(
        text: str, supplied: str) -> None:
    """The id may hold NUL and the other separators too: one it lacks joins the decodings,
    or, where it holds them all, each decoding is searched alone."""
    texts = judges._decodings(text + supplied[1:-1])
    plain = sorted(w for w in judges._id_windows(supplied) if any(w in t for t in texts))
    # by the text's runs (a short text, an id of many windows), and by searches
    assert judges.echoed(text + supplied[1:-1], supplied) == plain
    with mock.patch.object(judges_echo, "_GRAMS_TEXT_MAX", 0):
        assert judges.echoed(text + supplied[1:-1], supplied) == plain


@settings(max_examples=200, deadline=None)
@given(supplied=st.lists(_ID_PARTS, min_size=2, max_size=6).map("".join),
       text=st.lists(st.one_of(_ID_PARTS, st.sampled_from(['"', " ", "\n", "%"])),
                     max_size=20).map("".join))
def test_echoed_by_runs_finds_what_each_search_finds(supplied: str, text: str) -> None:
    """The runs of the text looked up in the windows (the short cut for a refusal and an id
    of many windows): the windows a search of each decoding finds, shorter forms' included."""
    texts = judges._decodings(text)
    plain = sorted(w for w in judges._id_windows(supplied) if any(w in t for t in texts))
    with mock.patch.object(judges_echo, "_GRAMS_FROM", 0):
        assert judges.echoed(text, supplied) == plain


def test_no_entries_on_wire_reads_1_0_as_1() -> None:
    """One JSON value, written either way: the shape short cut keeps every number alike."""
    found = judges.no_entries_on_wire("r", [("doc", {"in": 1.0, "out": {"a": 2.0}})],
                                      [(1, {"a": 2})], [])
    assert not found[0].ok and found[0].observation["entries"] == ['1 -> {"a":2}']
