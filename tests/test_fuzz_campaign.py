"""Fuzzing past one machine: the example database replays a counterexample first, across
processes; campaigns of several jobs combine their counts."""

from __future__ import annotations

import io
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from refsim import SimHost
from refsim.cli import main
from refsim.testing.fuzz import (
    FuzzResult,
    FuzzTarget,
    batch_seed,
    campaign,
    replay_command,
    report_campaign,
    run_machine,
)
from refsim.wire.client import HostClient
from refsim.zoo.faulty import mutant

FAULTY = "serves-miss-live"
STEPS = 20


def _faulty_factory(made: list[int]) -> HostClient:
    made.append(1)
    return SimHost(seed=0, components=mutant(FAULTY).components())


def _plant(db: Path) -> FuzzResult:
    """Find a counterexample against the faulty host, without shrinking, into `db` (as
    `refsim fuzz --mutant FAULTY --database db` keeps it). Without the class sweep: its
    programs would find it first, and a program's failure is found again by every run,
    never saved."""
    planted = run_machine(lambda: _faulty_factory([]), max_examples=200, steps=STEPS,
                          seed_value=0, shrink=False, programs=False,
                          database=FuzzTarget(recipe=mutant(FAULTY)).database(db, STEPS))
    assert not planted.passed, "the machine should kill serves-miss-live"
    assert db.is_dir() and any(db.rglob("*")), "nothing was saved in the database"
    return planted


def test_a_planted_counterexample_is_replayed_on_the_first_example(tmp_path: Path) -> None:
    db = tmp_path / "db"
    planted = _plant(db)
    made: list[int] = []
    # A new machine class over a new factory: the key is the machine's, not the factory's.
    again = run_machine(lambda: _faulty_factory(made), max_examples=1, steps=STEPS,
                        shrink=False, programs=False,
                        database=FuzzTarget(recipe=mutant(FAULTY)).database(db, STEPS))
    assert not again.passed
    assert again.requirement_id == planted.requirement_id
    # One host for the replayed example, one for Hypothesis's final run that reports it,
    # and the throwaway one the machine probes the seams on before any example.
    assert len(made) <= 3, f"{len(made)} examples before the saved failure came back"


@pytest.mark.slow  # a process of its own
def test_the_replay_command_finds_it_in_another_process(tmp_path: Path) -> None:
    db = tmp_path / "db"
    planted = _plant(db)
    command = replay_command(FuzzTarget(recipe=mutant(FAULTY)), db, STEPS)
    assert command.startswith("refsim fuzz --replay --database ")
    argv = command.split()[2:]
    done = subprocess.run([sys.executable, "-m", "refsim", "fuzz", *argv],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"COUNTEREXAMPLE for {planted.requirement_id}" in done.stdout
    assert command in done.stdout  # and it prints the command that replays it again


def test_replay_for_a_target_the_database_holds_none_of_says_so_and_loses_nothing(
        tmp_path: Path) -> None:
    db = tmp_path / "db"
    planted = _plant(db)
    saved = sorted(str(p.relative_to(db)) for p in db.rglob("*"))
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["fuzz", "--replay", "--database", str(db), "--steps", str(STEPS)])
        # Another step count is another search: it reads none of those entries either.
        other = main(["fuzz", "--replay", "--database", str(db), "--steps", "5", "--mutant",
                      FAULTY])
    # Neither target has an example there: each says so, names whose examples those are
    # not, and exits 2 (nothing was judged), where it once said "nothing failed".
    assert code == 2 and other == 2
    assert out.getvalue().count("nothing to replay") == 2
    assert "holds no example of this target (refsim fuzz --profile reference" in (
        out.getvalue())
    # Hypothesis deletes a saved example that no longer fails where it is replayed: the
    # sound host never saw the faulty host's, which is still there and still fails.
    assert sorted(str(p.relative_to(db)) for p in db.rglob("*")) == saved
    again = run_machine(lambda: _faulty_factory([]), max_examples=1, steps=STEPS,
                        shrink=False, programs=False,
                        database=FuzzTarget(recipe=mutant(FAULTY)).database(db, STEPS))
    assert not again.passed and again.requirement_id == planted.requirement_id


def test_targets_see_the_database_apart() -> None:
    labels = {FuzzTarget().label(20), FuzzTarget(recipe=mutant(FAULTY)).label(20),
              FuzzTarget(recipe=mutant(FAULTY)).label(30),
              FuzzTarget(profile="no-fixture-errors").label(20),
              FuzzTarget(base_url="http://h:1").label(20),
              FuzzTarget(base_url="http://h:1", extended=False).label(20)}
    assert len(labels) == 6
    assert FuzzTarget().database(None, 20) is None


def test_replay_needs_a_database_and_runs_once(tmp_path: Path) -> None:
    with redirect_stderr(io.StringIO()) as err:
        assert main(["fuzz", "--replay"]) == 2
        assert main(["fuzz", "--replay", "--database", "db", "--jobs", "2"]) == 2
        assert main(["fuzz", "--jobs", "0"]) == 2
    assert "--database DIR" in err.getvalue() and "no --jobs" in err.getvalue()
    missing = tmp_path / "never-made"
    with redirect_stderr(io.StringIO()) as err:
        assert main(["fuzz", "--replay", "--database", str(missing)]) == 2
    assert "does not exist" in err.getvalue() and not missing.exists()


def test_a_database_is_made_at_the_start_and_counted(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    db = tmp_path / "deep" / "db"
    assert main(["fuzz", "--database", str(db), "--max-examples", "2", "--steps", "3",
                 "--seed", "1"]) in (0, 2)
    out = capsys.readouterr().out
    assert db.is_dir()
    assert f"example database: {db} (0 entries before this run)" in out
    assert f"example database: {db} holds" in out and "(it had 0)" in out


def test_batch_seeds_never_repeat_across_jobs_and_batches() -> None:
    seeds = {batch_seed(7, job, 3, batch) for job in range(3) for batch in range(5)}
    assert len(seeds) == 15


@pytest.mark.slow
def test_a_campaign_of_two_jobs_combines_counts_and_shares_the_database(
        tmp_path: Path) -> None:
    db = tmp_path / "db"
    result = campaign(FuzzTarget(), jobs=2, duration=None, max_examples=4, steps=5,
                      base_seed=11, database=str(db))
    assert result.passed
    assert [o.job for o in result.outcomes] == [0, 1]
    assert [o.seeds for o in result.outcomes] == [(11,), (12,)]
    assert all(o.examples >= 4 for o in result.outcomes)
    combined = result.branches
    assert sum(combined.values()) == sum(sum(o.branches.values()) for o in result.outcomes)
    assert sum(combined.values()) > 0
    out = io.StringIO()
    report_campaign(result, out, target=FuzzTarget(), database=str(db), steps=5)
    assert "campaign: 2 job(s)" in out.getvalue()
    assert "combined branch counts:" in out.getvalue()


@pytest.mark.slow
def test_a_campaign_reports_the_first_counterexample_and_how_to_replay_it(
        tmp_path: Path) -> None:
    db = tmp_path / "db"
    target = FuzzTarget(recipe=mutant(FAULTY))
    # The random search's counterexample (the explicit programs would find this host
    # first, and theirs is found again by every run, never saved in the database).
    result = campaign(target, jobs=2, duration=None, max_examples=200, steps=STEPS,
                      base_seed=0, database=str(db), shrink=False, sweep=False)
    assert not result.passed and result.first_failure is not None
    assert result.first_failure.requirement_id == "refsim.requirement.0252.fail-closed-miss"
    out = io.StringIO()
    assert report_campaign(result, out, target=target, database=str(db), steps=STEPS) == 1
    text = out.getvalue()
    assert "first counterexample: job" in text
    assert replay_command(target, str(db), STEPS) in text


def test_the_hypofuzz_route_saves_where_the_replay_command_reads(tmp_path: Path) -> None:
    """docs/fuzzing.md's module for HypoFuzz: the machine's TestCase under the target's database.
    What it saves, `refsim fuzz --replay` finds (HypoFuzz runs the same test case)."""
    import unittest

    from hypothesis import HealthCheck, Phase, settings

    from refsim.testing.stateful import machine_for
    db = tmp_path / "db"
    target = FuzzTarget(recipe=mutant(FAULTY))
    case_class = machine_for(target.factory()).TestCase
    case_class.settings = settings(database=target.database(db, STEPS),
                                   stateful_step_count=STEPS, deadline=None, max_examples=200,
                                   phases=[Phase.generate],
                                   suppress_health_check=list(HealthCheck))
    outcome = unittest.TestResult()
    case_class("runTest").run(outcome)
    assert outcome.failures or outcome.errors, "the test case found nothing to save"
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["fuzz", "--replay", "--database", str(db), "--steps", str(STEPS),
                     "--mutant", FAULTY])
    assert code == 1 and "COUNTEREXAMPLE for" in out.getvalue(), out.getvalue()


def test_a_labelled_database_passes_on_only_its_own_changes(tmp_path: Path) -> None:
    from hypothesis.database import InMemoryExampleDatabase

    from refsim.testing.fuzz import LabelledDatabase
    inner = InMemoryExampleDatabase()
    mine, other = LabelledDatabase(inner, "mine"), LabelledDatabase(inner, "other")
    seen: list[Any] = []
    mine.add_listener(seen.append)
    other.save(b"k", b"theirs")
    mine.save(b"k", b"v")
    mine.delete(b"k", b"v")
    assert seen == [("save", (b"k", b"v")), ("delete", (b"k", b"v"))]
    mine.remove_listener(seen.append)
    mine.save(b"k", b"w")
    assert len(seen) == 2
    assert list(mine.fetch(b"k")) == [b"w"] and list(other.fetch(b"k")) == [b"theirs"]
    # The same directory under the same label is the same database, equal and hashed alike.
    a, b = FuzzTarget().database(tmp_path, 20), FuzzTarget().database(tmp_path, 20)
    assert a == b and len({a, b}) == 1
