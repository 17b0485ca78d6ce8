"""The machine's rules that make the runs its other rules name (`SourceRules`): every
example's first sources, the tenants, sources of every kind recorded (eval, workflow,
waiting, noop), a waiting run resolved or cancelled, and a run of each of run-states'
states made and named.

A new rule that records a source, adds a tenant or makes a run of a new state goes here.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize, multiple, precondition, rule

from refsim.check import classes, judges
from refsim.check.ids import req_id
from refsim.check.observe import SEAM_ERASE, SEAM_RESOLVE, SEAM_TENANTS, eval_body, run_path
from refsim.domain.agents import RECORDER, UNHELD
from refsim.domain.tools import COUNTER, FLAKY, VAULT
from refsim.testing.machine.draws import (
    EXTRA_TENANTS,
    HEADERS,
    LANES,
    RECORDED_ARGS,
    RUN_STATES,
    _class_data,
)
from refsim.testing.machine.offered import AGENT_CALL, NOOP, WAIT_INPUT
from refsim.testing.machine.state import TENANTS, MachineState
from refsim.testing.machine.verdicts import judged, note
from refsim.testing.model import ModelRun
from refsim.testing.strategies import ANY_SCRIPTS, COUNTER_SCRIPTS, counter_only
from refsim.wire.response import Response

# The script of every example's first sources: both keys moved, one read twice.
COUNTER_INIT: tuple[dict[str, Any], ...] = (
    {"call": COUNTER, "args": {"op": "inc", "key": "k1"}},
    {"call": COUNTER, "args": {"op": "read", "key": "k1"}},
    {"call": COUNTER, "args": {"op": "inc", "key": "k2"}},
    {"call": COUNTER, "args": {"op": "read", "key": "k1"}},
    {"decide": "ok"})


def _str(made: Any) -> str:
    """A run id a recording rule returned (they return one always, typed as any rule)."""
    return str(made)


# The machine's bundles (`MachineState`'s), named as the rules below name them.
tenants, runs = MachineState.tenants, MachineState.runs


class SourceRules(MachineState):
    """The rules that make runs, mixed into `RecordedFixturesMachine`."""

    # -- every example starts from one usable source of each known tenant

    @initialize(target=runs, rich=RECORDED_ARGS, trials=st.integers(1, 3))
    def first_source(self, rich: int, trials: int) -> Any:
        """Before any rule: the facet as discovery shows it (§A), and one completed eval
        source per tenant, so every rule that names a run has the caller's and another
        tenant's to name from the first step on."""
        judged(judges.facet_implies_matching(req_id("0252.facet-implies-matching"),
                                             self._session(next(iter(self.keys))).discovery()
                                             .json))
        if not self.offer.recorded:
            return multiple()
        made = [self.record_eval_source(tenant, RECORDER, list(COUNTER_INIT), rich, trials)
                for tenant in sorted(self.keys)]
        return multiple(*made)

    # -- tenants

    @rule(target=tenants, name=st.sampled_from(sorted(TENANTS)))
    def known_tenant(self, name: str) -> Any:
        return name if name in self.keys else multiple()

    @precondition(lambda self: self._seam(SEAM_TENANTS))
    @rule(target=tenants, name=st.sampled_from(EXTRA_TENANTS))
    def add_tenant(self, name: str) -> Any:
        if name in self.keys:
            return multiple()
        key = f"hk_test_{name}"
        if name not in self._added:  # else an earlier example added it to this host
            r = self.client.request("POST", "/conformance/seams/tenants",
                                    api_key=self.keys["acme"], json={"name": name, "apiKey": key})
            if r.status == 400 and self.inside is None:
                if self.narrate:
                    note(f"{name} already exists on this long-lived host")  # another run's
            elif not 200 <= r.status < 300 and r.status != 400:
                self._broke(SEAM_TENANTS, r)  # listed, but it does not answer: nothing added
                return multiple()
            else:
                judged(judges.created(req_id("0252.tenant-isolation"), r,
                                      f"adding tenant {name}"))
        self.keys[name] = key
        self._added.add(name)
        if self.inside is not None:  # the one-step counter comparison needs the same names
            self._same_names &= self.inside.tenant_of(key) == name
        self._take_in_counters(name)
        self._count("tenant:add")
        if self.narrate:
            note(f"added tenant {name}")
        return name

    # -- recording sources

    @precondition(lambda self: self.offer.recorded)
    @rule(target=runs, tenant=tenants, lane=st.sampled_from(LANES), script=COUNTER_SCRIPTS,
          rich=RECORDED_ARGS, trials=st.integers(1, 3))
    def record_eval_source(self, tenant: str, lane: str, script: list[Any], rich: int = 0,
                           trials: int = 1) -> str:
        """run-states: a completed eval source; with several trials, several invocations
        of the agent (UQ1: every call of every invocation is derived)."""
        lane = self._lane(lane)
        script = self._rich(script, rich)
        suite, _, script, trials, _ = self._suite(tenant, script, source=True, trials=trials)
        self._may_move([tenant], script)
        r = self._session(tenant).create(eval_body(suite, agent_id=lane))
        if trials > 1:
            self._count("source:several-invocations")
        return self._recorded_source(tenant, "eval", lane, script, r, trials)

    def _rich(self, script: list[Any], rich: int) -> list[Any]:
        """The script with exact-args' `rich`-th recorded argument set beside every counter
        call's own (0: as drawn), so the variants of exact-args have something to change."""
        if not rich:
            return script
        self._drew("exact-args", f"recorded {rich - 1}")
        return [{**step, "args": classes.with_recorded(step["args"], rich - 1)}
                if step.get("call") == COUNTER and isinstance(step.get("args"), dict) else step
                for step in script]

    @precondition(lambda self: self.offer.fixture(AGENT_CALL))
    @rule(target=runs, tenant=tenants, lane=st.sampled_from(LANES), script=ANY_SCRIPTS,
          rich=RECORDED_ARGS)
    def record_workflow_source(self, tenant: str, lane: str, script: list[Any],
                               rich: int = 0) -> str:
        lane = self._lane(lane)
        script = self.offer.script(script) if type(self).extended else counter_only(script)
        script = self._rich(script, rich)
        self._may_move([tenant], script)
        r = self._session(tenant).workflow(AGENT_CALL, {"agentId": lane, "script": script})
        return self._recorded_source(tenant, "workflow", lane, script, r)

    def _recorded_source(self, tenant: str, kind: str, lane: str, script: list[Any],
                         r: Response, trials: int = 1) -> str:
        """Model a live source run the host just created, and count what it holds."""
        run_id = self._created_id(tenant, r, f"a {kind} source run")
        run = self._record(ModelRun(run_id, tenant, kind, lane, True, script=script))
        for _ in range(trials):
            self.model.run_live(tenant, lane, script, run.calls, run.invoked)
        if self.inside is None or not self._same_names:  # counts the model may not know
            self.model.take_in(tenant, run.calls, self._session(tenant).events(run_id))
            self._settled.add(run_id)
        self._count("source:" + kind)
        self._count_source(run)
        if self.narrate:
            note(f"{tenant} recorded {kind} source {run_id} on lane {lane}: {script}")
        return run_id

    def _count_source(self, run: ModelRun) -> None:
        if any("delegate" in s for s in run.script):
            self._count("source:delegates")
        if any(c.failed for c in run.calls):
            self._count("source:failed-call")
        if any(c.tool == VAULT for c in run.calls):
            self._count("source:credentialed")
        if run.agent in self.model.unheld_agents and any(c.agent == run.agent for c in run.calls):
            self._count("source:not-held")

    @precondition(lambda self: self.offer.fixture(WAIT_INPUT))
    @rule(target=runs, tenant=tenants, script=COUNTER_SCRIPTS)
    def record_waiting_run(self, tenant: str, script: list[Any]) -> str:
        self._may_move([tenant], script)
        r = self._session(tenant).workflow(WAIT_INPUT, {"agentId": RECORDER, "script": script})
        run_id = self._created_id(tenant, r, "a waiting run")
        run = self._record(ModelRun(run_id, tenant, "waiting", RECORDER, False, script=script))
        self.model.run_live(tenant, RECORDER, script, run.calls, run.invoked)
        if self.inside is None or not self._same_names:
            self.model.take_in(tenant, run.calls, self._session(tenant).events(run_id))
            self._settled.add(run_id)  # waiting for input, until it is resolved
        self._count("source:non-terminal")
        if self.narrate:
            note(f"{tenant} started waiting run {run_id}")
        return run_id

    @precondition(lambda self: self.offer.fixture(NOOP))
    @rule(target=runs, tenant=tenants)
    def record_noop_run(self, tenant: str) -> str:
        r = self._session(tenant).workflow(NOOP)
        run_id = self._created_id(tenant, r, "a noop run")
        self._record(ModelRun(run_id, tenant, "noop", None, True))
        self._count("source:no-agent")
        if self.narrate:
            note(f"{tenant} ran noop {run_id}")
        return run_id

    @precondition(lambda self: self._seam(SEAM_RESOLVE))
    @rule(run_id=runs)
    def resolve(self, run_id: str) -> None:
        run = self.model.runs[run_id]
        if run.deleted:
            return  # the host took it away: there is nothing to resolve
        path = "/conformance/seams" + run_path(run_id, ":resolve")
        self._may_move([run.tenant], run.script)
        self._settled.discard(run_id)  # a waiting run goes on
        r = self._checked(run.tenant, self.client.request("POST", path,
                                                          api_key=self.keys[run.tenant]))
        if r.status in (404, 405, 501) and not (isinstance(r.json, dict)
                                                and r.json.get("error") == "not_found"
                                                and self.inside is not None
                                                and not self.inside.rewrites_answers()):
            self._broke(SEAM_RESOLVE, r)
            return
        if run.kind == "waiting" and not run.terminal:
            judged(judges.answered(req_id("0252.non-terminal-refused"), r, 200, "resolving"))
            run.terminal = True
            self._state_moved(run_id)
            self._count("resolve")
        else:
            judged(judges.answered(req_id("0252.non-terminal-refused"), r, 409,
                                   "resolving a run that is not waiting"))

    @precondition(lambda self: self.offer.fixture(WAIT_INPUT))
    @rule(run_id=runs)
    def cancel(self, run_id: str) -> None:
        """run-states: a run waiting for input, cancelled by its owner after the agent's
        calls: terminal, so a usable source for its owner (§C asks only that it is
        terminal), and refused like no run for anyone else."""
        run = self.model.runs[run_id]
        if run.kind != "waiting" or run.terminal or run.deleted:
            return
        r = self._checked(run.tenant, self._session(run.tenant).request(
            "POST", run_path(run_id, "/cancel"), json={}))
        if r.status in (404, 405, 501):
            return  # no cancellation here: the run waits on
        judged(judges.answered(req_id("0252.source-refused"), r, 200,
                               "cancelling a run that waits for input"))
        run.terminal = True
        run.kind = "cancelled"
        self._state_moved(run_id)
        self._settled.discard(run_id)
        self._count("source:cancelled")
        self._drew("run-states", "cancelled-after-calls (caller)")
        if self.narrate:
            note(f"{run.tenant} cancelled {run_id}")

    @precondition(lambda self: self.offer.recorded)
    @rule(target=runs, state=RUN_STATES, foreign=st.booleans(), script=COUNTER_SCRIPTS,
          header=HEADERS)
    def name_state(self, state: str, foreign: bool, script: list[Any], header: str) -> Any:
        """run-states: a run of a state and kind §C tells apart, made by its owner, then
        named by its owner or by another tenant: taken exactly when §C calls it usable."""
        (member,) = [m for m in _class_data().run_states if m.name == state]
        owner = sorted(self.keys)[0] if not foreign else sorted(self.keys)[-1]
        caller = sorted(self.keys)[0]
        run_id = self._made(member.recipe, owner, script)
        if run_id is None:
            return multiple()
        self._drew("run-states", f"{state} ({'another-tenant' if foreign else 'caller'})")
        run = self.model.runs[run_id]
        if not foreign and member.usable is not False and run.terminal:
            self._count("state:" + member.recipe)
        self.replay(caller, run_id, run.agent or RECORDER, "same", 1, header)
        return run_id

    def _made(self, recipe: str, owner: str, script: list[Any]) -> str | None:
        """A run of `recipe` (specs/classes.yaml, run-states) made by `owner`, or None
        where the host does not list what it takes."""
        def fixture(name: str) -> bool:
            return self.offer.fixture(name)
        if recipe in ("eval", "trials", "erased", "eval-of-eval"):
            run_id = _str(self.record_eval_source(owner, RECORDER, script, 0,
                                             3 if recipe == "trials" else 1))
            if recipe == "erased":
                if not self._seam(SEAM_ERASE):
                    return None
                self.erase(run_id)
            if recipe == "eval-of-eval":
                made = self.replay(owner, run_id, RECORDER, "same", 1)
                return made if isinstance(made, str) else None
            return run_id
        if recipe == "workflow" and fixture(AGENT_CALL):
            return _str(self.record_workflow_source(owner, RECORDER, script, 0))
        if recipe == "unheld" and fixture(AGENT_CALL) and self.offer.lane(UNHELD):
            return _str(self.record_workflow_source(owner, UNHELD, script, 0))
        if recipe == "failed-call" and fixture(AGENT_CALL) and self.offer.lane(FLAKY):
            return _str(self.record_workflow_source(
                owner, RECORDER, [{"call": FLAKY, "args": {"mode": "error"}}, *script], 0))
        if recipe in ("waiting", "cancelled", "resolved") and fixture(WAIT_INPUT):
            run_id = _str(self.record_waiting_run(owner, script))
            if recipe == "cancelled":
                self.cancel(run_id)
            elif recipe == "resolved" and self._seam(SEAM_RESOLVE):
                self.resolve(run_id)
            return run_id
        if recipe == "noop" and fixture(NOOP):
            return _str(self.record_noop_run(owner))
        return None
