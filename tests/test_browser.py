"""Both pages in a real browser: headless Chromium, the network blocked, the DOM it built
checked, and a screenshot that is not blank.

Chromium is the Debian package `chromium`; `.ci/run` installs it when missing. Without it
the test skips, except under CI (the `CI` variable set), where its absence is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from refsim.cli import main
from refsim.demo import LEGS
from refsim.demo.matrix import columns, render_matrix
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
