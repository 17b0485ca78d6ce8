"""The RFC's classes as data (specs/classes.yaml): the operations that make members read ids
as text, a spec author's member reaches the machine and the reference without Python, the
class sweep draws every member and kills what nobody listed, and the machine alone kills
every zoo host whose fault is not in time alone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis.database import InMemoryExampleDatabase

from refsim import SimHost
from refsim.check import classes
from refsim.data import paths
from refsim.domain.canonical import canonical
from refsim.testing.fuzz import run_machine, run_programs
from refsim.testing.programs import run_program, sweep
from refsim.testing.stateful import machine_for
from refsim.zoo.faulty import ZOO, mutant

UUID = "3f2b8c1e-9d4a-4b7e-8c21-5a6f0e9d1b33"


def _op(ops: tuple[classes.Op, ...], name: str) -> classes.Op:
    return next(op for op in ops if op.name == name)


# ----------------------------------------------------------------------------- operations

@pytest.mark.parametrize("run_id", ["acme/run-0123456789abcdef", UUID,
                                    "anon:s.1/" + "x" * 127 + "."])
def test_every_id_derivation_reads_the_id_as_text(run_id: str) -> None:
    """No derivation splits an id or assumes a tenant: each works on any id, and none
    gives the id back (a member that would is skipped, never sent as 'another' value)."""
    data = classes.load()
    for op in data.from_id:
        value = classes.derive(op, run_id)
        assert value != run_id, op.name
    assert classes.derive(_op(data.from_id, "upper-cased"), "0123") is None  # no letters


def test_a_shifted_id_keeps_its_length_and_shape() -> None:
    assert classes.shifted("acme/run-00z") == "acme/run-00a"
    assert classes.shifted("acme/run-009") == "acme/run-000"
    long = "anon:t/" + "Z" * 128
    assert len(classes.shifted(long)) == len(long) and classes.shifted(long) != long


def test_a_splice_joins_two_ids_at_their_parts_or_the_middle() -> None:
    data = classes.load()
    (op,) = data.from_two_ids
    assert classes.derive(op, "acme/run-aaaaaaaaaaaaaaaa", "globex/run-bbbbbbbbbbbbbbbb",
                          0) == "acme/run-bbbbbbbbbbbbbbbb"[:5] + "globex/run-bbbbbbbbbbbbbbbb"[5:]
    # Ids without a separator are cut at the middle only.
    assert classes.splice_points(UUID.replace("-", ""), "f" * 32) == [16]
    assert classes.derive(op, UUID, UUID, 0) is None


def test_an_argument_variant_changes_what_exact_matching_compares() -> None:
    """Each variant changes at least one recorded argument set (else it tests nothing),
    and never the counter's own op and key."""
    data = classes.load()
    for op in data.arg_variants:
        changed = []
        for recorded in data.recorded_args:
            args = {"op": "inc", "key": "k1", **recorded}
            varied = classes.vary(op, args)
            if varied is not None:  # JSON, not Python, equality: true is not 1
                assert canonical(varied) != canonical(args)
                assert varied["op"] == "inc" and varied["key"] == "k1"
                changed.append(varied)
        assert changed, f"{op.name} changes none of exact-args.recorded"
    # 5 and 5.0 are one JSON number: no variant may rest on it.
    assert classes.vary(_op(data.arg_variants, "nulls-dropped"), {"op": "inc", "n": 5}) is None


def test_the_id_after_its_last_slash_is_a_member_only_where_it_has_one() -> None:
    op = _op(classes.load().from_id, "after-the-last-slash")
    assert classes.derive(op, "acme/run-0123456789abcdef") == "run-0123456789abcdef"
    assert classes.derive(op, UUID) is None  # no slash: the id as it is, so no member


def test_unicode_variants_change_the_recorded_set_that_holds_such_text() -> None:
    data = classes.load()
    unicode_set = next(r for r in data.recorded_args if "caf\u00e9" in r.values())
    nfkc = classes.vary(_op(data.arg_variants, "strings-nfkc-normalised"), unicode_set)
    nfd = classes.vary(_op(data.arg_variants, "strings-nfd-decomposed"), unicode_set)
    assert nfkc is not None and nfkc["tags"][0] == "file" and nfkc["tags"][1] == "A"
    assert nfd is not None and nfd["label"] == "cafe\u0301"


def test_a_task_named_twice_is_written_twice() -> None:
    """Encoded, the object names its member twice (what a lenient parser reads either way);
    as a dict it holds the last value, as Python's parser would."""
    import json
    twice = classes.NamedTwice([("record", "a"), ("record", "b")])
    assert json.dumps({"fixtureRuns": twice}) == '{"fixtureRuns": {"record": "a", "record": "b"}}'
    assert dict(twice) == {"record": "b"}
    assert [m.roles for m in classes.load().named_twice][:2] == [("usable", "foreign"),
                                                               ("foreign", "usable")]


def test_a_listing_member_needs_a_runs_path(tmp_path: Path) -> None:
    for name in ("specs", "invariants"):
        shutil.copytree(paths.ROOT / name, tmp_path / name)
    path = tmp_path / "specs" / "classes.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace(
        '{name: listed, path: "/runs"}', '{name: listed, path: "/runs/{id}"}', 1),
        encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "refsim", "check"], capture_output=True,
                          text=True, timeout=120, check=False,
                          env={**os.environ, "REFSIM_ROOT": str(tmp_path)})
    assert done.returncode == 2 and "owner-routes.listings[0]" in done.stdout + done.stderr


def test_a_member_that_names_no_operation_is_refused_in_one_line(tmp_path: Path) -> None:
    for name in ("specs", "invariants"):
        shutil.copytree(paths.ROOT / name, tmp_path / name)
    path = tmp_path / "specs" / "classes.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace(
        "{name: doubled, repeat: 2}", "{name: doubled, twice: true}", 1), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "refsim", "check"], capture_output=True,
                          text=True, timeout=120, check=False,
                          env={**os.environ, "REFSIM_ROOT": str(tmp_path)})
    assert done.returncode == 2
    assert "specs/classes.yaml" in done.stdout + done.stderr
    assert "'doubled'" in done.stdout + done.stderr and "Traceback" not in done.stderr


# ----------------------------------------------------------------------------- a spec author

@pytest.fixture
def authored(tmp_path: Path) -> Iterator[Path]:
    """A copy of specs/ and invariants/ with one id derivation a spec author added."""
    for name in ("specs", "invariants"):
        shutil.copytree(paths.ROOT / name, tmp_path / name)
    path = tmp_path / "specs" / "classes.yaml"
    anchor = "      - {name: in-an-object, wrap: object}\n"
    text = path.read_text(encoding="utf-8")
    assert anchor in text
    path.write_text(text.replace(anchor, anchor + "      - {name: hash-appended-by-an-author,"
                                 " after: \"#\"}\n"), encoding="utf-8")
    yield tmp_path


def test_a_member_added_in_yaml_reaches_fuzz_and_the_reference(authored: Path) -> None:
    """Without touching Python: `refsim fuzz` counts and draws the new member (the class
    sweep draws every member), and `refsim doc` lists it. (check's sample: test_sampled.)"""
    env = {**os.environ, "REFSIM_ROOT": str(authored)}
    members = len(classes.member_names("source-values")) + 1
    fuzz = subprocess.run([sys.executable, "-m", "refsim", "fuzz", "--max-examples", "2",
                           "--steps", "5"], capture_output=True, text=True, timeout=300,
                          check=False, env=env)
    assert f"/{members} members" in fuzz.stdout, fuzz.stdout
    out = authored / "REFERENCE.md"
    subprocess.run([sys.executable, "-m", "refsim", "doc", "--out", str(out)], env=env,
                   capture_output=True, text=True, timeout=300, check=True)
    assert "`hash-appended-by-an-author`" in out.read_text(encoding="utf-8")
    assert f"### `source-values` ({members} members)" in out.read_text(encoding="utf-8")


# ----------------------------------------------------------------------------- the sweep

def test_the_sweep_holds_on_the_reference_host() -> None:
    machine = machine_for(lambda: SimHost(seed=0))
    assert run_programs(machine) is None
    # (the example rows run first, as programs too: tests/test_example_programs.py)
    assert {p.name for p in sweep(["acme", "globex"])} == set(machine.programs_run) - set(
        machine.rows_run)
    for cls in classes.CLASS_NAMES:  # every member of every class drawn
        drawn = {k.split(": ", 1)[1] for k in machine.drawn if k.startswith(cls + ": ")}
        missing = set(classes.member_names(cls)) - drawn
        # A pattern is drawn by the random phase; a derivation that leaves this host's
        # ids as they are (lower-casing its lower-case ids) makes no member of them.
        same = {op.name for op in classes.load().from_id
                if classes.derive(op, "acme/run-0123456789abcdef") is None}
        assert all(m.startswith("pattern ") or m in same for m in missing), (cls, missing)


@pytest.mark.parametrize(("host", "program"), [
    ("accepts-padded-id", "source-values"),  # a class member nobody listed in a row
    ("refuses-cancelled-source", "run-states"),
    ("first-key-only", "task-keys"),
    ("matches-without-nulls", "exact-args"),
    ("percent-path-skips-owner", "owner-routes"),
    ("localised-for-foreign", "request-headers"),
    ("first-ask-marked", "request-headers"),
    # Found by a hostile tester who saw neither the zoo nor the checks (issue 39):
    ("accepts-id-with-fragment", "source-values"),
    ("named-twice-split-brain", "source-values"),
    ("slug-folds-task-keys", "task-keys"),
    ("matches-nfkc-folded", "exact-args"),
    ("etag-before-owner", "owner-routes"),
    ("poll-continuation-skips-owner", "owner-routes"),
    ("bare-segment-any-tenant", "owner-routes"),
    ("lists-foreign-runs-when-filtered", "owner-routes"),
    ("workspace-blind-routes", "owner-routes"),
    ("idempotency-shared-across-workspaces", "owner-routes"),
])
def test_a_sweep_program_kills_the_host_of_its_class(host: str, program: str) -> None:
    faulty = mutant(host)
    machine = machine_for(lambda: faulty.host())
    (chosen,) = [p for p in sweep(sorted(machine.tenant_keys)) if p.name == program]
    result = run_program(machine, chosen)
    assert not result.passed, f"{program} let {host} pass"
    assert result.lines[0] == "state = RecordedFixturesMachine()"
    assert result.lines[-1] == "state.teardown()"


def test_a_sweep_failure_is_the_runs_counterexample_shown_as_written() -> None:
    result = run_machine(lambda: mutant("accepts-padded-id").host(), max_examples=5,
                         steps=10, seed_value=0, shrink=False,
                         database=InMemoryExampleDatabase())
    assert not result.passed and result.program_name == "source-values"
    assert any("refuse_derived" in line for line in result.pasteable)


@pytest.mark.slow
def test_the_machine_alone_kills_every_host_not_timing_only() -> None:
    """The kill matrix's machine column at its default budget (25 examples x 30 steps,
    seed 0): every zoo host but those whose fault is only in time."""
    survivors = []
    for faulty in ZOO:
        if faulty.timing_only:
            continue
        found = run_machine(faulty.host, max_examples=25, steps=30,
                            seed_value=0, shrink=False, database=InMemoryExampleDatabase())
        if found.passed:
            survivors.append(faulty.name)
    assert survivors == []


def test_no_sweep_runs_only_random_examples(capsys: pytest.CaptureFixture[str]) -> None:
    """`refsim fuzz --no-sweep`: the host the sweep kills at once is then left to the random
    search (whose counterexample a --database keeps), and no program is printed as run."""
    from refsim.cli import main
    assert main(["fuzz", "--mutant", "accepts-padded-id", "--max-examples", "2", "--steps",
                 "3", "--seed", "0", "--quiet"]) == 1
    swept = capsys.readouterr().out
    assert "source-values" in swept and "refuse_derived" in swept
    main(["fuzz", "--mutant", "accepts-padded-id", "--max-examples", "2", "--steps", "3",
          "--seed", "0", "--quiet", "--no-sweep"])
    random_only = capsys.readouterr().out
    assert "explicit programs" not in random_only and "class sweep" not in random_only
