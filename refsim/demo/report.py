"""The demo's folder: history.jsonl, report.json, report.md, report.html and timeline.txt,
and `latest`.

Nothing in the files depends on the wall clock, so the same seed writes the same bytes;
only the folder's name carries the time it was written.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from refsim.check.registry import Registry
from refsim.demo.chapters import LEGS, Chapter, brief, clip
from refsim.demo.history import RecordingClient
from refsim.demo.html import render_report

RUN_FOLDER = re.compile(r"[0-9]{8}T[0-9]{6}Z-seed[0-9]+(-[0-9]+)?")
FILES = {
    "history.jsonl": "every request and response of the demo, in order, each followed by "
                     "the events the host emitted while answering it",
    "report.json": "the chapters, their narration and every check, as data",
    "report.md": "this report",
    "report.html": "the same story as pictures, one self-contained page to open in any "
                   "browser, offline: a sequence diagram per chapter, the refusal bodies "
                   "side by side, the legs linked to their chapters",
    "timeline.txt": "the runs' events in the order they happened, under the request that "
                    "caused them",
}


@attrs.frozen
class DemoRun:
    """What a finished demo knows: enough to write its folder and to set its exit code."""

    seed: int
    host: str
    chapters: tuple[Chapter, ...]
    client: RecordingClient
    runs: dict[str, str]
    registry: Registry
    interrupted: bool = False

    @property
    def checks(self) -> int:
        return sum(len(c.findings) for c in self.chapters)

    @property
    def failed(self) -> int:
        return sum(not f.ok for c in self.chapters for f in c.findings)

    @property
    def blocked(self) -> list[str]:
        return [f"chapter {i}: {reason}" for i, c in enumerate(self.chapters, 1)
                for _, reason in c.blocked]

    @property
    def passed(self) -> bool:
        return self.failed == 0 and not self.interrupted and not self.blocked

    @property
    def exit_code(self) -> int:
        """As `refsim check`: 0 all held, 1 a check failed, 2 something could not be
        observed; 130 when the reader stopped the demo."""
        if self.interrupted:
            return 130
        return 1 if self.failed else 2 if self.blocked else 0

    def verdict(self) -> str:
        skipped = sum(c.skipped is not None for c in self.chapters)
        if self.interrupted:
            return f"interrupted after {len(self.chapters)} chapter(s)"
        if self.failed:
            return f"{self.failed} of {self.checks} checks failed"
        tail = f"; {skipped} chapter(s) skipped" if skipped else ""
        if self.blocked:
            tail += f"; {len(self.blocked)} observation(s) blocked"
        return f"all {self.checks} checks held{tail}"

    def legs(self) -> list[dict[str, Any]]:
        out = []
        for leg in LEGS:
            shown = [i for i, c in enumerate(self.chapters, 1) if leg in c.requirements]
            mine = [f for c in self.chapters for f in c.findings if f.requirement_id == leg]
            unseen = [why for c in self.chapters for req, why in c.blocked if req == leg]
            if not mine:
                result = ("not reached (stopped)" if self.interrupted else
                    "not shown (chapter skipped)")
            elif not all(f.ok for f in mine):
                result = "FAILED"
            elif unseen:
                result = f"blocked ({len(unseen)} observation(s) this host does not offer)"
            else:
                result = "held so far (stopped)" if self.interrupted else "held"
            title = self.registry.requirement(leg).title if leg in self.registry else ""
            out.append({"requirement_id": leg, "title": title, "chapters": shown,
                        "checks": len(mine), "result": result})
        return out

    def run_labels(self) -> dict[str, str]:
        """R1, R2, … in the order the host started the runs."""
        labels: dict[str, str] = {}
        for x in self.client.exchanges:
            for e in x.events:
                rid = str(e.get("runId"))
                if rid not in labels:
                    labels[rid] = f"R{len(labels) + 1}"
        return labels

    # ------------------------------------------------------------------ the files
    def report_json(self) -> dict[str, Any]:
        return {"tool": "refsim demo", "seed": self.seed, "host": self.host,
                "passed": self.passed, "verdict": self.verdict(), "blocked": self.blocked,
                "checks": self.checks, "failed": self.failed, "legs": self.legs(),
                "runs": [{"label": label, "runId": rid, "name": self.runs.get(rid)}
                         for rid, label in self.run_labels().items()],
                "chapters": [c.to_json() for c in self.chapters],
                "files": FILES}

    def timeline(self) -> str:
        labels = self.run_labels()
        out = [f"refsim demo timeline: seed {self.seed}, host {self.host}", "",
               "runs, in the order they started:"]
        out += [f"  {label:<4} {rid:<32} {self.runs.get(rid, '')}"
                for rid, label in labels.items()]
        out += ["", "each request that changed something, then the events it caused "
                "(reads are in history.jsonl):", ""]
        for x in self.client.exchanges:
            if x.method == "GET" and not x.events:
                continue
            answer = (x.response.get("error") if isinstance(x.response, dict) and
                "error" in x.response else labels.get(
                    str(x.response.get("runId")) if isinstance(x.response, dict) else "", ""))
            named = x.body.get("fixtureRuns") if isinstance(x.body, dict) else None
            sources = "" if not isinstance(named, dict) else " fixtureRuns " + ", ".join(
                f"{k}→{labels.get(str(v), 'a run that does not exist')}"
                for k, v in named.items())
            out.append(clip(f"{x.seq:>4} [{x.chapter}] {x.tenant} {x.method} {x.path}{sources} "
                            f"→ {x.status} {answer}".rstrip()))
            for e in x.events:
                out.append(clip(f"       {e.get('timestamp')}  "
                                f"{labels.get(str(e.get('runId')), '?'):<4} {brief(e)}"))
        return "\n".join(out) + "\n"

    def report_md(self) -> str:
        out = [
            "# refsim demo: RFC 0252 on the built-in host", "",
            "RFC 0252, *An eval task takes its fixtures from a recorded run*, lets an eval "
            "run name a prior run in `fixtureRuns`. The host turns that run's recorded tool "
            "calls into the task's fixtures and serves them fail-closed: a replay answers "
            "what the recording answered and touches no live tool, and a call the recording "
            "never made fails the task. A source run that cannot be used is refused with one "
            "uniform `400 validation_error` that never echoes the id, so another tenant's "
            "run looks exactly like no run at all.", "",
            "This report is one walk through those rules on refsim's in-memory host "
            f"(`{self.host}`). Each chapter names the RFC section and the requirement ids "
            "it shows, the requests it sent with the answers and events that matter, and "
            "the checks it made, with the judges `refsim check` uses. `openwop.requirement."
            "0252.*` ids are the six legs of OpenWOP's conformance scenario for the RFC; "
            "`refsim.requirement.0252.*` ids are refsim's own finer requirements "
            "(`specs/REFERENCE.md` lists them all).", "",
            f"- **Host:** `{self.host}`, seed {self.seed}. Tenants `acme` and `globex`.",
            f"- **Verdict:** {self.verdict()}.",
            *[f"- **Blocked:** {b}." for b in self.blocked],
            f"- **Reproduce:** `refsim demo --seed {self.seed}"
            + ("" if self.host == "refsim:reference" else
               f" --profile {self.host.split(':', 1)[1]}") + "`.", "",
            "## The six conformance legs", "",
            "`refsim check` runs each as a leg of the `v2-eval-recorded-fixtures` scenario. "
            "Here each is shown by a chapter:", "",
            "| requirement | what it requires | chapters | demo checks |",
            "| --- | --- | --- | --- |"]
        for leg in self.legs():
            chapters = ", ".join(str(i) for i in leg["chapters"]) or "—"
            checks = f"{leg['checks']} {leg['result']}" if leg["checks"] else leg["result"]
            out.append(f"| `{leg['requirement_id']}` | {leg['title']} | {chapters} | "
                       f"{checks} |")
        labels = self.run_labels()
        out += ["", "## The runs", ""]
        if labels:
            out += ["| label | run id | what it is |", "| --- | --- | --- |"]
            out += [f"| {label} | `{rid}` | {self.runs.get(rid, '')} |"
                    for rid, label in labels.items()]
        else:
            out.append("The demo started no run on this host.")
        for number, c in enumerate(self.chapters, 1):
            out += ["", f"## {number}. {c.title}", "",
                    f"RFC 0252 {c.sections}. Requirements: "
                    + ", ".join(f"`{r}`" for r in c.requirements) + ".", "", c.lede, ""]
            if c.lines:
                out += ["```text", *c.lines, "```", ""]
            if c.skipped:
                out.append(f"Skipped: {c.skipped}.")
            out += [f"Blocked: {why}." for _, why in c.blocked]
            if c.findings:
                out.append("Checks:")
                out += [f"- {'✓' if f.ok else '✗ **FAILED**'} `{f.requirement_id}`: "
                        f"{f.message}" for f in c.findings]
        out += ["", "## Files in this folder", ""]
        out += [f"- `{name}`: {what}" for name, what in FILES.items()]
        return "\n".join(out) + "\n"

    def write(self, base: Path, now: datetime | None = None) -> Path:
        """Write a new folder under `base`, point `base/latest` at it, return the folder."""
        check_base(base)
        base.mkdir(parents=True, exist_ok=True)
        stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
        name = f"{stamp}-seed{self.seed}"
        folder, n = base / name, 1
        while folder.exists():
            n += 1
            folder = base / f"{name}-{n}"
        folder.mkdir()
        (folder / "history.jsonl").write_bytes(self.client.history_jsonl())
        (folder / "report.json").write_text(
            json.dumps(self.report_json(), indent=2, ensure_ascii=False) + "\n",
            encoding="utf-8")
        (folder / "report.md").write_text(self.report_md(), encoding="utf-8")
        (folder / "report.html").write_text(render_report(self), encoding="utf-8")
        (folder / "timeline.txt").write_text(self.timeline(), encoding="utf-8")
        point_latest(base, folder.name)
        return folder


def check_base(base: Path) -> None:
    """Raise OSError, before anything runs, when the demo could not write under `base`."""
    if base.is_symlink() and not base.exists():
        raise OSError(f"{base} is a link to nothing")
    if base.exists() and not base.is_dir():
        raise OSError(f"{base} exists and is not a folder")
    for parent in base.parents:
        if parent.exists():
            if not parent.is_dir():
                raise OSError(f"{parent} is not a folder")
            break
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=base):  # a folder the demo cannot write fails here
        pass
    _check_latest(base / "latest")


def _check_latest(latest: Path) -> None:
    """`latest` may be replaced: a link, nothing, or a pointer file the demo wrote."""
    if latest.is_symlink():
        return
    if latest.is_dir():
        raise OSError(f"{latest} is a folder, not a link; move it away to let the demo "
                      "point it at the newest run")
    if latest.exists() and not _our_pointer(latest):
        raise OSError(f"{latest} is a file the demo did not write; move it away to let the "
                      "demo point it at the newest run")


def _our_pointer(latest: Path) -> bool:
    """A plain `latest` file the demo wrote where links fail: one line naming a run folder
    (which may since have been deleted)."""
    try:
        name = latest.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return False
    return bool(RUN_FOLDER.fullmatch(name))


def point_latest(base: Path, name: str) -> None:
    """`base/latest` becomes a symlink to `name`, replaced atomically. Where links cannot be
    made, `latest` is a one-line file naming the folder instead."""
    latest = base / "latest"
    _check_latest(latest)
    tmp = base / f".latest-{os.getpid()}"
    try:
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        os.symlink(name, tmp)
        os.replace(tmp, latest)
    except OSError:
        if tmp.is_symlink():
            tmp.unlink()
        latest.unlink(missing_ok=True)
        latest.write_text(name + "\n", encoding="utf-8")


def summary_lines(result: DemoRun) -> Sequence[str]:
    lines = ["", "The six conformance legs:"]
    for leg in result.legs():
        chapters = ", ".join(str(i) for i in leg["chapters"]) or "-"
        lines.append(f"  {leg['requirement_id']:<46} chapters {chapters:<6} {leg['result']}")
    lines.append("")
    lines += [f"blocked: {b}" for b in result.blocked]
    lines.append(f"verdict: {result.verdict()}")
    return lines
