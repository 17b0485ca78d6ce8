"""report.html's pictures, read without a browser: which requests are the checker's polls
and how they fold, where the refusal bodies may break a line, how labels wrap, and the
sizes the figures are drawn at (tests/test_browser.py measures them in Chromium)."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest

from refsim.demo import run_demo
from refsim.demo.history import Exchange
from refsim.demo.html import (
    CSS,
    FONT,
    MIN_WIDTH,
    WIDTH,
    Derivation,
    Fold,
    fold,
    fold_text,
    json_breaks,
    render_report,
    steps_of,
)
from tests import pages


@pytest.fixture(scope="module")
def page() -> pages.Node:
    return pages.parse(render_report(run_demo(seed=0)))


def _exchange(seq: int, path: str, response: Any, *, method: str = "GET", status: int = 200,
              events: list[dict[str, Any]] | None = None) -> Exchange:
    return Exchange(seq=seq, chapter="c", tenant="acme", method=method, path=path, body=None,
                    status=status, headers={}, response=response, events=events or [])


def test_the_polls_are_the_reads_that_show_nothing_new() -> None:
    run_id = "acme/run-abc"
    d = Derivation([], {run_id: "R1"}, {})
    facet = {"agents": {"evalSuite": {"recordedFixtures": True}}}
    poll = "/runs/acme~2Frun-abc/events/poll?afterSequence=-1"
    xs = [
        _exchange(1, "/.well-known/openwop", facet),  # the first reading is the story
        _exchange(2, "/.well-known/openwop", facet),  # the same answer again: a poll
        _exchange(3, "/.well-known/openwop", {"agents": {}}),  # a new answer: the story
        _exchange(4, "/conformance/seams/eval-counter?key=k", {"key": "k", "count": 0}),
        _exchange(5, "/conformance/seams/eval-counter?key=k", {"key": "k", "count": 0}),
        _exchange(6, poll, {"events": []}),
        _exchange(7, poll, {"events": []}, events=[{"type": "run.completed"}]),  # it showed
        _exchange(8, poll, {"error": "not_found"}, status=404),  # a refusal is news
        _exchange(9, "/runs/acme~2Frun-abc", {"status": "running"}),  # first: the story
        _exchange(10, "/runs/acme~2Frun-abc", {"status": "running"}),  # again: a poll
        _exchange(11, "/runs/acme~2Frun-abc", {"status": "completed"}),  # it moved
        _exchange(12, "/runs", {"runId": run_id}, method="POST", status=201),
        _exchange(13, "/runs/acme~2Frun-abc/eval-summary", {"tasks": []}),
        _exchange(14, "/runs/acme~2Frun-abc/eval-summary", {"tasks": []}),
    ]
    assert [d.poll(x) for x in xs] == [
        None, "discovery", None, None, None, "R1 events", None, None, None, "R1 run", None,
        None, None, None]


def test_consecutive_polls_fold_into_one_row_and_the_story_stays() -> None:
    result = run_demo(seed=0)
    d = Derivation(result.client.exchanges, result.run_labels(), result.runs)
    for chapter in result.chapters:
        steps = steps_of(d, [result.client.exchanges[s - 1] for s in chapter.exchanges])
        rows = fold(steps)
        if chapter.slug != "record":
            continue
        kinds = [r.line() if isinstance(r, Fold) else f"{r.kind} {r.state}" for r in rows]
        assert kinds[0] == "⋯ 2 polls by the checker: discovery \u00d72"
        assert "⋯ 4 polls by the checker: R1 events \u00d72, discovery \u00d72" in kinds
        # The seam readings, the run and its calls are the story; nothing else folds.
        assert kinds.count("call live") == 2
        assert len(kinds) == len(steps) - 12 + 2


def test_every_chapter_figure_tells_its_folds(page: pages.Node) -> None:
    folded = {s.attrs["data-chapter"]: s for s in page.find_all("svg", "sequence")}
    counts = {slug: pages.check_folds(page.by_id()[f"chapter-{slug}"], svg)
              for slug, svg in folded.items()}
    assert counts == {"tenants": 0, "record": 6, "replay": 6, "drift": 10, "refusals": 0,
                      "fields": 0, "erasure": 6}
    desc = folded["drift"].find("desc").text()
    assert ("The checker polls the host 2 time(s) only to observe (GET /.well-known/openwop"
        in desc and "misses (fixture_miss)" in desc)
    (full,) = page.find_all("svg", "sequence-all", where=lambda n: n.attrs.get(
        "data-chapter") == "drift")
    assert ("The checker polls: acme, without an API key, sends GET /.well-known/openwop"
        in full.find("desc").text())


@pytest.mark.parametrize("raw", [
    '{"error":"validation_error","message":"fixtureRuns names a source run"}',
    '{"a":[1,2,{"b":"x, y: \\"z\\" {w}"}],"c":null}',
    "not json at all, with: colons",
    "",
])
def test_a_refusal_body_breaks_only_between_json_tokens(raw: str) -> None:
    shown = json_breaks(raw)
    pieces = shown.split("<wbr>")
    assert html.unescape("".join(pieces)) == raw  # the bytes, unchanged
    at = 0
    for piece in pieces[:-1]:
        at += len(html.unescape(piece))
        before, after = raw[:at], raw[at:]
        # Outside any string (an even number of unescaped quotes before it), next to `{}[],:`.
        assert len(re.findall(r'(?<!\\)"', before)) % 2 == 0, (before, after)
        assert before[-1] in "{[,:" or after[0] in "}]", (before, after)
    if raw.startswith("{"):
        assert len(pieces) > 2


def test_the_refusal_cards_hold_the_bytes_and_never_break_a_word(page: pages.Node) -> None:
    for card in page.find_all("div", "refusal"):
        body = card.find("pre", "body")
        json.loads(body.text())
        assert body.find_all("wbr")
    rule = re.search(r"\.refusal pre \{([^}]*)\}", CSS)
    assert rule is not None
    assert "break-all" not in rule.group(1) and "overflow-wrap: normal" in rule.group(1)
    assert "white-space: pre-wrap" in rule.group(1) and "overflow-x: auto" in rule.group(1)


@pytest.mark.parametrize(("line", "n", "lines"), [
    ("GET /conformance/seams/eval-counter?key=recorded-fixtures-drift", 50,
     ["GET /conformance/seams/eval-counter", "?key=recorded-fixtures-drift"]),
    ("GET /runs/R1/events/poll?afterSequence=-1&timeout=2", 45,
     ["GET /runs/R1/events/poll?afterSequence=-1", "&timeout=2"]),
    ("mode eval · suite recorded-replay · fixtureRuns {record→R1}", 50,
     ["mode eval · suite recorded-replay · fixtureRuns", "{record→R1}"]),
    ("a/bcdefgh/ijklmnop", 8, ["a", "/bcdefgh", "/ijklmno", "p"]),
    ("short", 50, ["short"]),
    ("", 50, [""]),
])
def test_labels_wrap_at_spaces_then_at_the_query(line: str, n: int, lines: list[str]) -> None:
    assert fold_text(line, n) == lines
    assert all(len(x) <= n for x in lines)


def test_the_figures_text_is_never_drawn_below_12_px() -> None:
    """The static half of the browser's measure: labels are FONT units, no text is smaller,
    and the page never draws a figure narrower than MIN_WIDTH px of its WIDTH units."""
    sizes = [float(x) for x in re.findall(r"svg text[^{]*\{[^}]*?(\d+(?:\.\d+)?)px", CSS)]
    assert sizes and min(sizes) >= FONT
    assert f"min-width: {MIN_WIDTH}px" in CSS
    assert FONT * MIN_WIDTH / WIDTH >= 12
