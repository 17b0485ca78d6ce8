"""The machine's rules that replay recorded sources and fork what they made
(`ReplayRules`): a source replayed by its owner or by another tenant, on its lane or
another, as recorded or drifted, with one call's arguments varied, a task named twice, a
map of several keys; erasure and forks; and how an eval run is judged (`_judge_eval`).

A new rule that sends fixtureRuns to be taken, erases a source or forks an eval run goes
here; one whose request must be refused goes in `machine/refusals.py`.
"""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import consumes, multiple, precondition, rule

from refsim.check import classes, judges
from refsim.check.ids import req_id
from refsim.check.observe import SEAM_ERASE, SEAM_SUITES, eval_body
from refsim.domain.agents import RECORDER
from refsim.domain.canonical import canonical
from refsim.domain.tools import COUNTER, vault_credential
from refsim.testing.machine.draws import (
    ARG_VARIANTS,
    FROM_KEY,
    HEADERS,
    LANES,
    NAMED_TWICE,
    TASK_KEYS,
    _class_data,
    _op,
)
from refsim.testing.machine.state import TASK_ID, MachineState, _norm
from refsim.testing.machine.verdicts import judged, note
from refsim.testing.model import ModelRun
from refsim.testing.strategies import drift

# The machine's bundles (`MachineState`'s), named as the rules below name them.
tenants, runs, evals = MachineState.tenants, MachineState.runs, MachineState.evals


class ReplayRules(MachineState):
    """The rules that replay, erase and fork, mixed into `RecordedFixturesMachine`."""

    # -- replays

    @precondition(lambda self: self.offer.recorded)
    @rule(target=evals, caller=tenants, source_id=runs, lane=st.sampled_from(LANES),
          variant=st.sampled_from(["same", "drift"]), trials=st.integers(1, 3),
          header=HEADERS)
    def replay(self, caller: str, source_id: str, lane: str, variant: str, trials: int,
               header: str = "plain", script: list[Any] | None = None,
               fixed: dict[str, str] | None = None,
               twice: tuple[str, str] | None = None) -> Any:
        lane = self._lane(lane)
        source = self.model.runs[source_id]
        if script is None:
            script = source.script if source.script else [{"decide": "ok"}]
        if variant == "drift":
            script = drift(script)
        suite, task, script, trials, decision = self._suite(
            caller, script, source=False, trials=trials, drift=variant == "drift")
        # `twice`: the task named twice, `source_id` (usable) one of the two values.
        named: dict[str, Any] = ({task: source_id} if twice is None
                                 else classes.NamedTwice([(task, v) for v in twice]))
        body = eval_body(suite, named, agent_id=lane)
        usable = self.model.usable(caller, source_id, lane)
        if caller != source.tenant:
            self._count("cross-tenant")
        before = self.inside.resolutions(source_id) if self.inside else 0
        self._settle(source_id)
        self._may_move([caller], script)  # the eval run is the caller's, live or not
        minted = self.inside.run_count() if self.inside is not None else None
        if fixed is not None:  # the caller's own headers (an Idempotency-Key to reuse)
            r = self._checked(caller, self._session(caller).request("POST", "/runs", json=body,
                                                                    headers=fixed))
        else:
            r = self._create(caller, body, header)
        if header != "plain":
            self._drew("request-headers", header)
        if twice is not None and r.status != 201:  # refused, as any unusable source may be
            for finding in judges.refused(req_id("0252.source-refused"), r,
                                          f"{caller} naming a task twice ({twice})"):
                judged(finding)
            return multiple()
        if usable is None:
            kind = self.model.unusable_kind(caller, source_id, lane)
            self._refused_unusable(caller, r, [source_id], kind,
                                   lambda v: eval_body(suite, {task: v}, agent_id=lane),
                                   header=header, minted=minted)
            return multiple()
        judged(judges.created(req_id("0252.usable-source-accepted"), r,
                              f"{caller} replaying usable source {source_id} on lane {lane}"))
        run_id = str(r.json["runId"])
        entries = self.model.derive(usable, lane)
        run = self._record(ModelRun(run_id, caller, "eval", lane, True, fixture_runs={
            task: source_id}, derived={task: entries}, script=script, trials=trials,
            content_from={source_id, *usable.content_from}))
        misses, decisions, answers = self.model.run_replay(lane, script, entries, trials,
                                                           run.calls, run.invoked)
        run.expected_misses = misses
        run.expected_passed = misses == 0 and all(d == decision for d in decisions)
        self._count("replay:miss" if misses else "replay:no-miss")
        if trials > 1:
            self._count("replay:trials")
        if self.narrate:
            note(f"{caller} replayed {source_id} as {run_id} ({variant}, {trials} trial(s)): "
                 f"expect {misses} miss(es)")
        self._judge_eval(run, answers)
        if self.inside is not None:
            got = [[tool, args, _norm(response, failed), failed]
                   for tool, args, response, failed in self.inside.copy_of(
                       source_id, run_id, task) or ()]
            want = [[e.tool, e.args, _norm(e.response, e.is_error), e.is_error]
                    for e in entries]
            judged(judges.same_as(req_id("0252.derive-agent-calls-only"), got, want,
                                  f"the stored copy of {source_id} is the entries of its held "
                                  f"calls of {lane}"))
            judged(judges.no_secret_in(req_id("0252.no-egress-credential"), got,
                                       [vault_credential(usable.tenant)], "a derived entry"))
            stored = [e for _, eval_id, _, e in self.inside.copies() if eval_id == run_id]
            judged(judges.no_secret_in(req_id("0252.no-egress-credential"), stored,
                                       [vault_credential(usable.tenant)],
                                       "a derived entry as the copy store holds it"))
            judged(judges.counter_delta(req_id("0252.fork-no-reresolve"), before,
                                        self.inside.resolutions(source_id), 1,
                                        "resolving the source at create"))
        return run_id

    @precondition(lambda self: self.offer.recorded)
    @rule(target=evals, source_id=runs, variant=st.sampled_from(["same", "drift"]),
          trials=st.integers(1, 3), header=HEADERS)
    def replay_own(self, source_id: str, variant: str, trials: int,
                   header: str = "plain") -> Any:
        """The owner replays its own source on the source's lane: most often usable."""
        source = self.model.runs[source_id]
        return self.replay(source.tenant, source_id, source.agent or RECORDER, variant, trials,
                           header)

    @precondition(lambda self: self.offer.recorded)
    @rule(target=evals, source_id=runs, other=runs, member=NAMED_TWICE)
    def name_twice(self, source_id: str, other: str, member: str) -> Any:
        """source-values (named-twice): the owner names the task twice, its usable source
        beside another tenant's run or an id of no run: refused, or taken as the usable
        run, whose recording alone is served (the replay's outcomes are judged against
        the model's, as every replay's are)."""
        source = self.model.runs[source_id]
        lane = source.agent or RECORDER
        found = [m for m in _class_data().named_twice if m.name == member]
        if not found:
            return multiple()
        chosen, theirs = found[0], self.model.runs[other]
        roles = {"usable": source_id, "unknown": classes.shifted(source_id),
                 "foreign": other if theirs.tenant != source.tenant else None}
        values = [roles[r] for r in chosen.roles]
        if self.model.usable(source.tenant, source_id, lane) is None or None in values:
            return multiple()
        self._drew("source-values", member)
        return self.replay(source.tenant, source_id, lane, "same", 1,
                           twice=(str(values[0]), str(values[1])))

    @precondition(lambda self: self.offer.recorded)
    @rule(target=evals, source_id=runs, caller=tenants, header=HEADERS)
    def replay_as_another_tenant(self, source_id: str, caller: str,
                                 header: str = "plain") -> Any:
        """Tenant isolation: another tenant names this source on the source's own lane."""
        source = self.model.runs[source_id]
        if caller == source.tenant:
            return multiple()
        return self.replay(caller, source_id, source.agent or RECORDER, "same", 1, header)

    @precondition(lambda self: self.offer.recorded)
    @rule(target=evals, source_id=runs, how=ARG_VARIANTS, which=st.integers(0, 7))
    def replay_varied(self, source_id: str, how: str, which: int) -> Any:
        """exact-args: the owner replays its source with one call's arguments changed by a
        variant exact matching tells apart: that call misses."""
        source = self.model.runs[source_id]
        script = source.script or []
        calls = [i for i, step in enumerate(script)
                 if step.get("call") == COUNTER and isinstance(step.get("args"), dict)]
        if not calls:
            return multiple()
        index = calls[which % len(calls)]
        varied = classes.vary(_op(_class_data().arg_variants, how), script[index]["args"])
        if varied is None:
            return multiple()
        self._drew("exact-args", how)
        changed = [*script[:index], {**script[index], "args": varied}, *script[index + 1:]]
        return self.replay(source.tenant, source_id, source.agent or RECORDER, "same", 1,
                           script=changed)

    @precondition(lambda self: self._seam(SEAM_ERASE) and self.offer.forks)
    @rule(eval_id=consumes(evals), mode=st.sampled_from(["replay", "branch"]))
    def erase_source_then_fork(self, eval_id: str, mode: str) -> None:
        """Security: once the source is erased, a fork of the eval run is refused."""
        for source_id in (self.model.runs[eval_id].fixture_runs or {}).values():
            self.erase(source_id)
        self.fork(eval_id, mode)

    @precondition(lambda self: self.inside is not None and self.offer.forks)
    @rule(eval_id=consumes(evals), mode=st.sampled_from(["replay", "branch"]))
    def delete_source_then_fork(self, eval_id: str, mode: str) -> None:
        """§E, in process: the source deleted outright, as a host that deletes runs would
        (v2 has no portable deletion, so over HTTP there is no such step): a fork of the
        eval run re-reads its copy, never the source."""
        assert self.inside is not None
        for source_id in (self.model.runs[eval_id].fixture_runs or {}).values():
            source = self.model.runs[source_id]
            self.inside.delete_run(source_id)
            source.held = False
            source.deleted = True
            self._count("delete")
            if self.narrate:
                note(f"the host deleted {source.tenant}'s {source_id}")
        self.fork(eval_id, mode)

    def _judge_eval(self, run: ModelRun, answers: list[Any]) -> None:
        session = self._session(run.tenant)
        events = session.events(run.id)
        self._settled.add(run.id)
        task = next(iter(run.fixture_runs or {}), TASK_ID)
        judged(judges.echo(req_id("0252.echo-verbatim"), events, run.fixture_runs or {}))
        judged(judges.scored_once(req_id("0252.miss-count-reported"), events))
        judged(judges.scored_miss_count(req_id("0252.fail-closed-miss"), events, task,
                                        run.expected_misses))
        judged(judges.scored_passed(req_id("0252.fail-closed-miss"), events, task,
                                    run.expected_passed))
        self._judge_wire(run, events, session)
        if run.agent is not None and judges.outcomes_on_wire(events, run.agent):
            returned = [e.get("payload") or {} for e in events
                        if e.get("type") == "agent.tool-returned"]
            got = [_norm(p.get("error"), True) if "error" in p else p.get("outcome")
                   for p in returned]
            want = [_norm(value, failed) for value, failed in answers]
            judged(judges.same_as(req_id("0252.source-replayed"), got, want,
                                  "the answers served are the recorded ones"))

    # -- maps of several keys

    @precondition(lambda self: self.offer.recorded and self._seam(SEAM_SUITES))
    @rule(first=runs, second=runs,
          shape=st.sampled_from(["both", "one-named", "near-key", "conflict"]),
          reverse=st.booleans(), key=st.one_of(TASK_KEYS, FROM_KEY))
    def replay_map(self, first: str, second: str, shape: str, reverse: bool,
                   key: tuple[str, Any] | str) -> None:
        """§B with a map of two keys, in either order, from the first source's owner: both
        tasks named (each from its own source: any unusable one refuses the whole request,
        as every unusable source is refused), one named and the other live, a second key
        that is no taskId (task-keys), or a second task with suite fixtures. Every key and
        every source is judged, not the first alone; and only a named task is served."""
        caller = self.model.runs[first].tenant
        lane = RECORDER
        script_a = list(self.model.runs[first].script or [{"decide": "ok"}])
        script_b = (list(self.model.runs[second].script or [{"decide": "ok"}])
                    if shape != "one-named" else
                    [{"call": COUNTER, "args": {"op": "inc", "key": "k2"}}, {"decide": "ok"}])
        expected = {"kind": "golden", "match": {"strategy": "exact", "value": "ok"}}
        task_b: dict[str, Any] = {"taskId": "beta", "input": {"script": script_b},
                                  "expected": expected}
        if shape == "conflict":
            task_b["fixtures"] = {"toolResponses": [], "onMiss": "live"}
        tasks = [{"taskId": "alpha", "input": {"script": script_a}, "expected": expected},
                 task_b]
        digest = hashlib.sha256(canonical(tasks).encode()).hexdigest()[:12]
        suite_id = f"refsim.machine.evals.map-{digest}"
        doc = {"suiteId": suite_id, "version": "1.0.0",
               "modes": ["golden"], "trials": 1, "tasks": tasks}
        if not self._register(caller, doc):
            return
        second_key: Any = "beta"
        if shape == "near-key":
            if isinstance(key, tuple):
                name, second_key = key
            else:
                name, second_key = key, classes.derive(_op(_class_data().from_key, key), "beta")
            if not isinstance(second_key, str) or second_key in ("alpha", "beta"):
                return
            self._drew("task-keys", name)
        pairs: list[tuple[str, str]] = [("alpha", first)]
        if shape != "one-named":
            pairs.append((second_key, second))
        if reverse:
            pairs.reverse()
        named = dict(pairs)

        for source_id in named.values():
            self._settle(source_id)

        def body_of(replace: str | None = None, value: Any = None) -> Any:
            return eval_body(suite_id, {k: (value if k == replace else v)
                                              for k, v in named.items()}, agent_id=lane)
        self._may_move([caller], script_a + script_b)
        self._may_move([self.model.runs[second].tenant], script_b)
        minted = self.inside.run_count() if self.inside is not None else None
        r = self._create(caller, body_of())
        self._count("map:" + shape)
        if shape in ("near-key", "conflict"):
            requirement = req_id("0252.fields-refused" if shape == "near-key"
                                 else "0252.suite-fixtures-refused")
            judged(judges.refused_as(requirement, r, f"a map of two keys ({shape}, "
                                     f"{'second' if not reverse else 'first'} key at fault)"))
            return
        unusable = [(k, v) for k, v in named.items()
                    if self.model.usable(caller, v, lane) is None]
        if unusable:
            bad_key, bad_id = unusable[0]
            self._refused_unusable(caller, r, [bad_id],
                                   self.model.unusable_kind(caller, bad_id, lane),
                                   lambda v: body_of(bad_key, v), minted=minted)
            return
        judged(judges.created(req_id("0252.usable-source-accepted"), r,
                              f"a map of two usable sources ({shape})"))
        run_id = str(r.json["runId"])
        derived = {k: self.model.derive(self.model.usable(caller, v, lane) or
                                        self.model.runs[v], lane) for k, v in named.items()}
        run = self._record(ModelRun(run_id, caller, "eval-map", lane, True, fixture_runs=named,
                                    derived=derived, script=script_a,
                                    content_from=set(named.values())))
        misses: dict[str, int] = {}
        for task_id, script in (("alpha", script_a), ("beta", script_b)):
            if task_id in named:
                misses[task_id], _, _ = self.model.run_replay(lane, script, derived[task_id], 1,
                                                              run.calls, run.invoked)
            else:
                self.model.run_live(caller, lane, script, run.calls, run.invoked)
                misses[task_id] = 0
        events = self._session(caller).events(run_id)
        self._settled.add(run_id)
        judged(judges.echo(req_id("0252.echo-verbatim"), events, named))
        for task_id, count in misses.items():
            if task_id not in named:
                continue  # a task without fixtures need not report misses at all
            judged(judges.scored_miss_count(req_id("0252.fail-closed-miss"), events, task_id,
                                            count))
        if self.narrate:
            note(f"{caller} ran {run_id} with {named} ({shape}): misses {misses}")

    # -- erasure and forks

    @precondition(lambda self: self._seam(SEAM_ERASE))
    @rule(run_id=runs)
    def erase(self, run_id: str) -> None:
        run = self.model.runs[run_id]
        if run.deleted:
            return  # the host took it away: nothing is left to erase
        r = self._checked(run.tenant, self._session(run.tenant).erase(run_id))
        if r.status in (404, 405, 501):  # listed, but no seam answers there: nothing erased
            self._broke(SEAM_ERASE, r)
            return
        judged(judges.answered(req_id("0252.copy-erased-with-source"), r, 200, "erasing"))
        run.erased = True
        for other in self.model.runs.values():
            if run_id in other.content_from:
                other.erased = True  # it holds the erased content too
        self._count("erase")
        if self.narrate:
            note(f"{run.tenant} erased {run_id}")
        # The erasure's own effect is judged at the erasure, before any later step of the
        # same rule (a fork) can fail for it first: the failure names the right rule.
        self.erasure_reaches_copies()

    @precondition(lambda self: self.offer.forks)
    @rule(target=runs, eval_id=consumes(evals), mode=st.sampled_from(["replay", "branch"]))
    def fork(self, eval_id: str, mode: str) -> Any:
        run = self.model.runs[eval_id]
        gone = any(self.model.runs[s].erased for s in (run.fixture_runs or {}).values())
        before = self.inside.resolved_and_derived() if self.inside else None
        self._may_move([run.tenant, *(self.model.runs[s].tenant
                                      for s in (run.fixture_runs or {}).values())], run.script)
        r = self._checked(run.tenant, self._session(run.tenant).fork(eval_id, mode))
        if self.inside is not None:
            judged(judges.unchanged(req_id("0252.fork-no-reresolve"), before,
                                    self.inside.resolved_and_derived(),
                                    "what a fork resolved and derived from its sources"))
        if gone:
            judged(judges.refused_registered_any(req_id("0252.gone-copy-refused"), r,
                                                 f"a {mode} fork whose copy is gone"))
            self._count("fork:gone")
            return multiple()
        judged(judges.created(req_id("0252.fork-no-reresolve"), r, f"a {mode} fork"))
        fork_id = str(r.json["runId"])
        child = self._record(ModelRun(fork_id, run.tenant, "fork-" + mode, run.agent, True,
                                      fixture_runs=run.fixture_runs, derived=run.derived,
                                      script=run.script, trials=run.trials,
                                      content_from=set(run.content_from)))
        child.expected_misses, child.expected_passed = run.expected_misses, run.expected_passed
        if mode == "replay":
            child.held = False
            child.invoked = set(run.invoked)
        else:
            assert run.agent is not None
            (entries,) = run.derived.values()
            _, _, answers = self.model.run_replay(run.agent, run.script, entries,
                                                  run.trials, child.calls, child.invoked)
            self._judge_eval(child, answers)
        self._count("fork:ok")
        if self.narrate:
            note(f"{run.tenant} forked {eval_id} ({mode}) as {fork_id}")
        return fork_id
