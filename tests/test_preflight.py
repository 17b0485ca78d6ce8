"""Nothing green without a host: `check` and `fuzz --base-url` first read the host's
discovery document and stop with one line where it is no OpenWOP v2 host; a row that
passes has observed the host; a run in which no row observed a claim exits 2 (a host that
does not advertise recordedFixtures gets RFC 0252's inapplicable verdict once); Ctrl-C
stops `check` as it stops the other commands; `fuzz` says `passed` only of a run that
passed, and refuses up front a run that would send nothing."""

from __future__ import annotations

import io
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from refsim import SimHost
from refsim.check.findings import Disposition, Row, ok
from refsim.check.observe import KEY_A, KEY_B, discovery_refused
from refsim.cli import main
from refsim.cli.check import discovery_of, nothing_observed
from refsim.wire.httpclient import HttpClient
from refsim.wire.server import background
from refsim.zoo.correct import variant


class _Same(BaseHTTPRequestHandler):
    """A server that is no OpenWOP host: the same JSON on every path."""

    status, body = 200, b'{"hello":"world","agents":5}'

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _answer(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


class _NotFound(_Same):
    status, body = 404, b""


def _serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


@pytest.fixture()
def same_json() -> Iterator[str]:
    yield from _serve(_Same)


@pytest.fixture()
def not_found() -> Iterator[str]:
    yield from _serve(_NotFound)


@pytest.mark.parametrize("command", ["check", "fuzz"])
def test_a_server_that_answers_the_same_json_everywhere_is_refused_atdiscovery_of(
        command: str, same_json: str, capsys: pytest.CaptureFixture[str]) -> None:
    strict = ["--strict"] if command == "check" else []
    assert main([command, "--base-url", same_json, "--api-key", "k", *strict]) == 2
    captured = capsys.readouterr()
    lines = (captured.out + captured.err).strip().splitlines()
    assert len(lines) <= 3 and "/.well-known/openwop" in lines[0]
    assert "no OpenWOP discovery document" in lines[0] and '"hello"' in lines[0]


@pytest.mark.parametrize("command", ["check", "fuzz"])
def test_a_wrong_prefix_is_one_line(command: str, not_found: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--base-url", not_found + "/api", "--api-key", "k"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert f"{not_found}/api/.well-known/openwop answered 404" in line


def test_an_unreachable_host_is_named_by_the_url_given(
        capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    assert main(["check", "--base-url", url, "--api-key", "k"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"refsim: cannot reach {url}/.well-known/openwop")


def test_a_real_host_passes_the_preflight() -> None:
    with background(SimHost(seed=0)) as server:
        assert discovery_refused(HttpClient(server.url)) is None


def test_the_shape_row_is_no_pass_beside_a_host_over_http(
        capsys: pytest.CaptureFixture[str]) -> None:
    """It judges refsim's own schema vectors and sends the host nothing."""
    with background(SimHost(seed=0)) as server:
        main(["conformance", "--base-url", server.url, "--api-key", KEY_A,
              "--tenant-b-api-key", KEY_B, "--json", "/dev/null"])
    out = capsys.readouterr().out
    assert "executed-pass openwop.requirement.0252.shape" not in out
    assert "openwop.requirement.0252.shape" in out.split("In process only")[1]
    main(["conformance"])  # in process the built-in host is refsim, whose vectors they are
    assert "executed-pass openwop.requirement.0252.shape" in capsys.readouterr().out


def test_a_run_that_observed_no_claim_exits_2_with_one_line() -> None:
    blocked = [Row.unjudged("r", "s", Disposition.BLOCKED, "the host lists no fixture x"),
               Row.unjudged("q", "s", Disposition.INAPPLICABLE, "not advertised")]
    code, line = nothing_observed(blocked, discovery_of(SimHost(seed=0))) or (None, "")
    assert code == 2 and "no row observed a claim of RFC 0252" in line
    assert "the host lists no fixture x" in line
    # A host without recordedFixtures: RFC 0252's verdict on it, once, exit 0.
    bare = discovery_of(variant("no-recorded-fixtures").host())
    code, line = nothing_observed(blocked, bare) or (None, "")
    assert code == 0 and line.startswith("inapplicable: the host does not advertise")
    # A row executed: nothing to say.
    passed = Row.judged("r", "s", [ok("r", "seen")])
    assert nothing_observed([passed, *blocked], discovery_of(SimHost(seed=0))) is None


def test_fuzz_refuses_up_front_a_host_it_would_send_nothing(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fuzz", "--variant", "no-recorded-fixtures", "--max-examples", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "does not advertise" in captured.err


def test_fuzz_says_passed_only_of_a_run_that_passed() -> None:
    from refsim.testing.fuzz import FuzzTarget, report, run_machine
    target = FuzzTarget(recipe=variant("no-seams"))
    out = io.StringIO()
    result = run_machine(target.factory(), max_examples=1, steps=2, seed_value=0,
                         shrink=False, programs=False)
    assert report(result, out, target) == 2
    assert not out.getvalue().startswith("passed")
    assert out.getvalue().startswith("no counterexample, but inconclusive")


def _hanging() -> tuple[socket.socket, int]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)
    threading.Thread(target=accept, daemon=True).start()
    return listener, listener.getsockname()[1]


def test_ctrl_c_during_check_against_a_host_that_hangs_exits_130_without_a_traceback(
        ) -> None:
    listener, port = _hanging()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "refsim", "check", "--base-url",
                                 f"http://127.0.0.1:{port}", "--api-key", "k"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        listener.close()
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err and "PARTIAL: stopped (Ctrl-C)" in out


def test_ctrl_c_between_parts_prints_the_rows_judged_so_far(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from refsim.check import examples

    def stop(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt
    monkeypatch.setattr(examples, "run_examples", stop)
    assert main(["check"]) == 130
    out = capsys.readouterr().out
    assert "executed-pass openwop.requirement.0252.shape" in out  # the conformance part
    assert "PARTIAL: stopped (Ctrl-C) during part 2 of 4" in out
