"""`refsim demo`: the narrated walk, its folder, its determinism, and that it notices faults."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from refsim.check.registry import load_registry
from refsim.cli import main
from refsim.demo import LEGS, DemoRun, run_demo
from refsim.demo.html import render_report
from refsim.demo.report import FILES, point_latest
from refsim.domain.profile import PROFILES
from refsim.zoo.faulty import mutant
from tests import pages

TITLES = ("Two tenants", "records a source run", "The replay", "Drift fails closed",
          "Four unusable sources", "Requests that cannot mean anything", "Erasing the source")


def _folders(base: Path) -> list[Path]:
    return sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink())


def test_demo_command_exits_zero_names_every_leg_and_writes_its_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for leg in LEGS:
        assert leg in out
    for title in TITLES:
        assert title in out
    assert "verdict: all" in out and "checks held" in out
    (folder,) = _folders(tmp_path)
    assert str(folder) in out
    assert sorted(p.name for p in folder.iterdir()) == sorted(FILES)
    latest = tmp_path / "latest"
    assert latest.is_symlink() and latest.resolve() == folder.resolve()


def test_report_md_reads_on_its_own(tmp_path: Path) -> None:
    result = run_demo(seed=0)
    folder = result.write(tmp_path)
    md = (folder / "report.md").read_text(encoding="utf-8")
    assert md.startswith("# refsim demo: RFC 0252")
    assert "An eval task takes its fixtures from a recorded run" in md
    for leg in LEGS:  # the legs table names each with its title from the registry
        assert f"`{leg}` | {load_registry().requirement(leg).title} |" in md
    for number, title in enumerate(TITLES, 1):
        assert f"## {number}. " in md and title in md
    assert md.count("```text") == len(TITLES)  # each chapter shows its exchanges
    assert "✗" not in md and f"all {result.checks} checks held" in md
    for run_id in result.run_labels():
        assert f"`{run_id}`" in md  # every run the timeline labels is named in the report
    for name in FILES:
        assert f"`{name}`" in md


def test_same_seed_writes_identical_files_and_another_seed_does_not(tmp_path: Path) -> None:
    base = tmp_path / "seven"
    for _ in range(2):
        assert main(["demo", "--out", str(base), "--seed", "7"]) == 0
    assert main(["demo", "--out", str(tmp_path / "other"), "--seed", "8"]) == 0
    first, second = _folders(base)
    assert first.name != second.name
    for name in FILES:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    (other,) = _folders(tmp_path / "other")
    for name in ("history.jsonl", "report.html"):
        assert (other / name).read_bytes() != (first / name).read_bytes(), name
    assert (base / "latest").resolve() == second.resolve()


def test_history_holds_every_request_response_and_event() -> None:
    result = run_demo(seed=0)
    lines = [json.loads(line) for line in result.client.history_jsonl().decode().splitlines()]
    exchanges = [x for x in lines if x["kind"] == "exchange"]
    events = [x["event"] for x in lines if x["kind"] == "event"]
    assert len(exchanges) == len(result.client.exchanges)
    assert [x["seq"] for x in exchanges] == list(range(1, len(exchanges) + 1))
    for x in exchanges:
        assert set(x["request"]) >= {"method", "path", "tenant"}
        assert set(x["response"]) == {"status", "headers", "body"}
        assert "hk_test" not in json.dumps(x["request"])  # tenants by name, never keys
    host = result.client.host
    every = [e.to_json() for run in host.core.runs.values() for e in run.events]
    assert sorted(e["eventId"] for e in events) == sorted(e["eventId"] for e in every)
    assert {x["chapter"] for x in lines} == {c.slug for c in result.chapters}


def test_every_requirement_the_demo_names_is_registered() -> None:
    registry = load_registry()
    named = {r for c in run_demo().chapters for r in c.requirements}
    named |= {f.requirement_id for c in run_demo().chapters for f in c.findings}
    assert set(LEGS) <= named
    assert registry.unknown_ids(named) == []


@pytest.mark.parametrize(("name", "chapter"), [
    ("foreign-403", "refusals"),
    ("echoes-id", "refusals"),
    ("accepts-non-terminal", "refusals"),
    ("words-non-terminal-differently", "refusals"),
    ("serves-miss-live", "drift"),
    ("omits-echo", "replay"),
    ("ignores-fixture-runs", "replay"),
    ("accepts-without-mode", "fields"),
    ("keeps-copy-after-erasure", "erasure"),
])
def test_demo_on_a_faulty_host_fails_the_chapter_that_shows_the_fault(
        name: str, chapter: str, tmp_path: Path) -> None:
    result = run_demo(components=mutant(name).components())
    assert not result.passed
    failing = [c.slug for c in result.chapters if not c.passed]
    assert chapter in failing
    assert "checks failed" in result.verdict()
    md = result.write(tmp_path).joinpath("report.md").read_text(encoding="utf-8")
    assert "✗ **FAILED**" in md


def test_a_host_without_recorded_fixtures_skips_with_the_reason(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["demo", "--profile", "no-recorded-fixtures", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "skipped: the host does not advertise agents.evalSuite.recordedFixtures" in out
    result = run_demo(profile=PROFILES["no-recorded-fixtures"])
    assert [c.skipped is None for c in result.chapters] == [True] + [False] * 6
    assert "6 chapter(s) skipped" in result.verdict()


def test_step_waits_between_chapters_on_a_terminal(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    prompts: list[str] = []
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    def enter(prompt: str = "") -> str:
        prompts.append(prompt)
        return ""
    monkeypatch.setattr("builtins.input", enter)
    assert main(["demo", "--step", "--out", str(tmp_path)]) == 0
    assert len(prompts) == len(TITLES) - 1


def test_step_is_ignored_without_a_terminal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(prompt: str = "") -> str:
        raise AssertionError("input() called without a terminal")
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    monkeypatch.setattr("builtins.input", refuse)
    assert main(["demo", "--step", "--out", str(tmp_path)]) == 0
    assert "--step ignored: stdin is not a terminal" in capsys.readouterr().out


def test_ctrl_c_at_a_pause_keeps_what_ran(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    def stop(prompt: str = "") -> str:
        raise KeyboardInterrupt
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", stop)
    assert main(["demo", "--step", "--out", str(tmp_path)]) == 130
    (folder,) = _folders(tmp_path)
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    assert [c["slug"] for c in report["chapters"]] == ["tenants"]
    assert report["passed"] is False and "interrupted" in report["verdict"]


def test_an_unwritable_out_is_a_clear_error(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert main(["demo", "--out", str(blocker)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("refsim demo: cannot write the demo folder under") and "Trace" not in err


def test_latest_that_is_a_real_folder_is_not_clobbered(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "latest").mkdir()
    (tmp_path / "latest" / "keep").write_text("mine")
    assert main(["demo", "--out", str(tmp_path)]) == 2
    assert (tmp_path / "latest" / "keep").read_text() == "mine"
    captured = capsys.readouterr()
    assert "is a folder, not a link" in captured.err
    assert captured.out == ""  # refused before a word of narration


def test_latest_falls_back_to_a_file_where_links_fail(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(src: str, dst: object) -> None:
        raise OSError("symlinks not supported here")
    monkeypatch.setattr("os.symlink", no_links)
    point_latest(tmp_path, "20261130T000000Z-seed0")
    assert (tmp_path / "latest").read_text() == "20261130T000000Z-seed0\n"


def test_replay_moves_no_counter_and_drift_fails_closed_without_the_demo() -> None:
    """The same story told with bare requests, so a demo bug cannot hide a host bug."""
    from refsim import SimHost
    host = SimHost(seed=0)
    key, recorder = "hk_test_acme", "conformance.eval:recorder"

    def count() -> int:
        r = host.request("GET", "/conformance/seams/eval-counter?key=recorded-fixtures",
                         api_key=key)
        return int(r.json["count"])

    src = host.request("POST", "/runs", api_key=key, json={
        "mode": "eval", "evalSuiteRef": "conformance-eval-recorded-source", "agentId": recorder})
    assert src.status == 201
    assert count() == 1
    for suite, misses, passed in (("conformance-eval-recorded-replay", 0, True),
                                  ("conformance-eval-recorded-drift", 1, False)):
        r = host.request("POST", "/runs", api_key=key, json={
            "mode": "eval", "evalSuiteRef": suite, "agentId": recorder,
            "fixtureRuns": {"record": src.json["runId"]}})
        assert r.status == 201
        summary = host.request("GET", r.json["statusUrl"] + "/eval-summary", api_key=key).json
        assert summary["tasks"][0]["fixtureMissCount"] == misses
        assert summary["tasks"][0]["passed"] is passed
        assert count() == 1


def test_timeline_labels_the_runs_and_what_each_request_named() -> None:
    result = run_demo(seed=0)
    text = result.timeline()
    labels = result.run_labels()
    assert len(labels) == 6
    for run_id, label in labels.items():
        assert f"  {label:<4} {run_id}" in text
    assert "fixtureRuns record→R1 → 201 R2" in text  # the replay names the source
    assert "fixtureRuns record→a run that does not exist → 400 validation_error" in text
    assert "fork → 404 replay_source_missing" in text


@pytest.mark.parametrize(("profile", "code", "says"), [
    ("content-free-lane", 0, "the recorder's lane is content-free on this host"),
    ("no-fixture-errors", 0, "verdict: all"),
    ("no-counter-seam", 2, "blocked: chapter 2: the live counter cannot be read"),
    ("unheld-calls", 1, "the host refused its own completed source run"),
    ("no-eval", 0, "agents.evalSuite is not advertised"),
])
def test_demo_on_each_profile_says_what_it_could_show(
        profile: str, code: int, says: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--profile", profile, "--out", str(tmp_path)]) == code
    assert says in capsys.readouterr().out
    (folder,) = _folders(tmp_path)
    md = (folder / "report.md").read_text(encoding="utf-8")
    assert f"`refsim:{profile}`" in md and f"--profile {profile}" in md


def test_no_eval_report_has_no_empty_tables(tmp_path: Path) -> None:
    md = run_demo(profile=PROFILES["no-eval"]).write(tmp_path).joinpath(
        "report.md").read_text(encoding="utf-8")
    assert "The demo started no run on this host." in md
    assert "| not shown (chapter skipped) |" in md


@pytest.mark.parametrize("argv", [["--seed", "-3"], ["--out", ""], ["--out", "  "]])
def test_bad_arguments_are_refused_before_the_demo_runs(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("refsim demo: ")


def test_a_foreign_latest_file_is_kept_and_our_own_is_replaced(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "latest").write_text("my notes\n")
    assert main(["demo", "--out", str(tmp_path)]) == 2
    assert (tmp_path / "latest").read_text() == "my notes\n"
    assert "a file the demo did not write" in capsys.readouterr().err
    # What the demo writes where links fail, naming a run folder since deleted.
    (tmp_path / "latest").write_text("20261129T000000Z-seed0\n")
    assert main(["demo", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "latest").is_symlink()




def test_legs_it_could_not_observe_are_blocked_not_held() -> None:
    result = run_demo(profile=PROFILES["no-counter-seam"])
    legs = {leg["requirement_id"]: leg["result"] for leg in result.legs()}
    assert legs["openwop.requirement.0252.source-replayed"].startswith("blocked (")
    assert legs["openwop.requirement.0252.drift-fails-closed"].startswith("blocked (")
    assert legs["openwop.requirement.0252.source-uniform"] == "held"
    assert result.exit_code == 2


def test_a_stopped_demo_claims_nothing_it_did_not_reach() -> None:
    calls: list[int] = []

    def stop_after_two() -> None:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
    result = run_demo(pause=stop_after_two)
    assert [c.slug for c in result.chapters] == ["tenants", "record"]
    legs = {leg["requirement_id"]: leg["result"] for leg in result.legs()}
    assert legs["openwop.requirement.0252.source-replayed"] == "held so far (stopped)"
    assert legs["openwop.requirement.0252.drift-fails-closed"] == "not reached (stopped)"
    assert result.exit_code == 130


def test_refusal_chapters_fail_without_a_positive_control() -> None:
    """On a host that refuses even a usable source, a refusal shows nothing."""
    result = run_demo(profile=PROFILES["unheld-calls"])
    for slug in ("refusals", "fields"):
        (chapter,) = [c for c in result.chapters if c.slug == slug]
        assert any(not f.ok and "positive control" in f.message for f in chapter.findings)
    legs = {leg["requirement_id"]: leg["result"] for leg in result.legs()}
    for leg in ("source-refused", "source-uniform", "fields-refused"):
        assert legs[f"openwop.requirement.0252.{leg}"] == "FAILED"


def test_an_out_that_links_to_nothing_is_refused_before_the_demo(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "dang").symlink_to(tmp_path / "missing")
    assert main(["demo", "--out", str(tmp_path / "dang")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "is a link to nothing" in captured.err


def test_an_unwritable_out_is_refused_before_the_demo(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def no_write(*args: object, **kwargs: object) -> object:
        raise PermissionError("Operation not permitted")
    monkeypatch.setattr("tempfile.TemporaryFile", no_write)
    assert main(["demo", "--out", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Operation not permitted" in captured.err


# ---------------------------------------------------------------------- report.html
def _html(result: DemoRun, tmp_path: Path) -> str:
    return result.write(tmp_path).joinpath("report.html").read_text(encoding="utf-8")


def test_report_html_draws_every_chapter_the_refusals_and_the_legs(tmp_path: Path) -> None:
    result = run_demo(seed=0)
    root = pages.parse(_html(result, tmp_path))
    states = pages.check_report(root, [c.slug for c in result.chapters], list(LEGS))
    # The story in shapes: the source's calls reach the live counter, the replay's are
    # served from the recording, the drift's first call misses, chapter 5 refuses four times.
    assert states["record"].count("live") == 2 and "recording" not in states["record"]
    assert states["replay"].count("recording") == 2 and "live" not in states["replay"]
    assert states["drift"].count("miss") == 1 and "live" not in states["drift"]
    assert states["refusals"].count("refused") == 4
    assert states["erasure"].count("refused") == 2  # the fork, and the erased source
    svg = {s.attrs["data-chapter"]: s for s in root.find_all("svg", "sequence")}
    badges = [b.text() for b in svg["replay"].find_all("g", "badge")]
    assert badges == ["acme recorded-fixtures = 1 (unchanged)"] * 2
    assert ([b.text() for b in svg["record"].find_all("g", "badge")][-1] ==
        "acme recorded-fixtures = 1 (unchanged)")
    assert "acme recorded-fixtures = 1 (moved from 0)" in svg["record"].text()
    desc = svg["drift"].find("desc").text()
    assert "misses (fixture_miss) and reaches no live tool" in desc


def test_report_html_is_self_contained(tmp_path: Path) -> None:
    page = _html(run_demo(seed=0), tmp_path)
    root = pages.parse(page)
    assert not root.find_all("script") and not root.find_all("link")
    assert not root.find_all(where=lambda n: "src" in n.attrs or ("href" in n.attrs
                             and not n.attrs["href"].startswith("#")))
    # The only URL is the SVG namespace, which is a name, never fetched.
    assert set(re.findall(r"https?://[^\s\"'<>)]+", page)) == {"http://www.w3.org/2000/svg"}
    assert "@import" not in page and "@font-face" not in page
    assert all(u.startswith("#") for u in re.findall(r"url\(([^)]*)\)", page))
    (csp,) = root.find_all("meta", where=lambda n: n.attrs.get("http-equiv") ==
                           "Content-Security-Policy")
    assert csp.attrs["content"].startswith("default-src 'none'")


def test_report_html_escapes_what_the_host_said(tmp_path: Path) -> None:
    result = run_demo(seed=0)
    evil = "<script>alert(1)</script> & <b>"
    for x in result.client.exchanges:
        if x.status == 400 and x.chapter == "refusals":
            x.response = {"error": "validation_error", "message": evil}
            x.raw = json.dumps(x.response).encode()
    page = render_report(result)
    assert "<script" not in page and "&lt;script&gt;" in page
    root = pages.parse(page)
    assert evil in root.find("div", "refusal").find("pre", "body").text()


@pytest.mark.parametrize(("name", "chapter", "state"), [
    ("serves-miss-live", "drift", "unrecorded"),  # the miss reached the live counter
    ("ignores-fixture-runs", "replay", "unrecorded"),  # live answers, not the recording's
])
def test_report_html_draws_a_faulty_host_s_live_calls_as_live(
        name: str, chapter: str, state: str, tmp_path: Path) -> None:
    root = pages.parse(_html(run_demo(components=mutant(name).components()), tmp_path))
    (svg,) = [s for s in root.find_all("svg", "sequence") if s.attrs["data-chapter"] == chapter]
    states = [g.attrs["data-state"] for g in svg.find_all("g", "step")]
    assert state in states and "miss" not in states
    assert "moved from" in svg.text()
    section = root.by_id()[f"chapter-{chapter}"]
    assert "checks failed" in section.find("p", "meta").text()


def test_report_html_shows_refusals_that_differ(tmp_path: Path) -> None:
    root = pages.parse(_html(run_demo(
        components=mutant("words-non-terminal-differently").components()), tmp_path))
    cards = root.find_all("div", "refusal")
    assert len(cards) == 4 and len({c.attrs["data-sha256"] for c in cards}) == 2
    (line,) = root.find_all("p", where=lambda n: "data-same" in n.attrs)
    assert line.attrs["data-same"] == "false" and "not all the same" in line.text()


@pytest.mark.parametrize("profile", ["no-eval", "no-counter-seam", "content-free-lane"])
def test_report_html_on_other_profiles_still_draws_each_chapter(profile: str,
                                                                 tmp_path: Path) -> None:
    result = run_demo(profile=PROFILES[profile])
    root = pages.parse(_html(result, tmp_path))
    assert len(root.find_all("svg", "sequence")) == len(result.chapters)
    if profile == "no-eval":
        assert "skipped: the host does not advertise" in root.text()


def test_report_html_marks_a_refusal_that_echoes_the_id(tmp_path: Path) -> None:
    root = pages.parse(_html(run_demo(components=mutant("echoes-id").components()), tmp_path))
    cards = root.find_all("div", "refusal")
    assert cards and all("✕ the body echoes the id" in c.text() for c in cards)
