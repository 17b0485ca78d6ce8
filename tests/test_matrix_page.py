"""`refsim mutants --html`: the kill matrix as a grid, from the kill-matrix JSON document."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from refsim.cli import main
from refsim.demo.matrix import columns, render_matrix
from tests import pages

UNIFORM = "openwop.requirement.0252.source-uniform"
ISOLATION = "refsim.requirement.0252.tenant-isolation"
ECHO = "refsim.requirement.0252.echo-verbatim"

# The shape the integrator's extended JSON takes: findings, http and requirements are
# optional, machine is absent when it did not run and null when it found nothing.
DOC: dict[str, Any] = {"requirements": [UNIFORM, ISOLATION, ECHO], "mutants": [
    {"mutant": "foreign-403", "breaks": "§C: <another> tenant's run is refused like no run",
     "killed": True, "checker": [UNIFORM, ISOLATION],
     "findings": {UNIFORM: "globex's run: 403 <forbidden> & not 400"},
     "http": {"killed": True, "checker": [UNIFORM], "findings": {UNIFORM: "over HTTP: 403"}},
     "machine": {"requirementId": UNIFORM, "steps": 7, "message": "the refusals differ"}},
    {"mutant": "omits-echo", "breaks": "§E: eval.started carries fixtureRuns", "killed": True,
     "checker": [ECHO], "http": {"skipped": "needs the simulator's insides"}, "machine": None},
    {"mutant": "quiet", "breaks": "nothing anyone sees", "killed": False, "checker": []},
]}


def test_the_grid_has_a_row_per_mutant_and_a_cell_state_per_requirement() -> None:
    root = pages.parse(render_matrix(DOC))
    assert pages.check_matrix(root, DOC, DOC["requirements"]) == 3
    rows = {r.attrs["data-mutant"]: r for r in root.find_all("tr")
            if "data-mutant" in r.attrs}
    (all_three,) = [c for c in rows["foreign-403"].find_all("td", "cell")
                    if c.attrs["data-requirement"] == UNIFORM]
    assert all_three.attrs["data-state"] == "process http machine"
    assert [m.text() for m in all_three.find_all("span", "mk")] == ["P", "H", "M7"]
    title = all_three.attrs["title"]
    for part in ("killed in process: globex's run: 403 <forbidden> & not 400",
                 "killed over HTTP: over HTTP: 403",
                 "the machine killed it in 7 step(s): the refusals differ"):
        assert part in title
    assert "HTTP skipped: needs the simulator's insides" in rows["omits-echo"].text()
    assert "machine: no counterexample" in rows["omits-echo"].text()
    assert "machine not run" in rows["quiet"].text() and "SURVIVED" in rows["quiet"].text()
    assert "2/3 faulty hosts killed; survivors: quiet" in root.find("p", "summary").text()


def test_the_page_escapes_the_document_and_is_self_contained() -> None:
    page = render_matrix(DOC)
    assert "<another>" not in page and "&lt;another&gt;" in page
    assert "<forbidden>" not in page
    root = pages.parse(page)
    assert not root.find_all("script") and not root.find_all("link")
    assert "http://" not in page and "https://" not in page
    assert render_matrix(DOC) == page  # a pure function of the document


def test_todays_document_without_the_optional_parts_is_drawn() -> None:
    doc: dict[str, Any] = {"mutants": [
        {"mutant": "a", "breaks": "x", "killed": True, "checker": [ISOLATION, UNIFORM]},
        {"mutant": "b", "breaks": "y", "killed": True, "checker": [ECHO],
         "machine": {"requirementId": UNIFORM, "steps": 3, "message": "m"}}]}
    assert columns(doc) == sorted([ECHO, ISOLATION, UNIFORM])
    root = pages.parse(render_matrix(doc))
    assert pages.check_matrix(root, doc, sorted([ECHO, ISOLATION, UNIFORM])) == 4
    assert "killed in process" in root.find("ol", "details").text()


@pytest.mark.parametrize("doc", [{}, {"mutants": []}, {"mutants": "nonsense"}])
def test_an_empty_document_gives_an_empty_grid(doc: dict[str, Any]) -> None:
    root = pages.parse(render_matrix(doc))
    assert root.find_all("tr", where=lambda n: "data-mutant" in n.attrs) == []
    assert "0/0 faulty hosts killed" in root.text()


@pytest.mark.slow  # runs the kill matrix for its hosts
def test_mutants_html_writes_the_grid_of_the_json_it_computed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page, data = tmp_path / "m.html", tmp_path / "m.json"
    assert main(["mutants", "--only", "omits-echo", "--only", "accepts-without-mode",
                 "--machine-examples", "0", "--json", str(data), "--html", str(page)]) == 0
    assert "2/2 faulty hosts killed" in capsys.readouterr().out
    doc = json.loads(data.read_text(encoding="utf-8"))
    root = pages.parse(page.read_text(encoding="utf-8"))
    killed = pages.check_matrix(root, doc, columns(doc))
    assert killed == sum(len(m["checker"]) for m in doc["mutants"]) > 0


def _machine_cell(machine: dict[str, Any]) -> tuple[str, str]:
    doc: dict[str, Any] = {"requirements": [UNIFORM], "mutants": [
        {"mutant": "m", "breaks": "b", "killed": True, "checker": [], "machine": machine}]}
    (cell,) = pages.parse(render_matrix(doc)).find_all("td", "cell")
    return cell.find("span", "mk").text(), cell.attrs["title"]


def test_the_machine_mark_is_the_shrunk_count_and_the_hover_says_from_what() -> None:
    kill = {"requirementId": UNIFORM, "steps": 3, "message": "differ", "unshrunkSteps": 22,
            "shrinkBudget": 1.0, "shrinkSeconds": 0.8, "shrinkComplete": True, "shrunk": True,
            "program": ["state = RecordedFixturesMachine()"]}
    mark, title = _machine_cell(kill)
    assert mark == "M3"
    assert "the machine killed it in 3 step(s) (shrunk from 22): differ" in title
    _, ran_out = _machine_cell({**kill, "shrinkComplete": False})
    assert "(shrunk from 22, the shrink budget ran out)" in ran_out
    mark, not_shrunk = _machine_cell({**kill, "steps": 22, "shrunk": False,
                                      "shrinkNote": "not shrunk: the shrink run found no "
                                                    "failure"})
    assert mark == "M22"
    assert ("in 22 step(s) (not shrunk: the shrink run found no failure; found in 22)"
        in not_shrunk)
    mark, unasked = _machine_cell({**kill, "steps": 22, "shrinkBudget": 0, "shrunk": False})
    assert mark == "M22" and "in 22 step(s): differ" in unasked


def test_each_grid_scrolls_in_its_own_box_under_a_host_column_that_stays() -> None:
    """The page's half of "the matrix reads at 1300 px" (tests/test_browser.py measures it):
    each grid sits in a box that scrolls sideways, its host column is sticky at the box's
    left edge over an opaque background, and the requirement headers are drawn upright."""
    from refsim.demo.matrix import CSS

    doc = {**DOC, "correct": [{"variant": "v", "allows": "a", "cells": {}}]}
    root = pages.parse(render_matrix(doc))
    grids = root.find_all("table", "grid")
    assert len(grids) == 2
    for box in root.find_all("div", "scroll"):
        (grid,) = box.find_all("table", "grid")
        assert box.attrs["role"] == "region" and box.attrs["tabindex"] == "0"
        assert grid.find("th", "corner")
        assert all("row" in th.classes for th in grid.find_all("th")
                   if th.attrs.get("scope") == "row")
    assert len(root.find_all("div", "scroll")) == 2

    def rule(selector: str) -> str:
        found = re.search(re.escape(selector) + r"[^{]*\{([^}]*)\}", CSS)
        assert found, selector
        return found.group(1)

    assert "overflow-x: auto" in rule(".scroll")
    sticky = rule(".grid th.row, .grid th.corner")
    assert "position: sticky" in sticky and "left: 0" in sticky
    assert "background: var(--head)" in sticky and re.search(r"--head: #[0-9a-f]{6};", CSS)
    assert "writing-mode: vertical-rl" in rule(".grid th.req span")
