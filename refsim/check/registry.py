"""The requirement registry (specs/requirements.yaml): RFC 0252's rules and the ids checks emit.

Loading validates the file; `uncovered()` names the obligations no check witnesses.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from refsim.data import paths, yaml_data

LEVELS = ("MUST", "MUST NOT", "SHOULD", "SHOULD NOT", "MAY", "DEF")
OBLIGATIONS = frozenset({"MUST", "MUST NOT", "SHOULD", "SHOULD NOT"})
WITNESSES = ("witnessable-unaided", "witnessable-gated", "seam-gated", "claims-check",
             "negative-existence", "unwitnessable")
CHECK_KINDS = ("scenario", "example", "invariant", "machine", "sampled")
# What `refsim list` prints, defined (Registry.terms keeps those in use).
TERMS = {
    "MUST": "the RFC's keyword (RFC 2119): an absolute requirement",
    "MUST NOT": "the RFC's keyword: an absolute prohibition",
    "SHOULD": "the RFC's keyword: required unless a host has a reason it can state",
    "SHOULD NOT": "the RFC's keyword: prohibited unless a host has a reason it can state",
    "MAY": "the RFC's keyword: truly optional",
    "DEF": "a definition or ruling the RFC states with no keyword: what the rest is read by",
    "witnessable-unaided": "a client sees it on the wire with the protocol alone",
    "witnessable-gated": "a client sees it on the wire where the host advertises the "
                         "capability (agents.evalSuite.recordedFixtures) and the fixtures",
    "seam-gated": "seen only through a conformance seam the host exposes for tests (the "
                  "counter tool, erasure, the resolve count)",
    "claims-check": "checked against what the host says of itself (discovery, the summary) "
                    "rather than by an outcome",
    "negative-existence": "shown by something being absent (no member, no run, no event)",
    "unwitnessable": "no outside party can see it; refsim checks it in process only, and "
                     "the line under it says why",
    "scenario:": "a check: a leg of the conformance scenario v2-eval-recorded-fixtures",
    "example:": "a check: a row of the RFC example table (specs/examples/)",
    "invariant:": "a check: a row of invariants/invariants.yaml",
    "machine:": "a check: a rule of the stateful machine (refsim fuzz)",
    "sampled:": "a check: a class of specs/classes.yaml, sampled by refsim check (--seed)",
    "§A..§E": "the sections of RFC 0252; Security, Conformance, Implementation notes and "
              "Unresolved questions are its other headings",
    "R1, S1, UQ1, IMPL1": "rule ids: the RFC's normative lines (R), Security items (S), "
                          "steward rulings (UQ), the implementation notes (IMPL)",
    "RFC:": "the RFC's own falsifiability verdict for a rule (specs/falsifiability.yaml "
            "quotes its table), where refsim's witness class is the requirement's",
    "covered by": "the requirement ids whose checks witness the rule",
    "not covered": "an obligation nothing outside can witness, with the reason",
    "UNCOVERED": "an obligation no check witnesses: a gap in refsim",
    "no check": "a definition with no check of its own",
}
ID_PREFIXES = ("openwop.requirement.", "refsim.requirement.")

RULE_ID_RE = re.compile(r"^[A-Z]+[0-9]+[a-z]?$")
# The OpenWOP bundle's id grammar, with refsim's own namespace beside openwop's.
REQUIREMENT_ID_RE = re.compile(
    r"^(openwop|refsim)\.(requirement|it|scenario|floor|profile|family)\.[a-z0-9][a-z0-9.~-]*$")
CHECK_RE = re.compile(r"^(" + "|".join(CHECK_KINDS) + r"):\S+$")
DEFAULT_PATH = paths.SPECS / "requirements.yaml"


def short_id(requirement_id: str) -> str:
    """`openwop.requirement.0252.shape` -> `0252.shape`; other ids unchanged."""
    for prefix in ID_PREFIXES:
        if requirement_id.startswith(prefix):
            return requirement_id[len(prefix):]
    return requirement_id


@attrs.frozen
class Rule:
    """One normative line of the RFC, as wire-facts §A numbers it."""

    id: str
    section: str
    level: str = attrs.field(validator=attrs.validators.in_(LEVELS))
    text: str = attrs.field()
    # The RFC's own verdict for the line (its falsifiability table), else our reading.
    rfc_verdict: str = attrs.field(validator=attrs.validators.in_(WITNESSES))
    covered_by: tuple[str, ...] = ()
    rationale: str | None = None

    @property
    def is_obligation(self) -> bool:
        return self.level in OBLIGATIONS

    @property
    def exempt(self) -> bool:
        """Deliberately uncovered: unwitnessable, and saying why."""
        return self.rfc_verdict == "unwitnessable" and bool(self.rationale)

    def __str__(self) -> str:
        return f"{self.id} ({self.section}, {self.level}): {self.text}"


@attrs.frozen
class Requirement:
    """An id that checks emit, the rules it witnesses, and the checks that emit it."""

    id: str
    title: str
    section: str
    level: str = attrs.field(validator=attrs.validators.in_(LEVELS))
    witness: str = attrs.field(validator=attrs.validators.in_(WITNESSES))
    rules: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    # Why no faulty host can break it (its checks judge no host: schema vectors, or the
    # verdict of other rows); `refsim falsify` prints it where a violator would stand.
    hostless: str | None = None

    @property
    def short(self) -> str:
        return short_id(self.id)

    def __str__(self) -> str:
        return f"{self.id} ({self.section}, {self.level}): {self.title}"


def _fail(source: str, entry: str, problem: str) -> ValueError:
    return ValueError(f"{source}: {entry}: {problem}")


def _optional_text(source: str, entry: str, raw: Mapping[str, Any], key: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    return _text(source, entry, raw, key)


def _text(source: str, entry: str, raw: Mapping[str, Any], key: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _fail(source, entry, f"{key!r} must be a non-empty string, got {value!r}")
    return " ".join(value.split())


def _names(source: str, entry: str, raw: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = raw.get(key, [])
    if value is None:
        value = []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _fail(source, entry, f"{key!r} must be a list of strings, got {value!r}")
    if len(set(value)) != len(value):
        raise _fail(source, entry, f"{key!r} names an entry twice")
    return tuple(value)


def _choice(source: str, entry: str, raw: Mapping[str, Any], key: str,
            allowed: tuple[str, ...]) -> str:
    value = _text(source, entry, raw, key)
    if value not in allowed:
        raise _fail(source, entry, f"unknown {key} {value!r}; expected one of "
                    + ", ".join(allowed))
    return value


def _entries(source: str, data: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    value = data.get(key)
    if not isinstance(value, list):
        raise ValueError(f"{source}: top-level {key!r} must be a list")
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise ValueError(f"{source}: {key}[{index}] must be a mapping, got {item!r}")
    return value


def _rule(source: str, raw: Mapping[str, Any], index: int) -> Rule:
    rid = raw.get("id")
    entry = f"rule {rid}" if isinstance(rid, str) and rid else f"rules[{index}]"
    if not isinstance(rid, str) or not RULE_ID_RE.match(rid):
        raise _fail(source, entry, f"id {rid!r} is not a rule id like R10, R7a, S3, UQ1")
    rule = Rule(
        id=rid,
        section=_text(source, entry, raw, "section"),
        level=_choice(source, entry, raw, "level", LEVELS),
        text=_text(source, entry, raw, "text"),
        rfc_verdict=_choice(source, entry, raw, "rfc_verdict", WITNESSES),
        covered_by=_names(source, entry, raw, "covered_by"),
        rationale=_optional_text(source, entry, raw, "rationale"),
    )
    if rule.rfc_verdict == "unwitnessable" and not rule.rationale:
        raise _fail(source, entry, "rfc_verdict unwitnessable needs a rationale")
    return rule


def _requirement(source: str, raw: Mapping[str, Any], index: int) -> Requirement:
    qid = raw.get("id")
    entry = f"requirement {qid}" if isinstance(qid, str) and qid else f"requirements[{index}]"
    if not isinstance(qid, str) or not REQUIREMENT_ID_RE.match(qid):
        raise _fail(source, entry, f"id {qid!r} is not an id like "
                    "openwop.requirement.0252.shape or refsim.requirement.0252.no-echo")
    req = Requirement(
        id=qid,
        title=_text(source, entry, raw, "title"),
        section=_text(source, entry, raw, "section"),
        level=_choice(source, entry, raw, "level", LEVELS),
        witness=_choice(source, entry, raw, "witness", WITNESSES),
        rules=_names(source, entry, raw, "rules"),
        checks=_names(source, entry, raw, "checks"),
        hostless=_optional_text(source, entry, raw, "hostless"),
    )
    for name in req.checks:
        if not CHECK_RE.match(name):
            raise _fail(source, entry, f"check {name!r} is not <kind>:<name> with kind one of "
                        + ", ".join(CHECK_KINDS))
    return req


def _unique(source: str, kind: str, ids: Iterable[str]) -> None:
    seen: set[str] = set()
    for value in ids:
        if value in seen:
            raise ValueError(f"{source}: duplicate {kind} id {value!r}")
        seen.add(value)


@attrs.frozen
class Registry:
    rules: tuple[Rule, ...]
    requirements: tuple[Requirement, ...]
    source: str = "<registry>"
    _rules_by_id: dict[str, Rule] = attrs.field(init=False, eq=False, repr=False)
    _reqs_by_id: dict[str, Requirement] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        _unique(self.source, "rule", (r.id for r in self.rules))
        _unique(self.source, "requirement", (q.id for q in self.requirements))
        object.__setattr__(self, "_rules_by_id", {r.id: r for r in self.rules})
        object.__setattr__(self, "_reqs_by_id", {q.id: q for q in self.requirements})
        self._check_links()

    def _check_links(self) -> None:
        """Every link names something that exists, and both ends of a link agree."""
        for rule in self.rules:
            for qid in rule.covered_by:
                req = self._reqs_by_id.get(qid)
                if req is None:
                    raise _fail(self.source, f"rule {rule.id}",
                                f"covered_by names unknown requirement {qid!r}")
                if rule.id not in req.rules:
                    raise _fail(self.source, f"rule {rule.id}",
                                f"covered_by names {qid}, whose rules do not list {rule.id}")
        for req in self.requirements:
            for rid in req.rules:
                found = self._rules_by_id.get(rid)
                if found is None:
                    raise _fail(self.source, f"requirement {req.id}",
                                f"rules names unknown rule {rid!r}")
                if req.id not in found.covered_by:
                    raise _fail(self.source, f"requirement {req.id}",
                                f"rules names {rid}, whose covered_by does not list {req.id}")

    # -- loading ---------------------------------------------------------------------------

    @classmethod
    def from_data(cls, data: Any, source: str = "<registry>") -> Registry:
        if not isinstance(data, dict):
            raise ValueError(f"{source}: expected a mapping with 'rules' and 'requirements'")
        rules = tuple(_rule(source, raw, i)
                      for i, raw in enumerate(_entries(source, data, "rules")))
        reqs = tuple(_requirement(source, raw, i)
                     for i, raw in enumerate(_entries(source, data, "requirements")))
        return cls(rules, reqs, source)

    @classmethod
    def from_path(cls, path: Path) -> Registry:
        with path.open(encoding="utf-8") as handle:
            data = yaml_data.load(handle.read())
        return cls.from_data(data, str(path))

    # -- queries ---------------------------------------------------------------------------

    def rule(self, rule_id: str) -> Rule:
        return self._rules_by_id[rule_id]

    def requirement(self, requirement_id: str) -> Requirement:
        return self._reqs_by_id[requirement_id]

    def __contains__(self, requirement_id: object) -> bool:
        return requirement_id in self._reqs_by_id

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(self._reqs_by_id)

    def covering(self, rule: Rule) -> list[Requirement]:
        """The requirements covering `rule` that at least one check emits."""
        return [self._reqs_by_id[q] for q in rule.covered_by if self._reqs_by_id[q].checks]

    def uncovered(self) -> list[Rule]:
        """MUST/SHOULD (and NOT) rules no checked requirement covers, bar the exempt ones."""
        return [r for r in self.rules
                if r.is_obligation and not r.exempt and not self.covering(r)]

    def unchecked(self) -> list[Requirement]:
        """Requirements that no check emits yet."""
        return [q for q in self.requirements if not q.checks]

    def unknown_ids(self, ids: Iterable[str]) -> list[str]:
        """The ids not in the registry, sorted, each once."""
        return sorted({i for i in ids if i not in self._reqs_by_id})

    def matching(self, prefix: str) -> list[Requirement]:
        """Requirements whose id starts with `prefix`, or whose short id contains it."""
        return [q for q in self.requirements
                if q.id.startswith(prefix) or prefix in q.short]

    def terms(self) -> list[tuple[str, str]]:
        """Every term `refsim list` prints, with its meaning: the levels, witness classes
        and check kinds in use, then the words of the coverage lines."""
        used = ({q.level for q in self.requirements} | {r.level for r in self.rules}
                | {q.witness for q in self.requirements} | {r.rfc_verdict for r in self.rules}
                | {c.split(":", 1)[0] + ":" for q in self.requirements for c in q.checks})
        varies = {*LEVELS, *WITNESSES, *(f"{kind}:" for kind in CHECK_KINDS)}
        return [(term, meaning) for term, meaning in TERMS.items()
                if term in used or term not in varies]

    def format_list(self) -> str:
        """What `refsim list` prints: the terms it uses, requirements with their checks,
        then rule coverage."""
        terms = self.terms()
        twidth = max(len(t) for t, _ in terms)
        lines = ["Terms", ""] + [f"  {t:<{twidth}}  {meaning}" for t, meaning in terms] + [""]
        lines += [f"Requirements ({len(self.requirements)}): id, section, level, refsim's "
                  "witness class (how its checks see it)", ""]
        width = max((len(q.id) for q in self.requirements), default=0)
        swidth = max((len(q.section) for q in self.requirements), default=0)
        for q in self.requirements:
            lines.append(f"  {q.id:<{width}}  {q.section:<{swidth}}  {q.level:<10}  {q.witness}")
            checks = ", ".join(q.checks) if q.checks else "(no check yet)"
            lines.append(f"  {'':<{width}}  checks: {checks}")
        lines += ["", f"Rules ({len(self.rules)}): id, section, level, the RFC's own verdict "
                  "(its falsifiability table; a requirement above may see it through a seam "
                  "or only inside)", ""]
        rwidth = max((len(r.id) for r in self.rules), default=0)
        rswidth = max((len(r.section) for r in self.rules), default=0)
        for r in self.rules:
            lines.append(f"  {r.id:<{rwidth}}  {r.section:<{rswidth}}  {r.level:<10}  "
                         f"RFC: {r.rfc_verdict}")
            pad = " " * (rwidth + 4)
            lines.append(f"{pad}{r.text}")
            covering = self.covering(r)
            if covering:
                status = "covered by " + ", ".join(q.short for q in covering)
            elif r.exempt:
                status = f"not covered ({r.rfc_verdict}): {r.rationale}"
            elif r.is_obligation:
                status = "UNCOVERED: no check witnesses this obligation"
            else:
                status = "no check"
            lines.append(f"{pad}-> {status}")
        gaps = self.uncovered()
        lines += ["", f"{len(gaps)} uncovered obligation(s)"
                  + (": " + ", ".join(r.id for r in gaps) if gaps else "")]
        return "\n".join(lines)


@functools.cache
def load_registry(path: Path = DEFAULT_PATH) -> Registry:
    """The registry at `path` (specs/requirements.yaml by default), loaded once."""
    return Registry.from_path(path)
