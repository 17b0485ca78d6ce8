"""The RFC 0252 example table as data (`specs/examples/*.yaml`) and the runner that executes it.

Each row runs on a fresh host built for its profile, and is judged into one report `Row`.
The vocabulary documents itself: the file and row keys (`TOP_KEYS`, `ROW_KEYS`,
`REQUEST_KEYS`, each with what it means), the actions (the `ActionKind` classes here) and
the expectations (the `Expectation` classes of `refsim.check.expectations`). `refsim doc`
renders them as "The example vocabulary" in specs/REFERENCE.md, the one manual of it.
An unknown key anywhere is a `ValueError` naming the file and the row.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs

from refsim.check import judges
from refsim.check.differential import noise_of_host
from refsim.check.expectations import EXPECTATIONS, Invalid, names_needing_run
from refsim.check.findings import Disposition, Finding, Row, check_raised
from refsim.check.observe import (
    COUNTER_TOOL,
    KEYS,
    RECORDER,
    Inspector,
    Observed,
    Session,
    Surface,
    Unobservable,
    eval_body,
    gate,
    inspector_of,
    nonce,
    run_path,
)
from refsim.check.registry import load_registry
from refsim.data import paths, yaml_data
from refsim.domain.ids import parse_bound, project
from refsim.domain.profile import PROFILES
from refsim.wire import catalog, schemas
from refsim.wire.client import HostClient
from refsim.wire.render import agents_family
from refsim.wire.response import Response
from refsim.wire.trace import segment

SCENARIO = "rfc-0252-examples"
DEFAULT_DIRECTORY = paths.SPECS / "examples"
DEFAULT_TENANTS: Mapping[str, str] = KEYS

ID_RE = {"rfc": re.compile(r"^rfc-0252\.example-[1-9][0-9]*$"),
         "refsim": re.compile(r"^refsim\.example\.0252\.[a-z0-9][a-z0-9-]*$")}
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_PATH_REF_RE = re.compile(r"\$([A-Za-z][A-Za-z0-9_-]*)")


# ------------------------------------------------------------------------------ case objects


@attrs.frozen
class Action:
    """One step: `kind` (a key of ACTIONS) and its arguments, normalised at load."""

    kind: str
    args: Mapping[str, Any] = attrs.field(hash=False)

    @property
    def tenant(self) -> str:
        return str(self.args.get("key", "acme"))

    @property
    def capture(self) -> str | None:
        name = self.args.get("as")
        return str(name) if name is not None else None


@attrs.frozen
class Expected:
    name: str
    value: Any = attrs.field(hash=False)


@attrs.frozen
class RowRequest:
    label: str
    action: Action
    expect: tuple[Expected, ...]


@attrs.frozen
class Example:
    """One row of the table, validated: every name it uses is defined before it is used."""

    id: str
    source: str
    requirement_id: str
    title: str
    profile: str | None  # None: the target's profile, gated on recordedFixtures
    setup: tuple[Action, ...]
    requests: tuple[RowRequest, ...]
    file: str = attrs.field(default="", eq=False)
    # What the host must advertise for the row to say anything of it (`requires:`, and
    # what the row's own requests imply: evalModes and baselineRunId need
    # baselineSelection, a fork the replay family).
    requires: tuple[str, ...] = attrs.field(default=(), eq=False)
    # What the row's claim needs the host NOT to advertise (`withholds:`): it judges a host
    # without these members, so a host that advertises one gets an inapplicable row. In
    # process it runs on its `profile`, which withholds them; over HTTP on the host itself.
    withholds: tuple[str, ...] = attrs.field(default=(), eq=False)
    # Every live-counter key the row's scripts and suites name.
    counter_keys: tuple[str, ...] = attrs.field(default=(), eq=False)
    # `every_host:` the row is judged on every host, whatever it advertises.
    every_host: bool = attrs.field(default=False, eq=False)

    @property
    def actions(self) -> tuple[Action, ...]:
        return (*self.setup, *(r.action for r in self.requests))

    @property
    def expectation_names(self) -> set[str]:
        return {e.name for r in self.requests for e in r.expect}

    def unmet(self, surface: Surface) -> list[str]:
        """What the row requires that the host does not advertise."""
        out = []
        for name in self.requires:
            if name in FAMILIES and not surface.family(name):
                out.append(f"the {name} family")
            elif name in FACET_MEMBERS and not surface.advertises(name):
                out.append(f"agents.evalSuite.{name}")
        return out

    def advertised_against(self, surface: Surface) -> list[str]:
        """What the host advertises that the row's claim needs withheld."""
        return [f"agents.evalSuite.{name}" for name in self.withholds
                if surface.advertises(name)]

    def fixtures(self) -> set[str]:
        """The catalog fixtures the row runs beside its suites: the workflows it starts and
        the agents and tools its requests and its suites name (the recorder and the counter
        come with the three conformance fixtures)."""
        needed = catalog.needs([a.args for a in self.actions])
        for action in self.actions:
            if action.kind == "create_workflow":
                needed.add(str(action.args["workflow"]))
            elif (action.kind in ("register_suite", "create_eval")
                    and isinstance(action.args.get("suite"), str)):
                needed |= catalog.suite_needs(str(action.args["suite"]))
        return needed

    def needs_inside(self) -> str | None:
        """Why the row can only run in process (None when the wire can witness it): it pins
        a profile of the built-in host, the requirement it witnesses is one no outside
        party can observe (its witness class is unwitnessable), or every claim it makes
        needs the inside."""
        if self.profile is not None and not self.withholds:
            return (f"it states a fact about the {self.profile!r} profile of the built-in "
                    "host, which a host behind HTTP cannot be switched to")
        registry = load_registry()
        requirement = (registry.requirement(self.requirement_id)
            if self.requirement_id in registry else None)
        if requirement is not None and requirement.witness == "unwitnessable":
            return (f"its requirement ({requirement.short}) is unwitnessable from outside: "
                    "what it claims never reaches the wire, so only the simulator's inside "
                    "can observe it")
        claims = self.expectation_names - {"status", "error"}
        blind = sorted(n for n in claims if not EXPECTATIONS[n].observable_outside)
        if claims and len(blind) == len(claims):
            return ("every claim it makes reads the simulator's inside (" + ", ".join(blind)
                    + ")")
        return None

    def wire_claims_beside_the_inside(self) -> bool:
        """Whether the row, listed apart over HTTP only because its requirement is
        unwitnessable, also makes claims the wire can witness (besides status and error)."""
        if self.profile is not None and not self.withholds:
            return False
        claims = self.expectation_names - {"status", "error"}
        return any(EXPECTATIONS[n].observable_outside for n in claims)

    def live_keys(self) -> set[str]:
        """Every live-counter key a step of the row can move: those its scripts name and
        those of the catalog suites it runs."""
        keys = set(self.counter_keys)
        for action in self.actions:
            suite = action.args.get("suite")
            if isinstance(suite, str) and catalog.is_suite(suite):
                keys.update(_counter_keys(catalog.suite(suite)))
        return keys

    def tenants_missing(self, keys: Iterable[str]) -> list[str]:
        """The tenants the row acts as that have no key among `keys` (those it adds through
        the tenant seam aside)."""
        return sorted({a.tenant for a in self.actions} - set(keys)
                      - {a.capture for a in self.actions if a.kind == "add_tenant"})

    def matches(self, prefix: str | None) -> bool:
        """`prefix` is a substring of the short requirement id or of the example id."""
        if not prefix:
            return True
        short = _short(prefix)
        return short in _short(self.requirement_id) or short in self.id


def _short(text: str) -> str:
    for head in ("openwop.requirement.", "refsim.requirement."):
        if text.startswith(head):
            return text[len(head):]
    return text


# ------------------------------------------------------------------------------ the vocabulary


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

    def send(self, run: RowRun, session: Session, tenant: str,
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
    # Not sent as a request: the row run registers it (`RowRun.register`).


class CreateEval(ActionKind):
    name = "create_eval"
    doc = ("POST /runs of an eval: `suite` is a `suites` name, a fixture id or a suiteId; "
           "`agent` defaults to conformance.eval:recorder; `fixture_runs` is the fixtureRuns "
           "map and `eval_modes` the evalModes list; `extra` is merged into the body "
           "(baselineRunId, say)")
    required = frozenset({"suite"})
    optional = frozenset({"agent", "fixture_runs", "eval_modes", "extra", "key", "as"})
    creates_run = True

    def send(self, run: RowRun, session: Session, tenant: str,
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

    def send(self, run: RowRun, session: Session, tenant: str,
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

    def send(self, run: RowRun, session: Session, tenant: str,
             args: dict[str, Any]) -> Response:
        return session.request("POST", run_path(args["run"], ":fork"),
                               json={"mode": args["mode"], **args.get("body", {})})


class CancelRun(ActionKind):
    name = "cancel"
    doc = "POST /runs/{RUN}/cancel (`RUN` or `{run, key}`)"
    required = frozenset({"run"})
    success = 200
    shorthand = "run"

    def send(self, run: RowRun, session: Session, tenant: str,
             args: dict[str, Any]) -> Response:
        return session.request("POST", run_path(args["run"], "/cancel"), json={})


class EraseRun(ActionKind):
    name = "erase"
    doc = "the seam POST /conformance/seams/runs/{RUN}:erase (`RUN` or `{run, key}`)"
    required = frozenset({"run"})
    success = 200
    shorthand = "run"

    def send(self, run: RowRun, session: Session, tenant: str,
             args: dict[str, Any]) -> Response:
        return session.require_erase(args["run"])


class ResolveRun(ActionKind):
    name = "resolve"
    doc = ("the seam POST /conformance/seams/runs/{RUN}:resolve: a run waiting for input "
           "goes on (`RUN` or `{run, key}`)")
    required = frozenset({"run"})
    success = 200
    shorthand = "run"

    def send(self, run: RowRun, session: Session, tenant: str,
             args: dict[str, Any]) -> Response:
        return session.require_resolve(args["run"])


class AddTenant(ActionKind):
    name = "add_tenant"
    doc = ("the seam POST /conformance/seams/tenants: a tenant the row calls `as`, by the "
           "name this host gives `name`, with the key `api_key` (made new to every run of "
           "the row) and an optional `workspace`")
    required = frozenset({"as", "name", "api_key"})
    optional = frozenset({"workspace"})

    def send(self, run: RowRun, session: Session, tenant: str,
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

    def send(self, run: RowRun, session: Session, tenant: str,
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

    def send(self, run: RowRun, session: Session, tenant: str,
             args: dict[str, Any]) -> Response:
        path = _PATH_REF_RE.sub(lambda m: project(run.subst("$" + m.group(1))), args["path"])
        method = args.get("method", "POST")
        if "body" in args:
            return session.request(method, path, json=args["body"])
        return session.request(method, path)


ACTIONS: Mapping[str, ActionKind] = {kind.name: kind() for kind in (
    RegisterSuite, CreateEval, CreateWorkflow, ForkRun, CancelRun, EraseRun, ResolveRun,
    AddTenant, Unreadable, HttpRequest)}
# Each key of a file, a row and a request, with what it means (REFERENCE.md shows these).
TOP_KEYS: Mapping[str, str] = {
    "examples": "the rows (required, a list)",
    "suites": "name -> a suite of the conformance fixture catalog (its fixture id, "
              "specs/fixtures/) or a row-local eval-suite document; `register_suite: NAME` "
              "makes it available, `create_eval: {suite: NAME}` names it",
    "definitions": "free-form, ignored by the runner: a home for YAML anchors "
                   "(`&refund-script`) that rows and suites reuse (`*refund-script`)",
}
ROW_KEYS: Mapping[str, str] = {
    "id": "`rfc-0252.example-N` (`source: rfc`) or `refsim.example.0252.<slug>` "
          "(`source: refsim`)",
    "source": "`rfc` (a row of the RFC's own table) or `refsim`",
    "requirement_id": "the id of specs/requirements.yaml the row's report row is filed under",
    "title": "what the row shows, in a line",
    "profile": "a host profile (`refsim.domain.profile.PROFILES`): the row states a fact "
               "about that kind of host and always runs on it (over HTTP it is listed "
               "apart). Without one the row runs on the target's profile, and is "
               "inapplicable where the host does not advertise "
               "agents.evalSuite.recordedFixtures, as the conformance scenario is gated",
    "requires": "facet members (fixtureErrors, baselineSelection, fixtureMatching) or "
                "capability families (replay, runList) the row needs advertised: "
                "inapplicable where they are not",
    "withholds": "facet members the row's claim needs the host NOT to advertise (with a "
                 "`profile` that withholds them, to run on in process); over HTTP the row "
                 "judges a host that withholds them too, and is inapplicable on one that "
                 "advertises one",
    "every_host": "`true`: the row judges every host, whatever it advertises (a claim about "
                  "discovery itself, such as what recordedFixtures implies), so it is never "
                  "inapplicable for want of recordedFixtures",
    "setup": "a list of actions; each must succeed (its action's status) or the row fails "
             "there: every success is a positive-control finding of the row",
    "request": "one action, judged by `expect` (labelled `request`)",
    "expect": "the expectations of `request`; every request states `status`",
    "requests": "a list of `{label, <action>, expect}`, judged in order. In any action, "
                "`key` names the calling tenant (`acme` by default, `globex`, or an "
                "`add_tenant` label); `as: NAME` captures the id of the run it created, "
                "and afterwards `\"$NAME\"` stands for that id anywhere in an action or "
                "an expectation (`\"$$x\"` is the literal `\"$x\"`). RUN is a captured "
                "name (with or without `$`) or a literal id containing `/`",
}
REQUEST_KEYS: Mapping[str, str] = {
    "label": "the request's name, which later expectations refer to (`identical_to: L`)",
    "expect": "its expectations",
}
# What a row may require of the host, beside recordedFixtures (the gate): a member of the
# agents.evalSuite facet, or a capability family at the discovery root.
FACET_MEMBERS = frozenset({"fixtureErrors", "baselineSelection", "fixtureMatching"})
FAMILIES = frozenset({"replay", "runList"})
# Expectations that read the run the request created: its events or its summary.
_NEEDS_RUN = names_needing_run()


_Invalid = Invalid

# ------------------------------------------------------------------------------ loading


def load_examples(directory: Path = DEFAULT_DIRECTORY) -> list[Example]:
    """Every row of every `*.yaml` in `directory`, validated, in file then row order.

    Parsed once per state of the files (name, size, mtime): rows are frozen values, and one
    `refsim check` asks for them from several drivers."""
    files = sorted(Path(directory).glob("*.yaml"))
    stamp = tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    return list(_load_examples(str(directory), stamp))


@functools.lru_cache(maxsize=16)
def _load_examples(directory: str, stamp: tuple[tuple[str, int, int], ...]
                   ) -> tuple[Example, ...]:
    out: list[Example] = []
    seen: dict[str, str] = {}
    # The RFC's own table first, then the rest, each file in name order.
    files = sorted(Path(directory).glob("*.yaml"),
                   key=lambda f: (not f.name.startswith("rfc-"), f.name))
    for file in files:
        for example in load_file(file):
            if example.id in seen:
                raise ValueError(f"{file}: row {example.id}: the id is also used in "
                                 f"{seen[example.id]}")
            seen[example.id] = str(file)
            out.append(example)
    return tuple(out)


def load_file(file: Path) -> list[Example]:
    try:
        data = yaml_data.load(Path(file).read_text(encoding="utf-8"))
    except Exception as exc:
        if not yaml_data.is_error(exc):
            raise
        raise ValueError(f"{file}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{file}: the top level must be a mapping with `examples:`")
    unknown = sorted(set(map(str, data)) - TOP_KEYS.keys())
    if unknown:
        raise ValueError(f"{file}: unknown top-level key(s) {unknown}; expected "
                         + ", ".join(sorted(TOP_KEYS)))
    suites = data.get("suites") or {}
    if not isinstance(suites, dict):
        raise ValueError(f"{file}: `suites:` must map names to catalog suites or eval-suite "
                         "documents")
    for name, doc in suites.items():
        if isinstance(doc, str):
            if not catalog.is_suite(doc):
                raise ValueError(f"{file}: suite {name!r} names {doc!r}, which is no suite "
                                 "of the fixture catalog (specs/fixtures/)")
            continue
        problems = schemas.issues("eval-suite.schema.json", doc)
        if problems:
            raise ValueError(f"{file}: suite {name!r} is not a valid eval suite: "
                             + "; ".join(map(str, problems[:5])))
    rows = data.get("examples")
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"{file}: `examples:` must be a non-empty list of rows")
    out = []
    ids: set[str] = set()
    for index, raw in enumerate(rows):
        row_id = raw.get("id") if isinstance(raw, dict) else None
        where = f"row {row_id}" if isinstance(row_id, str) else f"row #{index + 1}"
        try:
            example = _RowParser(str(file), suites).parse(raw)
        except _Invalid as exc:
            raise ValueError(f"{file}: {where}: {exc}") from None
        if example.id in ids:
            raise ValueError(f"{file}: {where}: duplicate row id")
        ids.add(example.id)
        out.append(example)
    return out


@attrs.define
class _RowParser:
    file: str
    suites: Mapping[str, Any]
    runs: set[str] = attrs.Factory(set)
    tenants: set[str] = attrs.Factory(lambda: set(DEFAULT_TENANTS))
    labels: list[str] = attrs.Factory(list)
    registered: set[str] = attrs.Factory(set)

    def parse(self, raw: Any) -> Example:
        if not isinstance(raw, dict):
            raise _Invalid("a row must be a mapping")
        unknown = sorted(set(map(str, raw)) - ROW_KEYS.keys())
        if unknown:
            raise _Invalid(f"unknown row key(s) {unknown}; expected "
                           + ", ".join(sorted(ROW_KEYS)))
        source = self._text(raw, "source")
        if source not in ID_RE:
            raise _Invalid(f"source must be one of {sorted(ID_RE)}, got {source!r}")
        row_id = self._text(raw, "id")
        if not ID_RE[source].match(row_id):
            raise _Invalid(f"id {row_id!r} does not follow the {source} form "
                           f"{ID_RE[source].pattern}")
        requirement = self._text(raw, "requirement_id")
        if requirement not in load_registry().ids:
            raise _Invalid(f"requirement_id {requirement!r} is not in the requirement "
                           "registry (specs/requirements.yaml)")
        title = self._text(raw, "title")
        profile = raw.get("profile")
        if profile is not None and (not isinstance(profile, str) or profile not in PROFILES):
            raise _Invalid(f"unknown profile {profile!r}; known: {', '.join(sorted(PROFILES))}")
        requires = raw.get("requires") or []
        if not isinstance(requires, list) or any(r not in FACET_MEMBERS | FAMILIES
                                                 for r in requires):
            raise _Invalid(f"requires must list some of {sorted(FACET_MEMBERS | FAMILIES)}, "
                           f"got {requires!r}")
        withholds = raw.get("withholds") or []
        if not isinstance(withholds, list) or any(w not in FACET_MEMBERS for w in withholds):
            raise _Invalid(f"withholds must list some of {sorted(FACET_MEMBERS)}, "
                           f"got {withholds!r}")
        if withholds and (profile is None or set(withholds) & set(
                (agents_family(PROFILES[profile]) or {}).get("evalSuite", {}))):
            raise _Invalid("a row that withholds members names a profile without them, to "
                           "run on in process")
        every_host = raw.get("every_host", False)
        if not isinstance(every_host, bool):
            raise _Invalid(f"every_host must be true or false, got {every_host!r}")
        if every_host and (profile is not None or requires or withholds):
            raise _Invalid("a row judged on every host names no profile, requires nothing "
                           "and withholds nothing")
        setup_raw = raw.get("setup") or []
        if not isinstance(setup_raw, list):
            raise _Invalid("setup must be a list of actions")
        setup = tuple(self._action(step, f"setup[{i + 1}]") for i, step in enumerate(setup_raw))
        if "requests" in raw:
            if "request" in raw or "expect" in raw:
                raise _Invalid("use either `request` + `expect` or `requests`, not both")
            listed = raw["requests"]
            if not isinstance(listed, list) or not listed:
                raise _Invalid("requests must be a non-empty list")
            requests = tuple(self._request(r, f"requests[{i + 1}]") for i, r in enumerate(listed))
        elif "request" in raw:
            single = raw["request"]
            if not isinstance(single, dict):
                raise _Invalid("request must be a mapping with one action")
            if "label" in single or "expect" in single:
                raise _Invalid("with `request`, put `expect` beside it, not inside it")
            requests = (self._request({"label": "request", **single,
                                       "expect": raw.get("expect")}, "request"),)
        else:
            raise _Invalid("a row needs `request` + `expect` or `requests`")
        keys = sorted(set(_counter_keys(raw)) | {k for a in setup for k in _counter_keys(a.args)}
                      | {k for r in requests for k in _counter_keys(r.action.args)})
        implied = set(requires)
        for action in (*setup, *(r.action for r in requests)):
            if action.kind == "fork":
                implied.add("replay")
            if "eval_modes" in action.args or "baselineRunId" in (action.args.get("extra")
                                                                   or {}):
                implied.add("baselineSelection")
        return Example(row_id, source, requirement, title, profile, setup, requests,
                       file=self.file, counter_keys=tuple(keys),
                       requires=tuple(sorted(implied)), withholds=tuple(withholds),
                       every_host=every_host)

    # -- pieces

    @staticmethod
    def _text(raw: Mapping[str, Any], key: str) -> str:
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip():
            raise _Invalid(f"`{key}` must be a non-empty string, got {value!r}")
        return value

    def _request(self, raw: Any, where: str) -> RowRequest:
        if not isinstance(raw, dict):
            raise _Invalid(f"{where}: a request must be a mapping")
        label = raw.get("label")
        if not isinstance(label, str) or not NAME_RE.match(label):
            raise _Invalid(f"{where}: label must be a name like `unknown-id`, got {label!r}")
        if label in self.labels:
            raise _Invalid(f"{where}: label {label!r} is used twice")
        where = f"request {label}"
        action_part = {k: v for k, v in raw.items() if k not in REQUEST_KEYS}
        action = self._action(action_part, where)
        expect = raw.get("expect")
        if not isinstance(expect, dict) or not expect:
            raise _Invalid(f"{where}: `expect` must be a non-empty mapping")
        expectations = tuple(self._expectation(action, str(k), v, where)
                             for k, v in expect.items())
        names = {e.name for e in expectations}
        if "status" not in names:
            raise _Invalid(f"{where}: every request states the `status` it expects")
        status = next(e.value for e in expectations if e.name == "status")
        if "error" in names and (status == "4xx" or status < 400):
            raise _Invalid(f"{where}: `error` needs a refusal status (>= 400), not {status}")
        needs_run = sorted(names & _NEEDS_RUN)
        if needs_run and (status != 201 or not ACTIONS[action.kind].creates_run):
            raise _Invalid(f"{where}: {needs_run} read the run the request creates, so the "
                           "action must create one and `status` must be 201")
        self.labels.append(label)
        return RowRequest(label, action, expectations)

    def _action(self, raw: Any, where: str) -> Action:
        if not isinstance(raw, dict) or len(raw) != 1:
            keys = sorted(map(str, raw)) if isinstance(raw, dict) else raw
            raise _Invalid(f"{where}: an action is a mapping with exactly one of "
                           f"{', '.join(ACTIONS)}; got {keys!r}")
        ((kind, value),) = raw.items()
        spec = ACTIONS.get(str(kind))
        if spec is None:
            raise _Invalid(f"{where}: unknown action {kind!r}; expected one of "
                           + ", ".join(ACTIONS))
        kind = str(kind)
        where = f"{where} ({kind})"
        if not isinstance(value, dict):
            if spec.shorthand is None:
                raise _Invalid(f"{where}: the arguments must be a mapping")
            value = {spec.shorthand: value}
        args = dict(value)
        unknown = sorted(set(map(str, args)) - spec.required - spec.optional)
        if unknown:
            raise _Invalid(f"{where}: unknown argument(s) {unknown}; expected "
                           + ", ".join(sorted(spec.required | spec.optional)))
        missing = sorted(spec.required - set(args))
        if missing:
            raise _Invalid(f"{where}: missing argument(s) {missing}")
        key = args.get("key", "acme")
        if not isinstance(key, str) or key not in self.tenants:
            raise _Invalid(f"{where}: key {key!r} names no tenant; known: "
                           + ", ".join(sorted(self.tenants)))
        refine = _REFINE.get(kind)
        if refine is not None:
            args = refine(self, args, where)
        if "run" in args:
            args["run"] = self._run_ref(args["run"], where)
        if kind != "register_suite":  # a suite document is data: no $names in it
            self._check_refs(args, where)
        for name in ("fixture_runs", "inputs", "extra", "body"):
            if name in args and not isinstance(args[name], dict):
                raise _Invalid(f"{where}: `{name}` must be a mapping")
        capture = args.get("as")
        if capture is not None:
            if kind != "add_tenant" and not spec.creates_run:
                raise _Invalid(f"{where}: `as` captures a created run; {kind} creates none")
            if not isinstance(capture, str) or not NAME_RE.match(capture):
                raise _Invalid(f"{where}: `as` must be a name like `src`, got {capture!r}")
            if capture in self.runs or capture in self.tenants:
                raise _Invalid(f"{where}: the name {capture!r} is already taken")
            (self.tenants if kind == "add_tenant" else self.runs).add(capture)
        return Action(kind, args)

    def _args_register_suite(self, args: dict[str, Any], where: str) -> dict[str, Any]:
        """`suite` becomes a catalog fixture id (a string) or a row-local document."""
        suite = args["suite"]
        if isinstance(suite, str):
            if suite in self.suites:
                suite = self.suites[suite]
            elif not catalog.is_suite(suite):
                raise _Invalid(f"{where}: no suite named {suite!r} under `suites:` or in the "
                               "fixture catalog (specs/fixtures/)")
        if isinstance(suite, str):
            self.registered.add(suite)
            args["suite"] = suite
            return args
        problems = schemas.issues("eval-suite.schema.json", suite)
        if problems:
            raise _Invalid(f"{where}: not a valid eval suite: "
                           + "; ".join(map(str, problems[:5])))
        self.registered.add(str(suite["suiteId"]))
        args["suite"] = suite
        return args

    def _args_create_eval(self, args: dict[str, Any], where: str) -> dict[str, Any]:
        suite = args["suite"]
        if not isinstance(suite, str):
            raise _Invalid(f"{where}: `suite` must be a name, a fixture id or a suiteId")
        if suite in self.suites:
            named = self.suites[suite]
            key = named if isinstance(named, str) else str(named["suiteId"])
            if key not in self.registered:
                raise _Invalid(f"{where}: suite {suite!r} is used before any "
                               f"`register_suite: {suite}`")
            args["suite"] = key
        modes = args.get("eval_modes")
        if modes is not None and (not isinstance(modes, list)
                                  or not all(isinstance(m, str) for m in modes)):
            raise _Invalid(f"{where}: eval_modes must be a list of mode names")
        return args

    def _args_add_tenant(self, args: dict[str, Any], where: str) -> dict[str, Any]:
        for name in ("name", "api_key"):
            if not isinstance(args[name], str) or not args[name]:
                raise _Invalid(f"{where}: `{name}` must be a non-empty string")
        return args

    def _args_http(self, args: dict[str, Any], where: str) -> dict[str, Any]:
        path = args["path"]
        if not isinstance(path, str) or not path.startswith("/"):
            raise _Invalid(f"{where}: path must start with /")
        for name in _PATH_REF_RE.findall(path):
            if name not in self.runs:
                raise _Invalid(f"{where}: ${name} in the path names no captured run")
        method = args.get("method", "POST")
        if method not in ("GET", "POST", "PUT", "PATCH", "DELETE"):
            raise _Invalid(f"{where}: unknown method {method!r}")
        return args

    def _run_ref(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value:
            raise _Invalid(f"{where}: a run is a captured name or an id, got {value!r}")
        if "/" in value:
            return value
        name = value.removeprefix("$")
        if name not in self.runs:
            raise _Invalid(f"{where}: run {value!r} names no run captured earlier with `as`")
        return "$" + name

    def _runs(self, value: Any, where: str) -> list[str]:
        values = value if isinstance(value, list) else [value]
        if not values:
            raise _Invalid(f"{where}: name at least one run")
        return [self._run_ref(v, where) for v in values]

    def _check_refs(self, value: Any, where: str) -> None:
        for name in _refs(value):
            if name not in self.runs:
                raise _Invalid(f"{where}: ${name} names no run captured earlier with `as`")

    def run_ref(self, value: Any, where: str) -> str:
        return self._run_ref(value, where)

    def run_refs(self, value: Any, where: str) -> list[str]:
        return self._runs(value, where)

    def _expectation(self, action: Action, name: str, value: Any, where: str) -> Expected:
        where = f"{where}: expect {name}"
        kind = EXPECTATIONS.get(name)
        if kind is None:
            raise _Invalid(f"{where.rsplit(':', 1)[0]}: unknown expectation {name!r}; "
                           "expected one of " + ", ".join(EXPECTATIONS))
        normalised = kind.parse(self, action, value, where)
        self._check_refs(normalised, where)
        return Expected(name, normalised)


# Per-kind checks and normalisation of an action's arguments, beyond required/optional.
_REFINE: Mapping[str, Callable[[_RowParser, dict[str, Any], str], dict[str, Any]]] = {
    "register_suite": _RowParser._args_register_suite,
    "create_eval": _RowParser._args_create_eval,
    "add_tenant": _RowParser._args_add_tenant,
    "http": _RowParser._args_http,
}


def _refs(value: Any) -> Iterable[str]:
    """The `$name` references in a value, at any depth (`$$x` is a literal)."""
    if isinstance(value, str):
        if value.startswith("$") and not value.startswith("$$"):
            yield value[1:]
    elif isinstance(value, dict):
        for v in value.values():
            yield from _refs(v)
    elif isinstance(value, list):
        for v in value:
            yield from _refs(v)




def _counter_keys(value: Any) -> Iterable[str]:
    """The live-counter keys named anywhere in `value` (script steps calling the counter)."""
    if isinstance(value, dict):
        args = value.get("args")
        if (value.get("call") == COUNTER_TOOL and isinstance(args, dict)
                and isinstance(args.get("key"), str)):
            yield args["key"]
        for v in value.values():
            yield from _counter_keys(v)
    elif isinstance(value, list):
        for v in value:
            yield from _counter_keys(v)


# ------------------------------------------------------------------------------ running


HostFor = Callable[[str | None], HostClient]


def run_examples(make_host: HostFor, prefix: str | None = None, *,
                 examples: Sequence[Example] | None = None,
                 keys: Mapping[str, str] | None = None, remote: bool = False,
                 stop_on_fail: bool = False) -> list[Row]:
    """Run every row (or those `prefix` selects) on `make_host(row.profile)`, one host each
    (`stop_on_fail`: none after the first that fails).

    `make_host(None)` builds the target's own host: a row without `profile:` runs there.
    `remote`: the host is behind HTTP (one long-lived host, no inside): rows that need the
    inside are listed apart; `keys` then maps the tenant labels to that host's API keys.
    """
    chosen = load_examples() if examples is None else examples
    out = []
    for e in chosen:
        if not e.matches(prefix):
            continue
        with segment(e.id):  # its exchanges, for a failed row's evidence
            out.append(_run_one(e, make_host, keys, remote))
        if stop_on_fail and out[-1].disposition is Disposition.EXECUTED_FAIL:
            break
    return out


def _run_one(e: Example, make_host: HostFor, keys: Mapping[str, str] | None,
             remote: bool) -> Row:
    missing = e.tenants_missing(keys or DEFAULT_TENANTS)
    if remote:
        why = e.needs_inside()
        if why is not None:
            # A row whose requirement no outsider can witness may still make claims the
            # wire shows (a replayed answer, a status): a breach of those is a breach,
            # named; their holding proves nothing of the requirement, so it stays apart.
            if not missing and e.wire_claims_beside_the_inside():
                row = run_example(e, make_host(None), keys=keys)
                if row.disposition is Disposition.EXECUTED_FAIL:
                    return row
            return Row.apart_row(e.requirement_id, SCENARIO, why, check_id=e.id)
    if missing:
        return Row.unjudged(e.requirement_id, SCENARIO, Disposition.BLOCKED,
                            "no API key for tenant " + ", ".join(missing) +
                            " (a second tenant's key: --tenant-b-api-key or "
                            "OPENWOP_TEST_TENANT_B_API_KEY)", check_id=e.id)
    return run_example(e, make_host(None if remote else e.profile), keys=keys)


def run_example(example: Example, host: HostClient, *,
                keys: Mapping[str, str] | None = None) -> Row:
    """Judge one row on `host`. A row that names no profile is inapplicable on a host that
    does not advertise recordedFixtures: it has nothing to say about such a host. A row
    that needs what the host does not offer (a seam, a fixture) is blocked, naming it, and
    so is every row where the host's discovery could not be read."""
    session = Session(host, dict(keys or DEFAULT_TENANTS)["acme"])
    gated = gate(session.surface, fixtures=False)
    if gated.unread or (not example.every_host
                        and (example.profile is None or example.withholds)
                        and not gated.applies):
        return Row.unjudged(example.requirement_id, SCENARIO, gated.disposition,
                            f"the host ({host.name}): {gated.reason}, and the row names no "
                            "profile of its own", check_id=example.id)
    against = example.advertised_against(session.surface)
    if against:
        return Row.unjudged(example.requirement_id, SCENARIO, Disposition.INAPPLICABLE,
                            f"the host ({host.name}) advertises {', '.join(against)}; the "
                            "row judges a host without it", check_id=example.id)
    unmet = example.unmet(session.surface)
    if unmet:
        return Row.unjudged(example.requirement_id, SCENARIO, Disposition.INAPPLICABLE,
                            f"the host ({host.name}) does not advertise {', '.join(unmet)}, "
                            "which the row's claim rests on", check_id=example.id)
    run = RowRun(example, host, inspector_of(host), dict(keys or DEFAULT_TENANTS))
    try:
        for fixture in sorted(example.fixtures()):
            session.require_fixture(fixture)
        findings = run.run()
    except Unobservable as exc:
        return Row.unjudged(example.requirement_id, SCENARIO, exc.disposition,
                            f"the host ({host.name}): {exc.reason}", check_id=example.id)
    except Exception as exc:  # refsim's fault, never the host's: blocked, with where
        return Row.unjudged(example.requirement_id, SCENARIO, Disposition.BLOCKED,
                            check_raised(f"the row {example.id}", exc), check_id=example.id)
    if run.blocked:
        unseen = f"the host ({host.name}): " + "; ".join(run.blocked)
        if all(f.ok for f in findings):  # nothing it saw failed, yet not all was seen
            return Row.unjudged(example.requirement_id, SCENARIO, Disposition.BLOCKED,
                                unseen, check_id=example.id)
        failed = Row.judged(example.requirement_id, SCENARIO, findings, check_id=example.id)
        return attrs.evolve(failed, detail=f"{failed.detail}; and not judged: {unseen}")
    if findings and all(f.ok for f in findings) and run.claims == 0 and run.notes:
        return Row.unjudged(example.requirement_id, SCENARIO, Disposition.INAPPLICABLE,
                            f"the host ({host.name}): no claim of the row can be observed "
                            "there: " + "; ".join(run.notes), check_id=example.id)
    row = Row.judged(example.requirement_id, SCENARIO, findings, check_id=example.id)
    if run.notes and row.passed:
        row = attrs.evolve(row, detail=row.detail + "; not observable on this host: "
                           + "; ".join(run.notes))
    return row


NOOP_WORKFLOW = "conformance-noop"  # a catalog workflow that makes a run and calls nothing


class _Unbound(Exception):
    """A `$name` whose run was never captured, because the action that makes it failed."""


# The expectations that only say the request was answered as a control expects: a row
# whose every other expectation could not be observed on a host has observed no claim.
CONTROLS = frozenset({"status", "error"})


@attrs.define
class RowRun:
    example: Example
    host: HostClient
    inspector: Inspector | None
    keys: dict[str, str]
    findings: list[Finding] = attrs.Factory(list)
    runs: dict[str, str] = attrs.Factory(dict)  # captured name -> bound run id
    owners: dict[str, str] = attrs.Factory(dict)  # captured name -> tenant label
    responses: dict[str, Response] = attrs.Factory(dict)
    current_args: dict[str, Any] = attrs.Factory(dict)
    # The tenant each label names on this host (learnt from the runs it mints), so a literal
    # id written `acme/...` in the table names the caller's own tenant whatever it is called.
    tenant_names: dict[str, str] = attrs.Factory(dict)
    # Unique to this run of the row: suiteIds it registers through the suite seam carry
    # it, so a host that has seen the row before answers as if new.
    tag: str = attrs.Factory(nonce)
    # (tenant label, catalog fixture id or suiteId) -> the evalSuiteRef to send.
    suite_refs: dict[tuple[str, str], str] = attrs.Factory(dict)
    # Claims (findings of expectations other than the controls) judged, and what could not
    # be observed on this host (an expectation the host's wire cannot carry).
    claims: int = 0
    notes: list[str] = attrs.Factory(list)
    # Why an expectation could not be judged for want of what the host does not offer (a
    # seam): the row is blocked for it, unless a claim it could judge failed.
    blocked: list[str] = attrs.Factory(list)
    current: Action | None = None
    # label -> the action and its arguments as sent: a refusal can be asked for again.
    performed: dict[str, tuple[Action, dict[str, Any]]] = attrs.Factory(dict)
    last_args: dict[str, Any] = attrs.Factory(dict)

    @property
    def req(self) -> str:
        return self.example.requirement_id

    @property
    def counter_keys(self) -> tuple[str, ...]:
        return self.example.counter_keys

    @property
    def noise(self) -> frozenset[str]:
        return noise_of_host(self.session("acme"))

    def session(self, tenant: str) -> Session:
        return Session(self.host, self.keys[tenant], self.inspector)

    @property
    def length(self) -> int:
        """The row's steps: its setup actions, then its requests."""
        return len(self.example.setup) + len(self.example.requests)

    def run(self) -> list[Finding]:
        for index in range(self.length):
            found, go_on = self.step(index)
            self.findings += found
            if not go_on:
                break
        return self.findings

    def step(self, index: int) -> tuple[list[Finding], bool]:
        """Step `index` of the row (setup actions first, then requests): its findings, and
        whether the row can go on (a setup action that failed, or a `$name` never bound,
        ends it). The stateful machine runs a row this way, one rule step per row step."""
        setup = self.example.setup
        if index < len(setup):
            action = setup[index]
            what = f"setup {index + 1} ({action.kind})"
            if action.kind == "register_suite":
                ref, how = self.register(action)
                # require_suite stops the row where the suite cannot be made available
                return [judges.done(self.req, True,
                                    f"{what}: the suite is there as {ref} ({how})")], True
            try:
                response = self.perform(action)
            except _Unbound as exc:
                return [judges.could_not_go_on(self.req, what, str(exc))], False
            done = ACTIONS[action.kind].judge_setup(self.req, response, what)
            if done.ok:
                self.capture(action, response)
            return [done], done.ok
        request = self.example.requests[index - len(setup)]
        try:
            return self.request(request), True
        except _Unbound as exc:
            return [judges.could_not_go_on(self.req, request.label, str(exc))], False

    # -- acting

    def subst(self, value: Any) -> Any:
        if isinstance(value, str):
            if value.startswith("$$"):
                return value[1:]
            if value.startswith("$"):
                name = value[1:]
                if name not in self.runs:
                    raise _Unbound(f"${name} was never captured (the action that creates it "
                                   "did not succeed)")
                return self.runs[name]
            head, sep, rest = value.partition("/")
            if sep and head in self.tenant_names and self.tenant_names[head] != head:
                return f"{self.tenant_names[head]}/{rest}"
            return value
        if isinstance(value, dict):
            return {k: self.subst(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.subst(v) for v in value]
        return value

    def register(self, action: Action) -> tuple[str, str]:
        """Make a suite the row runs available to the action's tenant: a catalog suite by
        its fixture id where discovery lists it, else through the suite seam (a row-local
        suite only that way); `Unobservable` where neither is offered."""
        suite, tenant = action.args["suite"], action.tenant
        session = self.session(tenant)
        if isinstance(suite, str):
            key = suite
            listed = session.surface.lists(suite)
            ref = self.suite_refs.get((tenant, suite)) or session.require_suite(
                suite, catalog.suite(suite), self.tag)  # once per tenant (and machine example)
        else:
            key, listed = str(suite["suiteId"]), False
            ref = session.require_suite(key, suite, self.tag)
        self.suite_refs[(tenant, key)] = ref
        return ref, ("listed in discovery fixtures" if listed
                     else "registered through the suite seam")

    def suite_ref(self, tenant: str, suite: str) -> str:
        """The evalSuiteRef for a suite the row names: one registered for this tenant, a
        catalog suite made available now, or the value as it stands (a suiteId)."""
        if (tenant, suite) in self.suite_refs:
            return self.suite_refs[(tenant, suite)]
        if catalog.is_suite(suite):
            ref = self.session(tenant).require_suite(suite, catalog.suite(suite), self.tag)
            self.suite_refs[(tenant, suite)] = ref
            return ref
        return suite

    def learn_tenant(self, label: str) -> str:
        """The host's name for the row's tenant `label` (acme, globex): the tenant segment
        of a run it makes (a run of the no-op workflow, where the host lists it); the label
        itself where nothing can be learnt."""
        session = self.session(label)
        if label not in ("acme", "globex") or not session.surface.lists(NOOP_WORKFLOW):
            return label
        made = session.workflow(NOOP_WORKFLOW)
        rid = parse_bound(made.json["runId"]) if made.status == 201 and isinstance(
            made.json, dict) and isinstance(made.json.get("runId"), str) else None
        if rid is None:
            return label
        self.tenant_names.setdefault(label, rid.tenant)
        return rid.tenant

    def _settle(self, args: Mapping[str, Any]) -> None:
        """A host may answer a create (or a cancel, a resolve) before the run has
        finished, and a source still running is rightly refused (§C): each captured run a
        request names as a source is read by its owner until it settles (terminal, or
        waiting for someone) first."""
        named = (list((args.get("fixture_runs") or {}).values())
            if isinstance(args.get("fixture_runs"), dict) else [])
        extra = args.get("extra")
        if isinstance(extra, dict):
            named.append(extra.get("baselineRunId"))
        by_id = {run_id: name for name, run_id in self.runs.items()}
        for value in named:
            if isinstance(value, str) and value in by_id:
                self.session(self.owners.get(by_id[value], "acme")).events(value)

    def perform(self, action: Action, args: dict[str, Any] | None = None) -> Response:
        kind = action.kind
        session = self.session(action.tenant)
        self.current_args = dict(action.args)
        self.current = action
        if args is None:
            args = self.subst(dict(action.args))
        self.last_args = args
        if kind in ("create_eval", "create_workflow"):
            self._settle(args)
        return ACTIONS[kind].send(self, session, action.tenant, args)

    def ask(self, label: str) -> Callable[[], Response]:
        """The request labelled `label`, as it was sent, to be made again (a refusal)."""
        action, args = self.performed[label]
        return lambda: self.perform(action, dict(args))

    def control(self, values: Sequence[str]) -> Response | None:
        """The request just made, made again with each of `values` replaced by a control
        value of the same shape (`judges.control_value`): what the host says whatever the
        value is. Only for a request the host refused (it changes nothing)."""
        action = self.current
        if action is None:
            return None
        text = json.dumps(self.subst(dict(action.args)))
        for value in values:
            text = text.replace(json.dumps(value)[1:-1], json.dumps(
                judges.control_value(value))[1:-1])
        return self.perform(action, json.loads(text))

    def capture(self, action: Action, response: Response) -> None:
        body = response.json
        if (response.status in (200, 201) and isinstance(body, dict)
                and isinstance(body.get("runId"), str)):
            rid = parse_bound(body["runId"])
            if rid is not None:
                self.tenant_names.setdefault(action.tenant, rid.tenant)
        name = action.capture
        if name is None:
            return
        if action.kind == "add_tenant":
            self.keys[name] = f"{action.args['api_key']}-{self.tag}"
            return
        if (response.status in (200, 201) and isinstance(body, dict)
                and isinstance(body.get("runId"), str)):
            self.runs[name] = body["runId"]
            self.owners[name] = action.tenant

    def request(self, request: RowRequest) -> list[Finding]:
        tenant = request.action.tenant
        judged = self._judged(request)
        before = {}
        for e in judged:
            try:
                before[e.name] = EXPECTATIONS[e.name].before(self, e.value, tenant)
            except Unobservable as exc:
                if exc.disposition not in (Disposition.INAPPLICABLE, Disposition.BLOCKED):
                    raise
                before[e.name] = exc
        response = self.perform(request.action)
        self.responses[request.label] = response
        self.performed[request.label] = (request.action, self.last_args)
        self.capture(request.action, response)
        observed = self.observe(request, response)
        agent = str(request.action.args.get("agent", RECORDER))
        out: list[Finding] = []
        names = {e.name for e in request.expect}
        for e in judged:
            if e.name == "error" or (e.name == "status" and "error" in names):
                continue  # judged together below
            try:
                if isinstance(before[e.name], Unobservable):
                    raise before[e.name]
                found = EXPECTATIONS[e.name].judge(self, request.label, e.value, observed,
                                                   before[e.name], tenant, agent)
            except Unobservable as exc:
                if exc.disposition is Disposition.BLOCKED:
                    # The rest of the request is still judged: a seam the host does not
                    # offer must not hide a breach the wire shows.
                    if exc.reason not in self.blocked:
                        self.blocked.append(exc.reason)
                    continue
                if exc.disposition is not Disposition.INAPPLICABLE:
                    raise
                self.notes.append(f"{request.label}: {e.name}: {exc.reason}")
                continue
            if e.name not in CONTROLS:
                self.claims += len(found)
            out += [_labelled(request.label, f) for f in found]
        if "error" in names:
            status = next(e.value for e in request.expect if e.name == "status")
            code = next(e.value for e in request.expect if e.name == "error")
            out = judges.refused(self.req, response, request.label, status=status,
                                 code=code) + out
        return out

    def _judged(self, request: RowRequest) -> list[Expected]:
        """The request's expectations this host can witness: without the inside, those
        that need it and have no outside form are left out (the row's detail says so)."""
        if self.inspector is not None:
            return list(request.expect)
        return [e for e in request.expect if EXPECTATIONS[e.name].observable_outside]

    def observe(self, request: RowRequest, response: Response) -> Observed:
        if not any(EXPECTATIONS[e.name].reads_run for e in request.expect):
            return Observed(response)
        session = self.session(request.action.tenant)
        return session.observe(response)

    # -- observing

    def counter(self, tenant: str, key: str) -> int | None:
        return self.session(tenant).require_counter(key)

    def events_of(self, ref: str) -> list[dict[str, Any]]:
        name = ref.removeprefix("$")
        tenant = self.owners.get(name, "acme")
        return self.session(tenant).events(self.subst(ref))


def _labelled(label: str, finding: Finding) -> Finding:
    """Name the request in a finding whose judge could not (it takes no `what`)."""
    if finding.message.startswith(label + ":") or finding.message.startswith(label + " ("):
        return finding
    return attrs.evolve(finding, message=f"{label}: {finding.message}")
