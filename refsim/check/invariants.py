"""The invariant rows of invariants/invariants.yaml and the checks that enforce them.

Each check drives a fresh host through its wire; reference-impl rows also read its insides.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from refsim.check import judges
from refsim.check.differential import alike, no_new_runs, noise_of_host
from refsim.check.findings import Disposition, Finding, Row, check_raised
from refsim.check.ids import req_id
from refsim.check.observe import (
    COUNTER_KEY,
    COUNTER_TOOL,
    DRIFT,
    KEYS,
    RECORDER,
    REPLAY,
    SEAM_ERASE,
    SOURCE,
    TENANT_A,
    TENANT_B,
    UNKNOWN_OPAQUE,
    Inspector,
    Observed,
    Session,
    Unobservable,
    eval_body,
    gate,
    inapplicable,
    inspector_of,
    nonce,
    run_path,
)
from refsim.check.registry import load_registry
from refsim.data import paths, yaml_data
from refsim.domain.ids import seen_parts, spliced
from refsim.wire import catalog
from refsim.wire.client import NO_BODY, HostClient
from refsim.wire.response import Response
from refsim.wire.trace import segment

SCENARIO = "invariants"

TIERS = ("protocol", "reference-impl")
SEVERITIES = ("critical", "high", "medium", "low")
REQUIRED = ("id", "tier", "severity", "threat_model", "tests", "note", "witnessReview",
            "requirement_id")
# A row's witness class is its requirement's, from specs/requirements.yaml (the one place
# witness classes are written): `witness` in a row is refused.
# A row names the example rows that restate it (`examples`, run as they are and filed under
# the invariant) and a `check` (Python in this module) for what the row vocabulary cannot
# say; at least one of the two. The row is their conjunction.
OPTIONAL = ("non_testability_rationale", "check", "examples")
ID_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
REQUIREMENT_RE = re.compile(r"^(openwop|refsim)\.requirement\.[a-z0-9][a-z0-9.-]*$")
NAMESPACES = ("openwop.requirement.", "refsim.requirement.")



@attrs.define
class Probe:
    """What a check observes through: tenant A's and B's sessions on one host, and the
    host's inside when it is the simulator (None over HTTP)."""

    client: HostClient
    a: Session
    b: Session
    inspector: Inspector | None
    # Unique to one run of the check: suiteIds it registers through the seam carry it.
    tag: str = attrs.Factory(nonce)

    def suite(self, fixture: str) -> str:
        """The evalSuiteRef of a catalog suite for tenant A: its fixture id where discovery
        lists it, else registered through the suite seam; `Unobservable` otherwise."""
        return self.a.require_suite(fixture, catalog.suite(fixture), self.tag)

    def count(self, session: Session, key: str = COUNTER_KEY) -> int:
        """The live counter through the seam; on the simulator without it, from inside;
        `Unobservable` (the row is blocked) where neither can read it."""
        try:
            return session.require_counter(key)
        except Unobservable:
            if self.inspector is None:
                raise
            value = self.inspector.counter(session.api_key, key)
            if value is None:
                raise
            return value


Check = Callable[[Probe], list[Finding]]
CHECKS: dict[str, Check] = {}
# Checks that judge a host whatever it advertises; every other one needs recordedFixtures.
UNGATED = frozenset({"check_facet_implies_matching"})
# Checks whose claim only the simulator's inside can witness: over HTTP they are listed
# apart with this reason, never judged.
INSIDE: dict[str, str] = {}


def _check(fn: Check) -> Check:
    CHECKS[fn.__name__] = fn
    return fn


# The catalog fixtures each check runs beside its suites (the workflows it starts and the
# agents and tools its scripts name); a host that does not list one gets a blocked row.
# The seams a check uses it asks for as it goes (`Session.require_*`).
FIXTURES_USED: dict[str, frozenset[str]] = {}


def _needs(*fixtures: str) -> Callable[[Check], Check]:
    def mark(fn: Check) -> Check:
        FIXTURES_USED[fn.__name__] = frozenset(fixtures)
        return fn
    return mark


def _inside(why: str) -> Callable[[Check], Check]:
    def mark(fn: Check) -> Check:
        INSIDE[fn.__name__] = why
        return fn
    return mark


# ----------------------------------------------------------------------------- rows


@attrs.frozen
class Invariant:
    """One row of invariants.yaml, bound to the requirement and check that enforce it."""

    id: str
    tier: str
    severity: str
    threat_model: str
    tests: tuple[str, ...]
    note: str
    witness: str
    witness_review: str
    requirement_id: str
    check: str | None
    non_testability_rationale: str | None = None
    examples: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.id} ({self.tier}, {self.severity}, {self.witness}) -> {self.parts()}"

    def parts(self) -> str:
        """What enforces the row, in words: its example rows and its check."""
        named = [f"example {e}" for e in self.examples]
        return " + ".join(named + ([self.check] if self.check else []))

    def matches(self, prefix: str) -> bool:
        """`prefix` is a substring of the row id or of its bare requirement id; a prefix
        that names its namespace (`openwop.requirement.…`) must match it too."""
        if _strip_namespace(prefix) != prefix:
            return prefix in self.requirement_id
        return prefix in self.id or prefix in _strip_namespace(self.requirement_id)


def _strip_namespace(value: str) -> str:
    for ns in NAMESPACES:
        if value.startswith(ns):
            return value[len(ns):]
    return value


def load_invariants(path: Path = paths.INVARIANTS / "invariants.yaml") -> list[Invariant]:
    """Read and validate the rows; a malformed row is a ValueError that names it."""
    doc = yaml_data.load(Path(path).read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or not isinstance(doc.get("invariants"), list):
        raise ValueError(f"{path}: expected a mapping with an 'invariants' list")
    out: list[Invariant] = []
    seen: set[str] = set()
    for index, raw in enumerate(doc["invariants"]):
        row = _parse_row(raw, index)
        if row.id in seen:
            raise ValueError(f"invariant {row.id}: the id appears more than once")
        seen.add(row.id)
        out.append(row)
    return out


def _parse_row(raw: Any, index: int) -> Invariant:
    if not isinstance(raw, dict):
        raise ValueError(f"invariant #{index}: a row must be a mapping, got {type(raw).__name__}")
    name = raw.get("id") if isinstance(raw.get("id"), str) else f"#{index}"

    def bad(message: str) -> ValueError:
        return ValueError(f"invariant {name}: {message}")

    missing = [k for k in REQUIRED if k not in raw]
    if missing:
        raise bad("missing required field(s) " + ", ".join(missing))
    unknown = sorted(set(raw) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise bad("unknown field(s) " + ", ".join(unknown))
    for key in REQUIRED + OPTIONAL:
        if key in raw and key not in ("tests", "examples") and (not isinstance(raw[key], str)
                                              or not raw[key].strip()):
            raise bad(f"{key} must be a non-empty string")
    if not ID_RE.match(raw["id"]):
        raise bad("id must be lower-case words joined by '-'")
    for key, allowed in (("tier", TIERS), ("severity", SEVERITIES)):
        if raw[key] not in allowed:
            raise bad(f"{key} {raw[key]!r} is not one of {', '.join(allowed)}")
    if not raw["threat_model"].endswith(".md"):
        raise bad("threat_model must name a threat-model file (….md)")
    tests = raw["tests"]
    if not isinstance(tests, list) or not all(isinstance(t, str) and t.strip() for t in tests):
        raise bad("tests must be a list of repo-relative globs")
    if raw["tier"] == "protocol" and not tests:
        raise bad("a protocol-tier row needs at least one test glob")
    if not REQUIREMENT_RE.match(raw["requirement_id"]):
        raise bad(f"requirement_id {raw['requirement_id']!r} is not "
                  "openwop.requirement.<...> or refsim.requirement.<...>")
    registry = load_registry()
    if raw["requirement_id"] not in registry:
        raise bad(f"requirement_id {raw['requirement_id']!r} is no requirement of "
                  "specs/requirements.yaml, where its witness class is read")
    witness = registry.requirement(raw["requirement_id"]).witness
    if raw["tier"] == "protocol" and witness == "unwitnessable":
        raise bad("a protocol-tier row must not be unwitnessable (its requirement's witness "
                  "class in specs/requirements.yaml; OpenWOP check-witness-classes): "
                  "re-tier it to reference-impl")
    if witness == "unwitnessable" and "non_testability_rationale" not in raw:
        raise bad("its requirement is unwitnessable, so it needs a non_testability_rationale")
    if "check" not in raw and "examples" not in raw:
        raise bad("name the `examples` that restate it (rows of the example table), a "
                  "`check` (in refsim.check.invariants) for what they cannot say, or both")
    if "check" in raw and raw["check"] not in CHECKS:
        raise bad(f"check {raw['check']!r} is not a check registered in "
                  f"refsim.check.invariants (known: {', '.join(sorted(CHECKS))})")
    examples = raw.get("examples", [])
    if "examples" in raw and (not isinstance(examples, list) or not examples
            or not all(isinstance(e, str) for e in examples)
            or len(set(examples)) != len(examples)):
        raise bad("examples must be a non-empty list of distinct example row ids")
    if "examples" in raw:
        _check_examples(raw.get("check"), examples, bad)
    return Invariant(id=raw["id"], tier=raw["tier"], severity=raw["severity"],
                     threat_model=raw["threat_model"], tests=tuple(tests), note=raw["note"],
                     witness=witness, witness_review=raw["witnessReview"],
                     requirement_id=raw["requirement_id"], check=raw.get("check"),
                     non_testability_rationale=raw.get("non_testability_rationale"),
                     examples=tuple(examples))


def _check_examples(check: str | None, names: list[str],
                    bad: Callable[[str], ValueError]) -> None:
    """The named rows exist, run on the target's own host (no pinned profile), and stand on
    the same side of the wire as the check: all of the row runs over HTTP, or none of it."""
    from refsim.check.examples import load_examples
    known = {e.id: e for e in load_examples()}
    for name in names:
        if name not in known:
            raise bad(f"example {name!r} is no row of the example table (specs/examples/)")
        example = known[name]
        if example.profile is not None and not example.withholds:
            raise bad(f"example {name!r} pins the profile {example.profile!r}: an invariant "
                      "judges the target's own host")
    sides = {known[n].needs_inside() is not None for n in names}
    if check is not None:
        sides.add(check in INSIDE)
    if len(sides) > 1:
        raise bad("its parts stand on both sides of the wire (some need the simulator's "
                  "inside, some do not): over HTTP the row would be half judged")


def run_invariants(make_host: Callable[[], HostClient], prefix: str | None = None,
                   invariants: Sequence[Invariant] | None = None, *,
                   keys: Mapping[str, str] | None = None, remote: bool = False,
                   ran: Mapping[str, Row] | None = None, stop_on_fail: bool = False,
                   checked: Mapping[str, Row] | None = None) -> list[Row]:
    """One report row per invariant (filtered by `prefix`; `stop_on_fail`: none after the
    first that fails), each part on a fresh host (or,
    with `remote`, on the one host behind HTTP, where parts needing the inside are listed
    apart). `ran`: example rows already judged on this target, by example id, which a row
    that names them takes as they are instead of running them again; `checked`: the rows'
    own checks already judged (`run_checks`), by invariant id, taken the same way."""
    keys = dict(keys or KEYS)
    rows = []
    for inv in invariants if invariants is not None else load_invariants():
        if prefix is not None and not inv.matches(prefix):
            continue
        with segment(inv.id):  # its exchanges, for a failed row's evidence
            parts = [(f"example {name}", _example_part(name, make_host, keys, remote, ran))
                     for name in inv.examples]
            if inv.check is not None:
                parts.append((inv.check, checked[inv.id] if checked and inv.id in checked
                              else _check_part(inv, inv.check, make_host, keys, remote)))
        rows.append(conjoin(inv, parts))
        if stop_on_fail and rows[-1].disposition is Disposition.EXECUTED_FAIL:
            break
    return rows


def run_checks(make_host: Callable[[], HostClient]) -> dict[str, Row]:
    """Each invariant row's own Python check, in process, by invariant id, with no example
    run: what `run_invariants` takes as `checked`. Its exchanges are filed and ordered as
    `run_invariants` would send them when every example it names was `ran`."""
    keys = dict(KEYS)
    out = {}
    for inv in load_invariants():
        if inv.check is not None:
            with segment(inv.id):
                out[inv.id] = _check_part(inv, inv.check, make_host, keys, False)
    return out


def _example_part(name: str, make_host: Callable[[], HostClient], keys: dict[str, str],
                  remote: bool, ran: Mapping[str, Row] | None) -> Row:
    """A named example row, run as it is (or taken from `ran`)."""
    if ran is not None and name in ran:
        return ran[name]
    from refsim.check.examples import load_examples, run_examples
    (example,) = [e for e in load_examples() if e.id == name]
    (row,) = run_examples(lambda profile: make_host(), examples=[example], keys=keys,
                          remote=remote)
    return row


def _check_part(inv: Invariant, check: str, make_host: Callable[[], HostClient],
                keys: dict[str, str], remote: bool) -> Row:
    """The row's Python check on a fresh host."""
    req = inv.requirement_id
    if remote and check in INSIDE:
        return Row.apart_row(req, SCENARIO, INSIDE[check], check_id=inv.id)
    if TENANT_B not in keys:
        return Row.unjudged(req, SCENARIO, Disposition.BLOCKED,
                            "no second tenant's API key (--tenant-b-api-key or "
                            "OPENWOP_TEST_TENANT_B_API_KEY)", check_id=inv.id)
    host = make_host()
    a = Session(host, keys[TENANT_A])
    gated = gate(a.surface, fixtures=False)
    if gated.unread or (check not in UNGATED and not gated.applies):
        return Row.unjudged(req, SCENARIO, gated.disposition, str(gated.reason),
                            check_id=inv.id)
    inspector = inspector_of(host)
    probe = Probe(host, Session(host, keys[TENANT_A], inspector),
                  Session(host, keys[TENANT_B], inspector), inspector)
    try:
        for fixture in sorted(FIXTURES_USED.get(check, ())):
            probe.a.require_fixture(fixture)
        findings = CHECKS[check](probe)
    except Unobservable as exc:  # a fact the host does not offer: never a failure
        return Row.unjudged(req, SCENARIO, exc.disposition, exc.reason, check_id=inv.id)
    except Exception as exc:  # a check that raises is refsim's fault, never the host's:
        # blocked (a suite-side predicate failure), naming the exception and where
        return Row.unjudged(req, SCENARIO, Disposition.BLOCKED,
                            check_raised(f"the check {check}", exc), check_id=inv.id)
    return Row.judged(req, SCENARIO, findings, check_id=inv.id)


def conjoin(inv: Invariant, parts: Sequence[tuple[str, Row]]) -> Row:
    """The invariant's row from its parts' rows, every finding filed under its requirement:
    failed when a part failed; else blocked when a part was blocked; else passed on the
    parts that ran (naming those that did not apply here); else listed apart (in process
    only), or inapplicable, with every part's reason."""
    req = inv.requirement_id
    findings: list[Finding] = []
    executed = (Disposition.EXECUTED_PASS, Disposition.EXECUTED_FAIL)
    ran = [(name, row) for name, row in parts if row.disposition in executed]
    for name, row in ran:
        own = [attrs.evolve(f, requirement_id=req,
                            message=f.message if name == inv.check else f"{name}: {f.message}")
               for f in row.findings]
        if not row.passed and all(f.ok for f in own):  # failed without a failed finding
            own.append(judges.could_not_go_on(req, name, row.detail))
        findings += own
    rest = [(name, row) for name, row in parts if row.disposition not in executed]
    why = "; ".join((f"{name}: " if len(parts) > 1 else "") + row.detail.removeprefix(
        "in process only: ") for name, row in rest)
    blocked = [row for _, row in rest if row.disposition is Disposition.BLOCKED]
    if any(not row.passed for _, row in ran) or (ran and not blocked):
        judged = Row.judged(req, SCENARIO, findings, check_id=inv.id)
        if judged.passed and rest:
            judged = attrs.evolve(judged, detail=f"{judged.detail}; not judged here: {why}")
        return judged
    if blocked:
        return Row.unjudged(req, SCENARIO, Disposition.BLOCKED, why, check_id=inv.id)
    if any(row.apart for _, row in rest):
        return Row.apart_row(req, SCENARIO, why, check_id=inv.id)
    kinds = {row.disposition for _, row in rest}
    kind = kinds.pop() if len(kinds) == 1 else Disposition.INAPPLICABLE
    return Row.unjudged(req, SCENARIO, kind, why, check_id=inv.id)


# ----------------------------------------------------------------------------- helpers


def _call(tool: str, args: Any) -> dict[str, Any]:
    return {"call": tool, "args": args}


def _counter(op: str, key: str = COUNTER_KEY) -> dict[str, Any]:
    return _call(COUNTER_TOOL, {"op": op, "key": key})


def _script(fixture: str, task: str) -> list[Any]:
    """The script of a task of a catalog suite: the source a check records runs the same."""
    doc = catalog.suite(fixture)
    return list(next(t for t in doc["tasks"] if t["taskId"] == task)["input"]["script"])


def _controls(req: str, obs: Observed, what: str) -> list[Finding]:
    """Positive control: the run was created and completed."""
    return [judges.created(req, obs.response, what), judges.completed(req, obs.completed, what)]


def _returned(events: Sequence[Mapping[str, Any]]) -> list[Any]:
    return [(e.get("payload") or {}).get("outcome") for e in events
            if e.get("type") == "agent.tool-returned"]


def _not_asked(req: str, label: str, own: str, foreign: str) -> Finding:
    """A case that needs an id shaped like the host's own, which the ids it minted do not
    give (they carry no separable tenant part): said, never asked, never failed."""
    return judges.not_asked(req, label, [own, foreign])


def _refusal_controls(session: Session, response: Response, value: str,
                      body: Callable[[str], Any]) -> list[Response]:
    """The same refused request made again for a control value, where the answer holds a
    run of the id: what the host says whatever the id (`judges.no_echo`)."""
    if response.status < 400 or not judges.echo_windows(response, [value]):
        return []
    return [session.create(body(judges.control_value(value)))]


# ----------------------------------------------------------------------------- checks

R_UNIFORM = req_id("0252.source-uniform")
R_CONTENT_FREE = req_id("0252.summary-content-free")
R_NO_EGRESS = req_id("0252.no-egress-credential")
R_NO_RERESOLVE = req_id("0252.fork-no-reresolve")
R_COPY_ERASED = req_id("0252.copy-erased-with-source")
R_FACET = req_id("0252.facet-implies-matching")
R_NEVER_ON_WIRE = req_id("0252.derived-never-on-wire")
AGENT_CALL, WAIT_INPUT, NOOP = ("conformance-agent-call", "conformance-wait-input",
    "conformance-noop")
VAULT_FIXTURE = "refsim-tool-vault"


def _replay_body(value: str) -> Any:
    return eval_body(REPLAY, {"record": value})


@_check
@_needs(WAIT_INPUT, NOOP)
def check_tenant_scoped(probe: Probe) -> list[Finding]:
    """§C: another tenant's runs of every kind, and ids that mix its tenant with the
    caller's, get the unknown id's one id-free refusal; a retry of it gets the same.

    The first ask of the caller's own unusable runs and of an id that does not decode is
    the rows' (every-unusable-kind-alike, non-terminal-refused): here they are only asked
    again. Rows cannot say the rest: another tenant's id that was never minted, an id
    spliced from another run's segments, or a retry under an Idempotency-Key."""
    req = R_UNIFORM
    a, b = probe.a, probe.b
    own = a.eval(SOURCE)
    out = _controls(req, own, "the caller's own source run")
    if own.run_id is None:
        return out
    out.append(judges.created(req, a.create(_replay_body(own.run_id)),
                              "positive control: the caller's own completed source"))
    foreign = b.eval(SOURCE)
    out += _controls(req, foreign, "tenant B's source run")
    waiting = b.workflow(WAIT_INPUT, {"agentId": RECORDER, "script": [_counter("read")]})
    out.append(judges.created(req, waiting, "tenant B's run waiting for input"))
    if foreign.run_id is None or waiting.status != 201:
        return out
    waiting_id = str(waiting.json["runId"])
    b.events(waiting_id)  # until it waits (a host may get there after answering)
    snap = b.get_run(waiting_id)
    status = snap.json.get("status") if isinstance(snap.json, dict) else None
    out.append(judges.run_status_is(req, status, "waiting-input",
                                    "tenant B's waiting run is not terminal"))
    # Tenant B's runs of every other kind: cancelled after the agent's calls (terminal),
    # one that never invoked the agent, and an eval run (a usable source for B, UQ4).
    cancelled = b.workflow(WAIT_INPUT, {"agentId": RECORDER, "script": [_counter("read")]})
    out.append(judges.created(req, cancelled, "tenant B's run to cancel"))
    b_noop = b.workflow(NOOP)
    out.append(judges.created(req, b_noop, "tenant B's run that never invokes the agent"))
    b_eval = b.eval(REPLAY, {"record": foreign.run_id})
    out.append(judges.created(req, b_eval.response, "tenant B's eval run"))
    if cancelled.status != 201 or b_noop.status != 201 or b_eval.run_id is None:
        return out
    cancelled_id = str(cancelled.json["runId"])
    b.events(cancelled_id)
    cancel = b.request("POST", run_path(cancelled_id, "/cancel"), json={})
    out.append(judges.answered(req, cancel, 200, "tenant B cancelled its run"))
    # The caller's own unusable runs, whose first ask the rows judge.
    own_waiting = a.workflow(WAIT_INPUT, {"agentId": RECORDER, "script": [_counter("read")]})
    noop = a.workflow(NOOP)
    out.append(judges.created(req, own_waiting, "the caller's run waiting for input"))
    out.append(judges.created(req, noop, "the caller's run that never invokes the agent"))
    if own_waiting.status != 201 or noop.status != 201:
        return out
    a.events(str(own_waiting.json["runId"]))
    # Ids are opaque: the cases shaped like the host's own ids are made from the ids it
    # minted (its tenant parts where they carry one after a `/`), or said not to apply.
    mine, theirs = seen_parts(own.run_id)[0], seen_parts(foreign.run_id)[0]
    mixed = spliced(own.run_id, foreign.run_id)
    cases: list[tuple[str, str]] = [("an unknown id", f"{mine}{UNKNOWN_OPAQUE}")]
    never_minted = "tenant B's never-minted id"
    if theirs and theirs != mine:
        cases.append((never_minted, f"{theirs}{UNKNOWN_OPAQUE}"))
    else:
        out.append(_not_asked(req, never_minted, own.run_id, foreign.run_id))
    cases += [("tenant B's completed source", foreign.run_id),
              ("tenant B's non-terminal run", waiting_id),
              ("tenant B's cancelled run", cancelled_id),
              ("tenant B's run without the agent", str(b_noop.json["runId"])),
              ("tenant B's eval run", b_eval.run_id)]
    under_mine = "tenant B's opaque segment under the caller's tenant"
    if mixed is not None:
        cases.append((under_mine, mixed))
    else:
        out.append(_not_asked(req, under_mine, own.run_id, foreign.run_id))
    runs_before = probe.inspector.run_count() if probe.inspector else None
    listed = a.list_runs()
    first: list[Response] = []
    asks: list[tuple[str, Callable[[], Response]]] = []
    restated = (("an id that does not decode", "not a run id"),
                ("the caller's non-terminal run", str(own_waiting.json["runId"])),
                ("the caller's run without the agent", str(noop.json["runId"])))
    for label, value in cases:
        r = a.create(_replay_body(value))
        out += judges.refused(req, r, label)
        out.append(judges.no_echo(req, r, [value], label,
                                  _refusal_controls(a, r, value, _replay_body)))
        out.append(judges.nothing_minted(req, r, label))
        first.append(r)
        asks.append((label, _ask(a, value)))
    out.append(alike(req, asks, first, noise_of_host(a)))
    # A retry cannot change what was refused, plain or under an Idempotency-Key.
    for label, value in (*cases, *restated):
        key = {"Idempotency-Key": f"refsim-retry-{nonce()}"}
        for again in range(2):
            out += judges.refused(req, a.request("POST", "/runs", _replay_body(value), key),
                                  f"{label}, asked again under an Idempotency-Key "
                                  f"({again + 1})")
    if probe.inspector is not None:
        out.append(judges.nothing_minted(req, first[-1], "the refusals", runs_before,
                                         probe.inspector.run_count()))
    if listed is not None:
        out += no_new_runs(a, req, listed, "the refusals")
    return out


def _ask(session: Session, value: str) -> Callable[[], Response]:
    return lambda: session.create(_replay_body(value))


R_ISOLATION = req_id("0252.tenant-isolation")


@_check
def check_foreign_actions(probe: Probe) -> list[Finding]:
    """Security: a tenant that cannot read an eval run cannot read, fork, erase or cancel
    it either, on any route the host offers; and the run is as it was afterwards.

    Rows cannot say it: that no answer carries the run's recorded content, and the reads
    under the other spellings of the id the host takes from its owner."""
    req = R_ISOLATION
    a, b = probe.a, probe.b
    source = a.eval(SOURCE)
    out = _controls(req, source, "tenant A's source run")
    if source.run_id is None:
        return out
    replay = a.eval(REPLAY, {"record": source.run_id})
    out += _controls(req, replay, "tenant A's eval run")
    if replay.run_id is None:
        return out
    rid = replay.run_id
    before = [(e.get("type"), e.get("payload")) for e in a.events(rid)]
    content = [c for call in judges.recorded_calls(replay.events, RECORDER) for c in call]
    tries: list[tuple[str, str, str, Any]] = [
        ("its snapshot", "GET", run_path(rid), NO_BODY),
        ("its events, polled", "GET", run_path(rid, "/events/poll?afterSequence=-1"), NO_BODY),
        ("its events, streamed", "GET", run_path(rid, "/events"), NO_BODY),
        ("its EvalSummary", "GET", run_path(rid, "/eval-summary"), NO_BODY),
        ("its cancellation", "POST", run_path(rid, "/cancel"), {})]
    if a.surface.family("replay"):
        tries += [(f"a {mode} fork", "POST", run_path(rid, ":fork"), {"mode": mode})
                  for mode in ("replay", "branch")]
    if a.surface.offers(SEAM_ERASE):
        tries.append(("its erasure (the erase seam)", "POST",
                      "/conformance/seams" + run_path(rid, ":erase"), NO_BODY))
    # The same reads under every other spelling of the id the host takes from its owner
    # (a percent-encoded slash): an owner check must not hang on one spelling.
    # (An id without a `/` has no other spelling.)
    for spelling in [spelt for spelt in (rid.replace("/", "%2F"), rid.replace("/", "%2f"))
                     if spelt != rid]:
        if a.request("GET", "/runs/" + spelling).status != 200:
            continue
        tries += [(f"{what} (the id spelt {spelling})", "GET", "/runs/" + spelling + suffix,
                   NO_BODY) for what, suffix in (
                       ("its snapshot", ""), ("its events, polled",
                                              "/events/poll?afterSequence=-1"),
                       ("its EvalSummary", "/eval-summary"))]
    opaque = seen_parts(rid)[1]  # the whole id where it has no tenant part
    for what, method, path, body in tries:
        r = b.request(method, path, json=body)
        label = f"tenant B asks for tenant A's eval run, {what}"
        out += judges.refused_registered(req, r, label)
        out.append(judges.nothing_of_run(req, r, opaque, content, label))
    after = [(e.get("type"), e.get("payload")) for e in a.events(rid)]
    out.append(judges.unchanged(req, before, after, "tenant A's eval run, after tenant B's "
                                "tries"))
    out.append(judges.readable(req, a.summary(rid), "tenant A still reads its EvalSummary"))
    if a.surface.family("replay"):
        out.append(judges.created(req, a.fork(rid, "branch"), "tenant A still forks it"))
    return out


CONTENT_SUITE = "refsim-invariant-content-free"
CONTENT_QUERY = "content-marker-0252-query"
CONTENT_DECISION = "content-marker-0252-decision"


@_check
@_needs(AGENT_CALL, VAULT_FIXTURE)
def check_summary_content_free(probe: Probe) -> list[Finding]:
    """§D + RFC 0081: eval.* events and the summary carry no recorded or task content.

    The row summary-content-free judges the eval run's summary and events content-free by
    their keys; rows cannot say "this marked content appears nowhere", which is judged
    here by value, on the eval run and on a replay fork of it."""
    req = R_CONTENT_FREE
    a = probe.a
    suite = probe.suite(CONTENT_SUITE)
    script = _script(CONTENT_SUITE, "served")
    source = a.agent_run(script)
    out = _controls(req, source, "the marked source run")
    if source.run_id is None:
        return out
    # The held calls, where the inside shows them; else the wire of the recorder lane.
    held: Any = (probe.inspector.held_calls(source.run_id) if probe.inspector else
        source.events)
    if probe.inspector is None and not judges.outcomes_on_wire(source.events, RECORDER):
        raise inapplicable("the recorder's lane carries no outcome on the wire, so the "
                           "content to look for is not there to find")
    out.append(judges.present_in(req, held, "vault:" + CONTENT_QUERY,
                                 "positive control: the source's recorded vault answer"))
    replay = a.eval(suite, {"served": source.run_id, "drifted": source.run_id})
    out += _controls(req, replay, "the replay")
    if replay.run_id is None:
        return out
    out += judges.miss_count(req, replay.events, replay.summary, "served", 0)
    out += judges.miss_count(req, replay.events, replay.summary, "drifted", 1)
    fork = a.forked(replay.run_id, "replay") if a.surface.family("replay") else None
    runs = [("the eval run", replay)]
    if fork is not None:
        out += _controls(req, fork, "a replay fork of the eval run")
        runs.append(("its replay fork", fork))
    markers = ["vault:" + CONTENT_QUERY, CONTENT_QUERY, CONTENT_DECISION]
    for label, obs in runs:
        if obs is not replay:  # the eval run's own: summary-content-free says it
            out += judges.content_free(req, obs.summary, obs.events)
        eval_events = [e for e in obs.events if str(e.get("type", "")).startswith("eval.")]
        out.append(judges.no_content_in(req, [obs.summary, eval_events], markers,
                                        f"{label}: summary and eval.* events"))
    return out


VAULT_SUITE = "refsim-invariant-vault"


@_check
@_inside("derived entries and the egress log never leave the host: only the simulator's "
         "inside shows that no credential entered a copy (the RFC calls it unwitnessable)")
@_needs(AGENT_CALL, VAULT_FIXTURE)
def check_no_egress_credential(probe: Probe) -> list[Finding]:
    """§D SR-1: the credential the gateway injected (it is in the egress log) reaches no
    response, event or summary of the source or its replay.

    The row no-egress-credential judges the derived entry and every stored copy; rows cannot
    read the egress log (the positive control) or search answers for a secret."""
    req = R_NO_EGRESS
    a, inspector = probe.a, probe.inspector
    assert inspector is not None
    suite = probe.suite(VAULT_SUITE)
    source = a.agent_run(_script(VAULT_SUITE, "vault"))
    out = _controls(req, source, "the vault source run")
    secrets = inspector.egress_secrets()
    log = inspector.egress_log()
    out.append(judges.any_present_in(req, log, secrets, "positive control: a tenant's vault "
                                     "credential is in the egress log"))
    if source.run_id is None:
        return out
    replay = a.eval(suite, {"vault": source.run_id})
    out += _controls(req, replay, "the vault replay")
    if replay.run_id is None:
        return out
    out += judges.miss_count(req, replay.events, replay.summary, "vault", 0)
    # The derived entry itself (exactly the answer the agent saw) and every stored copy
    # free of credentials: the row no-egress-credential says both.
    wire = ([obs.response.json for obs in (source, replay)] +
        [source.events, replay.events, replay.summary])
    out.append(judges.no_secret_in(req, wire, secrets, "responses, events and the summary"))
    return out


@_check
@_inside("v2 has no portable run deletion (RFC 0252's falsifiability table): no outside "
         "party can take the source away and see that a fork still needs nothing of it; "
         "inside, the source is deleted outright and the host's resolution and derivation "
         "counts are read")
def check_no_reresolution(probe: Probe) -> list[Finding]:
    """§E: forks of an eval run read the stored copy and never resolve the source again.

    The source deleted outright, the way a host that deletes runs would (not the erase
    seam: that erases the copy too): forks of the eval run must still be served the
    recorded answers, which only the stored copy can give, and may neither resolve the
    source nor derive from it again. Forks while the source is there are the row
    fork-no-reresolve's; no row can delete a run.
    """
    req = R_NO_RERESOLVE
    a, inspector = probe.a, probe.inspector
    assert inspector is not None
    if not a.surface.family("replay"):
        raise inapplicable("the host does not advertise the replay family (forkRun)")
    source = a.eval(SOURCE)
    out = _controls(req, source, "the source run")
    if source.run_id is None:
        return out
    replay = a.eval(REPLAY, {"record": source.run_id})
    out += _controls(req, replay, "the eval run")
    if replay.run_id is None:
        return out
    resolved = inspector.resolutions(source.run_id)
    derived = inspector.derivations(source.run_id)
    out.append(judges.at_least(req, resolved, 1, "positive control: creating the eval run "
                               "resolved the source"))
    out.append(judges.at_least(req, derived, 1, "positive control: creating the eval run "
                               "derived from the source"))
    # Forks while the source is there: fork-no-reresolve says them.
    out.append(judges.done(req, inspector.delete_run(source.run_id),
                           "the source was deleted from the host"))
    count = probe.count(a)
    forks = [(f"a {mode} fork with the source deleted", a.forked(replay.run_id, mode))
             for mode in ("replay", "branch")]
    branch = forks[-1][1].run_id
    if branch is not None:
        forks.append(("a branch of the branch", a.forked(branch, "branch")))
    for label, fork in forks:
        out += _controls(req, fork, label)
        if judges.outcomes_on_wire(source.events, RECORDER):
            out += judges.outcomes_equal(req, source.events, fork.events, RECORDER)
        out += judges.miss_count(req, fork.events, fork.summary, "record", 0)
        out.append(judges.no_reresolution(req, resolved, inspector.resolutions(source.run_id),
                                          label))
        out.append(judges.count_is(req, inspector.derivations(source.run_id), derived,
                                   f"{label}: derivations from the source"))
    out.append(judges.counter_unchanged(req, count, probe.count(a), "the forks"))
    return out


ERASURE_SUITE = "refsim-invariant-erasure"
ERASE_QUERY = "erase-marker-0252"


@_check
@_inside("the copy store never shows on the wire: only the simulator's inside shows which "
         "copies erasure reached (the wire side is eval-fixture-gone-copy-refused)")
@_needs(AGENT_CALL, VAULT_FIXTURE)
def check_copy_erased_with_source(probe: Probe) -> list[Finding]:
    """Security: erasing a source erases every copy derived from it, and only those.

    The row erase-reaches-copy counts the copies under the source; rows cannot say that the
    erased content is in no stored entry under any key, nor that the source holds no call."""
    req = R_COPY_ERASED
    a, inspector = probe.a, probe.inspector
    assert inspector is not None
    suite = probe.suite(ERASURE_SUITE)
    s1, s2 = (a.agent_run(_script(ERASURE_SUITE, "doomed")),
        a.agent_run(_script(ERASURE_SUITE, "kept")))
    out = _controls(req, s1, "the source to erase") + _controls(req, s2, "the source to keep")
    if s1.run_id is None or s2.run_id is None:
        return out
    evals = [a.eval(suite, {"doomed": s1.run_id}),
             a.eval(suite, {"doomed": s1.run_id}),
             a.eval(suite, {"kept": s2.run_id})]
    for index, obs in enumerate(evals):
        out.append(judges.created(req, obs.response, f"eval run {index + 1}"))

    def under(source: str) -> int:
        return sum(1 for s, *_ in inspector.copies() if s == source)

    def entries() -> list[tuple[str, Any]]:
        return [(s, e) for s, _, _, e in inspector.copies()]
    out.append(judges.count_is(req, under(s1.run_id), 2, "positive control: copies stored "
                               "under the source to erase"))
    out.append(judges.present_in(req, entries(), "vault:" + ERASE_QUERY,
                                 "positive control: the doomed source's content in the copy "
                                 "store"))
    a.require_erase(s1.run_id)
    out += judges.copies_gone(req, entries(), s1.run_id, ["vault:" + ERASE_QUERY])
    held = inspector.held_calls(s1.run_id)
    out.append(judges.count_is(req, len(held), 0, "calls the erased source still holds"))
    out.append(judges.count_is(req, under(s2.run_id), 1, "copies of the other source, "
                               "untouched by erasing this one"))
    # The eval runs that were served the erased content hold it too (UQ 4 makes them
    # sources): erasure reaches them, so the content cannot be derived again through them.
    fed = evals[0].run_id
    if fed is not None:
        again = a.create(eval_body(suite, {"doomed": fed}))
        out.append(judges.answered(req, again, 400, "an eval run fed by the erased source is "
                                   "no longer a usable source (else the erased content is "
                                   "derived again through it)"))
    return out


MATCHING_SUITE = "refsim-invariant-matching"


@_check
def check_facet_implies_matching(probe: Probe) -> list[Finding]:
    """§A: recordedFixtures comes with fixtureMatching, and both claims hold in behaviour.

    On every host, whatever it advertises (the rows are gated on recordedFixtures): a host
    that advertises fixtureMatching alone still has it judged."""
    req = R_FACET
    a = probe.a
    discovery = a.discovery()
    # That discovery never advertises the one without the other is the row
    # facet-implies-matching's (which applies where recordedFixtures is advertised).
    out = [judges.answered(req, discovery, 200, "discovery")]
    facet = judges.eval_suite_facet(discovery.json)
    if facet.get("recordedFixtures") is True:
        source = a.eval(SOURCE)
        out += _controls(req, source, "the source run")
        if source.run_id is not None:
            replay = a.eval(REPLAY, {"record": source.run_id})
            out.append(judges.created(req, replay.response,
                                      "recordedFixtures backed: a named source is accepted"))
    if facet.get("fixtureMatching") is True:
        doc = catalog.suite(MATCHING_SUITE)
        task = doc["tasks"][0]
        key = task["fixtures"]["toolResponses"][0]["args"]["key"]
        other = next(s["args"]["key"] for s in task["input"]["script"]
                     if s.get("args", {}).get("op") == "inc")
        suite = probe.suite(MATCHING_SUITE)
        before = probe.count(a, other)
        run = a.eval(suite)
        out.append(judges.created(req, run.response, "fixtureMatching backed: an args fixture"))
        # One miss, not two: the call whose args match was served. A lane that shows
        # outcomes also shows which answer it got.
        out += judges.miss_count(req, run.events, run.summary, "match", 1)
        served = _returned(run.events)
        if served and served[0] is not None:
            out.append(judges.same_as(req, served[0], {"key": key, "count": 41},
                                      "the call whose args match is served the fixture"))
        out.append(judges.counter_unchanged(req, before, probe.count(a, other),
                                            "the call whose args match nothing"))
    return out


WIRE_SUITE = "refsim-invariant-wire"


@_check
@_needs(AGENT_CALL, VAULT_FIXTURE)
def check_derived_never_on_wire(probe: Probe) -> list[Finding]:
    """§D: no response or event carries derived entries, by key or by content, on any
    channel (poll, stream, snapshot, summary, headers), and no export operation exists.

    The row derived-never-on-wire judges one replay's answers; rows cannot look for one
    run's recorded calls in another run's answers, which is judged here for a drift, a vault
    replay and forks."""
    req = R_NEVER_ON_WIRE
    a = probe.a
    suite = probe.suite(WIRE_SUITE)
    responses: list[tuple[str, Response]] = []
    source = a.eval(SOURCE)
    vault = a.agent_run(_script(WIRE_SUITE, "wire"))
    out = _controls(req, source, "the source run") + _controls(req, vault, "the vault source")
    if source.run_id is None or vault.run_id is None:
        return out
    made = [("the replay", a.eval(REPLAY, {"record": source.run_id})),
            ("the drift", a.eval(DRIFT, {"record": source.run_id})),
            ("the vault replay", a.eval(suite, {"wire": vault.run_id}))]
    replay_id = made[0][1].run_id
    if replay_id is not None and a.surface.family("replay"):
        made += [("a replay fork", a.forked(replay_id, "replay")),
                 ("a branch fork", a.forked(replay_id, "branch"))]
    for label, obs in made:
        out.append(judges.created(req, obs.response, label))
    if probe.inspector is not None:
        stored = sum(len(e) for *_, e in probe.inspector.copies())
        out.append(judges.at_least(req, stored, 3, "positive control: (white box) derived "
                                   "entries the host holds"))
    runs = [("the source", source), ("the vault source", vault), *made]
    for label, obs in runs:
        responses.append((f"{label}: create", obs.response))
        if obs.run_id is None:
            continue
        for suffix in ("", "/events/poll?afterSequence=-1", "/events", "/eval-summary"):
            responses.append((f"{label}: GET {suffix or '/'}",
                              a.request("GET", run_path(obs.run_id, suffix))))
    for label, r in responses:
        out.append(judges.no_derived_entries(req, r.body.decode("utf-8", "replace"), label))
    # By content, anywhere in the answers about each eval run: the entries (a recorded
    # call's inputs beside its answer) never, and a source's recorded calls the run did not
    # make nowhere; a run's own tool events may carry the calls it made.
    sources = {"the replay": source, "the drift": source, "the vault replay": vault,
               "a replay fork": source, "a branch fork": source}
    for label, obs in made:
        source_obs = sources[label]
        calls = judges.recorded_calls(source_obs.events, RECORDER)
        if obs.run_id is None or not calls:
            continue  # a content-free lane shows no content on the wire to look for
        documents = [(what, r) for what, r in responses if what.startswith(label + ":")]
        out += judges.no_entries_on_wire(req, documents, calls,
                                         judges.recorded_calls(obs.events, RECORDER))
    for label, run_id in (("the source", source.run_id), ("the vault source", vault.run_id),
                          ("the replay", replay_id)):
        if run_id is None:
            continue
        r = a.request("GET", run_path(run_id, "/tool-fixtures"))
        out.append(judges.absent(req, r, f"GET /runs/{{{label}}}/tool-fixtures"))
        out.append(judges.no_derived_entries(req, r.body.decode("utf-8", "replace"),
                                             f"GET /runs/{{{label}}}/tool-fixtures"))
    return out
