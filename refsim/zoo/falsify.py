"""`refsim falsify`: RFC 0252's falsifiability table, computed from the zoo.

For every requirement id of the registry and every faulty host of `refsim.zoo.faulty` built
to break it (`hosts:` in `specs/falsifiability.yaml`), the weakest observation that kills
the host (on that id, or on any other it fails: it is the host that is killed):

- `wire`: the checker from outside with no conformance seam (the suite and tenant seams,
  which set a run up and observe nothing, stay);
- `wire + X seam`: the wire plus one named seam (counter, erase, resolve), found by
  offering each seam alone in turn; `wire + counter+erase+resolve seams` when no single one
  suffices;
- `inside only`: only the in-process checker, with the simulator's inside (the copy store,
  resolution counts, the egress log).

It is the checker of `refsim check`, run on the same host in process with its `Inspector`,
and through `OutsideClient`: a `HostClient` with no `core` or `host` (so the checker finds
no inspector, as over HTTP) that answers a seam it withholds as the host answers a path it
has no route for, and leaves that seam out of discovery. A row that fails on the reference
host at a level (it needs the seam withheld there) judges nothing at that level. The RFC's
own table is data too (`rows:`); refsim's verdict for each row is the weakest level over
the ids it maps to. The result is cached in `specs/falsified.json` (`refsim falsify --write
specs/falsified.json`), which `specs/REFERENCE.md` renders.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs
import yaml

from refsim.check.findings import Disposition, Row
from refsim.check.registry import load_registry, short_id
from refsim.check.runner import PARTS, Target, run_parts
from refsim.data import paths
from refsim.host import SimHost
from refsim.progress import Progress, Stopped, run_all
from refsim.wire.client import NO_BODY
from refsim.wire.response import Response
from refsim.zoo.faulty import ZOO, Mutant, mutant

TABLE_PATH = paths.SPECS / "falsifiability.yaml"
CACHE_PATH = paths.SPECS / "falsified.json"

# The observation seams, by the name discovery lists them under and the path they take.
SEAMS: dict[str, tuple[str, str]] = {
    "counter": ("eval-counter", "/conformance/seams/eval-counter"),
    "erase": ("runs:erase", ":erase"),
    "resolve": ("runs:resolve", ":resolve"),
}
WIRE, SEAM, INSIDE, NONE = "wire", "seam", "inside", "none"
RANK = {WIRE: 0, SEAM: 1, INSIDE: 2, NONE: 3}
MACHINE_EXAMPLES, MACHINE_STEPS, MACHINE_SEEDS = 100, 20, (0, 1, 2)


def _seam_of(path: str) -> str | None:
    if not path.startswith("/conformance/seams/"):
        return None
    bare = path.split("?", 1)[0]
    for name, (_, marker) in SEAMS.items():
        if bare.startswith(marker) or bare.endswith(marker):
            return name
    return None


class OutsideClient:
    """A faulty host seen from outside: no inside for the checker, and only the seams in
    `offered`. A withheld seam gets the host's own answer to a path it has no route for,
    and is left out of discovery's `conformance.seams`. It keeps its host under a name the
    checker's `inspector_of` does not look for (`host`, `core`), as over HTTP."""

    def __init__(self, inner: SimHost, offered: Iterable[str] = SEAMS) -> None:
        self._inner = inner
        self.offered = frozenset(offered)

    @property
    def name(self) -> str:
        return "outside, seams: " + ("+".join(sorted(self.offered)) or "none")

    def request(self, method: str, path: str, *, api_key: str | None = None,
                json: Any = NO_BODY, headers: dict[str, str] | None = None) -> Response:
        seam = _seam_of(path)
        if seam is not None and seam not in self.offered:
            return self._inner.request(method, "/conformance/seams/withheld", api_key=api_key,
                                       json=json, headers=headers)
        r = self._inner.request(method, path, api_key=api_key, json=json, headers=headers)
        if path.split("?", 1)[0] == "/.well-known/openwop" and isinstance(r.json, dict):
            conformance = r.json.get("conformance")
            if isinstance(conformance, dict) and isinstance(conformance.get("seams"), list):
                withheld = {SEAMS[s][0] for s in SEAMS if s not in self.offered}
                conformance["seams"] = [s for s in conformance["seams"] if s not in withheld]
        return r


Fails = dict[str, str]  # "requirement id|check id" -> the first failing finding


def _failed(rows: Sequence[Row]) -> Fails:
    out: Fails = {}
    for row in rows:
        if row.disposition is Disposition.EXECUTED_FAIL:
            first = next((f.message for f in row.findings if not f.ok), row.detail)
            out.setdefault(f"{row.requirement_id}|{row.check_id}", f"{first}"[:300])
    return out


def _outside(make: Any, offered: Iterable[str], prefix: str | None = None) -> Fails:
    return _failed(run_parts(Target(), PARTS, prefix,
                             client=OutsideClient(make(), offered)))


CONFIGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("seams", tuple(SEAMS)), ("wire", ()), *((f"only:{s}", (s,)) for s in SEAMS))


@functools.cache
def baseline(prefix: str | None = None) -> dict[str, Fails]:
    """The reference host's failures at every outside level: rows that cannot run there
    (the counter or erase they need is withheld). They judge nothing at that level."""
    return {name: _outside(lambda: SimHost(seed=0), offered, prefix)
            for name, offered in CONFIGS}


def _killed(fails: Fails, base: Fails) -> dict[str, str]:
    """Requirement id -> "check: finding", for rows that fail here but not on the reference."""
    out: dict[str, str] = {}
    for key, message in sorted(fails.items()):
        if key in base:
            continue
        requirement, _, check = key.partition("|")
        out.setdefault(requirement, f"{check}: {message}")
    return out


def judge_host(faulty: Mutant, prefix: str | None = None) -> dict[str, Any]:
    """One faulty host at every level: the requirement ids that fail there, with findings
    (`prefix` narrows the checks, as `refsim check PREFIX` does)."""
    inside = inside_level(run_parts(Target(recipe=faulty), PARTS, prefix))
    return {"host": faulty.name, "breaks": faulty.breaks,
            "levels": {"inside": inside, **outside_levels(faulty, prefix)}}


def inside_level(rows: Sequence[Row]) -> dict[str, str]:
    """The `inside` level from the in-process checker's rows on a faulty host (the rows
    `refsim check --mutant` and `refsim mutants` judge it by)."""
    return _killed(_failed(rows), {})


def outside_levels(faulty: Mutant, prefix: str | None = None) -> dict[str, dict[str, str]]:
    """Every level but `inside`: the wire and all seams, the wire alone, and each seam alone
    when the seams kill more than the wire."""
    base = baseline(prefix)
    levels: dict[str, dict[str, str]] = {}
    for name, offered in CONFIGS[:2]:
        levels[name] = _killed(_outside(faulty.host, offered, prefix), base[name])
    if set(levels["seams"]) - set(levels["wire"]):
        for name, offered in CONFIGS[2:]:
            levels[name] = _killed(_outside(faulty.host, offered, prefix), base[name])
    return levels


def stale(cached: dict[str, Any], fresh: dict[str, Any], *, inside: bool = True,
          outside: bool = True) -> list[str]:
    """Where a host's entry in the cache's `raw` differs from `fresh`, a judgement of it as
    `judge_host` returns it (`{"host", "breaks", "levels"}`, `breaks` optional), over the
    `inside` level, the outside ones or both (a test may judge them apart); empty when the
    cache is current there."""
    name = fresh["host"]
    out = [] if cached.get("host") == name else [f"{name}: the cache has {cached.get('host')!r}"]
    if "breaks" in fresh and cached.get("breaks") != fresh["breaks"]:
        out.append(f"{name}: breaks {cached.get('breaks')!r} cached, {fresh['breaks']!r} now")
    was_levels, now_levels = cached.get("levels", {}), fresh["levels"]
    for level in sorted({*was_levels, *now_levels}):
        if not (inside if level == "inside" else outside):
            continue
        was, now = was_levels.get(level), now_levels.get(level)
        if was is None or now is None:
            out.append(f"{name}: level {level} " + ("not in the cache" if was is None
                                                     else "cached, not judged now"))
            continue
        out += [f"{name} at {level}: {short_id(rid)}: {was.get(rid)!r} cached, "
                f"{now.get(rid)!r} now" for rid in sorted({*was, *now})
                if _sans_run_ids(was.get(rid)) != _sans_run_ids(now.get(rid))]
    return out


# A run id the host minted, as an observation quotes it: which one it minted depends on
# how many runs it made before, and a row that times its requests (the latency row) makes
# more or fewer of them from run to run on a host that leaves a run behind each refusal.
_RUN_ID = re.compile(r"[A-Za-z0-9._-]+/run-[0-9a-z]+")


def _sans_run_ids(observation: str | None) -> str | None:
    return None if observation is None else _RUN_ID.sub("<run id>", observation)


# ----------------------------------------------------------------------------- the table


def _level(levels: dict[str, dict[str, str]], requirement: str
           ) -> tuple[str, str, str, list[str]] | None:
    """(level, observation, finding, seams used) of the weakest level where `requirement`
    fails: the wire alone, the wire and one seam (each offered alone in turn), the wire and
    all three, or only the inside."""
    if requirement in levels.get("wire", {}):
        return WIRE, "wire", levels["wire"][requirement], []
    if requirement in levels.get("seams", {}):
        needed = [s for s in SEAMS if requirement in levels.get(f"only:{s}", {})]
        if needed:
            finding = levels[f"only:{needed[0]}"][requirement]
            return SEAM, f"wire + {' or '.join(needed)} seam", finding, needed[:1]
        return (SEAM, "wire + counter+erase+resolve seams", levels["seams"][requirement],
            list(SEAMS))
    if requirement in levels.get("inside", {}):
        return INSIDE, "inside only", levels["inside"][requirement], []
    return None


def _gated(requirement_witness: str) -> str:
    return ("ungated" if requirement_witness == "witnessable-unaided" else
        "gated on recordedFixtures")


def compute(jobs: int | None = None, *, programs: bool = True,
            progress: Progress | None = None) -> dict[str, Any]:
    """The whole computed table, as the JSON document `specs/falsified.json` caches: the
    table, and under `raw` what failed where on every host (the table is rebuilt from it)."""
    names = [m.name for m in ZOO]
    jobs = jobs or min(len(names), os.cpu_count() or 1)
    hosts, stopped = run_all(_judge_named, [(n,) for n in names], jobs=jobs,
                             progress=progress, label=lambda a: str(a[0]),
                             waits=lambda a: mutant(str(a[0])).timing_only)
    doc = table(hosts)
    if stopped:  # the table of the hosts judged by then: a verdict may still change
        doc["partial"] = {"judged": len(hosts), "of": len(names)}
        raise Stopped(doc, len(hosts), len(names))
    if programs:
        try:
            add_programs(doc)
        except KeyboardInterrupt:
            doc["partial"] = {"judged": len(hosts), "of": len(names),
                              "programs": "stopped while the machine shrank them"}
            raise Stopped(doc, len(hosts), len(names)) from None
    return doc


def add_programs(doc: dict[str, Any]) -> None:
    """The machine's shrunk program for every RFC row a seam decides."""
    for row in doc["rfc"]:
        computed = row["refsim"]
        if computed["level"] == SEAM:
            computed["program"] = killing_program(computed["host"], computed["seams"])


def _judge_named(name: str) -> dict[str, Any]:
    return judge_host(mutant(name))


@attrs.frozen
class Fault:
    """What one zoo host is built to break (`hosts:` of specs/falsifiability.yaml): the
    requirement ids of its fault; `reading`, an id of specs/assumptions.yaml when the fault
    contradicts only refsim's reading of an open point, not an RFC line (the host is then no
    violator of the RFC's rows, and the table lists it apart); `needs`, a seam without
    which the fault does not exist at all (a fault on the erase seam's route): at a level
    without it the host is correct, so it is a violator only where that seam is offered
    (and inside)."""

    breaks: tuple[str, ...]
    reading: str | None = None
    needs: str | None = None

    def shows_at(self, level: str) -> bool:
        return self.needs is None or level in ("inside", "seams", f"only:{self.needs}")


def load_faults(path: Path = TABLE_PATH) -> dict[str, Fault]:
    """Host -> its `Fault` (`hosts:` of the table's file): a list of requirement ids, or
    `{breaks: [...], reading: ASSUMPTION, needs: SEAM}`."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    reg = load_registry()
    by_short = {short_id(q.id): q.id for q in reg.requirements} | {q.id: q.id
                                                                   for q in reg.requirements}
    raw = doc.get("hosts") or {}
    missing = [m.name for m in ZOO if m.name not in raw]
    extra = [name for name in raw if name not in {m.name for m in ZOO}]
    if missing or extra:
        raise ValueError(f"{path}: hosts: missing {missing}, not in the zoo {extra}")
    readings = {a["id"] for a in yaml.safe_load(
        (paths.SPECS / "assumptions.yaml").read_text(encoding="utf-8"))["assumptions"]}
    out: dict[str, Fault] = {}
    for name, entry in raw.items():
        spec = entry if isinstance(entry, dict) else {"breaks": entry}
        if not isinstance(spec.get("breaks"), list) or set(spec) - {"breaks", "reading",
                                                                     "needs"}:
            raise ValueError(f"{path}: hosts: {name}: a list of requirement ids, or "
                             "{breaks, reading, needs}")
        unknown = [i for i in spec["breaks"] if i not in by_short]
        if unknown:
            raise ValueError(f"{path}: hosts: {name}: unknown requirement ids {unknown}")
        if spec.get("reading") is not None and spec["reading"] not in readings:
            raise ValueError(f"{path}: hosts: {name}: reading {spec['reading']!r} is no id "
                             "of specs/assumptions.yaml")
        if spec.get("needs") not in (None, *SEAMS):
            raise ValueError(f"{path}: hosts: {name}: needs is a seam "
                             f"({', '.join(SEAMS)})")
        out[name] = Fault(tuple(by_short[i] for i in spec["breaks"]), spec.get("reading"),
                          spec.get("needs"))
    return out


def load_breaks(path: Path = TABLE_PATH) -> dict[str, tuple[str, ...]]:
    """Host -> the requirement ids it is built to break."""
    return {name: fault.breaks for name, fault in load_faults(path).items()}


def table(hosts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    reg = load_registry()
    breaks = load_breaks()
    requirements: list[dict[str, Any]] = []
    for q in reg.requirements:
        kills = []
        for h in hosts:
            if q.id not in breaks[h["host"]]:
                continue
            level, observation, finding, seams, failed_on = _kill(h["levels"], q.id)
            kills.append({"host": h["host"], "level": level, "observation": observation,
                          "finding": finding, "seams": seams, "failedOn": failed_on})
        kills.sort(key=lambda k: (RANK[k["level"]], k["host"]))
        collateral = sorted(h["host"] for h in hosts if q.id not in breaks[h["host"]]
                            and q.id in h["levels"]["inside"])
        requirements.append({
            "id": q.id, "section": q.section, "level": q.level, "registryWitness": q.witness,
            "verdict": (_verdict(kills[0], q.witness) if kills else
                        f"hostless: {q.hostless}" if q.hostless else
                        f"no faulty host (not an RFC 0252 line: {q.section})" if not q.rules
                        else _verdict(None, q.witness)),
            "kills": kills,
            "alsoFailedBy": collateral})
    by_id = {r["id"]: r for r in requirements}
    rfc = []
    for row in load_rfc_table():
        kills = sorted((dict(k, requirement=rid) for rid in row["requirements"]
                        for k in by_id[rid]["kills"]),
                       key=lambda k: (RANK[k["level"]], k["host"], k["requirement"]))
        best = kills[0] if kills else None
        computed: dict[str, Any] = {"level": best["level"] if best else NONE,
                                    "verdict": _verdict(best, None)}
        if best is not None:
            computed.update(host=best["host"], requirement=best["requirement"],
                            failedOn=best["failedOn"], observation=best["observation"],
                            finding=best["finding"], seams=best["seams"])
        rfc.append({**row, "refsim": computed,
                    "disagreement": disagreement(row["verdict"], computed["level"],
                                                 best is not None)})
    zoo = [{"host": h["host"], "breaks": h["breaks"], "requirements": list(breaks[h["host"]]),
            "weakest": _weakest(h["levels"]),
            "weakestOnItsOwn": _weakest(h["levels"], breaks[h["host"]])} for h in hosts]
    return {"requirements": requirements, "rfc": rfc, "hosts": zoo, "raw": list(hosts)}


def _kill(levels: dict[str, dict[str, str]], requirement: str
          ) -> tuple[str, str, str, list[str], str | None]:
    """The weakest observation that kills a host built to break `requirement`: on that id,
    or on any other the host fails (it is the host that is killed); that id wins ties."""
    ids = [requirement, *sorted({*levels["inside"], *levels["seams"]} - {requirement})]
    found = [(f, rid) for rid in ids if (f := _level(levels, rid)) is not None]
    if not found:
        return NONE, "nothing kills it", "no check fails on this host", [], None
    (level, observation, finding, seams), rid = min(
        found, key=lambda x: (RANK[x[0][0]], x[1] != requirement))
    return level, observation, finding, seams, rid


def _weakest(levels: dict[str, dict[str, str]], only: Iterable[str] | None = None) -> str:
    """The weakest observation that kills the host, on any requirement id (or on `only`)."""
    ids = {*levels["inside"], *levels["seams"]} if only is None else set(only)
    found = [f for f in (_level(levels, r) for r in ids) if f is not None]
    if not found:
        return "not killed by the checker"
    _, observation, _, _ = min(found, key=lambda f: (RANK[f[0]], f[1]))
    return observation


def _verdict(best: dict[str, Any] | None, witness: str | None) -> str:
    if best is None:
        return "no faulty host: not falsified"
    if best["level"] == NONE:
        return "a faulty host breaks it, but no check kills it"
    if best["level"] == WIRE:
        return "witnessable on the wire" + (f" ({_gated(witness)})" if witness else "")
    if best["level"] == SEAM:
        return f"seam-witnessable ({best['observation']})"
    return "inside only (no outside observation kills it)"


def disagreement(rfc_verdict: str, level: str, hosts: bool = True) -> str | None:
    if rfc_verdict == "unwitnessable" and level in (WIRE, SEAM):
        return ("the RFC calls it unwitnessable; refsim kills a faulty host "
                + ("on the wire" if level == WIRE else "through a seam"))
    if rfc_verdict.startswith("witnessable") and level in (INSIDE, NONE):
        return ("the RFC calls it witnessable; no outside observation kills a faulty host"
                if level == INSIDE or hosts else
                "the RFC calls it witnessable; no faulty host breaks it")
    if rfc_verdict == "witnessable-unaided" and level == SEAM:
        return "the RFC calls it witnessable unaided; refsim needs a seam"
    return None


def load_rfc_table(path: Path = TABLE_PATH) -> list[dict[str, Any]]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    reg = load_registry()
    rows = []
    for raw in doc["rows"]:
        unknown = [r for r in raw.get("requirements", []) if r not in reg]
        if unknown:
            raise ValueError(f"{path}: row {raw['id']}: unknown requirement ids {unknown}")
        rows.append({k: raw[k] for k in ("id", "requirement", "observable", "who", "verdict",
                                         "verdict_text")}
                    | {"requirements": list(raw.get("requirements", []))})
    return rows


def killing_program(host: str, seams: Sequence[str]) -> dict[str, Any]:
    """The stateful machine on the faulty host from outside, offered only `seams`: its
    shrunk program, or why none came out (the checker's finding stands then)."""
    from refsim.testing.fuzz import run_machine
    faulty = mutant(host)
    for seed_value in MACHINE_SEEDS:
        result = run_machine(lambda: OutsideClient(faulty.host(), seams),
                             max_examples=MACHINE_EXAMPLES, steps=MACHINE_STEPS,
                             seed_value=seed_value)
        if not result.passed:
            lines = [ln for ln in result.pasteable if "teardown" not in ln]
            return {"requirementId": result.requirement_id, "message": result.message,
                    "steps": result.steps, "seed": seed_value,
                    "program": ["from refsim.zoo.falsify import outside_machine",
                                f"RecordedFixturesMachine = outside_machine({host!r}, "
                                f"{list(seams)!r})", *lines]}
    return {"requirementId": None, "message": f"the machine found nothing in "
            f"{len(MACHINE_SEEDS)} x {MACHINE_EXAMPLES} examples", "steps": 0, "program": []}


def outside_machine(host: str, seams: Sequence[str]) -> Any:
    """The machine over a faulty host seen from outside: what a printed program runs."""
    from refsim.testing.stateful import machine_for
    faulty = mutant(host)
    return machine_for(lambda: OutsideClient(faulty.host(), seams))


# ----------------------------------------------------------------------------- two-sided

# The observation levels, weakest first, as the two-sided table reads them. Every outside
# level includes refsim's own suite and tenant seams (the checker registers its suites and
# second tenant through them where discovery lists them): a host without them is judged on
# fewer rows (`refsim check --base-url` says which).
TWO_SIDED_LEVELS: tuple[tuple[str, str], ...] = (
    ("wire", "wire"), ("only:counter", "wire + counter seam"),
    ("only:erase", "wire + erase seam"), ("only:resolve", "wire + resolve seam"),
    ("seams", "wire + counter, erase and resolve seams"), ("inside", "inside only"))
LEVEL_LABELS = dict(TWO_SIDED_LEVELS)
WIRE_NOTE = "every outside level includes refsim's own suite and tenant seams"
# The RFC's verdicts, as the weakest level each claims a row is witnessed at: unaided, the
# wire alone; gated, the suite with its fixtures and its counter tool (the RFC's "who" for
# those rows is "the suite", "the suite, through the counter tool").
RFC_LEVEL = {"witnessable-unaided": "wire", "witnessable-gated": "only:counter",
             "claims-check": "wire", "negative-existence": "wire", "seam-gated": "seams"}


def _kills_at(levels: dict[str, dict[str, str]], level: str) -> dict[str, str]:
    """The ids a host is killed on at `level`. A seam alone is judged only when the three
    seams together kill more than the wire: where they do not, each alone kills what the
    wire does."""
    if level in levels:
        return levels[level]
    return levels.get("wire", {}) if level.startswith("only:") else {}


def survivors_of(own: Iterable[str], raw: Sequence[dict[str, Any]],
                 faults: dict[str, Fault], *, readings: bool = True) -> dict[str, Any]:
    """The two-sided verdict over the requirement ids `own`: the violators (zoo hosts built
    to break one of them; with `readings=False`, not those that break only a reading of
    refsim's), the survivors at each level (violators whose fault shows there, killed on
    none of the ids of `own` they break), and the weakest level with no survivor."""
    own = set(own)
    mine = [h for h in raw if h["host"] in faults and own & set(faults[h["host"]].breaks)]
    violators = [h for h in mine if readings or faults[h["host"]].reading is None]
    survivors = {level: sorted(h["host"] for h in violators
                               if faults[h["host"]].shows_at(level)
                               and not own & set(faults[h["host"]].breaks)
                               & set(_kills_at(h["levels"], level)))
                 for level, _ in TWO_SIDED_LEVELS}
    # A level where no violator's fault lives shows nothing: it cannot be the witness.
    weakest = next((level for level, _ in TWO_SIDED_LEVELS if not survivors[level]
                    and any(faults[h["host"]].shows_at(level) for h in violators)), None)
    return {"violators": sorted(h["host"] for h in violators), "survivors": survivors,
            "witnessableAt": weakest,
            "readings": sorted(h["host"] for h in mine if h not in violators)}


def register_line(q: dict[str, Any]) -> str:
    """One requirement's two-sided verdict beside its register class, in words."""
    at = q["witnessableAt"]
    where = ("no violator" if not q["violators"] else
             "a violator survives even inside: " + ", ".join(q["survivors"]["inside"])
             if at is None else f"every violator dies at {LEVEL_LABELS[at]}")
    apart = f"; pins refsim's reading: {', '.join(q['readings'])}" if q["readings"] else ""
    flag = "" if q["agrees"] else "  DISAGREES with the register"
    return f"two-sided: {where}; register: {q['witness']}{apart}{flag}"


def two_sided(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Per RFC row and level: the violators (zoo hosts built to break one of the row's
    requirement ids, other than those that break only a reading of refsim's) that survive
    there, killed on none of the row's ids they break. A row is witnessable at a level only
    when every violator is killed there; a survivor shows it is not. Computed from the
    cache's `raw`, so `--cached` and REFERENCE.md show it too."""
    faults = load_faults()
    out = []
    for row in doc["rfc"]:
        got = survivors_of(row["requirements"], doc["raw"], faults, readings=False)
        survivors, weakest = got["survivors"], got["witnessableAt"]
        claimed = RFC_LEVEL.get(row["verdict"])
        witness = None
        if claimed is not None and survivors.get(claimed):
            witness = (f"the RFC calls it {row['verdict']}; {survivors[claimed][0]} breaks it "
                       f"and survives at {LEVEL_LABELS[claimed]}")
        elif claimed is None and weakest is not None and weakest != "inside":
            witness = (f"the RFC calls it {row['verdict']}; every violator is killed at "
                       f"{LEVEL_LABELS[weakest]}")
        out.append({"id": row["id"], "requirement": row["requirement"],
                    "rfc": row["verdict"], **got, "disagreement": witness})
    return out


# The weakest two-sided levels each witness class of specs/requirements.yaml allows: the
# register's class of a requirement must be what the zoo shows (a test holds them to it).
CLASS_LEVELS = {
    "witnessable-unaided": ("wire",),
    "witnessable-gated": ("wire", "only:counter"),
    "claims-check": ("wire", "only:counter"),
    "negative-existence": ("wire", "only:counter"),
    "seam-gated": ("only:erase", "only:resolve", "seams"),
    "unwitnessable": ("inside",),
}


def requirement_levels(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Per requirement id of the registry, the two-sided verdict over that id alone, beside
    the witness class the register gives it; `agrees` is False where the zoo shows another
    class (a violator survives where the class says it is seen, or every one dies short
    of where the class says it can be)."""
    faults = load_faults()
    out = []
    for q in load_registry().requirements:
        got = survivors_of([q.id], doc["raw"], faults)
        at = got["witnessableAt"]
        agrees = not got["violators"] or at in CLASS_LEVELS[q.witness]
        out.append({"id": q.id, "level": q.level, "witness": q.witness, **got,
                    "agrees": agrees})
    return out


def two_sided_lines(doc: dict[str, Any]) -> list[str]:
    """The two-sided table as the report prints it, a few lines per RFC row."""
    lines = ["Two-sided: a row is witnessable at a level only if every zoo host built to "
             "break it is killed there, on the row's own requirement ids; a survivor shows "
             f"it is not ({WIRE_NOTE}).", ""]
    rows = two_sided(doc)
    for row in rows:
        where = ("no violator in the zoo" if not row["violators"] else
                 "survivors even inside" if row["witnessableAt"] is None else
                 f"witnessable at {LEVEL_LABELS[row['witnessableAt']]}")
        flag = "  DISAGREES" if row["disagreement"] else ""
        lines.append(f"{row['requirement']}{flag}")
        lines.append(f"  RFC: {row['rfc']}; refsim: {where} "
                     f"({len(row['violators'])} violator(s))")
        for level, label in TWO_SIDED_LEVELS:
            gone = row["survivors"][level]
            if gone:
                lines.append(f"    survives at {label}: {', '.join(gone[:4])}"
                             + (f" +{len(gone) - 4}" if len(gone) > 4 else ""))
        if row["readings"]:
            lines.append("  left out, they contradict only refsim's reading of an open point: "
                         + ", ".join(row["readings"]))
        if row["disagreement"]:
            lines.append(f"  disagreement: {row['disagreement']}")
    flagged = [r["id"] for r in rows if r["disagreement"]]
    lines += ["", f"{len(flagged)} two-sided disagreement(s) with the RFC's table: "
              + (", ".join(flagged) or "none")]
    return lines


# ----------------------------------------------------------------------------- output


def report(doc: dict[str, Any], out: TextIO) -> None:
    partial = doc.get("partial")
    print("RFC 0252's falsifiability table beside refsim's, computed from the zoo "
          f"({len(doc['hosts'])} faulty hosts)\n" + (
              f"PARTIAL: stopped after {partial['judged']} of {partial['of']} hosts; a "
              "verdict may change with the rest\n" if partial else ""), file=out)
    print("One-sided: for each row, the weakest observation that kills some violator (an "
          "existential claim; the two-sided table at the end asks it of every violator).\n",
          file=out)
    for row in doc["rfc"]:
        computed = row["refsim"]
        flag = "  (one-sided: differs)" if row["disagreement"] else ""
        print(f"{row['requirement']}{flag}", file=out)
        print(f"  RFC:    {row['verdict']} ({row['verdict_text']})", file=out)
        print(f"  refsim: {computed['verdict']}", file=out)
        if "host" in computed:
            failed = computed["failedOn"]
            print(f"          faulty host {computed['host']} (breaks "
                  f"{short_id(computed['requirement'])})"
                  + (f", killed on {short_id(failed)}: {computed['finding']}" if failed
                     else ": no check kills it"), file=out)
        if row["disagreement"]:
            print(f"  disagreement: {row['disagreement']}", file=out)
        program = computed.get("program")
        if program and not program.get("program"):
            print(f"  no killing program from the machine: {program['message']}", file=out)
        if program and program.get("program"):
            print(f"  the killing program ({program['steps']} steps, "
                  f"[{program['requirementId']}]):", file=out)
            for line in program["program"]:
                print(f"    {line}", file=out)
        print(file=out)
    print("Every requirement id (weakest observation that kills a faulty host breaking it; "
          "then, two-sided, where every one dies, beside the register's witness class):",
          file=out)
    sided = {q["id"]: q for q in requirement_levels(doc)}
    for q in doc["requirements"]:
        kills = q["kills"]
        who = ("" if not kills else f"  [{kills[0]['host']}" +
            (f" +{len(kills) - 1}" if len(kills) > 1 else "") + "]")
        print(f"  {short_id(q['id']):<36} {q['level']:<8} {q['verdict']}{who}", file=out)
        print(f"  {'':<36} {'':<8} {register_line(sided[q['id']])}", file=out)
    print("\nEvery faulty host: the weakest observation that kills it on the ids it is built "
          "to break (and on any id):", file=out)
    for h in doc["hosts"]:
        own = ", ".join(short_id(r) for r in h["requirements"])
        print(f"  {h['host']:<44} {h['weakestOnItsOwn']:<36} ({h['weakest']})  [{own}]",
              file=out)
    disagreements = [r for r in doc["rfc"] if r["disagreement"]]
    print(f"\nOne-sided (the weakest observation that kills some violator): "
          f"{len(disagreements)} disagreement(s) with the RFC's table: "
          + (", ".join(r["id"] for r in disagreements) or "none"), file=out)
    print("", *two_sided_lines(doc), sep="\n", file=out)


def write(doc: dict[str, Any], path: str | Path = CACHE_PATH) -> None:
    Path(path).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n",
                          encoding="utf-8")


def load_cache(path: Path = CACHE_PATH) -> dict[str, Any] | None:
    if not path.exists():
        return None
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc
