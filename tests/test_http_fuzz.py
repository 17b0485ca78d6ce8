"""The stateful machine over HTTP against `refsim serve` (white-box checks skipped)."""

from __future__ import annotations

import pytest

from refsim import SimHost
from refsim.testing.fuzz import run_machine
from refsim.wire.httpclient import HttpClient
from refsim.wire.server import background


@pytest.mark.slow
def test_fuzz_over_http_passes_against_refsim_serve() -> None:
    with background(SimHost()) as server:
        client = HttpClient(server.url)
        result = run_machine(lambda: client, max_examples=40, steps=15, seed_value=3,
                             keys={"acme": "hk_test_acme", "globex": "hk_test_globex"})
    assert server.handler_errors == []
    assert result.passed, result.message + "\n" + "\n".join(result.program)
    assert result.machine.examples_run >= 40
    assert result.machine.branches["refusal:foreign"] > 0
    assert result.machine.branches["replay:no-miss"] + result.machine.branches["replay:miss"] > 0
