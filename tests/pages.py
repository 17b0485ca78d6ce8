"""Reading the HTML pages back in tests: a small DOM (html.parser) and a PNG decoder (zlib).

Both the page tests and the browser test use them; no third-party parser or image library.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Callable, Iterator
from html.parser import HTMLParser

from attrs import Factory, define

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


@define
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = Factory(list)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self) -> Iterator[Node]:
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None,
                 where: Callable[[Node], bool] | None = None) -> list[Node]:
        return [n for n in self.iter() if (tag is None or n.tag == tag)
                and (cls is None or cls in n.classes) and (where is None or where(n))]

    def find(self, tag: str | None = None, cls: str | None = None) -> Node:
        found = self.find_all(tag, cls)
        assert found, f"no <{tag} class={cls}>"
        return found[0]

    def by_id(self) -> dict[str, Node]:
        return {n.attrs["id"]: n for n in self.iter() if "id" in n.attrs}


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(html: str) -> Node:
    builder = _Builder()
    builder.feed(html)
    builder.close()
    return builder.root


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and the unfiltered rows of RGB pixels of an 8-bit RGB or RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    width = height = depth = kind = interlace = -1
    while pos < len(data):
        n, name = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if name == b"IHDR":
            width, height, depth, kind, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif name == b"IDAT":
            idat += body
    assert depth == 8 and kind in (2, 6) and interlace == 0, (depth, kind, interlace)
    bpp = 3 if kind == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        f, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if f == 1:
            for x in range(bpp, stride):
                line[x] = (line[x] + line[x - bpp]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev, strict=True))
        elif f == 3:
            for x in range(stride):
                left = line[x - bpp] if x >= bpp else 0
                line[x] = (line[x] + (left + prev[x]) // 2) & 255
        elif f == 4:
            for x in range(stride):
                a = line[x - bpp] if x >= bpp else 0
                b, c = prev[x], prev[x - bpp] if x >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = ((line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c))
                    & 255)
        rows.append(bytes(line) if bpp == 3 else bytes(
            v for i, v in enumerate(line) if i % 4 != 3))
        prev = line
    return width, height, rows


def colours(rows: list[bytes]) -> dict[bytes, int]:
    """How many pixels have each RGB colour."""
    counts: dict[bytes, int] = {}
    for row in rows:
        for i in range(0, len(row), 3):
            px = row[i:i + 3]
            counts[px] = counts.get(px, 0) + 1
    return counts


# ---------------------------------------------------------------------- what the pages hold
LANES = ["acme", "globex", "host", "counter"]


def check_report(root: Node, slugs: list[str], legs: list[str]) -> dict[str, list[str]]:
    """Assert report.html's structure: one labelled SVG per chapter with its four lanes, the
    refusal bodies present and equal, the legs linked to chapters that name them. Returns
    each chapter's step states (data-state of its rows), for the caller's own checks."""
    ids = root.by_id()
    sections = root.find_all("section", "chapter")
    assert [s.attrs["data-slug"] for s in sections] == slugs
    states: dict[str, list[str]] = {}
    for section, slug in zip(sections, slugs, strict=True):
        assert section.attrs["id"] == f"chapter-{slug}"
        (svg,) = section.find_all("svg", "sequence")
        for figure in (svg, *section.find_all("svg", "sequence-all")):
            assert figure.attrs["role"] == "img"
            title_id, desc_id = figure.attrs["aria-labelledby"].split()
            assert ids[title_id].tag == "title" and ids[title_id].text().strip()
            assert ids[desc_id].tag == "desc" and len(ids[desc_id].text()) > 20
            assert ids[title_id] in figure.iter() and ids[desc_id] in figure.iter()
            assert [g.attrs["data-lane"] for g in figure.find_all("g", "lane")] == LANES
        check_folds(section, svg)
        states[slug] = [g.attrs["data-state"] for g in svg.find_all("g", "step")]
    assert len(root.find_all("svg", "sequence")) == len(slugs)

    cards = root.find_all("div", "refusal")
    assert len(cards) == 4
    bodies = [c.find("pre", "body").text() for c in cards]
    assert len(set(bodies)) == 1 and '"validation_error"' in bodies[0]
    digests = {c.attrs["data-sha256"] for c in cards}
    assert len(digests) == 1
    assert digests == {hashlib.sha256(bodies[0].encode("utf-8")).hexdigest()}
    for c in cards:  # the hash is shown, not only carried
        assert c.attrs["data-sha256"] in c.text()
    assert root.find_all("p", where=lambda n: n.attrs.get("data-same") == "true")

    rows = root.find("table", "legs").find_all("tr", where=lambda n: "data-leg" in n.attrs)
    assert [r.attrs["data-leg"] for r in rows] == legs
    for row in rows:
        links = row.find_all("a")
        assert links, f"{row.attrs['data-leg']} links to no chapter"
        for a in links:
            target = ids[a.attrs["href"].removeprefix("#")]
            assert "chapter" in target.classes
            assert row.attrs["data-leg"] in target.find("p", "meta").text()
    return states


def check_folds(section: Node, folded: Node) -> int:
    """Assert a chapter's polls by the checker: the folded figure draws every request of
    the chapter either as a row or inside a fold row (data-seqs), and tells the folds in
    its <desc>; when it folds any, a <details> toggle holds the full figure, which draws
    them all, marked as polls. Returns how many polls are folded."""
    story = [int(g.attrs["data-seq"]) for g in folded.find_all("g", "step")
             if g.attrs["data-kind"] == "request"]
    folds = folded.find_all("g", "fold")
    polled = [int(s) for g in folds for s in g.attrs["data-seqs"].split()]
    for g in folds:
        assert int(g.attrs["data-polls"]) == len(g.attrs["data-seqs"].split())
        assert f"⋯ {g.attrs['data-polls']} poll" in g.text() and "by the checker" in g.text()
    assert not set(story) & set(polled)
    toggles = section.find_all("details", "polls")
    if not folds:
        assert not toggles and not section.find_all("svg", "sequence-all")
        return 0
    assert "polls the host" in folded.find("desc").text()
    (toggle,) = toggles
    assert "show every request" in toggle.find("summary").text()
    (full,) = toggle.find_all("svg", "sequence-all")
    requests = [g for g in full.find_all("g", "step") if g.attrs["data-kind"] == "request"]
    assert sorted(int(g.attrs["data-seq"]) for g in requests) == sorted(story + polled)
    assert (sorted(int(g.attrs["data-seq"]) for g in requests if "poll" in g.classes)
        == sorted(polled))
    return len(polled)


def expected_cell(m: dict[str, object], req: str) -> str:
    """A kill-matrix cell's state, computed from the document independently of the page."""
    checker = m.get("checker")
    http = m.get("http")
    machine = m.get("machine")
    parts = []
    if isinstance(checker, list) and req in checker:
        parts.append("process")
    if (isinstance(http, dict) and isinstance(http.get("checker"), list)
            and req in http["checker"]):
        parts.append("http")
    if isinstance(machine, dict) and machine.get("requirementId") == req:
        parts.append("machine")
    return " ".join(parts) or "none"


def check_matrix(root: Node, doc: dict[str, list[dict[str, object]]],
                 columns: list[str]) -> int:
    """Assert the kill-matrix page: a row per mutant in order, a cell per column with the
    state the document gives, the detail in the cell's title and in a line under the grid.
    Returns how many cells are killed."""
    rows = root.find("table", "grid").find_all("tr", where=lambda n: "data-mutant" in n.attrs)
    assert [r.attrs["data-mutant"] for r in rows] == [m["mutant"] for m in doc["mutants"]]
    lines = {(li.attrs["data-mutant"], li.attrs["data-requirement"]): li.text()
             for li in root.find("ol", "details").find_all("li")}
    killed = 0
    for row, m in zip(rows, doc["mutants"], strict=True):
        name = str(m["mutant"])
        assert row.attrs["data-killed"] == str(m["killed"]).lower()
        cells = row.find_all("td", "cell")
        assert [c.attrs["data-requirement"] for c in cells] == columns
        for cell in cells:
            req = cell.attrs["data-requirement"]
            state = expected_cell(m, req)
            assert cell.attrs["data-state"] == state, (name, req)
            assert cell.attrs["title"].startswith(f"{name} \u00d7 {req}: ")
            if state == "none":
                assert "not killed" in cell.attrs["title"] and (name, req) not in lines
                continue
            killed += 1
            assert lines[(name, req)] == cell.attrs["title"]
            assert cell.find("a").attrs["href"] == "#" + next(
                li.attrs["id"] for li in root.find_all("li")
                if li.attrs.get("data-mutant") == name
                and li.attrs.get("data-requirement") == req)
    assert len(lines) == killed
    return killed
