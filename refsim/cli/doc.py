"""`refsim doc`: specs/REFERENCE.md, rendered from the data the checker itself runs on.

Requirements, rules, example rows, invariants, assumptions and error codes all come from
`specs/` and `invariants/`; the file is never edited by hand, and a test fails when it is
stale.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from refsim.check.examples import Example, load_examples
from refsim.check.invariants import Invariant, load_invariants
from refsim.check.registry import Registry, Requirement, load_registry
from refsim.data import paths, yaml_data
from refsim.data.registry_codes import registry as error_registry

DEFAULT_OUT = paths.SPECS / "REFERENCE.md"
ANSWERS = paths.SPECS / "error-answers.yaml"
SOURCES = ("specs/requirements.yaml", "specs/examples/", "invariants/invariants.yaml",
           "specs/assumptions.yaml", "specs/error-answers.yaml", "specs/error-registry.json",
           "specs/falsifiability.yaml", "specs/falsified.json", "specs/classes.yaml")


@attrs.frozen
class Answer:
    """One code of specs/error-answers.yaml: an HTTP answer (status set) or a tool error."""

    code: str
    status: int | None
    when: tuple[str, ...]
    only_under: str | None = None


def _answer(raw: Any, where: str, *, http: bool) -> Answer:
    if not isinstance(raw, dict) or not isinstance(raw.get("code"), str):
        raise ValueError(f"{where}: each entry is a mapping with a string code")
    code = raw["code"]
    allowed = {"code", "status", "when", "only_under"} if http else {"code", "when"}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ValueError(f"{where}: {code}: unknown field(s) {', '.join(unknown)}")
    when = raw.get("when")
    if not isinstance(when, list) or not when or not all(
            isinstance(w, str) and w.strip() for w in when):
        raise ValueError(f"{where}: {code}: `when` must list at least one situation")
    status = raw.get("status")
    if http and (not isinstance(status, int) or isinstance(status, bool)):
        raise ValueError(f"{where}: {code}: `status` must be an HTTP status")
    only = raw.get("only_under")
    if only is not None and not isinstance(only, str):
        raise ValueError(f"{where}: {code}: `only_under` must be NAME=VALUE")
    return Answer(code, status if http else None, tuple(" ".join(w.split()) for w in when),
                  only)


def load_answers(path: Path | None = None) -> tuple[tuple[Answer, ...], tuple[Answer, ...]]:
    """(HTTP answers, tool errors) from specs/error-answers.yaml, validated."""
    path = path or ANSWERS
    doc = yaml_data.load(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a mapping with `answers` and `tool_errors`")
    out: list[tuple[Answer, ...]] = []
    for key, http in (("answers", True), ("tool_errors", False)):
        rows = doc.get(key)
        if not isinstance(rows, list):
            raise ValueError(f"{path}: `{key}` must be a list")
        parsed = tuple(_answer(r, f"{path}: {key}[{i}]", http=http) for i, r in enumerate(rows))
        codes = [a.code for a in parsed]
        if len(set(codes)) != len(codes):
            raise ValueError(f"{path}: `{key}` lists a code twice")
        out.append(parsed)
    return out[0], out[1]


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _requirement(q: Requirement, reg: Registry, examples: Sequence[Example],
                 invariants: Sequence[Invariant]) -> list[str]:
    out = [f"### `{q.id}`", "", f"{q.title}.", "",
           f"Section {q.section} · level **{q.level}** · witness class `{q.witness}`", ""]
    if q.rules:
        out.append("Rules:")
        out += [f"- **{r}** ({reg.rule(r).section}, {reg.rule(r).level}): "
                f"{_cell(reg.rule(r).text)}" for r in q.rules]
        out.append("")
    out.append("Checks: " + (", ".join(f"`{c}`" for c in q.checks) or "none") + ".")
    rows = [e for e in examples if e.requirement_id == q.id]
    if rows:
        out += ["", "Example rows:"]
        out += [f"- `{e.id}`" + (f" (profile `{e.profile}`)" if e.profile else "")
                + f": {_cell(e.title)}" for e in rows]
    rows_i = [i for i in invariants if i.requirement_id == q.id]
    if rows_i:
        out += ["", "Invariants:"]
        out += [f"- `{i.id}` ({i.tier}, {i.severity}, `{i.witness}`), checked by "
                + " and ".join(([("example rows " if len(i.examples) > 1 else "example row ")
                                 + ", ".join(f"`{e}`" for e in i.examples)] if i.examples
                                else []) + ([f"`{i.check}`"] if i.check else []))
                for i in rows_i]
    out.append("")
    return out


def _rules(reg: Registry) -> list[str]:
    out = ["| rule | section | level | RFC verdict | text | covered by |",
           "| --- | --- | --- | --- | --- | --- |"]
    for r in reg.rules:
        covering = reg.covering(r)
        if covering:
            cover = ", ".join(f"`{q.short}`" for q in covering)
        elif r.exempt:
            cover = f"not coverable: {_cell(r.rationale or '')}"
        else:
            cover = "**uncovered**" if r.is_obligation else "no check"
        out.append(f"| {r.id} | {r.section} | {r.level} | `{r.rfc_verdict}` | {_cell(r.text)} | "
                   f"{cover} |")
    return out


ASSUMPTION_FIELDS = ("id", "question", "reading", "default", "source")


def _assumption_rows(doc: Any) -> list[Mapping[str, Any]]:
    where = "specs/assumptions.yaml"
    if not isinstance(doc, dict) or not isinstance(doc.get("assumptions"), list):
        raise ValueError(f"{where}: expected a mapping with an `assumptions` list")
    rows: list[Mapping[str, Any]] = []
    for index, a in enumerate(doc["assumptions"]):
        if not isinstance(a, dict):
            raise ValueError(f"{where}: assumptions[{index}] is not a mapping")
        missing = [k for k in ASSUMPTION_FIELDS if not isinstance(a.get(k), str)]
        if missing:
            raise ValueError(f"{where}: {a.get('id', f'assumptions[{index}]')}: missing or "
                             f"non-text field(s) {', '.join(missing)}")
        decided = a.get("decided_in") or []
        if not isinstance(decided, list) or not all(isinstance(d, str) for d in decided):
            raise ValueError(f"{where}: {a['id']}: decided_in is a list of code locations")
        alternatives = a.get("alternatives") or []
        if not isinstance(alternatives, list) or not all(
                isinstance(x, dict) and {"value", "reading"} <= set(x) for x in alternatives):
            raise ValueError(f"{where}: {a['id']}: each alternative is {{value, reading}}")
        rows.append(a)
    return rows


def _assumptions(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    out = ["| assumption | reading | other readings | flips with --assume |",
           "| --- | --- | --- | --- |"]
    for a in rows:
        others = (", ".join(f"`{_cell(x['value'])}`" for x in a.get("alternatives") or [])
            or "—")
        out.append(f"| [`{a['id']}`](#{a['id']}) | `{a['default']}` | {others} | "
                   f"{'yes' if a.get('assumable') else 'no'} |")
    out.append("")
    for a in rows:
        out += [f"### `{a['id']}`", "", _cell(a["question"]), "",
                f"- **Reading** (`{a['default']}`): {_cell(a['reading'])}"]
        for alt in a.get("alternatives") or []:
            value = _cell(alt["value"])
            flip = f" `--assume {a['id']}={value}`" if a.get("assumable") else ""
            out.append(f"- **Instead** (`{value}`){flip}: {_cell(alt['reading'])}")
        if a.get("note"):
            out.append(f"- **Note:** {_cell(a['note'])}")
        out.append(f"- **Source:** {_cell(a['source'])}")
        decided = a.get("decided_in") or []
        if decided:
            out.append("- **Decided in:** " + ", ".join(f"`{d}`" for d in decided))
        out.append("")
    return out


def _errors(answers: Sequence[Answer], tool_errors: Sequence[Answer]) -> list[str]:
    registered = error_registry()
    out = ["Every refusal is `{\"error\": code, \"message\": …, \"details\"?: …}` at the "
           "code's registered status. These are all the codes the host answers with:", "",
           "| status | code | when |", "| --- | --- | --- |"]
    for a in sorted(answers, key=lambda a: (a.status or 0, a.code)):
        status = f"{a.status}" + ("" if registered.get(a.code) == a.status
                                  else " (**not the registered status**)")
        only = f" Only under `--assume {a.only_under}`." if a.only_under else ""
        out.append(f"| {status} | `{a.code}` | " + " ".join(
            f"({i}) {_cell(w)}" if len(a.when) > 1 else _cell(w)
            for i, w in enumerate(a.when, 1)) + only + " |")
    out += ["", "### Tool error codes", "",
            "Not HTTP answers: the `error.code` an agent sees in `agent.tool-returned`.", "",
            "| code | when |", "| --- | --- |"]
    out += [f"| `{a.code}` | " + " ".join(_cell(w) for w in a.when) + " |" for a in tool_errors]
    return out


def _rule_ids(reg: Registry) -> str:
    """The rule ids by family, first to last: `R1…R22, S1…S5`."""
    families: dict[str, list[str]] = {}
    for r in reg.rules:
        families.setdefault(r.id.rstrip("0123456789abcdefghijklmnopqrstuvwxyz"), []).append(r.id)
    def number(rule_id: str) -> tuple[int, str]:
        digits = "".join(ch for ch in rule_id if ch.isdigit())
        return int(digits or 0), rule_id
    spans = [sorted(ids, key=number) for ids in families.values()]
    return ", ".join(ids[0] if len(ids) == 1 else f"{ids[0]}…{ids[-1]}" for ids in spans)


def render() -> str:
    """The whole reference. Raises ValueError (or OSError, yaml.YAMLError) on bad data."""
    reg = load_registry()
    examples = load_examples()
    invariants = load_invariants()
    assumptions = _assumption_rows(yaml_data.load((paths.SPECS / "assumptions.yaml").read_text(
        encoding="utf-8")))
    answers, tool_errors = load_answers()
    out = ["# RFC 0252 in refsim: the reference", "",
           "<!-- Generated by `refsim doc`. Do not edit: edit the sources below, then run "
           "`refsim doc`. tests/test_doc.py fails while this file is stale. -->", "",
           "Generated from " + ", ".join(f"`{s}`" for s in SOURCES) + ". RFC 0252, *An eval "
           "task takes its fixtures from a recorded run*, is the specification; the rule ids "
           f"({_rule_ids(reg)}) number its normative lines and definitions.", "",
           f"- [Requirements](#requirements): {len(reg.requirements)} ids, the checks that "
           "emit each, its example rows and invariants",
           f"- [Rules](#rules): {len(reg.rules)} rules (normative lines and definitions) "
           "and what covers them",
           f"- [Assumptions](#assumptions): {len(assumptions)} readings of open points, "
           f"{sum(bool(a.get('assumable')) for a in assumptions)} of them flippable",
           f"- [Error codes](#error-codes): {len(answers)} HTTP codes and "
           f"{len(tool_errors)} tool error codes",
           "- [The example vocabulary](#the-example-vocabulary): the actions and "
           "expectations an example row is written in, and what runs over HTTP",
           "- [The classes](#the-classes): the RFC's classes, each member the machine draws "
           "and `refsim check` samples",
           "- [Faulty hosts](#faulty-hosts): the zoo the kill matrix judges",
           "- [Falsifiability, computed](#falsifiability-computed): the RFC's table beside "
           "the one `refsim falsify` computes from the zoo", "",
           "## Requirements", "",
           "Check kinds: `scenario:` a leg of v2-eval-recorded-fixtures, `example:` a row of "
           "`specs/examples/`, `invariant:` a row of `invariants/invariants.yaml`, `machine:` "
           "a rule of the stateful machine, `sampled:` a class of `specs/classes.yaml` "
           "that `refsim check` samples.", ""]
    for q in reg.requirements:
        out += _requirement(q, reg, examples, invariants)
    out += ["## Rules", "", *_rules(reg)]
    out += ["", "## Assumptions", "",
            "Where no source settles a point, refsim takes the reading below. Those with "
            "another value to try flip with `refsim check --assume NAME=VALUE`.", ""]
    out += _assumptions(assumptions)
    out += ["## Error codes", "", *_errors(answers, tool_errors)]
    out += ["", *_vocabulary()]
    out += ["", *_classes()]
    out += ["", *_zoo()]
    out += ["", *_falsified()]
    return "\n".join(out).rstrip("\n") + "\n"


def _classes() -> list[str]:
    """specs/classes.yaml: each class, its RFC line, and every member by the name the
    machine counts it under (`refsim fuzz` prints how many of each it drew)."""
    from refsim.check import classes
    data = classes.load()
    out = ["## The classes", "",
           "Written once in `specs/classes.yaml`. The stateful machine draws every class "
           "(its class sweep draws every member once, before anything random); `refsim "
           "check` takes a bounded, seeded sample of each (`--seed`). A member added there "
           "appears here, in `refsim fuzz`'s counts and in `check`'s sample.", ""]
    for cls in classes.CLASS_NAMES:
        names = classes.member_names(cls)
        out += [f"### `{cls}` ({len(names)} members)", "", _cell(data.rfc[cls]), "",
                ", ".join(f"`{_cell(repr(n) if n != n.strip() or not n.isprintable() else n)}`"
                          for n in names), ""]
    return out


def _vocabulary() -> list[str]:
    """The example table's vocabulary, from the table's own definitions (refsim.check.examples'
    keys and action classes, refsim.check.expectations' expectation classes): the one manual
    of it."""
    from refsim.check.examples import ACTIONS, REQUEST_KEYS, ROW_KEYS, TOP_KEYS
    from refsim.check.expectations import reference_table
    out = ["## The example vocabulary", "",
           "Generated from the keys, the action classes and the expectation classes of "
           "`refsim.check.examples` and `refsim.check.expectations`: the rows of "
           "`specs/examples/*.yaml` are written in it. An unknown name fails when the table "
           "loads. Over HTTP (`--base-url`) there is no inside: an expectation that needs it "
           "is judged by its outside form where it has one, and left out otherwise; a row "
           "whose every claim needs the inside, or that pins a profile, is listed apart, "
           "never judged.", "", "### Files, rows and requests", "", "| key | in | means |",
           "| --- | --- | --- |"]
    for where, keys in (("file", TOP_KEYS), ("row", ROW_KEYS), ("request", REQUEST_KEYS)):
        for key, means in keys.items():
            out.append(f"| `{key}` | {where} | {_cell(means)} |")
    out += ["", "### Actions", "", "One key each, the same in `setup` and in requests.", "",
            "| action | arguments | sends | succeeds with |", "| --- | --- | --- | --- |"]
    for name, kind in ACTIONS.items():
        args = ", ".join([*sorted(kind.required), *(f"{a}?" for a in sorted(kind.optional))])
        out.append(f"| `{name}` | {args} | {_cell(kind.doc)} | {kind.success or '2xx'} |")
    out += ["", "### Expectations", "", "| expectation | asserts | needs the inside | "
            "judged over HTTP |", "| --- | --- | --- | --- |"]
    for form, doc, inside, where in reference_table():
        out.append(f"| `{_cell(form)}` | {_cell(doc)} | {inside} | {_cell(where)} |")
    return out


def _zoo() -> list[str]:
    from refsim.zoo.faulty import ZOO
    out = ["## Faulty hosts", "", f"The {len(ZOO)} hosts of `refsim.zoo.faulty`, each the "
           "reference host with one part swapped; `refsim mutants` judges them in process "
           "and over HTTP (`refsim serve --mutant NAME` serves any of them).", "",
           "| host | breaks | over HTTP |", "| --- | --- | --- |"]
    for m in ZOO:
        out.append(f"| `{m.name}` | {_cell(m.breaks)} | "
                   f"{_cell('in process only: ' + m.inside_only) if m.inside_only else 'yes'} |")
    return out



def _falsified() -> list[str]:
    """The RFC's falsifiability table beside refsim's, from the cache `refsim falsify
    --write specs/falsified.json` writes (computing it takes minutes)."""
    from refsim.check.registry import short_id
    from refsim.zoo.falsify import CACHE_PATH, load_cache
    doc = load_cache()
    out = ["## Falsifiability, computed", ""]
    if doc is None:
        return [*out, f"`{CACHE_PATH.name}` is missing: run `refsim falsify --write "
                "specs/falsified.json`."]
    out += ["RFC 0252's falsifiability table (`specs/falsifiability.yaml`) beside the one "
            "`refsim falsify` computes (`specs/falsified.json`): for every requirement id and "
            "every faulty host that breaks it, the weakest observation that kills the host "
            "there. `wire`: the checker from outside with no conformance seam; `wire + X "
            "seam`: with that one seam (counter, erase, resolve); `inside only`: only the "
            "in-process checker, with the simulator's inside. A row flagged **disagrees** is a "
            "finding to read, not a failure.", "",
            "| RFC row | RFC verdict | refsim verdict | the faulty host, where it is killed | "
            "disagreement |", "| --- | --- | --- | --- | --- |"]
    for row in doc["rfc"]:
        c = row["refsim"]
        killed = (f"`{c['host']}` (breaks {short_id(c['requirement'])}), killed on "
                  f"{short_id(c['failedOn'])}: {c['finding']}"
                  if c.get("failedOn") else f"`{c['host']}`: no check kills it"
                  if "host" in c else "")
        flag = f"**disagrees**: {row['disagreement']}" if row["disagreement"] else ""
        out.append(f"| {_cell(row['requirement'])} | {row['verdict']} | {_cell(c['verdict'])} "
                   f"| {_cell(killed)} | {_cell(flag)} |")
    programs = [(row, row["refsim"]["program"]) for row in doc["rfc"]
                if (row["refsim"].get("program") or {}).get("program")]
    for row, program in programs:
        out += ["", f"The program that kills `{row['refsim']['host']}` for *{row['requirement']}* "
                f"({program['steps']} steps, `{program['requirementId']}`):", "", "```python",
                *program["program"], "```"]
    from refsim.zoo.falsify import LEVEL_LABELS as labels
    from refsim.zoo.falsify import WIRE_NOTE, two_sided
    out += ["", "### Two-sided", "",
            "A row is witnessable at a level only if every zoo host built to break it is "
            "killed there, on the row's own requirement ids; the survivors at each level "
            f"short of that are named ({WIRE_NOTE}). A row that **disagrees** names its "
            "witness.", "",
            "| RFC row | RFC verdict | violators | witnessable at | survivors, by level | "
            "disagreement |", "| --- | --- | --- | --- | --- | --- |"]
    for row in two_sided(doc):
        at = ("no violator" if not row["violators"] else "—" if row["witnessableAt"] is None
              else labels[row["witnessableAt"]])
        gone = "; ".join(f"{labels[level]}: " + ", ".join(f"`{h}`" for h in hosts)
                         for level, hosts in row["survivors"].items() if hosts)
        flag = f"**disagrees**: {row['disagreement']}" if row["disagreement"] else ""
        if row["readings"]:
            gone += (("; " if gone else "") + "left out, contradicting only refsim's reading: "
                + ", ".join(f"`{h}`" for h in row["readings"]))
        out.append(f"| {_cell(row['requirement'])} | {row['rfc']} | {len(row['violators'])} "
                   f"| {at} | {_cell(gone)} | {_cell(flag)} |")
    from refsim.zoo.falsify import register_line, requirement_levels
    sided = {q["id"]: q for q in requirement_levels(doc)}
    out += ["", "### Every requirement id", "",
            "Two-sided over the id alone: where every violator dies, beside the witness "
            "class of specs/requirements.yaml (a test holds them to agree); a host that "
            "contradicts only refsim's reading of an open point is named as such.", "",
            "| requirement | level | refsim verdict | faulty hosts that break it (weakest "
            "observation) | two-sided |", "| --- | --- | --- | --- | --- |"]
    for q in doc["requirements"]:
        hosts = ", ".join(f"`{k['host']}` ({k['observation']})" for k in q["kills"])
        out.append(f"| `{short_id(q['id'])}` | {q['level']} | {_cell(q['verdict'])} | "
                   f"{hosts or '—'} | {_cell(register_line(sided[q['id']]))} |")
    return out
