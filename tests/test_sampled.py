"""check's sample of each class of specs/classes.yaml (refsim.check.sampled): each row passes
on the reference host (in process and over HTTP), fails on the faulty host built for its
class, repeats its sample under a seed, stands aside where the host lacks a fact, and takes
a member a spec author adds to specs/classes.yaml without any Python."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from refsim import SimHost
from refsim.check import classes
from refsim.check.findings import Disposition, Row
from refsim.check.observe import KEY_A, KEY_B, TENANT_A
from refsim.check.runner import Target, run_parts
from refsim.check.sampled import SCENARIO, check_id, requirement, run_sampled, sample_sizes
from refsim.cli import main
from refsim.data import paths
from refsim.wire.httpclient import HttpClient
from refsim.wire.response import Response
from refsim.wire.server import background
from refsim.zoo.correct import variant
from refsim.zoo.faulty import mutant

# Each new faulty host of the zoo, and the class whose row must catch it.
KILLS = [
    ("accepts-id-in-a-list", "source-values"),
    ("accepts-id-in-an-object", "source-values"),
    ("decodes-body-ids-like-path-ids", "source-values"),
    ("accepts-id-nfkc-folded", "source-values"),
    ("folds-task-keys", "task-keys"),
    ("foreign-polls-eval-events", "owner-routes"),
    ("foreign-reads-eval-snapshot", "owner-routes"),
    ("foreign-cancels-eval-run", "owner-routes"),
    ("idempotency-ignores-fixture-runs", "owner-routes"),
    ("idempotency-shared-across-owners", "owner-routes"),
    # Older hosts each class's row catches too (run states, exact args, request headers).
    ("refuses-cancelled-source", "run-states"),
    ("matches-lists-in-any-order", "exact-args"),
    ("problem-json-oracle", "request-headers"),
]


def _rows(target: Target) -> dict[str, Row]:
    return {r.check_id: r for r in run_parts(target, ("sampled",))}


@pytest.fixture(scope="module")
def reference() -> dict[str, Row]:
    return _rows(Target())


def test_one_row_per_class_each_passing_on_the_reference_host(
        reference: dict[str, Row]) -> None:
    assert list(reference) == [check_id(c) for c in classes.CLASS_NAMES]
    for cls in classes.CLASS_NAMES:
        row = reference[check_id(cls)]
        assert row.passed, (cls, row.detail)
        assert row.requirement_id == requirement(cls) and row.scenario_id == SCENARIO
        assert row.detail.startswith(f"{sample_sizes([row])[cls]} sampled (seed 0)")


@pytest.mark.parametrize(("name", "cls"), KILLS, ids=[k[0] for k in KILLS])
def test_each_class_row_fails_on_the_host_built_for_it(name: str, cls: str,
                                                       reference: dict[str, Row]) -> None:
    row = _rows(Target(recipe=mutant(name)))[check_id(cls)]
    assert row.disposition is Disposition.EXECUTED_FAIL, (name, row.detail)
    assert reference[check_id(cls)].passed


@pytest.mark.parametrize("seed", [1, 7])
def test_a_seed_repeats_its_sample_and_another_draws_another(seed: int) -> None:
    ids = ["acme/run-0123456789abcdefghij", "globex/run-zyxwvutsrq9876543210"]
    for cls in classes.CLASS_NAMES:
        again = classes.sample(cls, seed, ids=ids, keys=["record"])
        assert again == classes.sample(cls, seed, ids=ids, keys=["record"])
    drawn = {s: [m.name for m in classes.sample("source-values", s, ids=ids)]
             for s in (seed, seed + 1)}
    assert drawn[seed] != drawn[seed + 1]
    first = {r.check_id: r.detail for r in run_parts(Target(seed=seed), ("sampled",))}
    assert first == {r.check_id: r.detail for r in run_parts(Target(seed=seed), ("sampled",))}
    assert all(f"(seed {seed})" in d for d in first.values())


def test_check_prints_each_class_size_and_the_json_carries_the_seed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert main(["check", "sampled", "--seed", "5", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.startswith("sampled from specs/classes.yaml"))
    assert "(--seed 5)" in line
    doc = json.loads(out.read_text())
    assert doc["sample"]["seed"] == 5
    assert list(doc["sample"]["sizes"]) == list(classes.CLASS_NAMES)
    for cls, size in doc["sample"]["sizes"].items():
        assert f"{cls} {size}" in line and size > 0


class _Counting:
    """A client that counts the requests through it."""

    def __init__(self, host: SimHost) -> None:
        self.host, self.count = host, 0

    def request(self, method: str, path: str, *, api_key: str | None = None,
                json: Any = None, headers: dict[str, str] | None = None) -> Response:
        self.count += 1
        if json is None:
            return self.host.request(method, path, api_key=api_key, headers=headers)
        return self.host.request(method, path, api_key=api_key, json=json, headers=headers)


def test_the_part_stays_cheap() -> None:
    """Few requests: the whole part costs check ~50 ms in process. (374 since the classes
    grew by a task named twice, listings, another workspace's key and every argument
    variant: each member is one or two requests, so the bound follows the data.)"""
    client = _Counting(SimHost(seed=0))
    rows = run_sampled(lambda: client)  # type: ignore[arg-type, return-value]
    assert all(r.passed for r in rows)
    assert client.count < 400, client.count


def test_over_http_every_row_passes_on_the_reference_and_fails_on_a_faulty_host() -> None:
    with background(SimHost(seed=0)) as server:
        rows = run_parts(Target(), ("sampled",), client=HttpClient(server.url),
                         api_key=KEY_A, tenant_b_key=KEY_B)
    assert [r.check_id for r in rows if not r.passed] == []
    assert len(rows) == len(classes.CLASS_NAMES)
    with background(mutant("foreign-cancels-eval-run").host()) as server:
        rows = run_parts(Target(), ("sampled",), client=HttpClient(server.url),
                         api_key=KEY_A, tenant_b_key=KEY_B)
    failed = [r.check_id for r in rows if r.disposition is Disposition.EXECUTED_FAIL]
    assert failed == [check_id("owner-routes")]


def test_without_a_second_tenant_the_rows_that_need_one_are_blocked() -> None:
    host = SimHost(seed=0)
    rows = {r.check_id: r for r in run_sampled(lambda: host, keys={TENANT_A: KEY_A})}
    for cls in ("owner-routes", "request-headers"):
        assert rows[check_id(cls)].disposition is Disposition.BLOCKED
        assert "second tenant" in rows[check_id(cls)].detail
    assert rows[check_id("source-values")].passed and rows[check_id("run-states")].passed


def test_a_host_without_the_suite_seam_blocks_exact_args_and_one_without_the_facet_is_inapplicable(
        ) -> None:
    rows = _rows(Target(recipe=variant("no-seams")))
    assert rows[check_id("exact-args")].disposition is Disposition.BLOCKED
    assert "eval-suites" in rows[check_id("exact-args")].detail
    assert rows[check_id("source-values")].passed
    rows = _rows(Target(profile="no-recorded-fixtures"))
    assert {r.disposition for r in rows.values()} == {Disposition.INAPPLICABLE}


def test_a_prefix_runs_only_the_classes_it_names() -> None:
    rows = run_parts(Target(), ("sampled",), "sampled-task-keys")
    assert [r.check_id for r in rows] == [check_id("task-keys")]


@pytest.fixture
def authored(tmp_path: Path) -> Iterator[Path]:
    """A copy of specs/ and invariants/ a spec author may edit."""
    for name in ("specs", "invariants"):
        shutil.copytree(paths.ROOT / name, tmp_path / name)
    yield tmp_path


def test_a_member_added_to_the_data_reaches_checks_sample_without_python(
        authored: Path) -> None:
    path = authored / "specs" / "classes.yaml"
    text = path.read_text(encoding="utf-8")
    anchor = "      - {name: in-an-object, wrap: object}\n"
    assert anchor in text
    path.write_text(text.replace(anchor, anchor + "      - {name: tilde-appended-by-an-author, "
                                 "after: \"~\"}\n"), encoding="utf-8")
    env = {**os.environ, "REFSIM_ROOT": str(authored)}
    script = ("from refsim.check.runner import Target, run_parts\n"
              "for r in run_parts(Target(), ('sampled',), 'sampled-source-values'):\n"
              "    print(r.disposition.value, r.detail.split(';')[0])\n"
              "    print('\\n'.join(f.message for f in r.findings))\n")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, check=True, timeout=120)
    assert "tilde-appended-by-an-author" in done.stdout
    assert done.stdout.startswith("executed-pass")
    before = sample_sizes(run_parts(Target(), ("sampled",), "sampled-source-values"))
    after = int(done.stdout.split()[1])
    assert after == before["source-values"] + 1
