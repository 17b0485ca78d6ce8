"""`refsim bench`: its table and JSON say figure, value, calibration, ratio, target and
verdict; the HTTP bench is delegated when present. No timing is asserted here."""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any

import pytest

from refsim.cli import bench, main
from refsim.cli.bench import (
    Figure,
    format_table,
    hollow_machine,
    hollow_machine_seconds,
    machine_in_fresh_process,
    trivial_machine_seconds,
    write_json,
)

REPLAY = Figure("replay-10k", "replayed call", 9.0, "us", "canonical JSON", 2.0, "us", 12.0,
                "us")
FUZZ = Figure("fuzz-200x50", "refsim fuzz", 10.0, "s", "trivial machine", 2.0, "s", 4.0, "x")


def test_a_figure_is_judged_by_its_value_or_by_its_ratio() -> None:
    assert REPLAY.ratio == 4.5 and REPLAY.met  # 9 us <= 12 us, whatever the ratio
    assert FUZZ.ratio == 5.0 and not FUZZ.met  # 5x the trivial machine > 4x
    size = Figure("size", "at 100k", 3.0, "us", "at 1k", 2.5, "us", 1.3, "x")
    assert size.met and size.judged == pytest.approx(1.2)


def test_the_table_names_value_calibration_ratio_target_and_verdict() -> None:
    text = format_table([REPLAY, FUZZ])
    header, replay, fuzz, total = text.splitlines()
    for word in ("figure", "value", "calibration", "ratio", "target", "verdict"):
        assert word in header
    assert "9.00 us" in replay and "canonical JSON 2.00 us" in replay and "4.50x" in replay
    assert "<= 12.00 us" in replay and replay.endswith("met")
    assert "5.00x" in fuzz and "<= 4.00x" in fuzz and fuzz.endswith("NOT MET")
    assert total == "1/2 targets met"


def test_the_json_holds_every_figure(tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    write_json([REPLAY, FUZZ], path, {"python": "3"}, ["a diagnostic"])
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["met"] is False and doc["notes"] == ["a diagnostic"]
    assert [f["key"] for f in doc["figures"]] == ["replay-10k", "fuzz-200x50"]
    assert doc["figures"][1]["calibration"] == {"name": "trivial machine", "value": 2.0,
                                                "unit": "s"}
    assert doc["figures"][1]["target"] == {"max": 4.0, "unit": "x"}


def test_the_trivial_machine_runs() -> None:
    assert trivial_machine_seconds(5, 5) > 0


def test_a_machine_is_timed_in_a_fresh_process_and_a_failure_says_so() -> None:
    """The fuzz figure's runs each get a process of their own (nothing a run before left
    behind); one that cannot run is an error naming it, never a figure."""
    assert machine_in_fresh_process("refsim", 3, 3) > 0
    with pytest.raises(RuntimeError, match="the nonesuch machine's process exited 1"):
        machine_in_fresh_process("nonesuch", 3, 3)


def test_a_machine_process_that_prints_no_time_is_an_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    def silent(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 0, stdout="", stderr="")

    monkeypatch.setattr(subprocess, "run", silent)
    with pytest.raises(RuntimeError, match="the trivial machine's process printed no time"):
        machine_in_fresh_process("trivial", 3, 3)


def test_the_hollow_machine_has_the_real_machines_rules_and_runs() -> None:
    from refsim.testing.stateful import RecordedFixturesMachine

    def shape(machine: type) -> list[tuple[str, tuple[str, ...], list[str]]]:
        state = machine.setup_state()  # type: ignore[attr-defined]
        return sorted((r.function.__name__, r.targets, sorted(r.arguments))
                      for r in state.rules)
    real, hollow = shape(RecordedFixturesMachine), shape(hollow_machine())
    assert hollow == real and len(real) > 10
    assert hollow_machine_seconds(5, 5) > 0


def test_bench_http_says_it_is_not_available_and_exits_2(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """A build without the HTTP bench (its module left out) says so in one line."""
    real = importlib.import_module

    def without_bench_http(name: str, package: str | None = None) -> Any:
        if name == "refsim.cli.bench_http":
            raise ImportError("No module named 'refsim.cli.bench_http'")
        return real(name, package)
    monkeypatch.setattr(importlib, "import_module", without_bench_http)
    err = io.StringIO()
    with redirect_stderr(err):
        assert main(["bench", "http"]) == 2
    assert "not available" in err.getvalue()


@pytest.mark.slow  # a process of its own
def test_whole_processes_cache_bytecode_in_the_benchs_own_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from refsim.cli import bench
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = bench.process_env(tmp_path)
    assert "PYTHONDONTWRITEBYTECODE" not in env and env["PYTHONPYCACHEPREFIX"] == str(tmp_path)
    bench.process_seconds(["-c", "import refsim.domain.clock"], env=env)
    assert list(tmp_path.rglob("clock*.pyc")), "no bytecode kept in the bench's folder"


def test_fuzz_over_http_is_measured_beside_the_same_machine_in_process(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests really sent per step over HTTP (beside those the rules make), and seconds
    per step over HTTP beside in process: both measured in the same run."""
    monkeypatch.setattr(bench, "HTTP_EXAMPLES", 3)
    monkeypatch.setattr(bench, "HTTP_STEPS", 5)
    said: list[str] = []
    requests, speed = bench.fuzz_over_http(said.append)
    assert said and requests.key == "fuzz-http-requests" and speed.key == "fuzz-http-speed"
    assert requests.value > requests.calibration_value > 0 and requests.target == 3.0
    assert speed.value > 0 and speed.calibration_value > 0 and speed.target_unit == "x"
    assert "req" in bench.format_table([requests, speed])


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_the_replay_s_peak_is_its_own_process_s_not_the_bench_s() -> None:
    """The bench starts the memory figure's process while it holds the replays it timed: the
    figure is the started process's own peak (getrusage's ru_maxrss, kept across exec from
    the parent, read twice the replay's peak here)."""
    import subprocess
    import sys
    held = bytearray(256 * 2**20)
    held[::4096] = b"\x01" * len(held[::4096])  # resident, not only reserved
    done = subprocess.run([sys.executable, "-c", "from refsim.cli.bench import own_peak\n"
                           "print(own_peak())"], capture_output=True, text=True, check=True)
    del held
    assert int(done.stdout) < 128 * 2**20
