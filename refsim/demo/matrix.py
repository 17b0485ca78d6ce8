"""The kill matrix as a page: zoo hosts (rows) by requirement ids (columns), one
self-contained HTML file (inline CSS, no script), drawn from `refsim mutants`'s JSON.

`render_matrix` reads the document `refsim.zoo.matrices` writes and tolerates its
optional parts being absent (`findings`, `http`, `machine`, `requirements`).
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

PREFIXES = ("openwop.requirement.", "refsim.requirement.", "openwop.scenario.")


def h(value: object) -> str:
    return escape(str(value), quote=True)


def short(requirement_id: str) -> str:
    for prefix in PREFIXES:
        if requirement_id.startswith(prefix):
            return requirement_id[len(prefix):]
    return requirement_id


def _ids(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _findings(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _http(m: Mapping[str, Any]) -> dict[str, Any] | None:
    """The HTTP part when the mutant was also judged over HTTP; None when absent or
    skipped (`skipped` carries why)."""
    http = m.get("http")
    if not isinstance(http, dict) or "skipped" in http:
        return None
    return http


def _machine(m: Mapping[str, Any]) -> dict[str, Any] | None:
    machine = m.get("machine")
    return machine if isinstance(machine, dict) else None


def columns(doc: Mapping[str, Any]) -> list[str]:
    """The document's `requirements` in their order, else every id any part names, sorted."""
    given = doc.get("requirements")
    if isinstance(given, list) and given:
        return [str(r) for r in given]
    seen: set[str] = set()
    for m in _mutants(doc):
        seen |= set(_ids(m.get("checker"))) | set(_findings(m.get("findings")))
        http = _http(m)
        if http is not None:
            seen |= set(_ids(http.get("checker"))) | set(_findings(http.get("findings")))
        machine = _machine(m)
        if machine is not None and machine.get("requirementId"):
            seen.add(str(machine["requirementId"]))
    return sorted(seen)


def _mutants(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    ms = doc.get("mutants")
    return [m for m in ms if isinstance(m, dict)] if isinstance(ms, list) else []


def _shrink(machine: Mapping[str, Any]) -> str | None:
    """How the machine's step count came about, when the document says: shrunk from the
    count the kill was found with, or why not."""
    unshrunk = machine.get("unshrunkSteps")
    if not isinstance(unshrunk, int) or not machine.get("shrinkBudget"):
        return None
    if machine.get("shrunk") is not True:
        return str(machine.get("shrinkNote") or "not shrunk") + f"; found in {unshrunk}"
    ran_out = "" if machine.get("shrinkComplete") is True else ", the shrink budget ran out"
    return f"shrunk from {unshrunk}{ran_out}"


class Cell:
    """One mutant and one requirement: who killed it there, and what they found."""

    def __init__(self, m: Mapping[str, Any], req: str) -> None:
        self.process = req in _ids(m.get("checker"))
        self.process_detail = _findings(m.get("findings")).get(req)
        http = _http(m)
        self.http = http is not None and req in _ids(http.get("checker"))
        self.http_detail = _findings(http.get("findings")).get(req) if http else None
        machine = _machine(m)
        self.steps: int | None = None
        self.machine_detail: str | None = None
        self.shrink: str | None = None
        if machine is not None and machine.get("requirementId") == req:
            steps = machine.get("steps")
            self.steps = steps if isinstance(steps, int) else 0
            self.machine_detail = str(machine.get("message") or "")
            self.shrink = _shrink(machine)

    @property
    def killed(self) -> bool:
        return self.process or self.http or self.steps is not None

    @property
    def state(self) -> str:
        """Space-separated: process, http, machine, or none."""
        parts = [name for name, on in (("process", self.process), ("http", self.http),
                                        ("machine", self.steps is not None)) if on]
        return " ".join(parts) or "none"

    def detail(self) -> str:
        out = []
        if self.process:
            out.append("killed in process" + (f": {self.process_detail}"
                                              if self.process_detail else ""))
        if self.http:
            out.append("killed over HTTP" + (f": {self.http_detail}" if self.http_detail
                                             else ""))
        if self.steps is not None:
            out.append(f"the machine killed it in {self.steps} step(s)"
                       + (f" ({self.shrink})" if self.shrink else "")
                       + (f": {self.machine_detail}" if self.machine_detail else ""))
        return "; ".join(out) if out else "not killed here"

    def marks(self) -> str:
        out = []
        if self.process:
            out.append('<span class="mk p">P</span>')
        if self.http:
            out.append('<span class="mk h">H</span>')
        if self.steps is not None:
            out.append(f'<span class="mk m">M{self.steps}</span>')
        return "".join(out) or '<span class="mk no">·</span>'


CSS = """
:root { color-scheme: light; --ink: #1f2328; --muted: #57606a; --line: #d0d7de;
  --p: #0f5132; --h: #1d4ed8; --m: #7c2d12; --bad: #b91c1c; --head: #f6f8fa;
  --killed: #e7f5ec; --survived: #fdecec; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--ink); background: #fff;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
  "Noto Sans", "Liberation Sans", sans-serif; }
main { padding: 20px; }
h1 { font-size: 1.5rem; margin: 0 0 6px; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas,
  "Liberation Mono", "DejaVu Sans Mono", monospace; font-size: 0.9em; }
/* The grid scrolls sideways inside its box, never the page; the host column stays put
   (sticky, opaque) so a row keeps its name at any scroll. */
.scroll { overflow-x: auto; max-width: 100%; margin: 12px 0;
  border: 1px solid var(--line); }
.scroll:focus-visible { outline: 3px solid #0550ae; }
table.grid { border-collapse: separate; border-spacing: 0; }
.grid caption { text-align: left; padding: 4px 6px; }
.grid th, .grid td { border: solid var(--line); border-width: 0 1px 1px 0; padding: 2px 3px; }
.grid th.req { vertical-align: bottom; background: var(--head); padding: 6px 2px; }
.grid th.req span { writing-mode: vertical-rl; transform: rotate(180deg); white-space: nowrap;
  font: 12px ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; }
.grid th.row, .grid th.corner { position: sticky; left: 0; z-index: 1; text-align: left;
  background: var(--head); border-right: 2px solid #8c959f; }
.grid th.corner { z-index: 2; vertical-align: bottom; }
.grid th.row { font-weight: 500; }
.grid th.row code { white-space: nowrap; }
.grid th.row .breaks { display: block; color: var(--muted); font-size: 12px;
  white-space: normal; min-width: 200px; max-width: 280px; }
.grid td.cell { text-align: center; min-width: 28px; height: 30px; background: #fff; }
.grid td.cell a { text-decoration: none; color: inherit; display: block; }
.grid td.cell:hover { outline: 3px solid #0550ae; outline-offset: -3px; }
.grid td.killed { background: var(--killed); }
.grid tr.survived th.row { color: var(--bad); background: var(--survived); }
.grid tr.survived td { background: var(--survived); }
.mk { display: inline-block; font: 700 12px ui-monospace, SFMono-Regular, Menlo, Consolas,
  "Liberation Mono", monospace; padding: 0 2px; margin: 1px; border-radius: 3px;
  color: #fff; }
.mk.p { background: var(--p); } .mk.h { background: var(--h); }
.mk.m { background: var(--m); } .mk.no { color: #8c959f; }
.verdict { font-weight: 700; } .killed-row .verdict { color: var(--p); }
.survived .verdict { color: var(--bad); }
.grid tfoot td { text-align: center; font-size: 12px; color: var(--muted); background: #fff; }
ol.details li { margin: 2px 0; overflow-wrap: anywhere; }
ol.details li:target { background: #fff8c5; }
.legend span.mk { margin-right: 4px; }
"""


def render_matrix(doc: dict[str, Any]) -> str:
    """The page, as a pure function of the kill-matrix document: same document, same bytes."""
    reqs = columns(doc)
    mutants = _mutants(doc)
    head = "".join(f'<th class="req" scope="col" title="{h(r)}"><span>{h(short(r))}</span></th>'
                   for r in reqs)
    body, details = [], []
    totals = [0] * len(reqs)
    for i, m in enumerate(mutants):
        name = str(m.get("mutant", f"mutant {i + 1}"))
        killed = m.get("killed") is True
        notes = []
        http = m.get("http")
        if isinstance(http, dict) and "skipped" in http:
            notes.append(f"HTTP skipped: {http['skipped']}")
        elif isinstance(http, dict):
            notes.append("HTTP: " + ("killed" if http.get("killed") is True else "not killed"))
        if "machine" in m and m.get("machine") is None:
            notes.append("machine: no counterexample")
        elif "machine" not in m:
            notes.append("machine not run")
        cells = []
        for j, req in enumerate(reqs):
            cell = Cell(m, req)
            text = f"{name} \u00d7 {req}: {cell.detail()}"
            anchor = f"d-{i}-{j}"
            if cell.killed:
                totals[j] += 1
                details.append(f'<li id="{anchor}" data-mutant="{h(name)}" '
                               f'data-requirement="{h(req)}">{h(text)}</li>')
                inner = f'<a href="#{anchor}">{cell.marks()}</a>'
            else:
                inner = cell.marks()
            cells.append(f'<td class="cell{" killed" if cell.killed else ""}" '
                         f'data-requirement="{h(req)}" data-state="{cell.state}" '
                         f'title="{h(text)}">{inner}</td>')
        row_cls = "killed-row" if killed else "survived"
        verdict = "✓ killed" if killed else "✕ SURVIVED"
        breaks = str(m.get("breaks", ""))
        note = f" · {'; '.join(notes)}" if notes else ""
        body.append(f'<tr class="{row_cls}" data-mutant="{h(name)}" '
                    f'data-killed="{str(killed).lower()}"><th class="row" scope="row">'
                    f'<span class="verdict">{verdict}</span> <code>{h(name)}</code>'
                    f'<span class="breaks">{h(breaks)}{h(note)}</span></th>{"".join(cells)}</tr>')
    survivors = [str(m.get("mutant")) for m in mutants if m.get("killed") is not True]
    summary = f"{len(mutants) - len(survivors)}/{len(mutants)} faulty hosts killed" + (
        f"; survivors: {', '.join(survivors)}" if survivors else "")
    foot = "".join(f"<td>{t}</td>" for t in totals)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        'style-src \'unsafe-inline\'">'
        f"<title>refsim kill matrix: {h(summary)}</title><style>{CSS}</style></head>"
        "<body><main><h1>refsim kill matrix</h1>"
        "<p>Each row is a faulty host of the zoo (<code>refsim/zoo/faulty/</code>), one "
        "swapped component each; each column a requirement id. A cell says who caught the "
        "fault on that requirement: "
        '<span class="legend"><span class="mk p">P</span>the checker in process, '
        '<span class="mk h">H</span>the checker over HTTP, '
        '<span class="mk m">M4</span>the stateful machine, in 4 steps (its counterexample '
        "shrunk for display, within a time budget, from the longer one it was found with; "
        "the hover says from how many), "
        '<span class="mk no">·</span>not killed there.</span> '
        "Hover a cell for the finding, or follow it to its line under the grid.</p>"
        f'<p class="summary verdict">{h(summary)}</p>'
        f"<p>{len(reqs)} requirement columns: the grid scrolls sideways, and each row's "
        "host stays at its left edge.</p>"
        '<div class="scroll" role="region" aria-label="kill matrix" tabindex="0">'
        '<table class="grid"><caption class="mono">faulty hosts &times; requirement ids</caption>'
        '<thead><tr><th class="corner" scope="col">faulty host (what it breaks)</th>'
        f'{head}</tr></thead><tbody>{"".join(body)}</tbody>'
        '<tfoot><tr><th class="row" scope="row">hosts killed per requirement</th>'
        f"{foot}</tr></tfoot></table></div>"
        "<h2>The findings, one line per killed cell</h2>"
        f'<ol class="details">{"".join(details)}</ol>'
        + ("" if details else "<p>No cell is killed.</p>")
        + render_pass_grid(doc.get("correct"))
        + "</main></body></html>\n")


PASS_COLUMNS = ("check in process", "check over HTTP", "fuzz in process", "fuzz over HTTP",
                "diff vs reference")


def render_pass_grid(correct: Any) -> str:
    """The pass matrix: a row per correct host (the reference host with one difference
    the RFC allows), a column per way refsim judges it; a failing cell is refsim's
    false verdict, never the host's fault. Empty when the document has none."""
    if not isinstance(correct, list) or not correct:
        return ""
    rows, notes = [], []
    failing = 0
    for i, d in enumerate(x for x in correct if isinstance(x, dict)):
        name = str(d.get("variant", f"host {i + 1}"))
        given = d.get("cells")
        cells_doc: dict[str, Any] = given if isinstance(given, dict) else {}
        cells = []
        bad = False
        for j, column in enumerate(PASS_COLUMNS):
            cell = cells_doc.get(column)
            if not isinstance(cell, dict):
                cells.append('<td class="cell" data-state="absent">-</td>')
                continue
            ok = cell.get("ok") is True
            bad |= not ok
            why = (cell.get("failed") or cell.get("message") or cell.get("error")
                or cell.get("difference") or "")
            counts = cell.get("counts")
            text = f"{name} \u00d7 {column}: " + ("passed" if ok else "FALSE VERDICT") + (
                f" ({', '.join(f'{k} {v}' for k, v in counts.items())})"
                if isinstance(counts, dict) else "") + (f": {why}" if why else "")
            if not ok:
                notes.append(f'<li id="p-{i}-{j}">{h(text)}</li>')
            if cell.get("skipped"):
                text = (f"{name} \u00d7 {column}: a difference the RFC allows, not diffed: "
                    f"{cell.get('allowed')}")
                cells.append(f'<td class="cell killed" data-state="allowed" '
                             f'title="{h(text)}">≈</td>')
                continue
            cells.append(f'<td class="cell{" killed" if ok else ""}" data-state='
                         f'"{"pass" if ok else "fail"}" title="{h(text)}">'
                         f'{"✓" if ok else "✕"}</td>')
        failing += bad
        rows.append(f'<tr class="{"survived" if bad else "killed-row"}" data-variant="{h(name)}">'
                    f'<th class="row" scope="row"><code>{h(name)}</code><span class="breaks">'
                    f'{h(d.get("allows", ""))}</span></th>{"".join(cells)}</tr>')
    head = "".join(f'<th scope="col">{h(c)}</th>' for c in PASS_COLUMNS)
    summary = f"{len(rows) - failing}/{len(rows)} correct hosts passed every way they were judged"
    return ("<h2>The pass matrix</h2>"
            "<p>Each row is a correct host (<code>refsim/zoo/correct.py</code>): the "
            "reference host with one difference RFC 0252, OpenWOP v2 or HTTP allows, and the "
            "line that allows it. Each column is a way refsim judges a host; every cell must "
            "pass (✓). A failing cell (✕) is a false verdict of refsim's. ≈: a difference a "
            "client sees and the RFC allows, which <code>refsim diff</code> is right to "
            "find, so it is not diffed.</p>"
            f'<p class="summary verdict">{h(summary)}</p>'
            '<div class="scroll" role="region" aria-label="pass matrix" tabindex="0">'
            '<table class="grid pass"><thead><tr><th class="corner" scope="col">correct host '
            f'(what allows it)</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
            "</div>"
            + (f'<ol class="details">{"".join(notes)}</ol>' if notes else ""))

