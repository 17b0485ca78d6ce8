"""`refsim bench http`: the HTTP face under N keep-alive clients, beside a trivial ASGI app.

Both servers run in child processes (uvicorn with refsim's h11 protocol), so the clients
here do not share a GIL with them; the floor is the same server serving an app that
answers at once. Figures only: nothing here fails because a machine is slow.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

KEY = "hk_test_acme"
RECORDER = "conformance.eval:recorder"
SOURCE = {"mode": "eval", "evalSuiteRef": "conformance-eval-recorded-source",
          "agentId": RECORDER}
LATENCY_REQUESTS = 300
ROUNDS = 3
TARGET_DISCOVERY_SHARE = 0.5
TARGET_REPLAYS = 500.0
TARGET_KEEPALIVE_RATIO = 2.0
TARGET_HOST_MS = 200.0


# -- the servers (child processes)

async def _floor_app(scope: dict[str, Any], receive: Callable[[], Any],
                     send: Callable[[dict[str, Any]], Any]) -> None:
    """The floor: an ASGI app that reads the request and answers a fixed small body."""
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False) and message["type"] == "http.request"
    status = 201 if scope["method"] == "POST" else 200
    body = b'{"ok":true}'
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _child(kind: str) -> int:
    """Serve the host (`host`) or the floor app (`floor`) on 127.0.0.1:0 until killed."""
    from refsim.host import SimHost
    from refsim.wire.server import make_server

    host = SimHost(seed=0)
    server = make_server(host, "127.0.0.1", 0, app=_floor_app if kind == "floor" else None)
    print(server.url, flush=True)
    server.serve_forever()
    return 0


@contextmanager
def _served(kind: str) -> Iterator[tuple[str, int]]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "refsim.cli.bench_http", "--child", kind],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"the {kind} server did not start")
        host, _, port = url.removeprefix("http://").rpartition(":")
        yield host, int(port)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- a raw keep-alive client (cheap, so the client side measures little of itself)

class _Conn:
    def __init__(self, address: tuple[str, int]) -> None:
        self.address = address
        self.sock = socket.create_connection(address, timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def close(self) -> None:
        self.sock.close()

    def exchange(self, request: bytes) -> tuple[int, bytes]:
        self.sock.sendall(request)
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ")[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(rest) < length:
            self.buffer = rest
            self._fill()
            rest = self.buffer
        self.buffer = rest[length:]
        return status, rest[:length]

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buffer += chunk


def _get(path: str, close: bool = False) -> bytes:
    extra = b"Connection: close\r\n" if close else b""
    return b"GET " + path.encode() + b" HTTP/1.1\r\nHost: bench\r\n" + extra + b"\r\n"


def _post(path: str, body: dict[str, Any]) -> bytes:
    data = json.dumps(body).encode()
    return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: bench\r\n"
            b"Authorization: Bearer " + KEY.encode() + b"\r\n"
            b"Content-Type: application/json\r\nContent-Length: " + str(len(data)).encode()
            + b"\r\n\r\n" + data)


def _throughput(address: tuple[str, int], request: bytes, expect: int, clients: int,
                seconds: float) -> tuple[float, int]:
    """Requests/s with `clients` threads, each on one keep-alive connection; and errors."""
    counts = [0] * clients
    errors = [0] * clients
    start = threading.Barrier(clients + 1)
    stop = threading.Event()

    def work(i: int) -> None:
        conn = _Conn(address)
        try:
            start.wait()
            while not stop.is_set():
                status, _ = conn.exchange(request)
                if status == expect:
                    counts[i] += 1
                else:
                    errors[i] += 1
        except OSError:
            errors[i] += 1
        finally:
            conn.close()

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    began = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    elapsed = time.perf_counter() - began
    return sum(counts) / elapsed, sum(errors)


def _paired(host: tuple[str, int], request: bytes, expect: int, floor: tuple[str, int],
            floor_request: bytes, clients: int, seconds: float) -> tuple[float, float, int]:
    """Host and floor req/s, measured in alternating rounds; the best round of each, so a
    burst of load from elsewhere on the machine does not decide the comparison."""
    best_host = best_floor = 0.0
    errors = 0
    for _ in range(ROUNDS):
        rps, bad = _throughput(host, request, expect, clients, seconds / ROUNDS)
        best_host, errors = max(best_host, rps), errors + bad
        rps, bad = _throughput(floor, floor_request, expect, clients, seconds / ROUNDS)
        best_floor, errors = max(best_floor, rps), errors + bad
    return best_host, best_floor, errors


def _latencies(address: tuple[str, int], path: str, *, reuse: bool, n: int) -> list[float]:
    out: list[float] = []
    conn = _Conn(address) if reuse else None
    try:
        for _ in range(n):
            began = time.perf_counter()
            if conn is not None:
                conn.exchange(_get(path))
            else:
                fresh = _Conn(address)
                try:
                    fresh.exchange(_get(path, close=True))
                finally:
                    fresh.close()
            out.append(time.perf_counter() - began)
    finally:
        if conn is not None:
            conn.close()
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _source_run(address: tuple[str, int]) -> str:
    conn = _Conn(address)
    try:
        status, body = conn.exchange(_post("/runs", SOURCE))
    finally:
        conn.close()
    if status != 201:
        raise RuntimeError(f"the source run was refused: {status} {body[:200]!r}")
    run_id: str = json.loads(body)["runId"]
    return run_id


def _largest_host_ms() -> tuple[str, float]:
    """Host time (the lock held) of the largest eval runs the seam caps accept, and their
    replays, measured in process: (which, milliseconds) of the slowest."""
    from refsim.host import SimHost
    from refsim.wire import limits

    host = SimHost(seed=0)
    calls, task_trials = limits.MAX_RUN_CALLS, limits.MAX_RUN_TASK_TRIALS
    shapes = {"calls": (3, calls // 3, 1),
              "tasks": (limits.MAX_SUITE_TASKS, calls // limits.MAX_SUITE_TASKS, 1),
              "trials": (task_trials // limits.MAX_TRIALS, calls // task_trials,
                         limits.MAX_TRIALS)}
    worst = ("", 0.0)
    for name, (tasks, calls, trials) in shapes.items():
        script: list[Any] = [{"call": "conformance.eval:counter",
                              "args": {"op": "inc", "key": f"k{j}"}} for j in range(calls)]
        suite = {"suiteId": f"acme.evals.bench-{name}", "version": "1.0.0",
                 "modes": ["golden"], "trials": trials,
                 "tasks": [{"taskId": f"t{i}", "input": {"script": [*script, {"decide": "d"}]},
                            "expected": {"kind": "golden",
                                         "match": {"strategy": "exact", "value": "d"}}}
                           for i in range(tasks)]}
        host.request("POST", "/conformance/seams/eval-suites", api_key=KEY, json={"suite": suite})
        body: dict[str, Any] = {"mode": "eval", "evalSuiteRef": suite["suiteId"],
                                "agentId": RECORDER}
        first = host.request("POST", "/runs", api_key=KEY, json=body)
        for label, extra in ((name, {}), (name + " replay",
                                          {"fixtureRuns": {"t0": first.json["runId"]}})):
            if extra:
                host.request("POST", "/runs", api_key=KEY, json={**body, **extra})
            held = host.router.last_hold_seconds * 1000
            if held > worst[1]:
                worst = (label, held)
    return worst


# -- the bench

MAX_CLIENTS = 256  # each client is a thread holding a connection


def arguments_refused(clients: int, seconds: float) -> str | None:
    """What is wrong with these arguments, or None: both entries (this module's and `refsim
    bench http`) ask before starting servers."""
    if not 1 <= clients <= MAX_CLIENTS or not 0 < seconds <= 3600:
        return (f"--clients takes 1 to {MAX_CLIENTS} and --seconds more than 0, at most "
                "3600")
    return None


def run(*, clients: int = 8, seconds: float = 5.0, json_path: str | None = None,
        out: TextIO) -> int:
    """Measure and print; write the figures to `json_path` as JSON when given. Exit 0."""
    phase = max(0.6, seconds / 2.5)
    figures: dict[str, Any] = {"clients": clients, "secondsPerPhase": phase}
    print(f"refsim bench http: {clients} keep-alive clients, {phase:g} s per phase, "
          f"uvicorn (h11) in child processes", file=out, flush=True)
    with _served("host") as host, _served("floor") as floor:
        source = _source_run(host)
        replay = {"mode": "eval", "evalSuiteRef": "conformance-eval-recorded-replay",
                  "agentId": RECORDER, "fixtureRuns": {"record": source}}
        d_host, d_floor, e1 = _paired(host, _get("/.well-known/openwop"), 200,
                                      floor, _get("/"), clients, phase)
        r_host, r_floor, e3 = _paired(host, _post("/runs", replay), 201,
                                      floor, _post("/runs", replay), clients, phase)
        lat = {}
        for name, address, path in (("host", host, "/.well-known/openwop"),
                                    ("floor", floor, "/")):
            for reuse in (True, False):
                values = _latencies(address, path, reuse=reuse, n=LATENCY_REQUESTS)
                lat[(name, reuse)] = (_pct(values, 0.5), _pct(values, 0.99))
    largest, largest_ms = _largest_host_ms()
    share = d_host / d_floor if d_floor else 0.0
    ka_ratio = (lat[("host", True)][0] / lat[("host", False)][0]
        if lat[("host", False)][0] else 0.0)
    rows: list[tuple[str, str, str, str, bool | None]] = [
        ("discovery GET", f"{d_host:8.0f} req/s", f"{d_floor:8.0f} req/s",
         f">= {TARGET_DISCOVERY_SHARE:.0%} of floor: {share:.0%}",
         share >= TARGET_DISCOVERY_SHARE),
        ("replay POST /runs", f"{r_host:8.0f} runs/s", f"{r_floor:8.0f} req/s",
         f">= {TARGET_REPLAYS:.0f}/s: {r_host:.0f}/s", r_host >= TARGET_REPLAYS),
    ]
    for reuse, label in ((True, "keep-alive"), (False, "new connection")):
        (h50, h99), (f50, f99) = lat[("host", reuse)], lat[("floor", reuse)]
        rows.append((f"latency {label}", f"p50 {h50:5.2f} p99 {h99:5.2f} ms",
                     f"p50 {f50:5.2f} p99 {f99:5.2f} ms", "", None))
    rows.append(("keep-alive vs new", f"p50 ratio {ka_ratio:.2f}", "",
                 f"<= {TARGET_KEEPALIVE_RATIO:g}x: {ka_ratio:.2f}x",
                 ka_ratio <= TARGET_KEEPALIVE_RATIO))
    rows.append(("largest request", f"{largest_ms:6.1f} ms host time", f"({largest} run)",
                 f"<= {TARGET_HOST_MS:g} ms", largest_ms <= TARGET_HOST_MS))
    print(f"  {'':20s} {'refsim':26s} {'floor (trivial app)':26s} target", file=out)
    for name, mine, floor_text, target, met in rows:
        mark = "" if met is None else ("  met" if met else "  NOT met")
        print(f"  {name:20s} {mine:26s} {floor_text:26s} {target}{mark}", file=out)
    errors = e1 + e3
    print(f"  non-success answers or dropped connections: {errors}", file=out, flush=True)
    figures.update({
        "discovery": {"rps": d_host, "floorRps": d_floor, "shareOfFloor": share},
        "replays": {"perSecond": r_host, "floorRps": r_floor},
        "latencyMs": {f"{name}.{'keepAlive' if reuse else 'newConnection'}":
                      {"p50": p50, "p99": p99} for (name, reuse), (p50, p99) in lat.items()},
        "keepAliveP50Ratio": ka_ratio, "errors": errors,
        "largestRequest": {"run": largest, "hostMs": largest_ms},
        "targets": {"discoveryShare": TARGET_DISCOVERY_SHARE, "replaysPerSecond": TARGET_REPLAYS,
                    "keepAliveP50Ratio": TARGET_KEEPALIVE_RATIO, "hostMs": TARGET_HOST_MS},
    })
    if json_path is not None:
        with open(json_path, "w", encoding="utf-8") as handle:
            json.dump(figures, handle, indent=2, sort_keys=True)
            handle.write("\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m refsim.cli.bench_http",
                                     description="refsim bench http (see refsim.cli.bench_http)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--json", dest="json_path", default=None)
    parser.add_argument("--child", choices=["host", "floor"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child)
    refused = arguments_refused(args.clients, args.seconds)
    if refused is not None:
        parser.error(refused)
    return run(clients=args.clients, seconds=args.seconds, json_path=args.json_path,
               out=sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
