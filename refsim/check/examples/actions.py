"""The example table's action kinds: one `ActionKind` class each, with its arguments, what
it sends and the status that means it succeeded, all listed in `ACTIONS`.

Part of `refsim.check.examples` (import the table from there). A new action is one class
here, listed in `ACTIONS`, and its test; what it may ask of the row being run is
`RowContext` (a `RowRun`, `refsim.check.examples.run`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

from refsim.check import judges
from refsim.check.findings import Disposition, Finding
from refsim.check.observe import RECORDER, Session, Unobservable, eval_body, run_path
from refsim.domain.ids import project
from refsim.wire.response import Response

# `$NAME` in an `http` action's path: that run's projected id (checked at load).
_PATH_REF_RE = re.compile(r"\$([A-Za-z][A-Za-z0-9_-]*)")


class RowContext(Protocol):
    """What an action may ask of the row being run (a `RowRun`)."""

    tag: str
    tenant_names: dict[str, str]

    def subst(self, value: Any) -> Any: ...

    def suite_ref(self, tenant: str, suite: str) -> str: ...

    def learn_tenant(self, label: str) -> str: ...


class ActionKind:
    """One kind of action of a row, in setup or as a request: its arguments, what it sends,
    and the status that means it succeeded. Subclasses set the class attributes and `send`."""

    name: ClassVar[str]
    doc: ClassVar[str]  # what it sends, in a sentence
    required: ClassVar[frozenset[str]]
    optional: ClassVar[frozenset[str]] = frozenset({"key"})
    success: ClassVar[int | None] = 201  # None: any 2xx
    shorthand: ClassVar[str | None] = None  # a bare scalar means {shorthand: value}
    creates_run: ClassVar[bool] = False

    def send(self, run: RowContext, session: Session, tenant: str,
             args: dict[str, Any]) -> Response:
        raise NotImplementedError(self.name)

    def judge_setup(self, req: str, response: Response, what: str) -> Finding:
        """Whether the setup step answered as the row needs (to go on)."""
        return judges.succeeded(req, response, self.success, what)


class RegisterSuite(ActionKind):
    name = "register_suite"
    doc = ("makes a suite available to the tenant: a catalog suite where discovery lists it "
           "in `fixtures`, else through the seam POST /conformance/seams/eval-suites; a "
           "row-local suite document through the seam only (`NAME` or `{suite, key}`)")
    required = frozenset({"suite"})
    shorthand = "suite"


class CreateEval(ActionKind):
    name = "create_eval"
    doc = ("POST /runs of an eval: `suite` is a `suites` name, a fixture id or a suiteId; "
           "`agent` defaults to conformance.eval:recorder; `fixture_runs` is the fixtureRuns "
           "map and `eval_modes` the evalModes list; `extra` is merged into the body "
           "(baselineRunId, say)")
    required = frozenset({"suite"})
    optional = frozenset({"agent", "fixture_runs", "eval_modes", "extra", "key", "as"})
    creates_run = True

    def send(self, run: RowContext, session: Session, tenant: str,
             args: dict[str, Any]) -> Response:
        body = eval_body(run.suite_ref(tenant, args["suite"]), args.get("fixture_runs"),
                         agent_id=args.get("agent", RECORDER))
        if "eval_modes" in args:
            body["evalModes"] = args["eval_modes"]
        body.update(args.get("extra", {}))
        return session.create(body)


class CreateWorkflow(ActionKind):
    name = "create_workflow"
    doc = ("POST /runs of a workflow: `inputs` and `fixture_runs` become its inputs and "
           "fixtureRuns; `extra` is merged into the body")
    required = frozenset({"workflow"})
    optional = frozenset({"inputs", "fixture_runs", "extra", "key", "as"})
    creates_run = True

    def send(self, run: RowContext, session: Session, tenant: str,
             args: dict[str, Any]) -> Response:
        body = {"workflowId": args["workflow"]}
        for name, field in (("inputs", "inputs"), ("fixture_runs", "fixtureRuns")):
            if name in args:
                body[field] = args[name]
        body.update(args.get("extra", {}))
        return session.create(body)


class ForkRun(ActionKind):
    name = "fork"
    doc = "POST /runs/{RUN}:fork with `mode` (replay or branch), `body` merged in"
    required = frozenset({"run", "mode"})
    optional = frozenset({"body", "key", "as"})
    creates_run = True

    def send(self, run: RowContext, session: Session, tenant: str,
             args: dict[str, Any]) -> Response:
        return session.request("POST", run_path(args["run"], ":fork"),
                               json={"mode": args["mode"], **args.get("body", {})})


class CancelRun(ActionKind):
    name = "cancel"
    doc = "POST /runs/{RUN}/cancel (`RUN` or `{run, key}`)"
    required = frozenset({"run"})
    success = 200
    shorthand = "run"

    def send(self, run: RowContext, session: Session, tenant: str,
             args: dict[str, Any]) -> Response:
        return session.request("POST", run_path(args["run"], "/cancel"), json={})


class EraseRun(ActionKind):
    name = "erase"
    doc = "the seam POST /conformance/seams/runs/{RUN}:erase (`RUN` or `{run, key}`)"
    required = frozenset({"run"})
    success = 200
    shorthand = "run"

    def send(self, run: RowContext, session: Session, tenant: str,
             args: dict[str, Any]) -> Response:
        return session.require_erase(args["run"])


class ResolveRun(ActionKind):
    name = "resolve"
    doc = ("the seam POST /conformance/seams/runs/{RUN}:resolve: a run waiting for input "
           "goes on (`RUN` or `{run, key}`)")
    required = frozenset({"run"})
    success = 200
    shorthand = "run"

    def send(self, run: RowContext, session: Session, tenant: str,
             args: dict[str, Any]) -> Response:
        return session.require_resolve(args["run"])


class AddTenant(ActionKind):
    name = "add_tenant"
    doc = ("the seam POST /conformance/seams/tenants: a tenant the row calls `as`, by the "
           "name this host gives `name`, with the key `api_key` (made new to every run of "
           "the row) and an optional `workspace`")
    required = frozenset({"as", "name", "api_key"})
    optional = frozenset({"workspace"})

    def send(self, run: RowContext, session: Session, tenant: str,
             args: dict[str, Any]) -> Response:
        # The tenant is the one the row names, by the name this host gives it (learnt
        # from a run of its, if none is yet).
        name = run.tenant_names.get(args["name"]) or run.learn_tenant(args["name"])
        return session.require_tenant(name, f"{args['api_key']}-{run.tag}",
                                      args.get("workspace"))


class Unreadable(ActionKind):
    name = "unreadable"
    doc = ("GET /runs/{RUN} as `key`: the row stands on a run that key cannot read. Which "
           "runs an owner triple can read is the host's (RFC 0252 §C does not say), so where "
           "the key reads it (2xx) the row is inapplicable, with that reason")
    required = frozenset({"run"})
    shorthand = "run"

    def send(self, run: RowContext, session: Session, tenant: str,
             args: dict[str, Any]) -> Response:
        return session.get_run(args["run"])

    def judge_setup(self, req: str, response: Response, what: str) -> Finding:
        if 200 <= response.status < 300:
            raise Unobservable(f"{what}: this key reads the run (answered "
                               f"{response.status}): the host's owner policy lets it, and "
                               "the row asks for one that does not", Disposition.INAPPLICABLE)
        return judges.done(req, response.status >= 400,
                           f"{what}: the key cannot read the run (answered {response.status})")


class HttpRequest(ActionKind):
    name = "http"
    doc = ("any request: `method` (POST by default) to `path` with `body`; `$NAME` in the "
           "path becomes that run's projected id")
    required = frozenset({"path"})
    optional = frozenset({"method", "body", "key", "as"})
    success = None
    creates_run = True

    def send(self, run: RowContext, session: Session, tenant: str,
             args: dict[str, Any]) -> Response:
        path = _PATH_REF_RE.sub(lambda m: project(run.subst("$" + m.group(1))), args["path"])
        method = args.get("method", "POST")
        if "body" in args:
            return session.request(method, path, json=args["body"])
        return session.request(method, path)


ACTIONS: Mapping[str, ActionKind] = {kind.name: kind() for kind in (
    RegisterSuite, CreateEval, CreateWorkflow, ForkRun, CancelRun, EraseRun, ResolveRun,
    AddTenant, Unreadable, HttpRequest)}
