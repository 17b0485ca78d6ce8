"""`refsim doc` and specs/REFERENCE.md: current, complete, and honest about error codes."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from refsim.check.assume import parse
from refsim.check.examples import load_examples
from refsim.check.invariants import load_invariants
from refsim.check.registry import load_registry
from refsim.check.runner import Target, run_parts
from refsim.cli import main
from refsim.cli.doc import DEFAULT_OUT, _answer, _assumption_rows, load_answers, render
from refsim.data import paths
from refsim.data.registry_codes import registry
from refsim.demo import run_demo
from refsim.domain.profile import HostProfile
from refsim.domain.refusals import Refusal
from refsim.wire import router as router_module

ROOT = Path(__file__).resolve().parent.parent
# Where the host decides what goes on the wire; refsim/check and refsim/testing only judge.
HOST_SOURCES = [*sorted((ROOT / "refsim" / "domain").glob("*.py")),
                *sorted((ROOT / "refsim" / "wire").glob("*.py")), ROOT / "refsim" / "host.py"]


def test_the_committed_reference_is_current() -> None:
    assert DEFAULT_OUT.read_text(encoding="utf-8") == render(), (
        "specs/REFERENCE.md is stale: run `refsim doc`")


def test_doc_check_passes_on_the_committed_file_and_fails_on_a_stale_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doc", "--check"]) == 0
    copy = tmp_path / "REFERENCE.md"
    assert main(["doc", "--out", str(copy)]) == 0
    assert copy.read_text(encoding="utf-8") == DEFAULT_OUT.read_text(encoding="utf-8")
    assert main(["doc", "--check", "--out", str(copy)]) == 0
    copy.write_text(copy.read_text(encoding="utf-8").replace("MUST", "MAY", 1), encoding="utf-8")
    capsys.readouterr()
    assert main(["doc", "--check", "--out", str(copy)]) == 1
    assert "is stale: run `refsim doc`" in capsys.readouterr().err
    assert main(["doc", "--check", "--out", str(tmp_path / "missing.md")]) == 1


def test_a_spec_edit_shows_up_in_the_reference(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The file is rendered from the data: change the data and the reference changes."""
    answers = yaml.safe_load((paths.SPECS / "error-answers.yaml").read_text(encoding="utf-8"))
    answers["answers"][0]["when"].append("a situation a spec author just added")
    edited = tmp_path / "error-answers.yaml"
    edited.write_text(yaml.safe_dump(answers), encoding="utf-8")
    monkeypatch.setattr("refsim.cli.doc.ANSWERS", edited)
    assert "a situation a spec author just added" in render()
    assert main(["doc", "--check"]) == 1


def test_the_reference_names_every_requirement_rule_row_invariant_and_assumption() -> None:
    text = render()
    reg = load_registry()
    for q in reg.requirements:
        assert f"### `{q.id}`" in text
    for r in reg.rules:
        assert f"| {r.id} | {r.section} |" in text
    for e in load_examples():
        assert f"- `{e.id}`" in text, e.id
    for i in load_invariants():
        assert f"- `{i.id}` ({i.tier}" in text, i.id
    doc = yaml.safe_load((paths.SPECS / "assumptions.yaml").read_text(encoding="utf-8"))
    for a in doc["assumptions"]:
        assert f"### `{a['id']}`" in text
        if a.get("assumable"):
            for alt in a.get("alternatives") or []:
                assert f"`--assume {a['id']}={alt['value']}`" in text


def test_every_answer_is_registered_at_its_status() -> None:
    answers, _ = load_answers()
    codes = registry()
    for a in answers:
        assert codes.get(a.code) == a.status, f"{a.code} is not registered at {a.status}"


@pytest.mark.parametrize(("raw", "problem"), [
    ({"code": "x", "status": 400}, "`when` must list"),
    ({"code": "x", "status": 400, "when": []}, "`when` must list"),
    ({"code": "x", "status": "400", "when": ["w"]}, "`status` must be"),
    ({"code": "x", "status": 400, "when": ["w"], "extra": 1}, "unknown field"),
    ("validation_error", "a mapping with a string code"),
])
def test_a_malformed_answer_row_is_a_clear_error(raw: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        _answer(raw, "answers[0]", http=True)


def _refusal_codes(files: list[Path]) -> set[str]:
    """Codes the host builds HTTP refusals with: `Refusal("code", …)`, plus the profile's
    gone-copy code (a field, so the refusal that uses it names no literal)."""
    found = {HostProfile().gone_copy_code}
    for file in files:
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == "Refusal" and node.args
                    and isinstance(node.args[0], ast.Constant)):
                found.add(str(node.args[0].value))
    return found


def _tool_error_codes(files: list[Path]) -> set[str]:
    """Codes the host puts in a tool result's error: `ToolResult.err("code", …)` and
    `{"code": "…"}` literals."""
    found: set[str] = set()
    for file in files:
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "err" and node.args
                    and isinstance(node.args[0], ast.Constant)):
                found.add(str(node.args[0].value))
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if (isinstance(key, ast.Constant) and key.value == "code"
                            and isinstance(value, ast.Constant)):
                        found.add(str(value.value))
    return found


def test_every_code_the_host_source_can_answer_with_is_listed() -> None:
    answers, tool_errors = load_answers()
    http = _refusal_codes(HOST_SOURCES)
    assert {"validation_error", "not_found", "replay_source_missing"} <= http  # the scan works
    assert http - {a.code for a in answers} == set()
    tools = _tool_error_codes(HOST_SOURCES)
    assert {"fixture_miss", "tool_error"} <= tools
    assert tools - {a.code for a in tool_errors} == set()
    assert {a.code for a in tool_errors} - tools == set(), "a tool error no source emits"


@pytest.fixture
def wire_codes(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[tuple[int, str]]]:
    """Every (status, code) the router puts on the wire while the test runs."""
    seen: set[tuple[int, str]] = set()
    guard = router_module.checked  # type: ignore[attr-defined]

    def spy(refusal: Refusal) -> tuple[int, Refusal]:
        status, out = guard(refusal)
        seen.add((status, out.code))
        return status, out
    monkeypatch.setattr(router_module, "checked", spy)
    yield seen


def test_every_code_a_full_check_and_the_demo_meet_is_listed_and_none_is_padding(
        wire_codes: set[tuple[int, str]]) -> None:
    run_parts(Target(), ("conformance", "examples", "invariants"))
    run_demo()
    answers, _ = load_answers()
    listed = {(a.status, a.code) for a in answers}
    assert wire_codes, "the spy saw no refusal at all"
    assert wire_codes - listed == set()
    # No entry is padding: each is met on the wire or named in the host's source.
    reachable = {c for _, c in wire_codes} | _refusal_codes(HOST_SOURCES) | {
        a.only_under.split("=", 1)[1] for a in answers if a.only_under}
    assert {a.code for a in answers} - reachable == set()
    # A code that needs a reading never appears without it.
    assert not {a.code for a in answers if a.only_under} & {c for _, c in wire_codes}


def test_a_code_that_needs_a_reading_appears_under_it(
        wire_codes: set[tuple[int, str]]) -> None:
    answers, _ = load_answers()
    for a in answers:
        if a.only_under is None:
            continue
        wire_codes.clear()
        run_parts(Target(readings=tuple(parse([a.only_under]))), ("examples",), "gone-copy")
        assert (a.status, a.code) in wire_codes, a.code


def test_bad_spec_data_is_a_clear_error_not_a_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "error-answers.yaml"
    broken.write_text("answers: [code: x\n", encoding="utf-8")  # not YAML
    monkeypatch.setattr("refsim.cli.doc.ANSWERS", broken)
    assert main(["doc", "--check"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("refsim doc: cannot render the reference:") and "Traceback" not in err


@pytest.mark.parametrize(("doc", "problem"), [
    ({"assumptions": [{"id": "x", "question": "q", "reading": "r", "default": "d"}]},
     "x: missing or non-text field.s. source"),
    ({"assumptions": ["x"]}, r"assumptions\[0\] is not a mapping"),
    ({"assumptions": [{"id": "x", "question": "q", "reading": "r", "default": "d",
                       "source": "s", "alternatives": [{"value": "v"}]}]},
     "each alternative is"),
    ([], "expected a mapping"),
    ({"assumptions": [{"id": "x", "question": "q", "reading": "r", "default": "d",
                       "source": "s", "decided_in": "abc"}]}, "decided_in is a list"),
])
def test_a_malformed_assumption_row_is_named(doc: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        _assumption_rows(doc)


def _resolves(pointer: str) -> bool:
    """A `decided_in` pointer, `path[:Qualified.name]`, names real code: the file exists
    and, for a Python file, the module has the name (a class's method, a function, a
    constant); for another file, the name is in its text."""
    import importlib
    path, _, qualified = pointer.partition(":")
    file = paths.ROOT.parent / path if not (paths.ROOT / path).exists() else paths.ROOT / path
    if not file.exists():
        return False
    if not path.endswith(".py") or not qualified:
        return not qualified or qualified.split(".")[-1] in file.read_text(encoding="utf-8")
    found: object = importlib.import_module(path.removesuffix(".py").replace("/", "."))
    for part in qualified.split("."):
        if not hasattr(found, part):
            return False
        found = getattr(found, part)
    return True


def test_every_decided_in_pointer_names_real_code() -> None:
    doc = yaml.safe_load((paths.SPECS / "assumptions.yaml").read_text(encoding="utf-8"))
    rows = doc["assumptions"] if isinstance(doc, dict) else doc
    pointers = [(row["id"], p) for row in rows for p in row.get("decided_in") or []]
    assert len(pointers) > 100
    assert _resolves("refsim/wire/router.py:Router._poll")  # the check can pass...
    assert not _resolves("refsim/domain/suites.py:Suite.parse")  # ...and fail
    assert [(rid, p) for rid, p in pointers if not _resolves(p)] == []


def test_the_spec_author_pages_falsify_sample_is_what_falsify_prints(
        capsys: pytest.CaptureFixture[str]) -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "spec-author.md").read_text(
        encoding="utf-8")
    start = text.index("$ refsim falsify --cached\n") + len("$ refsim falsify --cached\n")
    sample = text[start:text.index("```", start)]
    assert main(["falsify", "--cached"]) == 0
    printed = capsys.readouterr().out.splitlines()
    shown = [ln for ln in sample.splitlines() if ln != "..."]
    assert len(shown) > 5
    for line in shown:  # every line of the sample, in order, in what falsify prints
        assert line in printed, line
    assert shown[-1] == printed[-1]
