"""The machine's rules on the owner's routes, owner-routes (`OwnerRouteRules`): another
tenant, or a key of the owner's tenant scoped to another workspace, lists runs, asks for
a route that carries the run's owner, or sends again under the owner's Idempotency-Key.

A new rule that asks for a run as someone other than its owner goes here.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import multiple, precondition, rule

from refsim.check import classes, judges
from refsim.check.ids import req_id
from refsim.check.observe import REPLAY, SEAM_ERASE, SEAM_TENANTS, Session, eval_body
from refsim.domain.agents import RECORDER
from refsim.testing.machine.draws import IDEMPOTENT, LISTINGS, ROUTES, SPELLINGS, _class_data, _op
from refsim.testing.machine.state import MachineState
from refsim.testing.machine.verdicts import judged
from refsim.testing.model import ModelRun
from refsim.wire.client import NO_BODY

# The machine's bundles (`MachineState`'s), named as the rules below name them.
tenants, runs, evals = MachineState.tenants, MachineState.runs, MachineState.evals


class OwnerRouteRules(MachineState):
    """The rules on the owner's routes, mixed into `RecordedFixturesMachine`."""

    # -- other tenants on the owner's routes (owner-routes)

    @precondition(lambda self: self.offer.recorded and len(self.keys) > 1
                  and self.offer.surface.family("runList"))
    @rule(run_id=st.one_of(evals, runs), caller=tenants, listing=LISTINGS)
    def foreign_listing(self, run_id: str, caller: str, listing: str) -> None:
        """owner-routes: another tenant lists runs, filtered by the run's own workflowId or
        status or not at all: the listing answers, and never shows the owner's run (its id:
        the caller's own runs may hold like content)."""
        run = self.model.runs[run_id]
        chosen = [m for m in _class_data().listings if m.name == listing]
        if caller == run.tenant or run.deleted or not chosen:
            return
        self._settle(run_id)
        owned = self._checked(run.tenant, self._session(run.tenant).get_run(run_id)).json
        if not isinstance(owned, dict):
            return
        path = classes.listed(chosen[0], owned)
        self._drew("owner-routes", listing)
        r = self._checked(caller, self._session(caller).request("GET", path))
        judged(judges.nothing_of_run(req_id("0252.tenant-isolation"), r, run_id, [],
                                     f"{caller} lists runs ({listing}, {r.status}) beside "
                                     f"{run.tenant}'s run {run_id}"))

    def _ask_route(self, label: str, session: Session, run: ModelRun, chosen: classes.Route,
                   spelling: str, who: str) -> None:
        """`session` (another owner than the run's) asks the route under the spelling:
        refused with a registered code, nothing of the run in the answer, and the same
        status and code as for an id of the same shape that names no run."""
        data = _class_data()
        run_id, route = run.id, chosen.name
        path = classes.spelt(chosen, run_id, _op(data.spellings, spelling))
        body = chosen.body if chosen.body is not None else NO_BODY
        headers = dict(chosen.headers) or None
        r = self._checked(label, session.request(chosen.method, path, json=body,
                                                 headers=headers))
        what = f"{who}: {route}, the id {spelling}"
        for finding in judges.refused_registered(req_id("0252.tenant-isolation"), r, what):
            judged(finding)
        content = [v for c in run.calls for v in (c.args, c.outcome, c.error)
                   if isinstance(v, dict | list) and v]
        judged(judges.nothing_of_run(req_id("0252.tenant-isolation"), r, run_id, content, what))
        # Another owner's run reads as no run on this route too: the same route asked for
        # an id of the same shape that names no run gets the same status and code.
        control = classes.shifted(run_id)
        if control != run_id and control not in self.model.runs:
            asked = self._checked(label, session.request(
                chosen.method, classes.spelt(chosen, control, _op(data.spellings, spelling)),
                json=body, headers=headers))
            if judges.undecodable(asked) and not judges.undecodable(r):
                return  # the host reads the made-up id as no id at all (a checksum, say)
            judged(judges.uniform(req_id("0252.tenant-isolation"),
                                  [(f"{route} of {run.tenant}'s run", r),
                                   (f"{route} of an id of no run", asked)], exact=False))

    def _workspace_session(self, tenant: str) -> Session | None:
        """A key of `tenant` scoped to a workspace, minted once through the seam tenants
        (None where the host mints none): another owner triple of the same tenant."""
        if tenant not in self._workspaces:
            fresh = f"hk_ws_{tenant}_{self._fresh()}"
            r = self._checked(tenant, self._session(tenant).add_tenant(
                tenant, fresh, workspace="refsim-ws"))
            self._workspaces[tenant] = fresh if 200 <= r.status < 300 else None
        key = self._workspaces[tenant]
        return None if key is None else Session(self.client, key)

    def _refused_to_workspace(self, tenant: str, run_id: str, lane: str) -> Session | None:
        """The session of a key of `tenant` scoped to a workspace, where the host refuses it
        the tenant's usable run `run_id` as a source (it is another owner triple there);
        None where the host mints no such key, or takes the run (it reads it)."""
        if (lane != RECORDER or not self._seam(SEAM_TENANTS) or not self.offer.fixture(REPLAY)
                or self.model.usable(tenant, run_id, RECORDER) is None):
            return None
        session = self._workspace_session(tenant)
        if session is None:
            return None
        self._settle(run_id)
        asked = self._checked(tenant, session.create(eval_body(REPLAY, {"record": run_id})))
        return None if asked.status == 201 else session

    def _reused_by_workspace(self, owner: str, source_id: str, lane: str, run_id: str,
                             body: Any, key: dict[str, str]) -> None:
        """A key of the owner's tenant scoped to another workspace, refused the owner's
        source, sends the owner's body under the owner's Idempotency-Key: it is not
        answered with the owner's run."""
        session = self._refused_to_workspace(owner, source_id, lane)
        if session is None:
            return
        again = self._checked(owner, session.request("POST", "/runs", json=body, headers=key))
        judged(judges.nothing_of_run(req_id("0252.tenant-isolation"), again, run_id, [],
                                     f"a key of {owner} scoped to another workspace, under "
                                     "the owner's Idempotency-Key and body"))

    @precondition(lambda self: self.offer.recorded and self._seam(SEAM_TENANTS)
                  and self.offer.fixture(REPLAY))
    @rule(run_id=runs, route=ROUTES, spelling=SPELLINGS)
    def workspace_route(self, run_id: str, route: str, spelling: str) -> None:
        """owner-routes, within one tenant: a key of the run's tenant scoped to a workspace
        names the run (the owner's tenant-wide source) in an eval. Where the host refuses it
        that source (it cannot read it: another owner triple), the key asks the route and is
        answered as another tenant is; where the host takes it, it reads the run, and
        nothing is asked (the run it made is one of the owner's tenant)."""
        run = self.model.runs[run_id]
        data = _class_data()
        found = [r for r in data.routes if r.name == route]
        if (run.deleted or not found
                or (found[0].needs == "replay" and not self.offer.forks)
                or (found[0].needs == "seam:erase" and not self._seam(SEAM_ERASE))):
            return
        session = self._refused_to_workspace(run.tenant, run_id, run.agent or RECORDER)
        if session is None:
            return  # no such key here, or it reads its tenant's run: no other owner
        self._drew("owner-routes", f"{route} ({spelling}), another workspace")
        self._ask_route(run.tenant, session, run, found[0], spelling,
                        f"a key of {run.tenant} scoped to another workspace asks its run "
                        f"{run_id}")
        self._count("owner-route:workspace")

    @precondition(lambda self: self.offer.recorded and len(self.keys) > 1)
    @rule(run_id=st.one_of(evals, runs), caller=tenants, route=ROUTES, spelling=SPELLINGS)
    def foreign_route(self, run_id: str, caller: str, route: str, spelling: str) -> None:
        """owner-routes: another tenant asks a route that carries the run's owner, under a
        spelling of its id: refused with a registered code, nothing of the run in the
        answer (and the run as it was: a later step that reads it would tell)."""
        run = self.model.runs[run_id]
        if caller == run.tenant or run.deleted:
            return
        data = _class_data()
        (chosen,) = [r for r in data.routes if r.name == route]
        if chosen.needs == "replay" and not self.offer.forks:
            return
        if chosen.needs == "seam:erase" and not self._seam(SEAM_ERASE):
            return
        self._settle(run_id)
        self._drew("owner-routes", f"{route} ({spelling})")
        self._ask_route(caller, self._session(caller), run, chosen, spelling,
                        f"{caller} asks {run.tenant}'s run {run_id}")
        self._count("owner-route:" + route)

    @precondition(lambda self: self.offer.recorded)
    @rule(target=evals, source_id=runs, other=runs, how=IDEMPOTENT, caller=tenants)
    def idempotent_create(self, source_id: str, other: str, how: str, caller: str) -> Any:
        """owner-routes: a create under the owner's Idempotency-Key, asked again by another
        tenant with the owner's body, or by the owner with another source: never answered
        with the owner's run (a host may refuse the key's reuse, or judge the body as new)."""
        source = self.model.runs[source_id]
        owner = source.tenant
        spec = next(m for m in _class_data().idempotent if m["name"] == how)
        lane = source.agent or RECORDER
        if self.model.usable(owner, source_id, lane) is None:
            return multiple()
        suite, task, script, _, _ = self._suite(owner, source.script or [{"decide": "ok"}],
                                                source=False)
        key = {"Idempotency-Key": f"refsim-machine-{self._fresh()}"}
        body = eval_body(suite, {task: source_id}, agent_id=lane)
        self._drew("owner-routes", how)
        # The first create is a replay like any other: judged and modelled as one.
        run_id = self.replay(owner, source_id, lane, "same", 1, fixed=key)
        if not isinstance(run_id, str):
            return multiple()
        if spec["who"] == "another-workspace":
            self._reused_by_workspace(owner, source_id, lane, run_id, body, key)
        elif spec["who"] == "another-tenant":
            if caller == owner:
                return run_id
            self._suite(caller, source.script or [{"decide": "ok"}], source=False)
            self._may_move([caller], script)
            again = self._checked(caller, self._session(caller).request(
                "POST", "/runs", json=body, headers=key))
            self._refused_unusable(caller, again, [source_id], "foreign",
                                   lambda v: eval_body(suite, {task: v}, agent_id=lane),
                                   header="idempotency-key")
        else:
            value: Any = other if spec["body"] == "other-source" else None
            if value is not None and (value == source_id
                                      or self.model.usable(owner, value, lane) is not None):
                return run_id  # a usable other source may rightly run: not this case
            changed = (eval_body(suite, {task: value}, agent_id=lane) if value is not None
                       else eval_body(suite, agent_id=lane))
            self._may_move([owner], script)
            again = self._checked(owner, self._session(owner).request(
                "POST", "/runs", json=changed, headers=key))
            same_run = (isinstance(again.json, dict) and again.json.get("runId") == run_id)
            answered = f"with the first run {run_id}" if same_run else "apart"
            judged(judges.done(req_id("0252.source-refused"), not same_run,
                               f"the owner's Idempotency-Key with another body ({how}) is "
                               f"answered {answered}"))
            if value is None and again.status == 201 and isinstance(again.json, dict):
                new = self._record(ModelRun(str(again.json["runId"]), owner, "eval", lane, True,
                                            script=script))
                self.model.run_live(owner, lane, script, new.calls, new.invoked)
            elif value is not None:
                judged(judges.refused_registered_any(
                    req_id("0252.source-refused"), again,
                    f"the owner's Idempotency-Key with an unusable source ({how})"))
        self._count("idempotent:" + how)
        return run_id
