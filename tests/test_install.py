"""Where refsim finds its data, and what it says when the data is not there: one line,
before any work, never a traceback or a server that answers 500 (`.ci/wheel` installs the
built wheel outside the checkout and runs check, demo and serve there)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from refsim.cli import data_check
from refsim.data import paths


def _refsim(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REFSIM_ROOT": str(root)}
    return subprocess.run([sys.executable, "-m", "refsim", *argv], capture_output=True,
                          text=True, timeout=60, env=env, check=False)


def _copy_of_data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    for name in ("specs", "invariants"):
        shutil.copytree(paths.ROOT / name, root / name)
    return root


def test_a_checkout_reads_the_editable_sources_in_place() -> None:
    assert (paths.SPECS / "requirements.yaml").is_file()
    assert data_check.problem(smoke=True) is None


@pytest.mark.parametrize("argv", [["check"], ["serve", "--port", "0"], ["list"]])
def test_missing_data_is_one_line_before_any_work(tmp_path: Path, argv: list[str]) -> None:
    done = _refsim(tmp_path / "nowhere", *argv)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "specs/requirements.yaml" in done.stderr and "REFSIM_ROOT" in done.stderr
    assert "serving" not in done.stdout


def test_a_broken_file_is_named_and_serve_does_not_start(tmp_path: Path) -> None:
    root = _copy_of_data(tmp_path)
    (root / "specs" / "error-registry.json").write_text("{", encoding="utf-8")
    done = _refsim(root, "serve", "--port", "0")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "specs/error-registry.json" in done.stderr, done.stderr
    assert "serving" not in done.stdout


@pytest.mark.parametrize("broken", ["specs/requirements.yaml", "specs/assumptions.yaml",
                                    "invariants/invariants.yaml"])
def test_a_yaml_file_that_does_not_parse_is_named_by_every_command(tmp_path: Path,
                                                                   broken: str) -> None:
    """Even where a module reads the file as it is imported (requirement ids)."""
    root = _copy_of_data(tmp_path)
    with (root / broken).open("a", encoding="utf-8") as out:
        out.write("\nfoo: [\n")
    for argv in (["check"], ["list"]):
        done = _refsim(root, *argv)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1 and broken in done.stderr, done.stderr


def test_a_copy_of_the_data_named_by_refsim_root_is_read(tmp_path: Path) -> None:
    root = _copy_of_data(tmp_path)
    done = _refsim(root, "check", "0252.shape")
    assert done.returncode == 0, done.stderr
    assert "executed-pass" in done.stdout


def test_serve_refuses_a_host_that_cannot_answer_an_eval(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    from refsim.host import SimHost
    from refsim.wire.response import Response

    def broken(self: SimHost, *args: object, **kwargs: object) -> Response:
        return Response(status=500, headers={}, text="Internal Server Error")
    monkeypatch.setattr(SimHost, "request", broken)
    problem = data_check.problem(smoke=True)
    assert problem is not None and "500" in problem


def test_a_yaml_error_names_the_file_the_line_and_the_column(tmp_path: Path) -> None:
    for name in ("specs", "invariants"):
        shutil.copytree(paths.ROOT / name, tmp_path / name)
    path = tmp_path / "invariants" / "invariants.yaml"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines.insert(3, "  broken: [1, 2")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "refsim", "check"], capture_output=True,
                          text=True, timeout=120, check=False,
                          env={**os.environ, "REFSIM_ROOT": str(tmp_path)})
    assert done.returncode != 0 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "invariants/invariants.yaml" in line and "line " in line and "column " in line
    assert "begun at line 4" in line


def test_a_checkout_whose_data_differs_from_the_data_in_use_is_named(tmp_path: Path) -> None:
    """After `pip install .`, edits to the checkout's specs/ are not read: refsim says so,
    and how to read them."""
    checkout = tmp_path / "checkout"
    for name in ("specs", "invariants"):
        shutil.copytree(paths.ROOT / name, checkout / name)
    (checkout / "pyproject.toml").write_text('[project]\nname = "refsim"\n', encoding="utf-8")
    assert paths.unread_checkout(checkout / "specs") is None  # the same data: nothing to say
    edited = checkout / "specs" / "classes.yaml"
    edited.write_text(edited.read_text(encoding="utf-8") + "\n# an edit\n", encoding="utf-8")
    assert paths.unread_checkout(checkout / "specs") == checkout.resolve()
    done = subprocess.run([sys.executable, "-m", "refsim", "list"], capture_output=True,
                          text=True, timeout=120, check=False, cwd=checkout)
    assert f"not the specs/ and invariants/ of the checkout at {checkout.resolve()}" in (
        done.stderr)
    assert f"pip install -e {checkout.resolve()}" in done.stderr
