"""`refsim demo`: a narrated walk through RFC 0252 on the built-in host, written to a folder.

`run_demo()` runs the chapters (`refsim.demo.chapters`) and returns a `DemoRun`, which
writes history.jsonl, report.json, report.md, report.html (`refsim.demo.html`) and
timeline.txt (`refsim.demo.report`). `refsim.demo.matrix` draws the kill matrix as a page.
"""

from __future__ import annotations

from collections.abc import Callable

from refsim.check.observe import KEY_A, KEY_B
from refsim.check.registry import load_registry
from refsim.demo.chapters import LEGS, TENANTS, Chapter, Demo
from refsim.demo.history import RecordingClient
from refsim.demo.report import DemoRun, check_base, summary_lines
from refsim.domain.core import Components
from refsim.domain.profile import HostProfile
from refsim.host import SimHost

__all__ = ["KEY_A", "KEY_B", "LEGS", "Chapter", "DemoRun", "check_base", "run_demo",
           "summary_lines"]


def run_demo(*, seed: int = 0, profile: HostProfile | None = None,
             components: Components | None = None,
             echo: Callable[[str], None] = lambda line: None,
             pause: Callable[[], None] | None = None) -> DemoRun:
    """Run every chapter on a fresh host. `pause` runs between chapters; a KeyboardInterrupt
    or EOFError from it ends the demo early, keeping what ran (`DemoRun.interrupted`)."""
    host = SimHost(seed=seed, profile=profile, components=components)
    client = RecordingClient(host, dict(TENANTS))
    demo = Demo(client, echo=echo)
    interrupted = False
    try:
        demo.run(pause)
    except (KeyboardInterrupt, EOFError):
        interrupted = True
        echo("")
        echo("(stopped by the reader; the chapters so far are kept)")
    return DemoRun(seed=seed, host=host.name, chapters=tuple(demo.chapters), client=client,
                   runs=dict(demo.runs), registry=load_registry(), interrupted=interrupted)
