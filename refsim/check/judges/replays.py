"""Judges of an eval run's events, summary and live counter: the fixtureRuns echo, replayed
outcomes against the source's, a live counter that moved or did not, the scores and miss
counts of fixture matching, the eval events' order, and the facet that implies matching.

Part of `refsim.check.judges` (import the judges from there). A new judge of replay, fixture
matching or an eval's events goes here, and is re-exported by `refsim.check.judges`.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from refsim.check.findings import Finding, check, fail, ok
from refsim.check.judges.answers import refused
from refsim.check.observe import eval_suite_facet
from refsim.domain.canonical import canonical, canonical_or_none, integral
from refsim.wire import schemas
from refsim.wire.response import Response


def of_type(events: Sequence[Mapping[str, Any]], type_: str) -> list[Mapping[str, Any]]:
    return [e for e in events if e.get("type") == type_]


def _payload(event: Mapping[str, Any]) -> Mapping[str, Any]:
    """An event's payload; one that is not an object is judged as an empty one."""
    payload = event.get("payload")
    return payload if isinstance(payload, dict) else {}


def echo(req: str, events: Sequence[Mapping[str, Any]], expected: Mapping[str, Any]) -> Finding:
    started = of_type(events, "eval.started")
    if len(started) != 1:
        return fail(req, f"expected exactly one eval.started, saw {len(started)}")
    got = _payload(started[0]).get("fixtureRuns")
    want = dict(expected)
    if got is None:
        return fail(req, "eval.started carries no fixtureRuns although the request did"
                    + ("" if isinstance(started[0].get("payload"), dict)
                       else " (its payload is not an object)"), {"expected": want, "got": got})
    # Verbatim is the map's value: the same members, the same values. A JSON object is
    # unordered (RFC 8259 §4), so member order is no part of it.
    same = isinstance(got, dict) and canonical(got) == canonical(want)
    return check(req, same, "eval.started.fixtureRuns echoes the accepted map verbatim"
                 if same else "eval.started.fixtureRuns differs from the accepted map",
                 {"expected": want, "got": got})


def outcomes_equal(req: str, source: Sequence[Mapping[str, Any]],
                   replay: Sequence[Mapping[str, Any]], agent_id: str) -> list[Finding]:
    """Each replayed agent.tool-returned carries the outcome (or error) the source recorded.

    A call whose outcome and error are on neither run's wire (a content-free lane) is a
    failing finding: nothing was compared, and the caller decides what that means.
    """
    def returned(events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        return [_payload(e) for e in of_type(events, "agent.tool-returned")
                if _payload(e).get("agentId") == agent_id]

    def result(p: Mapping[str, Any]) -> dict[str, Any]:
        return {k: p[k] for k in ("outcome", "error") if k in p}
    src, rep = returned(source), returned(replay)
    if not src:
        return [fail(req, "the source run recorded no agent.tool-returned of the agent")]
    out = [check(req, len(src) == len(rep),
                 f"the replay returned {len(rep)} call(s), the source {len(src)}")]
    for index, (a, b) in enumerate(zip(src, rep, strict=False)):
        seen = {"source": result(a), "replay": result(b)}
        if not seen["source"] and not seen["replay"]:
            out.append(fail(req, f"call {index}: neither run carries an outcome or error on "
                            "the wire, so the outcomes cannot be compared", seen))
            continue
        same = canonical(seen["source"]) == canonical(seen["replay"])
        out.append(check(req, same, f"call {index}: the replayed outcome equals the source's"
                         if same else f"call {index}: the replayed outcome differs from the "
                         "source's", seen))
    return out


def named_twice(req: str, response: Response, source: Sequence[Mapping[str, Any]],
                served: Sequence[Mapping[str, Any]], agent_id: str, what: str
                ) -> list[Finding]:
    """§C, a task named twice in fixtureRuns (the caller's usable run beside a value that is
    not one): refused as any unusable source is (400 validation_error), or taken as one of
    the two; then the replay served the usable run's recording (`source`'s outcomes), never
    the other value's. `served` is the replay's events (none where it was refused)."""
    if response.status != 201:
        return refused(req, response, f"{what}, where not taken")
    return [ok(req, f"{what}: taken (201), as the usable run it names"),
            *(attrs.evolve(f, message=f"{what}: {f.message}")
              for f in outcomes_equal(req, source, served, agent_id))]


def outcomes_on_wire(events: Sequence[Mapping[str, Any]], agent_id: str) -> bool:
    """Whether the agent's lane puts outcomes on the wire at all (a content-free lane, with
    argsHash and no outcome, does not: its replay is witnessed by the counter alone)."""
    for e in of_type(events, "agent.tool-returned"):
        payload = e.get("payload")
        if (isinstance(payload, dict) and payload.get("agentId") == agent_id
                and ("outcome" in payload or "error" in payload)):
            return True
    return False


def counter_unchanged(req: str, before: int, after: int, what: str) -> Finding:
    return check(req, before == after,
                 f"{what}: the live counter did not move ({before})" if before == after else
                 f"{what}: the live counter moved from {before} to {after}",
                 {"before": before, "after": after})


def counter_moved(req: str, before: int, after: int, what: str) -> Finding:
    """A positive control: live calls do reach the counter, so a still counter means something."""
    return check(req, after > before,
                 f"{what}: the live counter moved {before} -> {after}" if after > before else
                 f"{what}: the live counter did not move ({before}); it cannot witness replay",
                 {"before": before, "after": after})


def scored(events: Sequence[Mapping[str, Any]], task_id: str) -> Mapping[str, Any] | None:
    found = [_payload(e) for e in of_type(events, "eval.scored")
             if _payload(e).get("taskId") == task_id]
    return found[0] if len(found) == 1 else None


def eval_events_alike(req: str, poll: Sequence[Mapping[str, Any]],
                      stream: Sequence[Mapping[str, Any]]) -> Finding:
    """Every channel the host offers shows the same eval: the eval.* events of a run's SSE
    stream are those of its poll, type and payload (the echo, each task's
    fixtureMissCount and passed), as many of each. Other events are left alone: a host may
    interleave what it likes."""
    def evals(events: Sequence[Mapping[str, Any]]) -> collections.Counter[str]:
        return collections.Counter(
            canonical([e.get("type"), _payload(e)]) for e in events
            if isinstance(e.get("type"), str) and str(e.get("type")).startswith("eval."))
    polled, streamed = evals(poll), evals(stream)
    missing = sorted((polled - streamed).elements())
    extra = sorted((streamed - polled).elements())
    return check(req, not missing and not extra,
                 f"the event stream shows the poll's {sum(polled.values())} eval events"
                 if not missing and not extra else "the event stream and the poll show "
                 f"different eval events: only polled {missing[:2]}, only streamed {extra[:2]}",
                 {"onlyPolled": missing, "onlyStreamed": extra})


def miss_count(req: str, events: Sequence[Mapping[str, Any]], summary: Any, task_id: str,
               expected: int) -> list[Finding]:
    """fixtureMissCount on eval.scored and in the summary: an integer (not a bool) equal to
    `expected`."""
    task = _summary_task(summary, task_id)
    return [scored_miss_count(req, events, task_id, expected),
            _count_is(req, None if task is None else task.get("fixtureMissCount"),
                      f"summary task {task_id} fixtureMissCount", expected)]


def scored_miss_count(req: str, events: Sequence[Mapping[str, Any]], task_id: str,
                      expected: int) -> Finding:
    """fixtureMissCount on the task's eval.scored: an integer (not a bool), `expected`."""
    score = scored(events, task_id)
    return _count_is(req, None if score is None else score.get("fixtureMissCount"),
                     f"eval.scored[{task_id}].fixtureMissCount", expected)


def _count_is(req: str, got: Any, field: str, expected: int) -> Finding:
    count = integral(got)  # 0.0 is the JSON integer 0; a bool or a string is no count
    kind = ("" if count is not None or got is None
            else f" (a {type(got).__name__}, not an integer)")
    return check(req, count == expected, f"{field} is {got!r}{kind}, expected {expected}")


def scored_once(req: str, events: Sequence[Mapping[str, Any]]) -> Finding:
    """An eval run of one task scores it once: one eval.scored event."""
    count = len(of_type(events, "eval.scored"))
    return check(req, count == 1, f"the eval run of one task has {count} eval.scored event(s)")


def passed_is(req: str, events: Sequence[Mapping[str, Any]], summary: Any, task_id: str,
              expected: bool) -> list[Finding]:
    task = _summary_task(summary, task_id)
    got_s = None if task is None else task.get("passed")
    return [scored_passed(req, events, task_id, expected),
            check(req, got_s is expected,
                  f"summary task {task_id} passed is {got_s}, expected {expected}")]


def scored_passed(req: str, events: Sequence[Mapping[str, Any]], task_id: str,
                  expected: bool) -> Finding:
    score = scored(events, task_id)
    got = None if score is None else score.get("passed")
    return check(req, got is expected,
                 f"eval.scored[{task_id}].passed is {got}, expected {expected}")


def suite_taken(req: str, taken: bool, suite_id: str) -> Finding:
    """A well-formed suite the checker registers is taken (else nothing it names can run)."""
    return check(req, taken, f"the host took suite {suite_id}" if taken
                 else f"the host refused suite {suite_id}")


def _summary_task(summary: Any, task_id: str) -> Mapping[str, Any] | None:
    if not isinstance(summary, dict):
        return None
    tasks = summary.get("tasks")
    if not isinstance(tasks, list):
        return None
    return next((t for t in tasks if isinstance(t, dict) and t.get("taskId") == task_id), None)


_SCORED_MEMBERS = ("fixtureMissCount", "passed", "score")


def summary_reread_alike(req: str, first: Any, again: Any) -> Finding:
    """The EvalSummary is a recorded fact: read again, each task reports the same
    fixtureMissCount, passed and score (3.0 and 3 alike), and the run the same passed."""
    def scored(summary: Any) -> Any:
        if not isinstance(summary, dict) or not isinstance(summary.get("tasks"), list):
            return None
        tasks = sorted((canonical_or_none([t.get("taskId"), *(t.get(m) for m in
                                                            _SCORED_MEMBERS)]) or "")
                       for t in summary["tasks"] if isinstance(t, dict))
        return [canonical_or_none(summary.get("passed")), tasks]
    was, now = scored(first), scored(again)
    return check(req, was == now, "the EvalSummary read again reports every task as the "
                 "first read did" if was == now else "the EvalSummary read again reports "
                 f"otherwise than the first read: {_brief(again)} after {_brief(first)}",
                 {"first": first, "again": again})


def _brief(doc: Any) -> str:
    text = canonical_or_none(doc) or repr(doc)
    return text if len(text) <= 300 else text[:297] + "..."


def eval_order(req: str, events: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """RFC 0081: one eval.started, at least one eval.scored in between, one eval.completed
    before run.completed."""
    unsequenced = [f"{i} ({e.get('type')})" for i, e in enumerate(events)
                   if integral(e.get("sequence")) is None]
    if unsequenced:
        return [fail(req, f"event(s) at position {', '.join(unsequenced)} carry no integer "
                     "sequence, so the order cannot be judged")]
    seqs = {t: [int(e["sequence"]) for e in of_type(events, t)]
            for t in ("eval.started", "eval.scored", "eval.completed", "run.completed")}
    ordered = [e.get("sequence") for e in events] == list(range(len(events)))
    out = [check(req, ordered, "event sequences run 0, 1, 2, ... without gaps")]
    one = len(seqs["eval.started"]) == 1 and len(seqs["eval.completed"]) == 1
    out.append(check(req, one, "exactly one eval.started and one eval.completed"))
    out.append(check(req, bool(seqs["eval.scored"]),
                     f"at least one eval.scored ({len(seqs['eval.scored'])})"))
    if one:
        s, c = seqs["eval.started"][0], seqs["eval.completed"][0]
        inside = all(s < x < c for x in seqs["eval.scored"])
        out.append(check(req, inside, "eval.scored sits between started and completed"
                         if inside else "an eval.scored is not between started and completed"))
        done = s < c and all(c < x for x in seqs["run.completed"])
        out.append(check(req, done, "eval.started precedes eval.completed, which precedes "
                         "run.completed" if done else "eval.completed is not between "
                         "eval.started and run.completed"))
    return out


def facet_implies_matching(req: str, discovery: Any) -> Finding:
    """§A: recordedFixtures is advertised only together with fixtureMatching."""
    facet = eval_suite_facet(discovery)
    if not facet.get("recordedFixtures"):
        return ok(req, "recordedFixtures is not advertised, so nothing is implied", facet)
    return check(req, facet.get("fixtureMatching") is True,
                 "recordedFixtures is advertised with fixtureMatching"
                 if facet.get("fixtureMatching") is True else
                 "recordedFixtures is advertised without fixtureMatching", facet)


def no_reresolution(req: str, before: int, after: int, what: str) -> Finding:
    return check(req, before == after,
                 f"{what}: the source was not resolved again ({before})" if before == after
                 else f"{what}: the source was resolved again ({before} -> {after})")


def event_validates(req: str, events: Sequence[Mapping[str, Any]], type_: str, schema: str,
                    what: str) -> Finding:
    """One event of the type, whose payload validates against the schema."""
    found = of_type(events, type_)
    good = len(found) == 1 and schemas.is_valid(schema, found[0].get("payload"))
    return check(req, good, what if good else f"{what}: no ({len(found)} {type_} event(s))")


def no_outcomes_on_wire(req: str, events: Sequence[Mapping[str, Any]], agent_id: str,
                        what: str) -> Finding:
    """No agent.tool-returned of the agent carries an outcome or error (redacted, or a
    content-free lane)."""
    shown = outcomes_on_wire(events, agent_id)
    return check(req, not shown, what if not shown else f"{what}: they still carry them")
