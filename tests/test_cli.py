"""`refsim check` and friends as a user runs them: exit codes, reports, gating, --assume."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from refsim import SimHost
from refsim.check.findings import Disposition
from refsim.check.scenario import HOST_LEGS, LEGS, SCENARIO_ROW, ScenarioConfig, run_scenario
from refsim.cli import main
from refsim.domain.profile import profile_named


def test_check_exits_zero_and_its_json_report_holds_every_row(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    report, junit = tmp_path / "report.json", tmp_path / "report.xml"
    assert main(["check", "--json", str(report), "--junit", str(junit)]) == 0
    printed = capsys.readouterr().out
    assert "executed-pass openwop.requirement.0252.source-uniform" in printed
    doc = json.loads(report.read_text())
    rows = doc["results"]["requirements"]
    assert all(r["requirementId"] for r in rows)
    assert all(r["disposition"] == "executed-pass" for r in rows)
    by_id = {r["requirementId"]: r for r in rows if r["checkId"] == r["requirementId"]}
    for leg in LEGS:
        assert by_id[leg]["disposition"] == "executed-pass" and by_id[leg]["assertionCount"] > 0
    checks = {r["checkId"] for r in rows}
    assert {f"rfc-0252.example-{n}" for n in range(1, 7)} <= checks
    assert "eval-fixture-run-tenant-scoped" in checks
    assert "signature" not in doc and doc["results"]["totals"]["executedFail"] == 0
    assert junit.read_text().startswith("<?xml")


def test_the_cycle_collector_rests_only_while_a_check_runs_in_process(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A check in process runs with Python's cycle collector paused (a tenth of its time),
    and leaves it as it found it, a check that raises included."""
    import gc

    from refsim.check import runner
    seen: list[bool] = []
    real = runner.run_parts

    def watched(*args: object, **kwargs: object) -> object:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)  # type: ignore[arg-type]
    monkeypatch.setattr(runner, "run_parts", watched)
    assert gc.isenabled()
    assert main(["check", "0252.shape"]) == 0
    assert seen == [False] and gc.isenabled()

    def broken(*args: object, **kwargs: object) -> object:
        raise ValueError("a host that cannot be reached")
    monkeypatch.setattr(runner, "run_parts", broken)
    assert main(["check"]) == 2
    assert gc.isenabled()


def test_a_prefix_narrows_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "0252.source-uniform"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("executed")]
    assert lines and all("source-uniform" in ln for ln in lines)


def test_an_unknown_prefix_or_assumption_is_a_usage_error(capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    assert main(["check", "no-such-requirement"]) == 2
    assert main(["check", "--assume", "no-such-point=x"]) == 2
    assert main(["check", "--assume", "merge-suite-fixtures=sometimes"]) == 2
    err = capsys.readouterr().err
    assert "unknown assumption 'no-such-point'" in err
    assert "choose one of refuse, merge" in err


def test_a_host_without_recorded_fixtures_makes_the_scenario_inapplicable() -> None:
    rows = run_scenario(SimHost(profile=profile_named("no-recorded-fixtures")),
                        ScenarioConfig("hk_test_acme", "hk_test_globex"))
    host_rows = [r for r in rows if r.requirement_id in (*HOST_LEGS, SCENARIO_ROW)]
    assert host_rows and all(r.disposition is Disposition.INAPPLICABLE for r in host_rows)
    assert all("recordedFixtures" in r.detail for r in host_rows)
    shape = next(r for r in rows if r.requirement_id.endswith(".shape"))
    assert shape.passed  # server-free, it runs whatever the host advertises


def test_conformance_exit_code_is_two_when_a_leg_is_blocked(capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    assert main(["conformance", "--profile", "no-counter-seam"]) == 2
    assert "blocked" in capsys.readouterr().out


@pytest.mark.parametrize(("reading", "changed"), [
    ("merge-suite-fixtures=merge", "openwop.requirement.0252.fields-refused"),
    ("uniform-refusal-body=status-and-code-only", "refsim.requirement.0252.source-uniform-body"),
    ("delegate-calls-derived=included", "refsim.example.0252.delegate-calls-excluded"),
    ("default-on-miss=live", "refsim.example.0252.default-on-miss-fails-closed"),
])
def test_assume_reports_which_checks_change_and_why(reading: str, changed: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--assume", reading]) == 1
    out = capsys.readouterr().out
    table, explained = out[:out.index("Assuming " + reading)], out[out.index("Assuming "
                                                                            + reading):]
    assert re.search(rf"  {re.escape(changed)}[ :]", explained)
    assert "executed-pass -> executed-fail" in explained and "because " in explained
    # Each changed row explained once, after the table; the table only names it.
    reasons = [ln.strip() for ln in explained.splitlines() if ln.startswith("      because")]
    assert reasons and all(r.removeprefix("because ") not in table for r in reasons)
    assert len(reasons) == len(set(reasons)) or len(explained.split("\n  ")) > 1
    # What was observed, in words: no Python reprs, no placeholders.
    assert "{'" not in explained and "None" not in explained and "($" not in out


def test_a_reading_the_rfc_allows_fails_no_row(capsys: pytest.CaptureFixture[str]) -> None:
    """A host that does not advertise fixtureErrors breaks no line of RFC 0252: the rows
    that need it are inapplicable there, none fails. Nor does another registered code for
    a fork whose copy is gone: the RFC asks only that it be refused."""
    assert main(["check", "--assume", "fixture-errors=not-advertised"]) == 0
    out = capsys.readouterr().out
    explained = out[out.index("Assuming fixture-errors=not-advertised"):]
    assert "refsim.example.0252.failed-call-with-fixture-errors (" in explained
    assert "executed-pass -> inapplicable" in explained and "executed-fail" not in explained
    assert main(["check", "--assume", "gone-copy-code=run_expired"]) == 0
    assert "No check changes under this reading." in capsys.readouterr().out


def test_assume_with_the_default_reading_changes_nothing(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    assert main(["check", "--assume", "merge-suite-fixtures=refuse"]) == 0
    assert "No check changes under this reading." in capsys.readouterr().out


def test_list_prints_every_requirement_without_running(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for leg in LEGS:
        assert leg in out
    assert "R10" in out and "eval-fixture-run-tenant-scoped" in out


def test_list_defines_every_term_it_prints(capsys: pytest.CaptureFixture[str]) -> None:
    from refsim.check.registry import CHECK_KINDS, LEVELS, TERMS, WITNESSES
    assert {*LEVELS, *WITNESSES, *(f"{k}:" for k in CHECK_KINDS)} <= set(TERMS)
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    legend, table = out.split("Requirements (", 1)
    defined = {ln.split("  ")[1].strip() for ln in legend.splitlines()[2:] if ln.strip()}
    printed = set()
    for line in table.splitlines():
        words = line.split()
        printed |= {w for w in words if w in WITNESSES}
        printed |= {level for level in LEVELS if f"  {level}  " in line}
        printed |= {w.split(":")[0] + ":" for w in words if w.split(":")[0] in CHECK_KINDS
                    and ":" in w}
        printed |= {term for term in ("covered by", "not covered", "UNCOVERED", "no check")
                    if f"-> {term}" in line}
    assert printed and printed <= defined, printed - defined


@pytest.mark.slow  # a second of machine runs
def test_mutants_prints_the_machine_kill_shrunk_beside_its_unshrunk_count(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from refsim.zoo.matrices import _short

    from .machine_runs import long_matrix_kill
    data = tmp_path / "m.json"
    host = long_matrix_kill()  # its kill at the matrix's budget is long enough to shrink
    capsys.readouterr()
    assert main(["mutants", "--only", host, "--no-http", "--shrink-budget", "0.5",
                 "--no-sweep", "--json", str(data)]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if "machine:" in ln]
    (kill,) = json.loads(data.read_text(encoding="utf-8"))["mutants"]
    machine = kill["machine"]
    short = _short(machine["requirementId"])
    assert machine["shrunk"] and machine["steps"] <= machine["unshrunkSteps"]
    assert machine["shrinkBudget"] == 0.5 and machine["shrinkSeconds"] > 0
    assert isinstance(machine["shrinkComplete"], bool)
    assert machine["program"][0] == "state = RecordedFixturesMachine()"
    assert line.startswith(f"    machine: {short} in {machine['steps']} step(s) "
                           f"(shrunk from {machine['unshrunkSteps']} in ")
    assert line.endswith(" s)" if machine["shrinkComplete"] else "budget of 0.5 s ran out)")


@pytest.mark.parametrize("budget", ["-1", "nan", "inf"])
def test_mutants_refuses_a_shrink_budget_that_is_no_number_of_seconds(
        budget: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mutants", "--only", "echoes-id", f"--shrink-budget={budget}"]) == 2
    assert "--shrink-budget takes a non-negative number of seconds" in capsys.readouterr().err


def test_mutants_help_gives_the_default_shrink_budget(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    from refsim.zoo.matrices import SHRINK_BUDGET
    with pytest.raises(SystemExit):
        main(["mutants", "--help"])
    assert f"default {SHRINK_BUDGET:g} s" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("argv,says", [
    (["fuzz", "--max-examples", "0"], "--max-examples takes a whole number, at least 1"),
    (["fuzz", "--steps", "-1"], "--steps takes a whole number, at least 1"),
    (["fuzz", "--jobs", "100000", "--duration", "1"], "--jobs takes a whole number, 1 to 64"),
    (["fuzz", "--duration", "nan"], "--duration takes a positive number of seconds"),
    (["diff", "--all", "--max-examples", "0"], "--max-examples takes a whole number"),
    (["diff", "--all", "--steps", "0"], "--steps takes a whole number, at least 1"),
    (["mutants", "--machine-steps", "0"], "--machine-steps takes a whole number, at least 1"),
    (["mutants", "--machine-examples", "-1"], "--machine-examples takes a whole number, at "
                                              "least 0"),
])
def test_a_count_out_of_range_is_refused_before_any_work(
        argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Hypothesis would raise InvalidArgument with a traceback, and a hundred thousand jobs
    would start a hundred thousand processes: a usage line instead."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_an_output_path_that_cannot_be_written_is_refused_before_any_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`bench` and `mutants` take minutes: a report they could not write is said at once."""
    a_file = tmp_path / "a-file"
    a_file.write_text("kept\n", encoding="utf-8")
    for argv in (["check", "--json", str(a_file / "report.json")],
                 ["check", "--junit", str(tmp_path)],
                 ["mutants", "--json", str(a_file / "m.json")],
                 ["bench", "--skip-slow", "--json", str(a_file / "b.json")],
                 ["bench", "http", "--json", str(a_file / "h.json")],
                 ["falsify", "--write", str(a_file / "f.json")],
                 ["diff", "--all", "--json", str(a_file / "d.json")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "refsim: cannot write" in err and "Traceback" not in err, argv
    assert a_file.read_text(encoding="utf-8") == "kept\n"
    # A folder that does not exist yet is made, as before.
    assert main(["check", "0252.shape", "--json", str(tmp_path / "new" / "r.json")]) == 0
    assert (tmp_path / "new" / "r.json").exists()


def test_fuzz_refuses_a_database_that_is_a_file(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "db"
    a_file.write_text("not a database\n", encoding="utf-8")
    assert main(["fuzz", "--database", str(a_file), "--max-examples", "1"]) == 2
    assert "--database names a folder" in capsys.readouterr().err
    assert a_file.read_text(encoding="utf-8") == "not a database\n"


@pytest.mark.parametrize("argv", [["fuzz", "--max-examples", "2"],
                                  ["fuzz", "--jobs", "2", "--duration", "1"], ["check"]])
def test_a_host_nothing_answers_at_is_one_line_for_every_command(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    import socket
    sock = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()  # nothing listens there now
    assert main([*argv, "--base-url", url, "--api-key", "hk_test_acme"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("refsim: cannot reach") and err.count("\n") == 1, err


def test_a_write_the_file_system_refuses_later_is_a_usage_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from refsim.check import report

    def refused(*_: object, **__: object) -> None:
        raise PermissionError(13, "Permission denied", str(tmp_path / "r.json"))

    monkeypatch.setattr(report, "write_reports", refused)
    assert main(["check", "0252.shape", "--json", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "refsim: [Errno 13] Permission denied" in err and "Traceback" not in err


def test_every_subcommand_has_its_own_description_and_examples_that_parse() -> None:
    import shlex

    from refsim.cli import HELP, build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    names = set(sub.choices)
    assert names <= set(HELP)
    descriptions = [HELP[n][0] for n in HELP]
    assert len(set(descriptions)) == len(descriptions)
    for name, (text, examples) in HELP.items():
        assert len(text) > 60 and examples, name
        for example in examples:
            argv = shlex.split(example.split("|")[0])
            assert argv[0] == "refsim"
            assert name in argv[1:3], example
            parser.parse_args(argv[1:])  # exits (SystemExit) on an example that is wrong
    shown = sub.choices["fuzz"].format_help()
    assert "fuzz a live v2 host" in shown and "check a live v2 host" not in shown
    assert "examples:\n  refsim fuzz" in shown


@pytest.mark.parametrize(("argv", "said"), [
    (["check", "--profile", "no-eval", "--base-url", "http://127.0.0.1:9", "--api-key", "k"],
     "--profile builds the built-in host"),
    (["check", "--api-key", "hk_test_acme"], "--api-key names a key of the host at"),
    (["check", "--tenant-b-api-key", "hk_test_globex"], "--tenant-b-api-key names a key"),
    (["check", "--base-url", " "], "--base-url is empty"),
    (["check", "--json", ""], "the path is empty"),
    (["check", "--assume", "refusal-order=x"], "settles one way only (not assumable)"),
])
def test_an_option_that_would_be_ignored_is_refused_in_one_line(
        argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1, err


def test_version_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("refsim ")


def test_a_leg_that_raises_is_blocked_and_check_exits_2(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    """A leg that raises is refsim's fault, not the host's: its row and the scenario row
    are blocked, naming the exception and where refsim raised it, and the exit code is 2."""
    from refsim.check import scenario

    def broken(self: object) -> list[object]:
        raise IndexError("list index out of range")
    monkeypatch.setattr(scenario._Legs, "drifted", broken)
    rows = {r.requirement_id: r for r in run_scenario(
        SimHost(), ScenarioConfig("hk_test_acme", "hk_test_globex"))}
    drifted = rows["openwop.requirement.0252.drift-fails-closed"]
    assert drifted.disposition is Disposition.BLOCKED
    assert re.search(r"raised IndexError: list index out of range at "
                     r"refsim/check/scenario\.py:\d+ ", drifted.detail), drifted.detail
    assert rows[SCENARIO_ROW].disposition is Disposition.BLOCKED
    assert rows["openwop.requirement.0252.source-replayed"].passed  # the others still run
    report = tmp_path / "report.json"
    assert main(["conformance", "--json", str(report)]) == 2
    doc = json.loads(report.read_text())
    assert doc["results"]["totals"]["executedFail"] == 0


def test_every_option_of_every_command_says_what_it_does() -> None:
    import argparse as ap

    from refsim.cli import build_parser
    silent = []

    def walk(parser: ap.ArgumentParser, name: str) -> None:
        for action in parser._actions:
            if isinstance(action, ap._SubParsersAction):
                for sub, child in action.choices.items():
                    walk(child, f"{name} {sub}")
            elif not action.help and action.dest != "help":
                silent.append(f"{name} {action.option_strings or action.dest}")
    walk(build_parser(), "refsim")
    assert silent == []


def test_an_install_hint_names_the_checkout_refsim_came_from() -> None:
    """refsim is on no package index: `pip install 'refsim[redis]'` cannot work from a
    checkout; the hint names the folder it was installed from."""
    from refsim.data.paths import install_hint
    checkout = Path(__file__).resolve().parents[1]
    hint = install_hint("redis")
    assert hint.startswith("pip install ") and hint.endswith("[redis]'")
    assert str(checkout) in hint


def test_a_reading_the_register_lists_but_no_code_builds_is_named_as_such(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import attrs

    from refsim.check import assume
    known = assume.assumables()
    name, row = next(iter(known.items()))
    added = attrs.evolve(row, alternatives={**row.alternatives, "shiny": "a new reading"})
    monkeypatch.setattr(assume, "assumables", lambda: {**known, name: added})
    with pytest.raises(assume.AssumptionError) as refused:
        assume.parse([f"{name}=shiny"])
    assert "no code builds it yet" in str(refused.value)
    assert "shiny" not in str(refused.value).split("readings built:")[1]
