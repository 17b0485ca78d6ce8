"""`refsim fuzz --database redis://…`: a campaign's examples in a real Redis, shared by fuzz
processes that need no common file system. A `redis-server` is started on a loopback port
(`.ci/run` installs Debian's redis-server when it is missing)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from refsim.testing.fuzz import FuzzTarget, database_entries
from refsim.zoo.faulty import mutant

pytestmark = pytest.mark.slow

FAULTY = "serves-miss-live"  # a miss reaches the live tool: found in a few examples
STEPS = "30"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = shutil.which("redis-server")
    if server is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is not installed, and CI is set: .ci/run installs it "
                        "with apt-get (Debian package redis-server)")
        pytest.skip("redis-server is not installed (Debian package redis-server)")
    port = _free_port()
    work = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(work)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/3"
    import redis
    client = redis.Redis.from_url(url)
    try:
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        else:
            pytest.fail("redis-server did not answer on its port")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _fuzz(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A separate `refsim fuzz` process, as on another machine: it shares nothing with the
    others but the Redis URL (each runs in its own empty folder)."""
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-m", "refsim", "fuzz", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_two_processes_share_a_counterexample_through_redis(redis_url: str,
                                                             tmp_path: Path) -> None:
    assert database_entries(redis_url) == 0
    # --no-sweep: the class sweep would find this host first, and a sweep's counterexample
    # is found again by every run, never saved; the random search's is saved.
    first = _fuzz("--mutant", FAULTY, "--database", redis_url, "--steps", STEPS,
                  "--max-examples", "300", "--seed", "0", "--no-sweep",
                  cwd=tmp_path / "one")
    assert first.returncode == 1, first.stdout + first.stderr
    assert f"example database: {redis_url} (0 entries before this run)" in first.stdout
    saved = database_entries(redis_url)
    assert saved > 0
    # No example kept on this file system (Hypothesis's own caches of constants and
    # Unicode tables aside).
    assert not [p for p in (tmp_path / "one").rglob("*")
                if p.is_file() and not {"constants", "unicode_data"} & set(p.parts)
                and p.name != ".gitignore"]
    # Another process, elsewhere: it generates nothing, it replays what Redis holds.
    second = _fuzz("--mutant", FAULTY, "--database", redis_url, "--steps", STEPS,
                   "--replay", cwd=tmp_path / "two")
    assert second.returncode == 1, second.stdout + second.stderr
    assert "fail-closed-miss" in second.stdout
    # The reference host replays its own (none): the faulty host's entries stay.
    sound = _fuzz("--database", redis_url, "--steps", STEPS, "--replay",
                  cwd=tmp_path / "three")
    assert sound.returncode == 2, sound.stdout + sound.stderr
    assert "holds no example of this target" in sound.stdout
    assert database_entries(redis_url) == saved
    # In Redis as in a folder, each target's entries are filed under its own label.
    import redis
    keys = redis.Redis.from_url(redis_url).keys(b"hypothesis-example:*")
    label = FuzzTarget(recipe=mutant(FAULTY)).label(int(STEPS)).encode()
    assert keys and all(label in k for k in keys)


def test_an_unreachable_redis_is_one_line_and_exit_2(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{_free_port()}/0"
    done = _fuzz("--database", url, "--max-examples", "1", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(f"refsim fuzz: cannot reach the Redis at {url}")
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
