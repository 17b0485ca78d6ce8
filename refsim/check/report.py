"""Reports over rows: a JSON document shaped like a certification bundle's results, JUnit, text.

Unsigned and never a certification: the JSON says so, and carries no signature.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import refsim
from refsim.check.findings import Disposition, Row
from refsim.domain.canonical import sha256_hex

NOT_A_CERTIFICATION = ("This report is unsigned output of the refsim reference checker and "
                       "is not an OpenWOP certification.")
TOTAL_KEYS = {
    Disposition.EXECUTED_PASS: "executedPass",
    Disposition.EXECUTED_FAIL: "executedFail",
    Disposition.SKIPPED: "skipped",
    Disposition.INAPPLICABLE: "inapplicable",
    Disposition.BLOCKED: "blocked",
}
RFC3339_RE = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
TEXT_WIDTH = 100
# Exit codes, as Maelstrom's: pass, fail, unknown (blocked or nothing to judge).
EXIT_PASS, EXIT_FAIL, EXIT_UNKNOWN = 0, 1, 2
# XML 1.0 cannot carry most control characters; a host's message may contain them.
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def judged(rows: Sequence[Row]) -> list[Row]:
    """The rows that count: those listed apart (in process only) are no part of a verdict."""
    return [r for r in rows if not r.apart]


def apart(rows: Sequence[Row]) -> list[Row]:
    return [r for r in rows if r.apart]


def totals(rows: Sequence[Row]) -> dict[str, int]:
    counts = dict.fromkeys(TOTAL_KEYS.values(), 0)
    for row in judged(rows):
        counts[TOTAL_KEYS[row.disposition]] += 1
    return counts


def _row_json(row: Row) -> dict[str, Any]:
    return {"requirementId": row.requirement_id, "scenarioId": row.scenario_id,
            "checkId": row.check_id or row.requirement_id,
            "disposition": row.disposition.value, "detail": row.detail,
            "assertionCount": row.assertion_count}


def _with_evidence(row: Row, doc: dict[str, Any]) -> dict[str, Any]:
    """A failed row's document with its evidence: the exchanges (HAR entries) and the curl
    lines that send them again."""
    if row.evidence:
        doc["evidence"] = list(row.evidence)
    if row.curl:
        doc["curl"] = list(row.curl)
        doc["reproduce"] = row.reproduce
    return doc


def evidence_text(row: Row) -> list[str]:
    """A failed row's evidence as text: each exchange in one line, then the curl lines."""
    lines = []
    for entry in row.evidence:
        request, response = entry.get("request", {}), entry.get("response", {})
        body = response.get("content", {}).get("text", "")
        lines.append(f"{request.get('method')} {request.get('url')} -> "
                     f"{response.get('status')} {' '.join(body.split())[:200]}")
    if row.curl:
        lines.append(f"to reproduce ({row.reproduce}):")
        lines.extend(row.curl)
    return lines


def _timestamp(generated_at: str | datetime) -> str:
    if isinstance(generated_at, datetime):
        if generated_at.tzinfo is None:
            raise ValueError("generated_at needs a time zone to be an RFC 3339 timestamp")
        return generated_at.isoformat().replace("+00:00", "Z")
    if not RFC3339_RE.match(generated_at):
        raise ValueError(f"generated_at {generated_at!r} is not an RFC 3339 timestamp")
    return generated_at


def to_json(rows: Sequence[Row], host: str, generated_at: str | datetime,
            assumptions: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The results of a run, in the certification bundle's `results` shape, unsigned."""
    requirements = [_row_json(r) for r in judged(rows)]
    # Over the rows alone, so two runs that judged alike hash alike whatever their date
    # (and whatever the exchanges behind them: ids and timings differ from run to run).
    digest = sha256_hex(requirements)
    requirements = [_with_evidence(r, d) for r, d in zip(judged(rows), requirements,
                                                            strict=True)]
    doc: dict[str, Any] = {
        "tool": {"name": "refsim", "version": refsim.__version__},
        "host": {"label": host},
        "generatedAt": _timestamp(generated_at),
        "notACertification": NOT_A_CERTIFICATION,
        "results": {"totals": totals(rows), "requirements": requirements},
        "detail": {"nonPass": [_with_evidence(r, {
            "requirementId": r.requirement_id, "checkId": r.check_id or r.requirement_id,
            "disposition": r.disposition.value, "reason": r.detail})
            for r in judged(rows) if not r.passed]},
        # Rows this host was not asked: they need the simulator's inside.
        "inProcessOnly": [{"requirementId": r.requirement_id, "checkId": r.check_id,
                           "reason": r.detail} for r in apart(rows)],
        "rowsSha256": digest,
    }
    if assumptions is not None:
        doc["assumptions"] = [dict(a) for a in assumptions]
    return doc


def _xml_text(value: str) -> str:
    return _XML_ILLEGAL.sub("\ufffd", value)


def _suite_counts(rows: Sequence[Row]) -> dict[str, str]:
    failures = sum(r.disposition is Disposition.EXECUTED_FAIL for r in rows)
    skipped = sum(r.disposition in (Disposition.SKIPPED, Disposition.INAPPLICABLE,
                                    Disposition.BLOCKED) for r in rows)
    return {"tests": str(len(rows)), "failures": str(failures), "errors": "0",
            "skipped": str(skipped)}


def to_junit(rows: Sequence[Row], host: str) -> str:
    """JUnit XML: a testsuite per scenario, a testcase per row (name: check, class: requirement)."""
    import xml.etree.ElementTree as ET  # here: only a --junit report needs it
    rows = judged(rows)
    root = ET.Element("testsuites", {"name": f"refsim against {_xml_text(host)}",
                                     **_suite_counts(rows)})
    by_scenario: dict[str, list[Row]] = {}
    for row in rows:
        by_scenario.setdefault(row.scenario_id, []).append(row)
    for scenario, members in by_scenario.items():
        suite = ET.SubElement(root, "testsuite", {"name": _xml_text(scenario),
                                                  **_suite_counts(members)})
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", {"name": "host", "value": _xml_text(host)})
        for row in members:
            case = ET.SubElement(suite, "testcase", {
                "name": _xml_text(row.check_id or row.requirement_id),
                "classname": _xml_text(row.requirement_id),
                "assertions": str(row.assertion_count)})
            if row.disposition is Disposition.EXECUTED_FAIL:
                failed = [f.message for f in row.findings if not f.ok] or [row.detail]
                node = ET.SubElement(case, "failure", {"message": _xml_text(failed[0]),
                                                       "type": "executed-fail"})
                node.text = _xml_text("\n".join([*failed, *evidence_text(row)]))
            elif row.disposition is Disposition.BLOCKED:
                ET.SubElement(case, "skipped", {"message": _xml_text("blocked: " + row.detail)})
            elif row.disposition in (Disposition.SKIPPED, Disposition.INAPPLICABLE):
                ET.SubElement(case, "skipped", {"message": _xml_text(row.detail)})
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def totals_line(rows: Sequence[Row]) -> str:
    counts = totals(rows)
    counted = judged(rows)
    assertions = sum(r.assertion_count for r in counted)
    parts = ", ".join(f"{counts[key]} {disposition.value}"
                      for disposition, key in TOTAL_KEYS.items())
    aside = len(rows) - len(counted)
    return f"{len(counted)} rows, {assertions} assertions: {parts}" + (
        f"; {aside} in process only (listed apart)" if aside else "")


def terminal_width() -> int:
    """The terminal's width in columns (COLUMNS, then the terminal itself), TEXT_WIDTH when
    the output is no terminal; never under 40."""
    return max(40, shutil.get_terminal_size((TEXT_WIDTH, 24)).columns)


def to_text(rows: Sequence[Row], host: str, width: int | None = None,
            changed: Collection[tuple[str, str]] = ()) -> str:
    """One line per row, then the totals: what a person reads in a terminal. A row whose
    detail does not fit beside its name on one line of `width` (the terminal's) gets it
    wrapped below; nothing is cut. Rows `changed` by an --assume reading (requirement id,
    check id) are explained once, after the table, and only named here."""
    width = width if width is not None else terminal_width()
    lines = [f"refsim against {host}"]
    for row in judged(rows):
        check = row.check_id or row.requirement_id
        name = row.requirement_id + (f" ({check})" if check != row.requirement_id else "")
        head = f"{row.disposition.value:<13} {name} [{row.assertion_count}]"
        detail = " ".join(row.detail.split())
        if (row.requirement_id, row.check_id) in changed:
            detail = "changed by the reading assumed: see below"
        if row.passed and len(head) + 1 + len(detail) <= width:
            lines.append(f"{head} {detail}".rstrip())
        else:
            lines.append(head)
            lines.extend("    " + part for part in textwrap.wrap(
                detail, max(36, width - 4), break_on_hyphens=False, break_long_words=False))
            if row.curl:  # one command a line, never wrapped: it is pasted
                lines.append(f"    to reproduce ({row.reproduce}):")
                lines.extend("      " + line for line in row.curl)
    aside = apart(rows)
    if aside:
        lines.append(f"In process only, not run on this host ({len(aside)}; no pass, no fail, "
                     "no part of the verdict):")
        for row in aside:
            lines.append(f"  {row.check_id} ({row.requirement_id})")
            lines.extend("    " + part for part in textwrap.wrap(
                row.detail.removeprefix("in process only: "), max(40, width - 4),
                break_on_hyphens=False, break_long_words=False))
    lines.append(totals_line(rows))
    return "\n".join(lines)


def verdict(rows: Sequence[Row]) -> int:
    """0 all passed or reasonably not run; 1 anything failed; 2 blocked or nothing to judge."""
    rows = judged(rows)
    if any(r.disposition is Disposition.EXECUTED_FAIL for r in rows):
        return EXIT_FAIL
    if not rows:
        return EXIT_UNKNOWN
    for row in rows:
        if row.disposition is Disposition.BLOCKED:
            return EXIT_UNKNOWN
        # Every non-pass row carries a reason; one that does not hides what happened.
        if not row.passed and not row.detail.strip():
            return EXIT_UNKNOWN
    return EXIT_PASS


def write_reports(rows: Sequence[Row], host: str, json_path: str | Path | None,
                  junit_path: str | Path | None, *,
                  generated_at: str | datetime | None = None,
                  assumptions: Sequence[Mapping[str, Any]] | None = None) -> list[Path]:
    """Write the JSON and/or JUnit report where asked; return the paths written."""
    written: list[Path] = []
    if json_path is not None:
        when = generated_at if generated_at is not None else datetime.now(UTC).replace(
            microsecond=0)
        doc = to_json(rows, host, when, assumptions)
        path = Path(json_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)
    if junit_path is not None:
        path = Path(junit_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(to_junit(rows, host), encoding="utf-8")
        written.append(path)
    return written
