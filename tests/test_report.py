"""The JSON, JUnit and text reports, and the verdict's exit code."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import refsim
from refsim.check import report
from refsim.check.findings import Disposition, Row, fail, ok
from refsim.check.scenario import ScenarioConfig, run_scenario

WHEN = "2026-10-27T12:00:00Z"
HOST = "refsim:reference"
SCN = "v2-eval-recorded-fixtures"
P = "openwop.requirement.0252."
S = "refsim.requirement.0252."


def passing() -> Row:
    return Row.judged(P + "shape", SCN, [ok(P + "shape", "vector a validates"),
                                         ok(P + "shape", "vector b is refused")])


def failing() -> Row:
    return Row.judged(P + "source-replayed", SCN, [
        ok(P + "source-replayed", "the replay: 201"),
        fail(P + "source-replayed", "call 0: the replayed outcome differs from the source's"),
        fail(P + "source-replayed", "the replay: the live counter moved from 1 to 2")])


def skipped() -> Row:
    return Row.unjudged(S + "per-trial-reset", "examples", Disposition.SKIPPED,
                        "the suite declares one trial", check_id="example:trials")


def inapplicable() -> Row:
    return Row.unjudged(P + "drift-fails-closed", SCN, Disposition.INAPPLICABLE,
                        "the host does not advertise agents.evalSuite.recordedFixtures")


def blocked() -> Row:
    return Row.unjudged(P + "source-uniform", SCN, Disposition.BLOCKED,
                        "no second tenant's API key (OPENWOP_TEST_TENANT_B_API_KEY)")


def invariant_row() -> Row:
    return Row.judged(S + "echo-verbatim", "invariants",
                      [ok(S + "echo-verbatim", "eval.started.fixtureRuns echoes the map")],
                      check_id="eval-fixture-runs-echoed")


def mixed() -> list[Row]:
    return [passing(), failing(), skipped(), inapplicable(), blocked(), invariant_row()]


def keys_of(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value).union(*(keys_of(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(keys_of(v) for v in value)) if value else set()
    return set()


# -- JSON -----------------------------------------------------------------------------------------

def test_json_shape() -> None:
    doc = report.to_json(mixed(), HOST, WHEN)
    assert set(doc) == {"tool", "host", "generatedAt", "notACertification", "results",
                        "detail", "inProcessOnly", "rowsSha256"}
    assert doc["tool"] == {"name": "refsim", "version": refsim.__version__}
    assert doc["host"] == {"label": HOST}
    assert doc["generatedAt"] == WHEN
    assert "not" in doc["notACertification"] and "certification" in doc["notACertification"]
    assert re.fullmatch(r"[0-9a-f]{64}", doc["rowsSha256"])
    json.dumps(doc)  # serialisable as it stands


def test_json_totals_add_up_to_the_rows() -> None:
    rows = mixed()
    totals = report.to_json(rows, HOST, WHEN)["results"]["totals"]
    assert totals == {"executedPass": 2, "executedFail": 1, "skipped": 1, "inapplicable": 1,
                      "blocked": 1}
    assert sum(totals.values()) == len(rows)


def test_json_rows_carry_ids_dispositions_and_counts() -> None:
    rows = mixed()
    out = report.to_json(rows, HOST, WHEN)["results"]["requirements"]
    assert len(out) == len(rows)
    for got, row in zip(out, rows, strict=True):
        assert set(got) == {"requirementId", "scenarioId", "checkId", "disposition", "detail",
                            "assertionCount"}
        assert got["requirementId"] == row.requirement_id and got["requirementId"]
        assert got["disposition"] == row.disposition.value
        assert got["assertionCount"] == row.assertion_count
    assert out[1]["assertionCount"] == 3 and out[2]["checkId"] == "example:trials"
    assert out[5]["checkId"] == "eval-fixture-runs-echoed"


def test_json_non_pass_detail_lists_every_non_pass_row_with_its_reason() -> None:
    doc = report.to_json(mixed(), HOST, WHEN)
    non_pass = doc["detail"]["nonPass"]
    assert [n["disposition"] for n in non_pass] == [
        "executed-fail", "skipped", "inapplicable", "blocked"]
    assert all(n["reason"] and n["requirementId"] and n["checkId"] for n in non_pass)
    assert "outcome differs" in non_pass[0]["reason"]


def test_json_is_never_signed() -> None:
    doc = report.to_json(mixed(), HOST, WHEN, assumptions=[{"name": "gone-copy-code",
                                                            "value": "run_expired"}])
    assert "signature" not in keys_of(doc) and "verifierSignature" not in keys_of(doc)


def test_json_rows_hash_is_stable_and_moves_with_a_row() -> None:
    rows = mixed()
    first = report.to_json(rows, HOST, WHEN)["rowsSha256"]
    assert report.to_json(list(rows), HOST, WHEN)["rowsSha256"] == first
    # Neither the date, the host label nor the assumptions are part of the rows.
    assert report.to_json(rows, "elsewhere", "2027-01-01T00:00:00Z",
                          assumptions=[{"name": "x"}])["rowsSha256"] == first
    changed = [*rows[:1], Row.judged(P + "source-replayed", SCN,
                                     [ok(P + "source-replayed", "all held")]), *rows[2:]]
    assert report.to_json(changed, HOST, WHEN)["rowsSha256"] != first
    reordered = [rows[1], rows[0], *rows[2:]]
    assert report.to_json(reordered, HOST, WHEN)["rowsSha256"] != first


def test_json_assumptions_pass_through() -> None:
    assumed = [{"name": "gone-copy-code", "value": "run_expired", "reading": "410 instead"}]
    doc = report.to_json(mixed(), HOST, WHEN, assumptions=assumed)
    assert doc["assumptions"] == assumed
    assert "assumptions" not in report.to_json(mixed(), HOST, WHEN)


def test_json_generated_at_is_rfc3339() -> None:
    when = datetime(2026, 10, 27, 12, 0, tzinfo=UTC)
    assert report.to_json([], HOST, when)["generatedAt"] == "2026-10-27T12:00:00Z"
    with pytest.raises(ValueError, match="RFC 3339"):
        report.to_json([], HOST, "yesterday")
    with pytest.raises(ValueError, match="time zone"):
        report.to_json([], HOST, datetime(2026, 10, 27))


# -- JUnit ----------------------------------------------------------------------------------------

def test_junit_parses_with_the_right_counts() -> None:
    root = ET.fromstring(report.to_junit(mixed(), HOST))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("6", "1", "3")
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {SCN, "examples", "invariants"}
    scn = suites[SCN]
    assert (scn.get("tests"), scn.get("failures"), scn.get("skipped")) == ("4", "1", "2")
    assert len(root.findall(".//failure")) == 1
    assert len(root.findall(".//skipped")) == 3


def test_junit_testcases_name_checks_and_classes_requirements() -> None:
    root = ET.fromstring(report.to_junit(mixed(), HOST))
    cases = {(c.get("classname"), c.get("name")) for c in root.iter("testcase")}
    assert (S + "per-trial-reset", "example:trials") in cases
    assert (S + "echo-verbatim", "eval-fixture-runs-echoed") in cases
    assert (P + "shape", P + "shape") in cases


def test_junit_failure_carries_the_failing_findings_messages() -> None:
    root = ET.fromstring(report.to_junit(mixed(), HOST))
    failure = root.find(".//failure")
    assert failure is not None
    assert failure.get("message") == "call 0: the replayed outcome differs from the source's"
    assert failure.text is not None
    assert "live counter moved from 1 to 2" in failure.text
    assert "the replay: 201" not in failure.text  # the assertion that held is not a failure


def test_junit_skipped_messages_carry_the_reason_and_mark_blocked() -> None:
    root = ET.fromstring(report.to_junit(mixed(), HOST))
    messages = sorted(str(s.get("message")) for s in root.iter("skipped"))
    assert messages == sorted([
        "the suite declares one trial",
        "the host does not advertise agents.evalSuite.recordedFixtures",
        "blocked: no second tenant's API key (OPENWOP_TEST_TENANT_B_API_KEY)"])


def test_junit_survives_control_characters_in_a_detail() -> None:
    row = Row.judged(P + "source-refused", SCN, [fail(P + "source-refused", "body \x00\x1b[31m")])
    root = ET.fromstring(report.to_junit([row], HOST))
    assert root.find(".//failure") is not None


# -- text -----------------------------------------------------------------------------------------

def test_text_lists_each_row_then_the_totals() -> None:
    rows = mixed()
    lines = report.to_text(rows, HOST).splitlines()
    assert HOST in lines[0]
    body = [ln for ln in lines[1:-1] if not ln.startswith("    ")]  # reasons are indented
    assert len(body) == len(rows)
    for line, row in zip(body, rows, strict=True):
        assert line.startswith(row.disposition.value)
        assert row.requirement_id in line
        assert f"[{row.assertion_count}]" in line
    assert "(example:trials)" in body[2]
    assert f"({P}shape)" not in body[0]  # the check id is shown only when it differs
    assert lines[-1] == ("6 rows, 6 assertions: 2 executed-pass, 1 executed-fail, 1 skipped, "
                         "1 inapplicable, 1 blocked")


def test_text_keeps_names_whole_and_prints_a_failure_reason_in_full() -> None:
    reason = " ".join(["the-refusal-differs"] * 40)
    long = Row.judged(P + "source-refused", SCN, [fail(P + "source-refused", reason)],
                      check_id="refsim.example.0252.a-very-long-example-identifier-" + "y" * 60)
    lines = report.to_text([long], HOST).splitlines()
    assert long.check_id in lines[1]
    wrapped = [ln.strip() for ln in lines[2:-1]]
    assert " ".join(wrapped) == reason
    assert all(len(ln) <= report.TEXT_WIDTH for ln in lines[2:-1])


def test_text_fits_the_width_given_and_wraps_a_passing_rows_detail_below() -> None:
    ok_row = Row.judged(P + "shape", SCN, [ok(P + "shape", "fine")] * 12345,
                        check_id="c" * 50)
    detail = ok_row.detail
    for width in (60, 90, 140):
        lines = report.to_text([ok_row], HOST, width=width).splitlines()
        assert ok_row.check_id in lines[1]  # the name is never cut
        assert all(len(ln) <= width for ln in lines[2:-1])
        assert "..." not in "\n".join(lines)
        shown = " ".join(ln.strip() for ln in lines[1:-1])
        assert shown.endswith(detail)  # nothing of the detail is lost
    assert len(report.to_text([ok_row], HOST, width=200).splitlines()) == 3  # one line


def test_text_takes_the_terminals_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "72")
    assert report.terminal_width() == 72
    monkeypatch.setenv("COLUMNS", "10")
    assert report.terminal_width() == 40


# -- verdict --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("rows", "code"), [
    ([passing()], 0),
    ([passing(), inapplicable(), skipped()], 0),
    ([inapplicable()], 0),
    ([passing(), failing()], 1),
    ([failing(), blocked()], 1),
    ([passing(), blocked()], 2),
    ([blocked(), inapplicable()], 2),
    ([], 2),
    ([Row(P + "shape", SCN, Disposition.SKIPPED, "")], 2),  # a skip that says nothing
])
def test_verdict(rows: list[Row], code: int) -> None:
    assert report.verdict(rows) == code


def test_a_judged_row_without_assertions_fails_the_verdict() -> None:
    assert report.verdict([passing(), Row.judged(P + "shape", SCN, [])]) == 1


# -- files and a real run -------------------------------------------------------------------------

def test_write_reports(tmp_path: Path) -> None:
    json_path, junit_path = tmp_path / "out" / "report.json", tmp_path / "out" / "junit.xml"
    written = report.write_reports(mixed(), HOST, json_path, junit_path, generated_at=WHEN,
                                   assumptions=[{"name": "n"}])
    assert written == [json_path, junit_path]
    doc = json.loads(json_path.read_text(encoding="utf-8"))
    assert doc == report.to_json(mixed(), HOST, WHEN, assumptions=[{"name": "n"}])
    ET.parse(junit_path)
    assert report.write_reports(mixed(), HOST, None, None) == []


def test_reports_over_the_scenario_on_the_reference_host() -> None:
    rows = run_scenario(refsim.SimHost(seed=0), ScenarioConfig("hk_test_acme", "hk_test_globex"))
    doc = report.to_json(rows, HOST, WHEN)
    assert doc["results"]["totals"]["executedPass"] == len(rows)
    assert doc["detail"]["nonPass"] == []
    assert report.verdict(rows) == 0
    again = run_scenario(refsim.SimHost(seed=0), ScenarioConfig("hk_test_acme", "hk_test_globex"))
    assert report.to_json(again, HOST, WHEN)["rowsSha256"] == doc["rowsSha256"]
    assert ET.fromstring(report.to_junit(rows, HOST)).get("failures") == "0"


def test_the_digest_does_not_tell_a_busy_machine_from_a_quiet_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the latency leg's first samples show a tail (a busy machine), it times one
    afresh: the rows still judge alike, so they hash alike (CI once failed on that)."""
    from refsim.check import judges
    config = ScenarioConfig("hk_test_acme", "hk_test_globex")
    quiet = report.to_json(run_scenario(refsim.SimHost(seed=0), config), HOST, WHEN)
    monkeypatch.setattr(judges, "tail_seen", lambda xa, xb: True)
    monkeypatch.setattr(judges, "TAIL_SAMPLES", 12)
    busy = report.to_json(run_scenario(refsim.SimHost(seed=0), config), HOST, WHEN)
    assert busy["rowsSha256"] == quiet["rowsSha256"]
    assert busy["results"]["totals"]["executedPass"] == len(busy["results"]["requirements"])
