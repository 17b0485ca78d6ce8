"""The demo's chapters: one idea of RFC 0252 each, shown on the built-in host and judged.

Each chapter drives the host through its wire (a `RecordingClient`), narrates what it sent
and what came back, and files its assertions with the checker's own judges, so a demo on a
faulty host says which promise broke.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from refsim.check import judges
from refsim.check.findings import Finding
from refsim.check.ids import req_id
from refsim.check.observe import (
    DRIFT,
    KEY_A,
    KEY_B,
    RECORDER,
    REPLAY,
    SOURCE,
    TENANT_A,
    TENANT_B,
    Session,
    eval_body,
    eval_suite_facet,
    gate,
)
from refsim.demo.history import Exchange, RecordingClient
from refsim.domain.refusals import Refusal
from refsim.wire.client import NO_BODY
from refsim.wire.errors import checked
from refsim.wire.response import Response

TENANTS = {KEY_A: TENANT_A, KEY_B: TENANT_B}
UNKNOWN_OPAQUE = "run-0252demo0unknown000000"
WIDTH = 220

SHAPE, REPLAYED = req_id("0252.shape"), req_id("0252.source-replayed")
DRIFTED, REFUSED = req_id("0252.drift-fails-closed"), req_id("0252.source-refused")
UNIFORM, FIELDS = req_id("0252.source-uniform"), req_id("0252.fields-refused")
LEGS = (SHAPE, REPLAYED, DRIFTED, REFUSED, UNIFORM, FIELDS)
NON_TERMINAL = req_id("0252.non-terminal-refused")
NOT_HELD = req_id("0252.not-held-refused")
COPY_ERASED = req_id("0252.copy-erased-with-source")
GONE_COPY = req_id("0252.gone-copy-refused")


@attrs.define
class Chapter:
    """What one chapter showed and what it asserted."""

    slug: str
    title: str
    sections: str
    requirements: tuple[str, ...]
    lede: str
    lines: list[str] = attrs.Factory(list)
    findings: list[Finding] = attrs.Factory(list)
    exchanges: list[int] = attrs.Factory(list)
    skipped: str | None = None
    # What could not be observed: (the requirement it would have witnessed, why not).
    blocked: list[tuple[str, str]] = attrs.Factory(list)

    @property
    def passed(self) -> bool:
        return all(f.ok for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {"slug": self.slug, "title": self.title, "sections": self.sections,
                "requirements": list(self.requirements), "lede": self.lede,
                "passed": self.passed, "skipped": self.skipped, "blocked": [
                    {"requirement_id": req, "reason": why} for req, why in self.blocked],
                "narration": self.lines,
                "findings": [{"requirement_id": f.requirement_id, "ok": f.ok,
                              "message": f.message} for f in self.findings],
                "exchanges": self.exchanges}


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=False)


def clip(text: str, width: int = WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def brief(event: Mapping[str, Any]) -> str:
    """One event as a short line: its sequence, its type, and the fields that matter here."""
    p = event.get("payload") if isinstance(event.get("payload"), dict) else {}
    assert isinstance(p, dict)
    kind = str(event.get("type"))
    if kind == "eval.started":
        detail = f"suite {p.get('suiteId')}"
        if "fixtureRuns" in p:
            detail += f"  fixtureRuns={compact(p['fixtureRuns'])}"
    elif kind == "agent.tool-called":
        detail = f"{p.get('toolName')} {compact(p.get('inputs', p.get('argsHash')))}"
    elif kind == "agent.tool-returned":
        if "error" in p and isinstance(p["error"], dict):
            detail = f"{p.get('status')} error={p['error'].get('code')}"
        elif "outcome" in p:
            detail = f"{p.get('status')} outcome={compact(p['outcome'])}"
        else:
            detail = f"{p.get('status')} (no outcome on the wire)"
    elif kind in ("eval.scored", "eval.completed"):
        keys = (("taskId", "passed", "fixtureMissCount") if kind == "eval.scored" else
            ("passed", "passedCount", "taskCount", "fixtureMissCount"))
        detail = " ".join(f"{k}={compact(p[k])}" for k in keys if k in p)
    elif kind == "run.started":
        detail = str(p.get("workflowId", ""))
    else:
        detail = str(p.get("status", p.get("decision", p.get("outcome", ""))))
    return clip(f"#{event.get('sequence')} {kind} {detail}".rstrip())


class Demo:
    """Runs the chapters in order against one host; `chapters` holds what each showed."""

    def __init__(self, client: RecordingClient, *,
                 echo: Callable[[str], None] = lambda line: None) -> None:
        self.client = client
        self.a = Session(client, KEY_A)
        self.b = Session(client, KEY_B)
        self.echo = echo
        self.chapters: list[Chapter] = []
        self.runs: dict[str, str] = {}  # run id -> what the demo calls it
        self.source_id: str | None = None
        self.source_events: list[dict[str, Any]] = []
        self.replay_id: str | None = None
        self.uniform_body: bytes | None = None
        self.unknown_body: bytes | None = None  # chapter 5's refusal of the unknown id
        self.replay_events: list[dict[str, Any]] = []
        self.advertised = False  # chapter 1 saw recordedFixtures with fixtureMatching

    # ------------------------------------------------------------------ narration
    def _open(self, chapter: Chapter) -> Chapter:
        self.chapters.append(chapter)
        self.client.chapter = chapter.slug
        number = len(self.chapters)
        self.echo("")
        self.echo(f"── {number}. {chapter.title}   [RFC 0252 {chapter.sections}]")
        for req in chapter.requirements:
            self.echo(f"   {req}")
        return chapter

    def say(self, chapter: Chapter, line: str = "") -> None:
        chapter.lines.append(line)
        self.echo(f"   {line}" if line else "")

    def judge(self, chapter: Chapter, findings: Finding | Sequence[Finding]) -> None:
        for f in [findings] if isinstance(findings, Finding) else findings:
            chapter.findings.append(f)
            self.echo(f"   {'✓' if f.ok else '✗'} {f.message}")

    def judge_as(self, chapter: Chapter, findings: Sequence[Finding], summary: str) -> None:
        """File every finding; print one line for them when all held, else each failure."""
        chapter.findings += findings
        if all(f.ok for f in findings):
            self.echo(f"   ✓ {summary}")
        for f in findings:
            if not f.ok:
                self.echo(f"   ✗ {f.message}")

    def control(self, chapter: Chapter, *reqs: str) -> None:
        """A refusal shows something only if the host accepts a usable source at all:
        chapter 3's replay of acme's own completed run is that positive control."""
        ok = self.replay_id is not None
        for req in reqs:
            chapter.findings.append(judges.done(
                req, ok, "positive control: chapter 3 replayed acme's own completed source "
                "(else these refusals show nothing)"))
        self.echo(f"   {'✓' if ok else '✗'} positive control: chapter 3's replay of acme's "
                  f"own source was {'accepted' if ok else 'refused'}")

    def _mark(self, chapter: Chapter, start: int) -> None:
        chapter.exchanges += [x.seq for x in self.client.exchanges[start:]]

    def name_run(self, run_id: str, label: str) -> None:
        self.runs[run_id] = label

    def show(self, chapter: Chapter, x: Exchange, *, answer: str | None = None) -> None:
        body = "" if x.body is NO_BODY else " " + compact(x.body)
        self.say(chapter, clip(f"{x.tenant or 'anonymous'} → {x.method} {x.path}{body}"))
        if answer is None:
            created = x.status == 201 and isinstance(x.response, dict) and x.path == "/runs"
            answer = compact({k: x.response[k] for k in ("runId", "status")
                              if k in x.response}) if created else compact(x.response)
        self.say(chapter, clip(f"    ← {x.status} {answer}"))

    def show_events(self, chapter: Chapter, run_id: str, events: Sequence[Mapping[str, Any]],
                    *, keep: Callable[[Mapping[str, Any]], bool] | None = None) -> None:
        label = self.runs.get(run_id, run_id)
        shown = "" if keep is None else " (those that matter here; timeline.txt has all)"
        self.say(chapter, f"    events of {label}{shown}:")
        for e in events:
            if keep is None or keep(e):
                self.say(chapter, "      " + brief(e))

    def last(self) -> Exchange:
        return self.client.exchanges[-1]

    def create(self, chapter: Chapter, session: Session, body: Any) -> Response:
        r = session.create(body)
        self.show(chapter, self.last())
        return r

    def eval_run(self, chapter: Chapter, req: str, body: dict[str, Any], name: str
                 ) -> tuple[str, list[dict[str, Any]]] | None:
        """Start an eval run and show the events that matter; None (judged) if refused."""
        r = self.create(chapter, self.a, body)
        self.judge(chapter, judges.created(req, r, name))
        if r.status != 201 or not isinstance(r.json, dict):
            return None
        run_id = str(r.json["runId"])
        self.name_run(run_id, name)
        events = self.a.events(run_id)
        self.show_events(chapter, run_id, events, keep=_matters)
        return run_id, events

    def copies_of(self, source_id: str) -> int:
        """How many accepted eval runs named `source_id`: each holds a copy derived from it."""
        return sum(1 for x in self.client.exchanges
                   if x.method == "POST" and x.path == "/runs" and x.status == 201
                   and isinstance(x.body, dict) and isinstance(x.body.get("fixtureRuns"), dict)
                   and source_id in x.body["fixtureRuns"].values())

    def counter(self, chapter: Chapter, key: str = "recorded-fixtures") -> int | None:
        value = self.a.counter(key)
        self.say(chapter, f"live counter {key!r}: "
                          f"{value if value is not None else 'cannot be read'}")
        return value

    def block(self, chapter: Chapter, req: str, reason: str) -> None:
        """Something the chapter cannot observe on this host: neither a pass nor a failure
        (the checker's `blocked`)."""
        chapter.blocked.append((req, reason))
        self.echo(f"   ? blocked: {reason}")

    def still(self, chapter: Chapter, req: str, before: int | None, after: int | None,
              what: str) -> None:
        """Judge that the live counter did not move, or say why that cannot be seen."""
        if before is None or after is None:
            self.block(chapter, req, f"{what}: the live counter cannot be read (no eval-counter "
                                "seam), so a live call would go unseen")
        else:
            self.judge(chapter, judges.counter_unchanged(req, before, after, what))

    # ------------------------------------------------------------------ the chapters
    def run(self, pause: Callable[[], None] | None = None) -> list[Chapter]:
        steps: list[Callable[[], Chapter]] = [
            self.tenants, self.record, self.replay, self.drift, self.refusals,
            self.fields, self.erasure]
        for index, step in enumerate(steps):
            if index and pause is not None:
                pause()
            start = len(self.client.exchanges)
            chapter = step()
            self._mark(chapter, start)
        return self.chapters

    def _skip_rest(self, needs_source: bool) -> str | None:
        """Why a chapter cannot run: an earlier chapter left nothing to build on."""
        if not self.advertised:
            return "the host does not advertise agents.evalSuite.recordedFixtures"
        if needs_source and self.source_id is None:
            return "chapter 2 recorded no source run"
        return None

    def _skip(self, chapter: Chapter, *, needs_source: bool = True) -> bool:
        reason = self._skip_rest(needs_source)
        if reason is not None:
            chapter.skipped = reason
            self.say(chapter, f"skipped: {reason}")
        return reason is not None

    def tenants(self) -> Chapter:
        c = self._open(Chapter(
            "tenants", "Two tenants, and a host that says it takes recorded fixtures", "§A",
            (SHAPE,),
            "The host holds two tenants, acme and globex, each with its own API key. Its "
            "discovery document says whether it takes fixtureRuns on an eval createRun: "
            "agents.evalSuite.recordedFixtures. A host that says so must also advertise "
            "fixtureMatching (RFC 0244), because a recorded run becomes ordinary fixtures; a "
            "client sends fixtureRuns to no other host."))
        self.say(c, f"tenants: {TENANT_A} (key {KEY_A}), {TENANT_B} (key {KEY_B})")
        r = self.a.discovery()
        facet = eval_suite_facet(r.json)
        first = ("recordedFixtures", "fixtureMatching")
        shown = ({k: facet[k] for k in first if k in facet} |
            {k: v for k, v in facet.items() if k not in first})
        self.show(c, self.last(), answer="agents.evalSuite = " + compact(shown) if shown
                  else "agents.evalSuite is not advertised")
        self.judge(c, judges.facet_implies_matching(SHAPE, r.json))
        self.judge(c, judges.answered(SHAPE, r, 200, "discovery"))
        # The checker's one gate (recordedFixtures with fixtureMatching), on what this
        # chapter judged well-formed.
        self.advertised = gate(r, fixtures=False).applies and c.passed
        if not self.advertised:
            self.say(c, "recordedFixtures is not advertised: a client must not send "
                        "fixtureRuns here (§A), so the chapters that need it are skipped")
        return c

    def record(self) -> Chapter:
        c = self._open(Chapter(
            "record", "acme records a source run against the live counter", "§D", (REPLAYED,),
            "An ordinary eval run is the recording. Its agent calls the live counter tool "
            "(inc, then read), and the host keeps every call with its answer. The counter "
            "moves: that is the live effect a replay must not repeat."))
        if self._skip(c, needs_source=False):
            return c
        before = self.counter(c)
        made = self.eval_run(c, REPLAYED, eval_body(SOURCE), "the source run")
        if made is None:
            return c
        self.source_id, self.source_events = made
        self.say(c, "(201 says running: the run finished while the request was answered, as "
                    "its run.completed event shows)")
        after = self.counter(c)
        if before is not None and after is not None:
            self.judge(c, judges.counter_moved(REPLAYED, before, after, "the source run"))
        else:
            self.block(c, REPLAYED, "the live counter cannot be read (no eval-counter seam), "
                                    "so it cannot witness the replay")
        return c

    def replay(self) -> Chapter:
        c = self._open(Chapter(
            "replay", "The replay: fixtureRuns serves the recording and moves nothing",
            "§B §D §E", (REPLAYED, SHAPE),
            "A second eval run names the source in fixtureRuns, keyed by task id. The host "
            "derives the task's fixtures from the recorded calls, echoes the map on "
            "eval.started, and serves every call from them: the agent sees the answers the "
            "source saw, and the live counter stays where it was."))
        if self._skip(c):
            return c
        assert self.source_id is not None
        before = self.counter(c)
        fixture_runs = {"record": self.source_id}
        made = self.eval_run(c, REPLAYED, eval_body(REPLAY, fixture_runs), "the replay")
        if made is None:
            self.say(c, "the host refused its own completed source run, so it cannot replay "
                        "it (does it hold the recorder's calls? §C asks it to)")
            return c
        self.replay_id, events = made
        summary = self.a.summary(self.replay_id)
        after = self.counter(c)
        self.judge(c, judges.echo(REPLAYED, events, fixture_runs))
        self.judge(c, judges.event_validates(
            SHAPE, events, "eval.started", "eval-events.schema.json#/$defs/evalStarted",
            "eval.started validates against its schema, fixtureRuns included"))
        if judges.outcomes_on_wire(self.source_events, RECORDER):
            self.judge(c, judges.outcomes_equal(REPLAYED, self.source_events, events,
                                                RECORDER))
        else:
            self.say(c, "the recorder's lane is content-free on this host: no outcome is on "
                        "the wire to compare, so the counter alone witnesses the replay")
        self.replay_events = events
        self.judge(c, judges.miss_count(REPLAYED, events, summary, "record", 0))
        self.judge(c, judges.passed_is(REPLAYED, events, summary, "record", True))
        self.still(c, REPLAYED, before, after, "the replay")
        return c

    def drift(self) -> Chapter:
        c = self._open(Chapter(
            "drift", "Drift fails closed: a call the source never made misses", "§D",
            (DRIFTED,),
            "The drift suite's agent increments another key, a call the source never made. "
            "No fixture matches it, so it misses: it answers fixture_miss, reaches no live "
            "tool, counts in fixtureMissCount, and fails the task. Fixtures from a recording "
            "are served fail-closed whatever the suite says."))
        if self._skip(c):
            return c
        assert self.source_id is not None
        before = self.counter(c)
        drift_before = self.a.counter("recorded-fixtures-drift")
        made = self.eval_run(c, DRIFTED, eval_body(DRIFT, {"record": self.source_id}),
                             "the drifted run")
        if made is None:
            return c
        run_id, events = made
        summary = self.a.summary(run_id)
        after = self.counter(c)
        drift_after = self.counter(c, "recorded-fixtures-drift")
        self.judge(c, judges.miss_count(DRIFTED, events, summary, "record", 1))
        self.judge(c, judges.passed_is(DRIFTED, events, summary, "record", False))
        self.still(c, DRIFTED, before, after, "the drifted run")
        self.still(c, DRIFTED, drift_before, drift_after, "the missed inc")
        return c

    def refusals(self) -> Chapter:
        c = self._open(Chapter(
            "refusals", "Four unusable sources, one refusal", "§C, Security (tenant isolation)",
            (REFUSED, UNIFORM, NON_TERMINAL),
            "A source must exist, belong to the caller's tenant, be terminal, and have "
            "invoked the agent. Every other value gets the same 400 validation_error, and "
            "the body never echoes the id: globex's run reads exactly like a run that does "
            "not exist, so the refusal tells acme nothing about another tenant."))
        if self._skip(c):
            return c
        self.control(c, REFUSED, UNIFORM)
        theirs = self.create(c, self.b, eval_body(SOURCE))
        noop = self.create(c, self.a, {"workflowId": "conformance-noop"})
        waiting = self.create(c, self.a, {"workflowId": "conformance-wait-input", "inputs": {
            "agentId": RECORDER, "script": [{"call": "conformance.eval:counter",
                                             "args": {"op": "read", "key": "demo"}}]}})
        ids = {"an unknown id": f"acme/{UNKNOWN_OPAQUE}"}
        for label, made, what in (("globex's run", theirs, "globex's completed source"),
                                  ("a run that never invoked the agent", noop,
                                   "acme's workflow run without the agent"),
                                  ("a run still waiting", waiting,
                                   "acme's run waiting for input")):
            self.judge(c, judges.created(REFUSED, made, what))
            if made.status == 201 and isinstance(made.json, dict):
                ids[label] = str(made.json["runId"])
                self.name_run(ids[label], label)
        self.say(c)
        self.say(c, "acme names each in fixtureRuns {\"record\": …}:")
        answers: list[tuple[str, Response]] = []
        for label, run_id in ids.items():
            r = self.a.create(eval_body(REPLAY, {"record": run_id}))
            answers.append((label, r))
            if label == "an unknown id":
                self.unknown_body = r.body
            digest = hashlib.sha256(r.body).hexdigest()[:12]
            self.say(c, f"  {label:<36} {run_id:<32} ← {r.status} body sha256 {digest}…")
            req = (UNIFORM if label == "globex's run" else
                NON_TERMINAL if label == "a run still waiting" else REFUSED)
            self.judge_as(c, [*judges.refused(req, r, label),
                              judges.no_echo(req, r, [run_id], label)],
                          f"{label}: 400 validation_error, a registered envelope, "
                          "the id in no form")
        bodies = {r.body for _, r in answers}
        if len(bodies) == 1:
            self.uniform_body = next(iter(bodies))
            self.say(c, f"one body for all {len(answers)}: {self.uniform_body.decode()}")
        else:
            for label, r in answers:
                self.say(c, clip(f"  {label}: {r.body.decode()}"))
        self.judge(c, judges.uniform(UNIFORM, answers, exact=True))
        return c

    def fields(self) -> Chapter:
        c = self._open(Chapter(
            "fields", "Requests that cannot mean anything are refused, and say why", "§B",
            (FIELDS,),
            "Before any source is looked up, the request itself must make sense: every key "
            "names a task of the suite, no such task carries fixtures of its own (the two "
            "are never merged), and fixtureRuns comes with mode eval. These refusals may "
            "name the field: they reveal nothing about anyone's runs."))
        if self._skip(c):
            return c
        assert self.source_id is not None
        sid = self.source_id
        self.control(c, FIELDS)
        for label, body in (
                ("a key naming no task", eval_body(REPLAY, {"no-such-task": sid})),
                ("a task with its own fixtures", eval_body(SOURCE, {"record": sid})),
                ("fixtureRuns without mode eval", {"workflowId": "conformance-noop",
                                                   "fixtureRuns": {"record": sid}})):
            r = self.create(c, self.a, body)
            self.judge_as(c, judges.refused(FIELDS, r, label),
                          f"{label}: 400 validation_error in a registered envelope")
        unknown = f"acme/{UNKNOWN_OPAQUE}"
        r = self.create(c, self.a, eval_body(REPLAY, {"no-such-task": unknown}))
        label = "a key naming no task, its value a run that does not exist"
        self.judge_as(c, judges.refused(FIELDS, r, label),
                      f"{label}: 400 validation_error in a registered envelope")
        if self.unknown_body is None:  # chapter 5 did not name the unknown id under a good key
            self.unknown_body = self.a.create(eval_body(REPLAY, {"record": unknown})).body
        # Told, not judged: the RFC asks only 400 validation_error of both, and a host may
        # word every refusal alike; refsim names the field, so the two read differently.
        self.say(c, "refsim words it as the key's refusal, not the unknown source's"
                 if r.body != self.unknown_body else
                 "worded as the unknown source's refusal (the RFC allows one wording for all)")
        return c

    def erasure(self) -> Chapter:
        c = self._open(Chapter(
            "erasure", "Erasing the source reaches its copies; the eval run cannot be forked",
            "§D, Security (erasure)", (COPY_ERASED, GONE_COPY, NOT_HELD),
            "The replay used a copy of the source's recorded calls. Erasing the source's "
            "tool content erases that copy too, and redacts the outcomes from both runs' "
            "events. A fork of the replay would need the copy, so it is refused rather than "
            "re-derived or run live; and the erased source is now refused like any "
            "unusable one."))
        if self._skip(c):
            return c
        assert self.source_id is not None
        if self.replay_id is None:
            c.skipped = "chapter 3 made no replay to fork"
            self.say(c, f"skipped: {c.skipped}")
            return c
        before = self.counter(c)
        r = self.a.erase(self.source_id)
        self.show(c, self.last())
        reported = judges.erased_as_reported(COPY_ERASED, r, self.copies_of(self.source_id))
        self.judge(c, reported[0])
        self.say(c, "(runsReached counts the source and every eval run whose events carried "
                    "its content; derivedCopiesErased the fixture copies)")
        self.judge(c, reported[1])
        events = self.a.events(self.replay_id)
        self.show_events(c, self.replay_id, events,
                         keep=lambda e: e.get("type") == "agent.tool-returned")
        if judges.outcomes_on_wire(self.replay_events, RECORDER):
            self.judge(c, judges.no_outcomes_on_wire(
                COPY_ERASED, events, RECORDER, "the replay's events carried the recorded "
                "outcomes before the erasure and carry none now"))
        else:
            self.say(c, "(the recorder's lane is content-free here: its events never carried "
                        "an outcome, so there is nothing on the wire to redact)")
        fork = self.a.fork(self.replay_id)
        self.show(c, self.last())
        # As the wire answers the host's gone-copy code (a code the registry lacks leaves
        # as internal_error).
        status, leaving = checked(Refusal(self.client.host.profile.gone_copy_code, ""))
        code = leaving.code
        self.judge_as(c, judges.refused(GONE_COPY, fork, "a replay fork of the eval run",
                                        status=status, code=code),
                      f"the replay fork is refused {status} {code}: nothing re-derived")
        again = self.create(c, self.a, eval_body(REPLAY, {"record": self.source_id}))
        self.judge_as(c, judges.refused(NOT_HELD, again, "the erased source"),
                      "the erased source is refused 400 validation_error")
        if self.uniform_body is not None:
            self.judge(c, judges.byte_identical(NOT_HELD, again.body, self.uniform_body,
                                                "its body, beside chapter 5's refusals"))
        after = self.counter(c)
        self.still(c, GONE_COPY, before, after, "the refused fork")
        return c


def _matters(event: Mapping[str, Any]) -> bool:
    return event.get("type") in ("eval.started", "agent.tool-called", "agent.tool-returned",
                                 "eval.scored", "eval.completed")


def findings(chapters: Sequence[Chapter]) -> Iterator[Finding]:
    for chapter in chapters:
        yield from chapter.findings
