"""`refsim.cli.bench_http.run` prints every figure beside the floor and writes them as JSON.
No figure is judged here: speed lives in the bench, never in a test."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from refsim.cli import bench_http


@pytest.mark.slow  # seconds of measuring, however short the windows
def test_bench_prints_each_figure_beside_the_floor(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_http, "LATENCY_REQUESTS", 20)
    out = io.StringIO()
    path = tmp_path / "bench.json"
    assert bench_http.run(clients=2, seconds=0.4, json_path=str(path), out=out) == 0
    text = out.getvalue()
    for row in ("discovery GET", "replay POST /runs", "latency keep-alive",
                "latency new connection", "keep-alive vs new", "largest request"):
        assert row in text, text
    assert "floor (trivial app)" in text and ">= 500/s" in text
    figures = json.loads(path.read_text(encoding="utf-8"))
    assert figures["clients"] == 2 and figures["errors"] == 0
    assert figures["discovery"]["rps"] > 0 and figures["discovery"]["floorRps"] > 0
    assert figures["replays"]["perSecond"] > 0
    assert set(figures["latencyMs"]) == {"host.keepAlive", "host.newConnection",
                                         "floor.keepAlive", "floor.newConnection"}
    assert figures["largestRequest"]["hostMs"] > 0


@pytest.mark.parametrize("argv", [["--clients", "0"], ["--clients", "100000"],
                                  ["--seconds", "nan"], ["--seconds", "-1"],
                                  ["--seconds", "inf"]])
def test_bench_http_refuses_clients_and_seconds_out_of_range_before_serving(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Through `refsim bench http`, which calls `run` itself, as through the module's own
    entry: a hundred thousand client threads, or a NaN duration, never start."""
    from refsim.cli import main
    assert main(["bench", "http", *argv]) == 2
    assert "--clients takes 1 to 256" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench_http.main(argv)
