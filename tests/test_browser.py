"""Both pages in a real browser: headless Chromium, the network blocked, the DOM it built
checked, and a screenshot that is not blank; then both measured at a 1300 px wide window
(a test-only copy of the page runs MEASURE and leaves its figures in the DOM it dumps: the
pages themselves carry no script).

Chromium is the Debian package `chromium`; `.ci/run` installs it when missing. Without it
the test skips, except under CI (the `CI` variable set), where its absence is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from refsim.check.registry import load_registry
from refsim.cli import main
from refsim.demo import LEGS
from refsim.demo.matrix import PASS_COLUMNS, columns, render_matrix
from refsim.zoo.correct import PASS_ZOO
from refsim.zoo.faulty import ZOO
from tests import pages
from tests.test_matrix_page import DOC

pytestmark = pytest.mark.slow

RED = bytes((0xB9, 0x1C, 0x1C))  # the refusal's stop box: a shape filled with one colour
BLUE = bytes((0x1D, 0x4E, 0xD8))  # a call served from the recording
PROCESS = bytes((0x0F, 0x51, 0x32))  # the matrix's "killed in process" mark


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium") or next(
        (p for p in ("/usr/bin/chromium",) if Path(p).exists()), None)
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed, and CI is set: .ci/run installs it with "
                    "apt-get (Debian package chromium)")
    pytest.skip("chromium is not installed (Debian package chromium); the browser test "
                "needs it")


def _browse(chromium: str, page: Path, work: Path, *action: str) -> bytes:
    """Run headless Chromium on `page` with the network blocked; return its stdout, and
    check from its net log that the page asked for nothing."""
    out, asked = _run(chromium, page, work, *action)
    assert asked == [], f"{page.name} asked the network for {asked}"
    return out


def _run(chromium: str, page: Path, work: Path, *action: str) -> tuple[bytes, list[str]]:
    work.mkdir(parents=True, exist_ok=True)
    netlog = work / "net.json"
    args = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--hide-scrollbars",
            f"--user-data-dir={work / 'profile'}",
            # Every request goes to a proxy that is not there, and no name resolves.
            "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
            "--host-resolver-rules=MAP * ~NOTFOUND", f"--log-net-log={netlog}",
            *action, page.as_uri()]
    # A bound against a hung browser, not a measurement: nothing here is timed.
    done = subprocess.run(args, capture_output=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")[-2000:]
    return done.stdout, _page_requests(netlog)


def _page_requests(netlog: Path) -> list[str]:
    """URLs the page itself asked for: requests keyed to the file:// page, not those the
    browser makes on its own (its update and account services, which the proxy stops)."""
    log: dict[str, Any] = json.loads(netlog.read_text(encoding="utf-8"))
    return sorted({str(e["params"]["url"]) for e in log.get("events", [])
                   if isinstance(e.get("params"), dict) and "url" in e["params"]
                   and "file://" in str(e["params"].get("network_isolation_key", ""))})


def _dom(chromium: str, page: Path, work: Path) -> pages.Node:
    return pages.parse(_browse(chromium, page, work / "dom", "--dump-dom").decode("utf-8"))


def _screenshot(chromium: str, page: Path, work: Path, size: str) -> dict[bytes, int]:
    shot = work / "screenshot.png"
    _browse(chromium, page, work / "shot", f"--screenshot={shot}", f"--window-size={size}")
    width, height, rows = pages.decode_png(shot.read_bytes())
    assert f"{width},{height}" == size
    counts = pages.colours(rows)
    # Not blank: many colours (text is antialiased), and no one colour fills the picture.
    assert len(counts) > 50, len(counts)
    assert max(counts.values()) < 0.97 * width * height
    return counts


def test_the_demo_page_in_chromium(chromium: str, tmp_path: Path) -> None:
    assert main(["demo", "--out", str(tmp_path / "demo")]) == 0
    page = tmp_path / "demo" / "latest" / "report.html"
    report = json.loads(page.with_name("report.json").read_text(encoding="utf-8"))
    slugs = [c["slug"] for c in report["chapters"]]
    root = _dom(chromium, page, tmp_path)
    states = pages.check_report(root, slugs, list(LEGS))
    assert states["drift"].count("miss") == 1 and states["replay"].count("recording") == 2
    counts = _screenshot(chromium, page, tmp_path, "1280,1600")
    # The top of the page holds the key to the diagrams: the styles were applied.
    assert counts.get(RED, 0) > 100 and counts.get(BLUE, 0) > 20


def test_the_kill_matrix_page_in_chromium(chromium: str, tmp_path: Path) -> None:
    page, data = tmp_path / "m.html", tmp_path / "m.json"
    assert main(["mutants", "--machine-examples", "0", "--only", "foreign-403", "--only",
                 "omits-echo", "--only", "accepts-without-mode", "--json", str(data),
                 "--html", str(page)]) == 0
    doc = json.loads(data.read_text(encoding="utf-8"))
    assert pages.check_matrix(_dom(chromium, page, tmp_path), doc, columns(doc)) > 0
    counts = _screenshot(chromium, page, tmp_path, "1400,700")
    assert counts.get(PROCESS, 0) > 50


def test_a_matrix_with_http_and_machine_kills_in_chromium(chromium: str,
                                                         tmp_path: Path) -> None:
    page = tmp_path / "synthetic.html"
    page.write_text(render_matrix(DOC), encoding="utf-8")
    root = _dom(chromium, page, tmp_path)
    assert pages.check_matrix(root, DOC, DOC["requirements"]) == 3
    states = [c.attrs["data-state"] for c in root.find_all("td", "cell")]
    assert "process http machine" in states and "none" in states


def test_the_network_check_sees_a_page_that_fetches(chromium: str, tmp_path: Path) -> None:
    """The control for the check above: a page that asks for an image is caught asking."""
    page = tmp_path / "fetches.html"
    page.write_text('<!DOCTYPE html><p>hello<img src="https://example.invalid/x.png" '
                    'alt="x"></p>', encoding="utf-8")
    out, asked = _run(chromium, page, tmp_path, "--dump-dom")
    assert b"hello" in out and asked == ["https://example.invalid/x.png"]


# ---------------------------------------------------------------------- measured at 1300 px
WINDOW = "1300,900"

# Run by a test-only copy of a page after it loaded; it leaves what it measured as JSON in
# <pre id="measured">. Lengths are CSS px as drawn; a font size is the computed size times
# the scale its SVG is drawn at (getScreenCTM), i.e. the size on the screen.
MEASURE = r"""
(() => {
  const box = e => e.getBoundingClientRect();
  // Drawn: not display:none, not in a closed <details> (content-visibility), not hidden.
  const shown = e => e.checkVisibility({visibilityProperty: true}) && box(e).height > 0;
  const fonts = sel => {
    let min = 1e9, count = 0, text = "";
    for (const svg of document.querySelectorAll(sel)) {
      if (!shown(svg)) continue;
      for (const t of svg.querySelectorAll("text")) {
        const size = parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a;
        count++;
        if (size < min) { min = size; text = t.textContent; }
      }
    }
    return {min: count ? min : null, count, text};
  };
  const page = () => ({width: innerWidth, scrollWidth: document.documentElement.scrollWidth});
  const out = {page: page(), grids: [], cards: [], folds: []};
  out.fonts = fonts("svg");
  // The refusal cards: where each line box of the body starts, as offsets in its text.
  for (const pre of document.querySelectorAll(".refusal pre.body")) {
    const starts = [], style = getComputedStyle(pre);
    let offset = 0, top = null;
    const walk = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
      for (let i = 0; i < node.data.length; i++, offset++) {
        const range = document.createRange();
        range.setStart(node, i); range.setEnd(node, i + 1);
        const rects = range.getClientRects();
        if (!rects.length || node.data[i] === " ") continue;
        if (top !== null && rects[0].top > top + 2) starts.push(offset);
        top = rects[0].top;
      }
    }
    out.cards.push({text: pre.textContent, starts, whiteSpace: style.whiteSpace,
                    wordBreak: style.wordBreak, overflowWrap: style.overflowWrap,
                    width: pre.clientWidth, scrollWidth: pre.scrollWidth});
  }
  // The folded polls: before and after the toggle is opened.
  for (const details of document.querySelectorAll("details.polls")) {
    const figure = details.parentElement;
    const folded = figure.querySelector("svg.sequence"), all = details.querySelector("svg");
    const before = {folded: shown(folded), all: shown(all),
                    foldRows: [...folded.querySelectorAll("g.fold")].filter(shown).length};
    details.open = true;
    const polls = [...all.querySelectorAll("g.step.poll")];
    out.folds.push({chapter: folded.dataset.chapter, before, after: {
      folded: shown(folded), all: shown(all), polls: polls.length,
      pollsShown: polls.filter(shown).length}});
  }
  out.fontsOpen = fonts("svg");
  out.pageOpen = page();
  // The grids: the host column stays at the box's left edge however far the grid scrolls.
  for (const grid of document.querySelectorAll("table.grid")) {
    const scroller = grid.closest(".scroll") || document.scrollingElement;
    const hosts = [...grid.querySelectorAll("tbody th.row")];
    const heads = [...grid.querySelectorAll("thead th")].slice(1);
    const edge = () => box(scroller === document.scrollingElement ? document.body : scroller);
    const visible = e => {
      const r = box(e), b = edge(), w = Math.min(b.right, innerWidth);
      const left = Math.max(...hosts.map(x => box(x).right), b.left);
      return r.left >= left - 1 && r.right <= w + 1;
    };
    const reachable = heads.filter(head => {
      scroller.scrollLeft = 0;
      scroller.scrollLeft = Math.max(0, head.offsetLeft - box(hosts[0]).width);
      return visible(head);
    }).length;
    scroller.scrollLeft = scroller.scrollWidth;
    const b = edge(), bg = getComputedStyle(hosts[0]).backgroundColor;
    out.grids.push({
      columns: heads.length, reachable, scrolled: scroller.scrollLeft,
      overflows: scroller.scrollWidth > scroller.clientWidth,
      hostOffsets: hosts.map(x => box(x).left - b.left),
      lastVisible: visible(heads[heads.length - 1]),
      firstHidden: heads.length > 1 && !visible(heads[0]),
      position: getComputedStyle(hosts[0]).position, background: bg,
      scrollerOverflowX: getComputedStyle(scroller).overflowX});
    scroller.scrollLeft = 0;
  }
  const pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify(out);
  document.body.append(pre);
})();
"""


def _measure(chromium: str, page: Path, work: Path) -> dict[str, Any]:
    """What MEASURE finds in a copy of `page` at a 1300 px wide window (the copy lets the
    script run: the page's own policy forbids any)."""
    html = page.read_text(encoding="utf-8")
    html, n = re.subn(r"default-src 'none';", "default-src 'none'; "
                      "script-src 'unsafe-inline';", html, count=1)
    assert n == 1, "the page's Content-Security-Policy is not where the copy expects it"
    assert "<script" not in html and "</body>" in html
    copy = work / "measure" / page.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(html.replace("</body>", f"<script>{MEASURE}</script></body>"),
                    encoding="utf-8")
    out = _browse(chromium, copy, work / "measure", f"--window-size={WINDOW}", "--dump-dom")
    (pre,) = [n for n in pages.parse(out.decode("utf-8")).find_all("pre")
              if n.attrs.get("id") == "measured"]
    found: dict[str, Any] = json.loads(pre.text())
    assert found["page"]["width"] == 1300, found["page"]
    return found


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--out", str(out)]) == 0
    return out / "latest" / "report.html"


@pytest.fixture(scope="module")
def demo_measured(chromium: str, demo_page: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _measure(chromium, demo_page, tmp_path_factory.mktemp("demo-measure"))


def test_the_diagrams_text_is_12_px_or_more_at_1300_px(demo_measured: dict[str, Any]) -> None:
    """Every SVG text drawn (the key, each chapter's figure, and every figure with its polls
    shown), at its size on the screen; and the page itself never scrolls sideways."""
    closed, opened = demo_measured["fonts"], demo_measured["fontsOpen"]
    assert closed["count"] > 100 and opened["count"] > closed["count"]
    assert closed["min"] >= 12, closed
    assert opened["min"] >= 12, opened
    for page in (demo_measured["page"], demo_measured["pageOpen"]):
        assert page["scrollWidth"] <= page["width"], page


def _token_starts(text: str) -> set[int]:
    """Offsets where a line may begin without breaking a token: after a space, or between
    two JSON tokens (outside a string, next to `{ } [ ] , :`)."""
    ok, in_string, escaped = set(), False, False
    for i, ch in enumerate(text):
        if i and text[i - 1] == " ":
            ok.add(i)
        if in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
            if not in_string and i + 1 < len(text) and text[i + 1] in "}],:":
                ok.add(i + 1)
            continue
        if ch in "{[,:":
            ok.add(i + 1)
        if ch in "}]":
            ok.add(i)
        in_string = ch == '"'
    return ok


def test_token_starts_reads_json_tokens() -> None:
    """The control for the wrap test below: a break inside a word or a string is refused."""
    text = '{"error":"validation_error","message":"no such run"}'
    ok = _token_starts(text)
    assert {text.index('"error"'), text.index('"message"'), text.index('"no'),
            text.index("such"), text.index("run"), len(text) - 1} <= ok
    assert not {text.index("validation") + 3, text.index('"message"') + 2,
                text.index("such") + 1, text.index("error")} & ok


def test_the_refusal_json_wraps_only_between_tokens(demo_measured: dict[str, Any]) -> None:
    cards = demo_measured["cards"]
    assert len(cards) == 4
    for card in cards:
        assert card["wordBreak"] != "break-all" and card["overflowWrap"] == "normal", card
        assert card["whiteSpace"] == "pre-wrap", card
        # The body is wider than its card, so it wraps: the test sees line boxes begin.
        assert card["starts"], card
        bad = sorted(set(card["starts"]) - _token_starts(card["text"]))
        assert not bad, [card["text"][max(0, i - 8):i] + "|" + card["text"][i:i + 8]
                         for i in bad]


def test_the_checkers_polls_fold_and_the_toggle_shows_them(
        demo_measured: dict[str, Any], demo_page: Path) -> None:
    root = pages.parse(demo_page.read_text(encoding="utf-8"))
    figures = {s.attrs["data-chapter"]: s for s in root.find_all("svg", "sequence")}
    expected = {slug: sum(int(g.attrs["data-polls"]) for g in svg.find_all("g", "fold"))
                for slug, svg in figures.items()}
    folds = {f["chapter"]: f for f in demo_measured["folds"]}
    assert set(folds) == {slug for slug, n in expected.items() if n}
    assert {"record", "replay", "drift", "erasure"} <= set(folds)
    for slug, fold in folds.items():
        # Closed: the story, each run of polls one row, the full figure not drawn.
        assert fold["before"]["folded"] and fold["before"]["foldRows"] > 0, fold
        assert not fold["before"]["all"], fold
        # Open: the full figure is drawn with every poll, in place of the folded one.
        assert fold["after"]["all"] and not fold["after"]["folded"], fold
        assert fold["after"]["polls"] == fold["after"]["pollsShown"] > 0, fold
        assert fold["after"]["polls"] == 2 * expected[slug]  # a request and its answer each


def _full_matrix() -> dict[str, Any]:
    """A kill-matrix document the size of the real one (every zoo host, every requirement
    id, every correct host), its cells made up: the page's layout is what is measured."""
    reqs = sorted(load_registry().ids)
    mutants: list[dict[str, Any]] = []
    for i, m in enumerate(ZOO):
        killed = [reqs[(5 * i + k) % len(reqs)] for k in range(1 + i % 3)]
        mutants.append({
            "mutant": m.name, "breaks": m.breaks, "killed": i != 7,
            "checker": killed if i != 7 else [],
            "http": {"killed": True, "checker": killed[:1]} if i % 2 else
            {"skipped": "needs the simulator's insides"},
            "machine": {"requirementId": killed[0], "steps": 3 + i % 20, "message": "differ"}
            if i % 3 == 0 else None})
    correct = [{"variant": v.name, "allows": v.allows, "cells": {
        c: {"ok": True, "counts": {"passed": 40}} for c in PASS_COLUMNS}} for v in PASS_ZOO]
    return {"requirements": reqs, "mutants": mutants, "correct": correct}


def test_the_kill_and_pass_matrices_read_at_1300_px(chromium: str, tmp_path: Path) -> None:
    """The page never scrolls sideways; the grid does, in its own box, and at its far right
    every row still shows its host at the box's left edge, over an opaque background, with
    the last requirement column beside it; every column can be scrolled into view."""
    doc = _full_matrix()
    page = tmp_path / "matrix.html"
    page.write_text(render_matrix(doc), encoding="utf-8")
    found = _measure(chromium, page, tmp_path)
    assert found["page"]["scrollWidth"] <= found["page"]["width"], found["page"]
    kill, passes = found["grids"]
    assert kill["columns"] == len(doc["requirements"]) >= 34
    assert passes["columns"] == len(PASS_COLUMNS)
    assert kill["overflows"]  # too wide for the window: what the sticky column is for
    for grid in (kill, passes):
        assert grid["reachable"] == grid["columns"], grid["reachable"]
        assert grid["position"] == "sticky" and grid["scrollerOverflowX"] == "auto"
        assert re.fullmatch(r"rgb\(\d+, \d+, \d+\)", grid["background"]), grid["background"]
        assert grid["lastVisible"]
        # Scrolled to the far right, every host cell is still at the box's left edge.
        assert all(-1 <= x <= 2 for x in grid["hostOffsets"]), grid["hostOffsets"]
    assert kill["scrolled"] > 0 and kill["firstHidden"]
