"""A red row and a counterexample come with the exchanges that show them: HAR 1.2 files
(`--trace DIR`), an `evidence` list in the JSON report and the JUnit text, and curl lines
that, run with the keys in the environment, get the failing answer again. Keys are never
written in clear."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis.database import InMemoryExampleDatabase

from refsim import SimHost
from refsim.check import evidence
from refsim.check.observe import KEY_A, KEY_B
from refsim.cli import main
from refsim.testing.fuzz import FuzzTarget, report, run_machine
from refsim.wire.response import Response
from refsim.wire.server import background
from refsim.wire.trace import Trace, recording, segment
from refsim.zoo.faulty import mutant

FAULTY = "foreign-without-agent-refused-apart"  # 404 for another tenant's run without agent
HAR_ENTRY = ("startedDateTime", "time", "request", "response", "cache", "timings")


def _har_files(folder: Path) -> list[dict[str, object]]:
    files = sorted(folder.glob("*.har"))
    assert files
    docs = [json.loads(f.read_text(encoding="utf-8")) for f in files]
    for doc in docs:
        log = doc["log"]
        assert log["version"] == "1.2" and log["creator"]["name"] == "refsim"
        assert isinstance(log["entries"], list)
        for entry in log["entries"]:
            assert all(k in entry for k in HAR_ENTRY), entry.keys()
            assert {"method", "url", "httpVersion", "cookies", "headers", "queryString",
                    "headersSize", "bodySize"} <= set(entry["request"])
            assert {"status", "statusText", "httpVersion", "cookies", "headers", "content",
                    "redirectURL", "headersSize", "bodySize"} <= set(entry["response"])
    return docs


def _no_key_in(text: str) -> None:
    assert KEY_A not in text and KEY_B not in text


@pytest.fixture(scope="module")
def faulty_url() -> Iterator[str]:
    with background(mutant(FAULTY).host()) as server:
        yield server.url


@pytest.fixture()
def keys_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENWOP_API_KEY", KEY_A)
    monkeypatch.setenv("OPENWOP_TEST_TENANT_B_API_KEY", KEY_B)


def test_a_red_row_over_http_carries_its_exchanges_and_curl_lines_that_reproduce_it(
        faulty_url: str, keys_in_env: None, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    report_path, trace = tmp_path / "r.json", tmp_path / "T"
    assert main(["check", "--base-url", faulty_url, "--json", str(report_path),
                 "--junit", str(tmp_path / "r.xml"), "--trace", str(trace)]) == 1
    out = capsys.readouterr().out
    docs = _har_files(trace)
    doc = json.loads(report_path.read_text(encoding="utf-8"))
    _no_key_in(out + report_path.read_text(encoding="utf-8") + json.dumps(docs)
               + (tmp_path / "r.xml").read_text(encoding="utf-8"))
    (row,) = [r for r in doc["results"]["requirements"]
              if r["checkId"] == "eval-fixture-run-tenant-scoped"]
    assert row["disposition"] == "executed-fail"
    assert row["evidence"][-1]["response"]["status"] == 404
    assert len(row["evidence"]) <= evidence.MAX_EVIDENCE
    assert "404" in (tmp_path / "r.xml").read_text(encoding="utf-8")
    # The curl lines under the row: the run it names made first, the 404 last.
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith("executed-fail") and "eval-fixture-run-tenant-scoped" in line)
    at = next(i for i in range(start, len(lines)) if "to reproduce" in lines[i])
    curls = []
    for line in lines[at + 1:]:
        if not line.startswith("      curl "):
            break
        curls.append(line.strip())
    assert curls and curls == row["curl"]
    assert "$OPENWOP_API_KEY" in curls[-1]
    if shutil.which("curl") is None and os.environ.get("CI"):
        pytest.fail("curl is not installed, and CI is set: .ci/run installs it")
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    got = subprocess.run(["bash", "-c", curls[-1]], capture_output=True, text=True,
                         timeout=30, env=os.environ.copy())
    assert got.stdout.startswith("HTTP/1.1 404"), got.stdout + got.stderr


def test_in_process_har_files_are_written_through_the_same_face(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report_path, trace = tmp_path / "r.json", tmp_path / "T"
    assert main(["check", "0252.source", "--json", str(report_path),
                 "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    docs = _har_files(trace)
    assert any(e["request"]["url"].startswith("http://refsim.invalid/")
               for d in docs for e in d["log"]["entries"])  # type: ignore[index]
    _no_key_in(out + json.dumps(docs) + report_path.read_text(encoding="utf-8"))
    doc = json.loads(report_path.read_text(encoding="utf-8"))
    assert all("evidence" not in r for r in doc["results"]["requirements"])  # all passed


def test_in_process_a_red_row_carries_its_evidence_without_curl() -> None:
    import attrs

    from refsim.check import report as reports
    from refsim.check.runner import PARTS, Target, run_parts
    trace = Trace()
    with recording(trace):
        rows = run_parts(Target(recipe=mutant(FAULTY)), PARTS, "0252.source-uniform")
    rows = evidence.attach(rows, trace, {"acme": KEY_A, "globex": KEY_B}, remote=False)
    doc = reports.to_json(rows, "faulty", "2026-12-05T00:00:00Z")
    failed = [r for r in doc["results"]["requirements"] if r["disposition"] == "executed-fail"]
    assert failed and all(r["evidence"] for r in failed) and "curl" not in failed[0]
    assert any(e["response"]["status"] == 404 for r in failed for e in r["evidence"])
    _no_key_in(json.dumps(doc))
    # The digest is over the verdicts alone: the same without the evidence.
    bare = [attrs.evolve(r, evidence=(), curl=(), reproduce="") for r in rows]
    assert reports.to_json(bare, "faulty", "2026-12-05T00:00:00Z")["rowsSha256"] == (
        doc["rowsSha256"])


def test_a_counterexample_over_http_prints_its_exchanges_as_curl_lines(
        faulty_url: str, tmp_path: Path) -> None:
    target = FuzzTarget(base_url=faulty_url, keys={"acme": KEY_A, "globex": KEY_B})
    result = run_machine(target.factory(), max_examples=5, steps=10, seed_value=0,
                         shrink=False, keys=target.tenant_keys(),
                         database=InMemoryExampleDatabase())
    assert not result.passed and result.evidence
    assert result.evidence[-1].response.status == 404
    out = io.StringIO()
    report(result, out, target)
    text = out.getvalue()
    assert "To reproduce over HTTP" in text and "  curl -sS -i -X POST " in text
    _no_key_in(text)
    from refsim.testing.fuzz import write_counterexample_har
    write_counterexample_har(result, tmp_path, target)
    (doc,) = _har_files(tmp_path)
    _no_key_in(json.dumps(doc))


def test_the_evidence_is_the_answer_the_failed_finding_quotes_after_what_made_its_runs(
        ) -> None:
    from refsim.check import judges
    trace = Trace()
    host = SimHost(seed=0)
    with recording(trace), segment("row"):
        made = host.request("POST", "/runs", api_key=KEY_B,
                            json={"workflowId": "conformance-noop"})
        run_id = made.json["runId"]
        host.request("GET", "/.well-known/openwop")
        asked = host.request("POST", "/runs", api_key=KEY_A,
                             json={"mode": "eval", "evalSuiteRef": "x",
                                   "fixtureRuns": {"t": run_id}})
        host.request("GET", "/.well-known/openwop")
        finding = judges.refused_as("r", Response(404, {}, {"error": "not_found"}), "what")
        quoting = judges.refused_as("r", asked, "what", status=201, code="x")
    assert not quoting.ok and quoting.observation["exchange"] == 3
    chosen = evidence.failing(trace.of("row"), [finding.observation, quoting.observation])
    assert [e.seq for e in chosen] == [3]  # the first observation quotes no exchange
    shown = evidence.with_dependencies(chosen, list(trace.exchanges))
    assert [e.seq for e in shown] == [1, 3]  # the run it names was made by exchange 1
    # Where nothing is quoted: the last refused answer.
    assert [e.seq for e in evidence.failing(trace.of("row"), [None])] == [3]


def test_keys_are_named_by_their_variables_and_curl_words_are_one_shell_word() -> None:
    secrets = evidence.redactions({"acme": "k-a", "globex": "k-a-longer"})
    assert evidence.redact("Bearer k-a-longer and k-a", secrets) == (
        "Bearer $OPENWOP_TEST_TENANT_B_API_KEY and $OPENWOP_API_KEY")
    text = "it's $HOME `x` \"q\" !bang Bearer $OPENWOP_API_KEY"
    word = evidence._quoted(text)
    got = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, text=True,
                         env={"OPENWOP_API_KEY": "SECRET", "PATH": os.environ["PATH"]})
    assert got.stdout == text.replace("$OPENWOP_API_KEY", "SECRET")
