"""The invariant rows of invariants/invariants.yaml and the checks that enforce them.

Each check drives a fresh host through its wire; reference-impl rows also read its insides.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml

from refsim import paths
from refsim.check import judges
from refsim.check.findings import Disposition, Finding, Row, check, fail
from refsim.check.session import (
    COUNTER_KEY,
    DRIFT,
    RECORDER,
    REPLAY,
    SOURCE,
    Session,
    eval_body,
    run_path,
)
from refsim.domain.canonical import canonical
from refsim.domain.ids import RunId, parse_bound
from refsim.domain.tools import VAULT, vault_credential
from refsim.host import SimHost
from refsim.wire.response import Response

SCENARIO = "invariants"
KEY_A, KEY_B = "hk_test_acme", "hk_test_globex"
TENANT_A = "acme"
# A well-formed id under the caller's tenant that no host minted.
UNKNOWN_OPAQUE = "run-0252invariant000000"

TIERS = ("protocol", "reference-impl")
SEVERITIES = ("critical", "high", "medium", "low")
WITNESS_CLASSES = ("witnessable-unaided", "witnessable-gated", "seam-gated", "claims-check",
                   "negative-existence", "unwitnessable")
REQUIRED = ("id", "tier", "severity", "threat_model", "tests", "note", "witness",
            "witnessReview", "requirement_id", "check")
OPTIONAL = ("non_testability_rationale",)
ID_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
REQUIREMENT_RE = re.compile(r"^(openwop|refsim)\.requirement\.[a-z0-9][a-z0-9.-]*$")
NAMESPACES = ("openwop.requirement.", "refsim.requirement.")

Check = Callable[[SimHost], list[Finding]]
CHECKS: dict[str, Check] = {}
# Checks that judge a host whatever it advertises; every other one needs recordedFixtures.
UNGATED = frozenset({"check_facet_implies_matching"})


def _check(fn: Check) -> Check:
    CHECKS[fn.__name__] = fn
    return fn


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
    check: str
    non_testability_rationale: str | None = None

    def __str__(self) -> str:
        return f"{self.id} ({self.tier}, {self.severity}, {self.witness}) -> {self.check}"

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
    doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
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
        if key in raw and key != "tests" and (not isinstance(raw[key], str)
                                              or not raw[key].strip()):
            raise bad(f"{key} must be a non-empty string")
    if not ID_RE.match(raw["id"]):
        raise bad("id must be lower-case words joined by '-'")
    for key, allowed in (("tier", TIERS), ("severity", SEVERITIES),
                         ("witness", WITNESS_CLASSES)):
        if raw[key] not in allowed:
            raise bad(f"{key} {raw[key]!r} is not one of {', '.join(allowed)}")
    if not raw["threat_model"].endswith(".md"):
        raise bad("threat_model must name a threat-model file (….md)")
    tests = raw["tests"]
    if not isinstance(tests, list) or not all(isinstance(t, str) and t.strip() for t in tests):
        raise bad("tests must be a list of repo-relative globs")
    if raw["tier"] == "protocol" and not tests:
        raise bad("a protocol-tier row needs at least one test glob")
    if raw["tier"] == "protocol" and raw["witness"] == "unwitnessable":
        raise bad("a protocol-tier row must not be unwitnessable (OpenWOP "
                  "check-witness-classes); re-tier it to reference-impl or name a witness")
    if raw["witness"] == "unwitnessable" and "non_testability_rationale" not in raw:
        raise bad("witness unwitnessable needs a non_testability_rationale")
    if not REQUIREMENT_RE.match(raw["requirement_id"]):
        raise bad(f"requirement_id {raw['requirement_id']!r} is not "
                  "openwop.requirement.<...> or refsim.requirement.<...>")
    if raw["check"] not in CHECKS:
        raise bad(f"check {raw['check']!r} is not a check registered in "
                  f"refsim.check.invariants (known: {', '.join(sorted(CHECKS))})")
    return Invariant(id=raw["id"], tier=raw["tier"], severity=raw["severity"],
                     threat_model=raw["threat_model"], tests=tuple(tests), note=raw["note"],
                     witness=raw["witness"], witness_review=raw["witnessReview"],
                     requirement_id=raw["requirement_id"], check=raw["check"],
                     non_testability_rationale=raw.get("non_testability_rationale"))


def run_invariants(make_host: Callable[[], SimHost], prefix: str | None = None,
                   invariants: Sequence[Invariant] | None = None) -> list[Row]:
    """One report row per invariant (filtered by `prefix`), each on a fresh host."""
    rows = []
    for inv in invariants if invariants is not None else load_invariants():
        if prefix is not None and not inv.matches(prefix):
            continue
        host = make_host()
        reason = None if inv.check in UNGATED else gate(host)
        if reason is not None:
            rows.append(Row.unjudged(inv.requirement_id, SCENARIO, Disposition.INAPPLICABLE,
                                     reason, check_id=inv.id))
            continue
        try:
            findings = CHECKS[inv.check](host)
        except Exception as exc:  # a check that crashes on a host is a failed check, with why
            findings = [fail(inv.requirement_id, f"the check {inv.check} raised {exc!r}")]
        # A row's findings are filed under the row's requirement id.
        findings = [attrs.evolve(f, requirement_id=inv.requirement_id) for f in findings]
        rows.append(Row.judged(inv.requirement_id, SCENARIO, findings, check_id=inv.id))
    return rows


def gate(host: SimHost) -> str | None:
    """Why the RFC 0252 rows do not apply to this host, or None when they do."""
    discovery = host.request("GET", "/.well-known/openwop")
    if discovery.status != 200 or not isinstance(discovery.json, dict):
        return f"discovery answered {discovery.status}; the host advertises nothing readable"
    if judges.eval_suite_facet(discovery.json).get("recordedFixtures") is not True:
        return "the host does not advertise agents.evalSuite.recordedFixtures"
    return None


# ----------------------------------------------------------------------------- pure judges


_DERIVED_KEY_RE = re.compile(r'"(toolResponses|argsMatch|tool)"\s*:')


def no_derived_entries(req: str, text: str, what: str) -> Finding:
    """§D: wire text carries no derived entry list and no derived entry."""
    found = sorted(set(_DERIVED_KEY_RE.findall(text)))
    return check(req, not found, f"{what}: no derived entry or entry list" if not found
                 else f"{what}: carries derived-entry keys {found}", {"keys": found})


def absent(req: str, response: Response, what: str) -> Finding:
    """A route that must not exist answers 404 or 405, never content."""
    return check(req, response.status in (404, 405),
                 f"{what}: does not exist ({response.status})" if response.status in (404, 405)
                 else f"{what}: answered {response.status}; the operation exists",
                 {"status": response.status})


def no_content_in(req: str, documents: Any, markers: Iterable[str], what: str) -> Finding:
    """No recorded content (tool answers, decisions) appears in what must stay content-free."""
    text = json.dumps(documents, sort_keys=True, default=str, ensure_ascii=False)
    found = sorted(m for m in markers if m and m in text)
    return check(req, not found, f"{what}: no recorded content" if not found
                 else f"{what}: carries recorded content {found}", {"found": found})


def present_in(req: str, documents: Any, needle: str, what: str) -> Finding:
    """A positive control: the material a check hunts for really exists where it should."""
    text = json.dumps(documents, sort_keys=True, default=str, ensure_ascii=False)
    return check(req, needle in text, f"{what}: present, as expected" if needle in text
                 else f"{what}: absent, so the check cannot witness anything")


def unchanged(req: str, before: Any, after: Any, what: str) -> Finding:
    same = canonical(before) == canonical(after)
    return check(req, same, f"{what}: unchanged" if same else f"{what}: changed",
                 {"before": before, "after": after})


def refused_registered(req: str, response: Response, what: str) -> list[Finding]:
    """Refused (4xx) with a registered code in a well-formed envelope."""
    return [check(req, 400 <= response.status < 500,
                  f"{what}: refused with {response.status}" if 400 <= response.status < 500
                  else f"{what}: answered {response.status}, not a refusal",
                  {"status": response.status, "body": response.json}),
            judges.envelope(req, response, what)]


def copies_gone(req: str, remaining: Sequence[tuple[str, Any]], source: str,
                markers: Iterable[str]) -> list[Finding]:
    """Security: after erasure no stored copy is keyed under the source or holds its content."""
    keyed = [s for s, _ in remaining if s == source]
    text = json.dumps([e for _, e in remaining], sort_keys=True, default=str)
    held = sorted(m for m in markers if m in text)
    return [check(req, not keyed, "no derived copy is stored under the erased source" if not keyed
                  else f"{len(keyed)} derived copy(ies) still stored under the erased source"),
            check(req, not held, "no stored copy holds the erased source's content" if not held
                  else f"stored copies still hold the erased source's content {held}")]


# ----------------------------------------------------------------------------- observations


@attrs.define
class _Eval:
    """One created run and what the wire says about it, gathered before any judging."""

    session: Session
    created: Response
    events: list[dict[str, Any]] = attrs.Factory(list)
    summary: Any = None

    @property
    def run_id(self) -> str | None:
        body = self.created.json
        if self.created.status != 201 or not isinstance(body, dict):
            return None
        return str(body["runId"]) if "runId" in body else None

    @property
    def completed(self) -> bool:
        return any(e.get("type") == "run.completed" for e in self.events)


def _observe(session: Session, response: Response) -> _Eval:
    obs = _Eval(session, response)
    if obs.run_id is not None:
        obs.events = session.events(obs.run_id)
        obs.summary = session.summary(obs.run_id)
    return obs


def _eval(session: Session, suite: str, fixture_runs: dict[str, Any] | None = None,
          **extra: Any) -> _Eval:
    return _observe(session, session.create(eval_body(suite, fixture_runs, **extra)))


def _agent_run(session: Session, script: list[Any]) -> _Eval:
    """A workflow run of the recorder with a script: a usable source when it completes."""
    return _observe(session, session.workflow("conformance-agent-call",
                                              {"agentId": RECORDER, "script": script}))


def _fork(session: Session, run_id: str, mode: str) -> _Eval:
    return _observe(session, session.fork(run_id, mode))


def _controls(req: str, obs: _Eval, what: str) -> list[Finding]:
    """Positive control: the run was created and completed."""
    return [judges.created(req, obs.created, what),
            check(req, obs.completed, f"{what}: reached run.completed" if obs.completed
                  else f"{what}: never reached run.completed")]


def _sessions(host: SimHost) -> tuple[Session, Session]:
    return Session(host, KEY_A), Session(host, KEY_B)


def _register(session: Session, suite: dict[str, Any]) -> Response:
    return session.client.request("POST", "/conformance/seams/eval-suites",
                                  api_key=session.api_key, json={"suite": suite})


def _suite(suite_id: str, tasks: Mapping[str, list[Any]], decision: str) -> dict[str, Any]:
    return {"suiteId": suite_id, "version": "1.0.0", "modes": ["golden"],
            "tasks": [{"taskId": task_id, "input": {"script": script},
                       "expected": {"kind": "golden",
                                    "match": {"strategy": "exact", "value": decision}}}
                      for task_id, script in tasks.items()]}


def _call(tool: str, args: Any) -> dict[str, Any]:
    return {"call": tool, "args": args}


def _counter(op: str, key: str = COUNTER_KEY) -> dict[str, Any]:
    return _call("conformance.eval:counter", {"op": op, "key": key})


def _count(session: Session, key: str = COUNTER_KEY) -> int:
    """The live counter through the seam; a host without the seam is read from inside."""
    value = session.counter(key)
    if value is None and isinstance(session.client, SimHost):
        owner = session.client.core.caller(session.api_key)
        if owner is not None:
            return session.client.core.gateway.counter_value(owner.tenant, key)
    return -1 if value is None else value


def _gateway(host: SimHost) -> dict[str, Any]:
    """Every piece of live tool state: a fail-closed replay moves none of it."""
    gw = host.core.gateway
    return {"liveCalls": gw.live_calls, "egress": len(gw.egress),
            "counters": sorted([*k, v] for k, v in gw.counters.items())}


def _rid(value: str | None) -> RunId | None:
    return parse_bound(value) if value is not None else None


def _entries(host: SimHost) -> list[tuple[str, Any]]:
    """(source id, derived entries as JSON) for every copy the host holds."""
    return [(source.bound, [e.to_json() for e in entries])
            for source, _, _, entries in host.core.copies.all_entries()]


def _held(host: SimHost, run_id: str) -> list[dict[str, Any]]:
    """The calls the host holds for a run, as executed (inside the simulator only)."""
    rid = parse_bound(run_id)
    run = host.core.runs.get(rid) if rid is not None else None
    return [] if run is None else [{"tool": c.tool, "inputs": c.inputs, "outcome": c.outcome,
                                    "error": c.error} for c in run.held_calls]


def _returned(events: Sequence[Mapping[str, Any]]) -> list[Any]:
    return [(e.get("payload") or {}).get("outcome") for e in events
            if e.get("type") == "agent.tool-returned"]


# ----------------------------------------------------------------------------- checks

R_UNIFORM = "openwop.requirement.0252.source-uniform"
R_CONTENT_FREE = "refsim.requirement.0252.summary-content-free"
R_FAIL_CLOSED = "refsim.requirement.0252.fail-closed-miss"
R_NO_EGRESS = "refsim.requirement.0252.no-egress-credential"
R_NO_RERESOLVE = "refsim.requirement.0252.fork-no-reresolve"
R_COPY_ERASED = "refsim.requirement.0252.copy-erased-with-source"
R_GONE_COPY = "refsim.requirement.0252.gone-copy-refused"
R_ECHO = "refsim.requirement.0252.echo-verbatim"
R_FACET = "refsim.requirement.0252.facet-implies-matching"
R_NEVER_ON_WIRE = "refsim.requirement.0252.derived-never-on-wire"


@_check
def check_tenant_scoped(host: SimHost) -> list[Finding]:
    """§C: every unusable source, another tenant's included, gets one id-free refusal."""
    req = R_UNIFORM
    a, b = _sessions(host)
    own = _eval(a, SOURCE)
    out = _controls(req, own, "the caller's own source run")
    if own.run_id is None:
        return out
    out.append(judges.created(req, a.create(eval_body(REPLAY, {"record": own.run_id})),
                              "positive control: the caller's own completed source"))
    foreign = _eval(b, SOURCE)
    out += _controls(req, foreign, "tenant B's source run")
    waiting = b.workflow("conformance-wait-input",
                         {"agentId": RECORDER, "script": [_counter("read")]})
    out.append(judges.created(req, waiting, "tenant B's run waiting for input"))
    if foreign.run_id is None or waiting.status != 201:
        return out
    waiting_id = str(waiting.json["runId"])
    snap = b.client.request("GET", run_path(waiting_id), api_key=b.api_key)
    status = snap.json.get("status") if isinstance(snap.json, dict) else None
    out.append(check(req, status == "waiting-input",
                     f"tenant B's waiting run is not terminal ({status})"))
    # The caller's own unusable runs too: a foreign run must read like every other reason.
    own_waiting = a.workflow("conformance-wait-input",
                             {"agentId": RECORDER, "script": [_counter("read")]})
    noop = a.workflow("conformance-noop")
    out.append(judges.created(req, own_waiting, "the caller's run waiting for input"))
    out.append(judges.created(req, noop, "the caller's run that never invokes the agent"))
    if own_waiting.status != 201 or noop.status != 201:
        return out
    foreign_opaque = foreign.run_id.split("/", 1)[1]
    cases = (("an unknown id", f"{TENANT_A}/{UNKNOWN_OPAQUE}"),
             ("an id that does not decode", "not a run id"),
             ("tenant B's completed source", foreign.run_id),
             ("tenant B's non-terminal run", waiting_id),
             ("tenant B's opaque segment under the caller's tenant",
              f"{TENANT_A}/{foreign_opaque}"),
             ("the caller's non-terminal run", str(own_waiting.json["runId"])),
             ("the caller's run without the agent", str(noop.json["runId"])))
    runs_before = len(host.core.runs)
    responses = []
    for label, value in cases:
        r = a.create(eval_body(REPLAY, {"record": value}))
        out += judges.refused(req, r, label)
        out.append(judges.no_echo(req, r, [value], label))
        responses.append((label, r))
    out.append(judges.uniform(req, responses, exact=True))
    out.append(check(req, len(host.core.runs) == runs_before,
                     "no refusal minted a run" if len(host.core.runs) == runs_before
                     else f"refusals minted {len(host.core.runs) - runs_before} run(s)"))
    return out


CONTENT_QUERY = "content-marker-0252-query"
CONTENT_DECISION = "content-marker-0252-decision"


@_check
def check_summary_content_free(host: SimHost) -> list[Finding]:
    """§D + RFC 0081: eval.* events and the summary carry no recorded or task content."""
    req = R_CONTENT_FREE
    a, _ = _sessions(host)
    script = [_call(VAULT, {"query": CONTENT_QUERY}), _counter("inc"), _counter("read"),
              {"decide": CONTENT_DECISION}]
    drift = [_call(VAULT, {"query": CONTENT_QUERY + "-drift"}), _counter("read"),
             {"decide": CONTENT_DECISION}]
    suite = _suite("refsim.invariants.evals.content-free",
                   {"served": script, "drifted": drift}, CONTENT_DECISION)
    out = [check(req, _register(a, suite).status == 201, "the content suite was registered")]
    source = _agent_run(a, script)
    out += _controls(req, source, "the marked source run")
    if source.run_id is None:
        return out
    # Read the held calls, not the wire: a content-free lane shows no outcome.
    held = _held(host, source.run_id)
    out.append(present_in(req, held, "vault:" + CONTENT_QUERY,
                          "positive control: the source's recorded vault answer"))
    replay = _eval(a, suite["suiteId"], {"served": source.run_id, "drifted": source.run_id})
    out += _controls(req, replay, "the replay")
    if replay.run_id is None:
        return out
    out += judges.miss_count(req, replay.events, replay.summary, "served", 0)
    out += judges.miss_count(req, replay.events, replay.summary, "drifted", 1)
    fork = _fork(a, replay.run_id, "replay")
    out += _controls(req, fork, "a replay fork of the eval run")
    markers = ["vault:" + CONTENT_QUERY, CONTENT_QUERY, CONTENT_DECISION]
    for label, obs in (("the eval run", replay), ("its replay fork", fork)):
        out += judges.content_free(req, obs.summary, obs.events)
        eval_events = [e for e in obs.events if str(e.get("type", "")).startswith("eval.")]
        out.append(no_content_in(req, [obs.summary, eval_events], markers,
                                 f"{label}: summary and eval.* events"))
    return out


@_check
def check_fail_closed(host: SimHost) -> list[Finding]:
    """§D + Security: a miss reaches no live tool, is counted, and fails the task."""
    req = R_FAIL_CLOSED
    a, _ = _sessions(host)
    before = _count(a)
    source = _eval(a, SOURCE)
    out = _controls(req, source, "the source run")
    out.append(judges.counter_moved(req, before, _count(a), "the source run"))
    if source.run_id is None:
        return out
    changed = _suite("refsim.invariants.evals.fail-closed",
                     {"record": [_counter("inc"), _counter("read"), _counter("inc"),
                                 _call(VAULT, {"query": "never-recorded"}),
                                 {"decide": "recorded"}]}, "recorded")
    out.append(check(req, _register(a, changed).status == 201,
                     "the changed-agent suite was registered"))
    live, count = _gateway(host), _count(a)
    drift = _eval(a, DRIFT, {"record": source.run_id})
    out.append(judges.created(req, drift.created, "the drifted replay"))
    out += judges.miss_count(req, drift.events, drift.summary, "record", 1)
    out += judges.passed_is(req, drift.events, drift.summary, "record", False)
    out.append(judges.counter_unchanged(req, count, _count(a), "the drifted replay"))
    out.append(judges.counter_unchanged(req, 0, _count(a, "recorded-fixtures-drift"),
                                        "the drifted inc's own key"))
    again = _eval(a, changed["suiteId"], {"record": source.run_id})
    out.append(judges.created(req, again.created, "a changed agent that repeats a consumed call "
                              "and calls a new tool"))
    out += judges.miss_count(req, again.events, again.summary, "record", 2)
    out += judges.passed_is(req, again.events, again.summary, "record", False)
    out.append(judges.counter_unchanged(req, count, _count(a), "the changed agent"))
    out.append(unchanged(req, live, _gateway(host),
                         "live tool state (counters, egress, live calls) across both replays"))
    return out


@_check
def check_no_egress_credential(host: SimHost) -> list[Finding]:
    """§D SR-1: the egress-injected credential never enters a derived entry or the wire."""
    req = R_NO_EGRESS
    a, _ = _sessions(host)
    secret = vault_credential(TENANT_A)
    script = [_call(VAULT, {"query": "q"}), {"decide": "ok"}]
    suite = _suite("refsim.invariants.evals.vault", {"vault": script}, "ok")
    out = [check(req, _register(a, suite).status == 201, "the vault suite was registered")]
    source = _agent_run(a, script)
    out += _controls(req, source, "the vault source run")
    out.append(present_in(req, [attrs.asdict(r) for r in host.core.gateway.egress], secret,
                          "positive control: the tenant's vault credential in the egress log"))
    if source.run_id is None:
        return out
    replay = _eval(a, suite["suiteId"], {"vault": source.run_id})
    out += _controls(req, replay, "the vault replay")
    if replay.run_id is None:
        return out
    out += judges.miss_count(req, replay.events, replay.summary, "vault", 0)
    replay_rid = _rid(replay.run_id)
    mine = [[e.to_json() for e in entries]
            for _, eval_run, _, entries in host.core.copies.all_entries() if eval_run == replay_rid]
    out.append(check(req, len(mine) == 1 and len(mine[0]) == 1,
                     f"the replay's derived copy holds one entry (copies: {len(mine)})"))
    if mine and mine[0]:
        seen = [c["outcome"] for c in _held(host, source.run_id)]
        got = mine[0][0].get("response")
        out.append(check(req, bool(seen) and canonical(got) == canonical(seen[0]),
                         "the derived entry carries the answer the agent saw",
                         {"entry": got, "agent saw": seen}))
    out.append(judges.no_secret_in(req, mine, [secret], "the replay's derived entries"))
    out.append(judges.no_secret_in(req, _entries(host), [secret], "every stored derived copy"))
    wire = [obs.created.json for obs in (source, replay)] + \
        [source.events, replay.events, replay.summary]
    out.append(judges.no_secret_in(req, wire, [secret], "responses, events and the summary"))
    return out


@_check
def check_no_reresolution(host: SimHost) -> list[Finding]:
    """§E: forks of an eval run read the stored copy and never resolve the source again.

    Two witnesses: the host's resolution count (which only a SourcePolicy moves), and the
    effect itself: with the source deleted from the host, a fork must still be served
    the recorded answers, which only the stored copy can give it.
    """
    req = R_NO_RERESOLVE
    a, _ = _sessions(host)
    source = _eval(a, SOURCE)
    out = _controls(req, source, "the source run")
    if source.run_id is None:
        return out
    rid = _rid(source.run_id)
    assert rid is not None
    replay = _eval(a, REPLAY, {"record": source.run_id})
    out += _controls(req, replay, "the eval run")
    resolved = host.core.resolutions.get(rid, 0)
    out.append(check(req, resolved >= 1, f"positive control: creating the eval run resolved "
                     f"the source ({resolved} time(s))"))
    if replay.run_id is None:
        return out
    # The source's events were read above, before it goes. Then take it out of the host
    # the way a host that deletes runs would (not the erase seam: that erases the copy).
    out.append(check(req, rid in host.core.runs,
                     "positive control: the host holds the source before it is deleted"))
    host.core.runs.pop(rid, None)
    out.append(check(req, rid not in host.core.runs, "the source was deleted from the host"))
    count = _count(a)
    # Each must be created (201) and served from the copy: a fork that needs the source
    # is refused now, or misses.
    forks = [(f"a {mode} fork with the source deleted from the host",
              _fork(a, replay.run_id, mode)) for mode in ("replay", "branch")]
    branch = forks[1][1].run_id
    if branch is not None:
        forks.append(("a branch of the branch", _fork(a, branch, "branch")))
    for label, fork in forks:
        out += _controls(req, fork, label)
        if judges.outcomes_on_wire(source.events, RECORDER):
            out += judges.outcomes_equal(req, source.events, fork.events, RECORDER)
        out += judges.miss_count(req, fork.events, fork.summary, "record", 0)
        out.append(judges.no_reresolution(req, resolved, host.core.resolutions.get(rid, 0),
                                          label))
    out.append(judges.counter_unchanged(req, count, _count(a), "the forks"))
    out += _fork_after_erasure(host, a)
    return out


def _fork_after_erasure(host: SimHost, a: Session) -> list[Finding]:
    """A fork attempted after its source was erased through the seam resolves nothing."""
    req = R_NO_RERESOLVE
    source = _eval(a, SOURCE)
    out = _controls(req, source, "the source to erase")
    if source.run_id is None:
        return out
    rid = _rid(source.run_id)
    assert rid is not None
    replay = _eval(a, REPLAY, {"record": source.run_id})
    out.append(judges.created(req, replay.created, "the eval run of the source to erase"))
    if replay.run_id is None:
        return out
    resolved = host.core.resolutions.get(rid, 0)
    erased = a.erase(source.run_id)
    out.append(check(req, erased.status == 200, f"the source was erased ({erased.status})"))
    _fork(a, replay.run_id, "branch")
    out.append(judges.no_reresolution(req, resolved, host.core.resolutions.get(rid, 0),
                                      "a fork after the source was erased"))
    return out


ERASE_QUERY = "erase-marker-0252"
KEEP_QUERY = "keep-marker-0252"


@_check
def check_copy_erased_with_source(host: SimHost) -> list[Finding]:
    """Security: erasing a source erases every copy derived from it, and only those."""
    req = R_COPY_ERASED
    a, _ = _sessions(host)
    doomed = [_call(VAULT, {"query": ERASE_QUERY}), {"decide": "ok"}]
    kept = [_call(VAULT, {"query": KEEP_QUERY}), {"decide": "ok"}]
    suite = _suite("refsim.invariants.evals.erasure", {"doomed": doomed, "kept": kept}, "ok")
    out = [check(req, _register(a, suite).status == 201, "the erasure suite was registered")]
    s1, s2 = _agent_run(a, doomed), _agent_run(a, kept)
    out += _controls(req, s1, "the source to erase") + _controls(req, s2, "the source to keep")
    if s1.run_id is None or s2.run_id is None:
        return out
    evals = [_eval(a, suite["suiteId"], {"doomed": s1.run_id}),
             _eval(a, suite["suiteId"], {"doomed": s1.run_id}),
             _eval(a, suite["suiteId"], {"kept": s2.run_id})]
    for index, obs in enumerate(evals):
        out.append(judges.created(req, obs.created, f"eval run {index + 1}"))
    rid1, rid2 = _rid(s1.run_id), _rid(s2.run_id)
    assert rid1 is not None and rid2 is not None
    out.append(check(req, host.core.copies.count_for(rid1) == 2,
                     f"positive control: two copies stored under the source to erase "
                     f"({host.core.copies.count_for(rid1)})"))
    out.append(present_in(req, _entries(host), "vault:" + ERASE_QUERY,
                          "positive control: the doomed source's content in the copy store"))
    erased = a.erase(s1.run_id)
    out.append(check(req, erased.status == 200, f"the source was erased ({erased.status})"))
    out += copies_gone(req, _entries(host), s1.run_id, ["vault:" + ERASE_QUERY])
    held = host.core.runs[rid1].held_calls
    out.append(check(req, not held, "the erased source holds no calls" if not held
                     else f"the erased source still holds {len(held)} call(s)"))
    out.append(check(req, host.core.copies.count_for(rid2) == 1,
                     "the other source's copy is untouched"
                     if host.core.copies.count_for(rid2) == 1
                     else "erasing one source reached another source's copy"))
    # The eval runs that were served the erased content hold it too (UQ 4 makes them
    # sources): erasure reaches them, so the content cannot be derived again through them.
    fed = evals[0].run_id
    if fed is not None:
        again = a.create(eval_body(suite["suiteId"], {"doomed": fed}))
        out.append(check(req, again.status == 400,
                         "an eval run fed by the erased source is no longer a usable source"
                         if again.status == 400 else "the erased content was derived again "
                         f"through an eval run it fed ({again.status})",
                         {"status": again.status, "body": again.json}))
    return out


@_check
def check_gone_copy_refused(host: SimHost) -> list[Finding]:
    """Security: a fork whose copy is gone is refused, re-derives nothing, runs nothing live."""
    req = R_GONE_COPY
    a, _ = _sessions(host)
    source = _eval(a, SOURCE)
    out = _controls(req, source, "the source run")
    if source.run_id is None:
        return out
    replay = _eval(a, REPLAY, {"record": source.run_id})
    out += _controls(req, replay, "the eval run")
    if replay.run_id is None:
        return out
    branch = _fork(a, replay.run_id, "branch")
    out += _controls(req, branch, "positive control: a branch while the copy exists")
    erased = a.erase(source.run_id)
    out.append(check(req, erased.status == 200, f"the source was erased ({erased.status})"))
    runs, live, count = len(host.core.runs), _gateway(host), _count(a)
    targets = [("a replay fork of the eval run", replay.run_id, "replay"),
               ("a branch fork of the eval run", replay.run_id, "branch")]
    if branch.run_id is not None:
        targets.append(("a branch of the earlier branch", branch.run_id, "branch"))
    for label, run_id, mode in targets:
        out += refused_registered(req, a.fork(run_id, mode), label)
    unknown = a.create(eval_body(REPLAY, {"record": f"{TENANT_A}/{UNKNOWN_OPAQUE}"}))
    again = a.create(eval_body(REPLAY, {"record": source.run_id}))
    out += judges.refused(req, again, "a new eval naming the erased source")
    out.append(judges.uniform(req, [("an unknown id", unknown),
                                    ("the erased source", again)], exact=True))
    out.append(check(req, len(host.core.runs) == runs,
                     "no refused fork minted a run" if len(host.core.runs) == runs
                     else f"{len(host.core.runs) - runs} run(s) minted after the copy was gone"))
    out.append(judges.counter_unchanged(req, count, _count(a), "the refused forks"))
    out.append(unchanged(req, live, _gateway(host), "live tool state across the refused forks"))
    return out


@_check
def check_runs_echoed(host: SimHost) -> list[Finding]:
    """§E: eval.started carries the accepted fixtureRuns verbatim, and forks keep it."""
    req = R_ECHO
    a, _ = _sessions(host)
    source = _eval(a, SOURCE)
    out = _controls(req, source, "the source run")
    scripts = {"alpha": [_counter("inc", "alpha"), _counter("read", "alpha")],
               "beta": [_counter("read", "beta")]}
    suite = _suite("refsim.invariants.evals.two-tasks", scripts, "done")
    out.append(check(req, _register(a, suite).status == 201, "the two-task suite was registered"))
    alpha, beta = _agent_run(a, scripts["alpha"]), _agent_run(a, scripts["beta"])
    out += _controls(req, alpha, "the alpha source") + _controls(req, beta, "the beta source")
    if source.run_id is None or alpha.run_id is None or beta.run_id is None:
        return out
    one = {"record": source.run_id}
    two = {"alpha": alpha.run_id, "beta": beta.run_id}
    single = _eval(a, REPLAY, one)
    double = _eval(a, suite["suiteId"], two)
    for label, obs, mapping in (("a one-task map", single, one), ("a two-task map", double, two)):
        out.append(judges.created(req, obs.created, label))
        out.append(judges.echo(req, obs.events, mapping))
    if single.run_id is not None:
        for mode in ("replay", "branch"):
            fork = _fork(a, single.run_id, mode)
            out.append(judges.created(req, fork.created, f"a {mode} fork of the eval run"))
            out.append(judges.echo(req, fork.events, one))
    return out


@_check
def check_facet_implies_matching(host: SimHost) -> list[Finding]:
    """§A: recordedFixtures comes with fixtureMatching, and both claims hold in behaviour."""
    req = R_FACET
    a, _ = _sessions(host)
    discovery = a.discovery()
    out = [check(req, discovery.status == 200, f"discovery answered {discovery.status}")]
    out.append(judges.facet_implies_matching(req, discovery.json))
    facet = judges.eval_suite_facet(discovery.json)
    if facet.get("recordedFixtures") is True:
        source = _eval(a, SOURCE)
        out += _controls(req, source, "the source run")
        if source.run_id is not None:
            replay = _eval(a, REPLAY, {"record": source.run_id})
            out.append(judges.created(req, replay.created,
                                      "recordedFixtures backed: a named source is accepted"))
    if facet.get("fixtureMatching") is True:
        key = "facet-matching"
        other = key + "-other"
        # The unmatched call is an inc: had it reached the live tool, the counter moves.
        suite = _suite("refsim.invariants.evals.matching",
                       {"match": [_counter("read", key), _counter("inc", other),
                                  {"decide": "matched"}]}, "matched")
        task = suite["tasks"][0]
        task["fixtures"] = {"toolResponses": [
            {"tool": "conformance.eval:counter", "args": {"op": "read", "key": key},
             "argsMatch": "exact", "response": {"key": key, "count": 41}}], "onMiss": "fail"}
        out.append(check(req, _register(a, suite).status == 201,
                         "the matching suite was registered"))
        before = _count(a, other)
        run = _eval(a, suite["suiteId"])
        out.append(judges.created(req, run.created, "fixtureMatching backed: an args fixture"))
        # One miss, not two: the call whose args match was served. A lane that shows
        # outcomes also shows which answer it got.
        out += judges.miss_count(req, run.events, run.summary, "match", 1)
        served = _returned(run.events)
        if served and served[0] is not None:
            out.append(check(req, served[0] == {"key": key, "count": 41},
                             "the call whose args match is served the fixture", served))
        out.append(check(req, before >= 0, "positive control: the live counter of the "
                         f"unmatched call's key is observable ({before})"))
        out.append(judges.counter_unchanged(req, before, _count(a, other),
                                            "the call whose args match nothing"))
    return out


@_check
def check_derived_never_on_wire(host: SimHost) -> list[Finding]:
    """§D: no response or event carries derived entries, and no export operation exists."""
    req = R_NEVER_ON_WIRE
    a, _ = _sessions(host)
    script = [_call(VAULT, {"query": "wire"}), _counter("read"), {"decide": "ok"}]
    suite = _suite("refsim.invariants.evals.wire", {"wire": script}, "ok")
    responses: list[tuple[str, Response]] = [("suite registration", _register(a, suite))]
    source = _eval(a, SOURCE)
    vault = _agent_run(a, script)
    out = _controls(req, source, "the source run") + _controls(req, vault, "the vault source")
    if source.run_id is None or vault.run_id is None:
        return out
    made = [("the replay", _eval(a, REPLAY, {"record": source.run_id})),
            ("the drift", _eval(a, DRIFT, {"record": source.run_id})),
            ("the vault replay", _eval(a, suite["suiteId"], {"wire": vault.run_id}))]
    replay_id = made[0][1].run_id
    if replay_id is not None:
        made += [("a replay fork", _fork(a, replay_id, "replay")),
                 ("a branch fork", _fork(a, replay_id, "branch"))]
    for label, obs in made:
        out.append(judges.created(req, obs.created, label))
    for label, obs in [("the source", source), ("the vault source", vault), *made]:
        responses.append((f"{label}: create", obs.created))
    stored = _entries(host)
    out.append(check(req, sum(len(e) for _, e in stored) >= 3,
                     f"positive control: the host holds derived entries "
                     f"({sum(len(e) for _, e in stored)})"))
    keys = {t.name: k for k, t in host.core.tenants.items()}
    for rid, run in list(host.core.runs.items()):
        for suffix in ("", "/events/poll?afterSequence=-1", "/events", "/eval-summary"):
            r = host.request("GET", run_path(rid.bound, suffix), api_key=keys[run.owner.tenant])
            responses.append((f"run {rid.bound} GET {suffix or '/'}", r))
    for label, r in responses:
        out.append(no_derived_entries(req, r.body.decode("utf-8", "replace"), label))
    for label, run_id in (("the source", source.run_id), ("the vault source", vault.run_id),
                          ("the replay", replay_id)):
        if run_id is None:
            continue
        r = host.request("GET", run_path(run_id, "/tool-fixtures"), api_key=KEY_A)
        out.append(absent(req, r, f"GET /runs/{{{label}}}/tool-fixtures"))
        out.append(no_derived_entries(req, r.body.decode("utf-8", "replace"),
                                      f"GET /runs/{{{label}}}/tool-fixtures"))
    return out
