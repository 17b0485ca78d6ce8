"""docs/fuzzing.md's HypoFuzz route, run: the optional `hypofuzz` extra installed apart (its own
folder on PYTHONPATH, so this environment's Hypothesis stays as it is), `hypothesis fuzz`
on the page's `fuzz_refsim.py` against a zoo host for a bounded time, then
`refsim fuzz --replay` on what it saved."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from refsim.testing.fuzz import database_entries

# About 30 s, 17 of them installing the extra: in the slow tier, and in `.ci/run`.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
FAULTY = "echoes-id"  # a refusal repeats the id: HypoFuzz finds it within seconds
BUDGET = 150.0  # seconds HypoFuzz may take to find it


def _snippet() -> str:
    text = (ROOT / "docs" / "fuzzing.md").read_text(encoding="utf-8")
    start = text.index("```python\n# fuzz_refsim.py") + len("```python\n")
    return text[start:text.index("```", start)]


@pytest.fixture(scope="module")
def hypofuzz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the `hypofuzz` extra as pyproject.toml states it."""
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "project"]["optional-dependencies"]["hypofuzz"]
    target = tmp_path_factory.mktemp("hypofuzz")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target",
                           str(target), *extra], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"pip could not install the hypofuzz extra: {done.stderr[-800:]}")
        pytest.skip("pip could not install the hypofuzz extra (no package index?)")
    return target


def _replay(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "refsim", "fuzz", "--mutant", FAULTY,
                           "--replay", "--database", ".refsim-db", "--steps", "30"],
                          cwd=cwd, capture_output=True, text=True, timeout=300)


def test_hypofuzz_finds_saves_and_refsim_replays(hypofuzz: Path, tmp_path: Path) -> None:
    """HypoFuzz runs until what it saved replays as a failure under `refsim fuzz --replay`,
    then is stopped: it would stop by itself only at its hub's next look, once a minute."""
    (tmp_path / "fuzz_refsim.py").write_text(_snippet(), encoding="utf-8")
    # CI set, as on a CI machine: Hypothesis then loads its "ci" profile, which derandomizes
    # every test, and HypoFuzz refuses to fuzz a derandomized one unless the snippet says not.
    env = {**os.environ, "PYTHONPATH": str(hypofuzz), "REFSIM_FUZZ_MUTANT": FAULTY,
           "CI": "true"}
    db = tmp_path / ".refsim-db"
    log = tmp_path / "hypofuzz.log"
    replay = None
    with log.open("w", encoding="utf-8") as out:
        fuzzer = subprocess.Popen([sys.executable, str(hypofuzz / "bin" / "hypothesis"), "fuzz",
                                   "-n", "1", "--no-dashboard", "--", "fuzz_refsim.py"],
                                  cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  text=True, start_new_session=True)
        try:
            deadline = time.monotonic() + BUDGET
            while time.monotonic() < deadline and fuzzer.poll() is None:
                time.sleep(1)
                if db.is_dir() and database_entries(db) > 0:
                    tried = _replay(tmp_path)
                    if tried.returncode == 1:  # what HypoFuzz saved fails: found and saved
                        replay = tried
                        break
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(fuzzer.pid, signal.SIGTERM)
            try:
                fuzzer.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(fuzzer.pid, signal.SIGKILL)
                fuzzer.wait()
    output = log.read_text(encoding="utf-8")[-3000:]
    assert replay is not None, output
    # The echo breaks whichever of these the machine judges first: the refusal's own lines,
    # or isolation when the echoed id is another tenant's run.
    assert any(req in replay.stdout for req in ("0252.no-echo", "0252.source-refused",
                                                "0252.tenant-isolation")), replay.stdout
    saved = database_entries(db)
    started = time.monotonic()
    again = _replay(tmp_path)  # replaying the database leaves it as it is
    assert again.returncode == 1, again.stdout + again.stderr
    assert time.monotonic() - started < 120
    assert database_entries(db) == saved
