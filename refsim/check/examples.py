"""The RFC 0252 example table as data (`specs/examples/*.yaml`) and the runner that executes it.

Each row runs on a fresh host built for its profile, and is judged into one report `Row`.

File format
-----------
A file is a mapping with these top-level keys:

``examples``
    the rows (required, a list).
``suites``
    name -> eval-suite document (optional). ``register_suite: NAME`` registers one;
    ``create_eval: {suite: NAME}`` names it by its ``suiteId``.
``definitions``
    free-form, ignored by the runner: a home for YAML anchors (``&refund-script``) that
    rows and suites reuse (``*refund-script``).

A row:

``id``
    ``rfc-0252.example-N`` (``source: rfc``) or ``refsim.example.0252.<slug>``
    (``source: refsim``).
``source``, ``requirement_id``, ``title``
    ``requirement_id`` is an id of the registry, specs/requirements.yaml.
``profile``
    a host profile (``refsim.domain.profile.PROFILES``). A row that names one states a fact
    about that kind of host and always runs on it. A row without one runs on the target's
    profile (``refsim examples --profile P``), and is ``inapplicable`` (not judged) when that
    host does not advertise ``agents.evalSuite.recordedFixtures`` in discovery, as the
    conformance scenario is gated.
``setup``
    a list of actions. Each must succeed (the status of its kind, below) or the row fails
    there: every success is a positive-control finding of the row.
``request`` + ``expect``, or ``requests``
    one action judged by ``expect``; or a list of ``{label, <action>, expect}`` (the single
    form is labelled ``request``). Every request needs ``status`` among its expectations.

Actions (one key each; the same in setup and in requests). ``key`` names the calling tenant:
``acme`` (default), ``globex``, or an ``add_tenant`` label. ``as: NAME`` captures the id of
the run the action created; afterwards the string ``"$NAME"`` stands for that id anywhere in
an action or an expectation (``"$$x"`` is the literal ``"$x"``). RUN below is a captured name
(with or without ``$``) or a literal id containing ``/``.

==================  ==========================================================  =======
action              arguments                                                   success
==================  ==========================================================  =======
register_suite      ``NAME`` or ``{suite: NAME | <suite document>, key}``       201
                    (seam ``POST /conformance/seams/eval-suites``)
create_eval         ``{suite, agent, fixture_runs, eval_modes, extra, key, as}``  201
                    (``suite``: a ``suites`` name, a fixture id or a suiteId;
                    ``agent`` defaults to ``conformance.eval:recorder``;
                    ``extra`` is merged into the body, e.g. ``baselineRunId``)
create_workflow     ``{workflow, inputs, fixture_runs, extra, key, as}``        201
fork                ``{run: RUN, mode: replay | branch, body, key, as}``        201
erase               ``RUN`` or ``{run, key}`` (seam ``runs/{id}:erase``)        200
resolve             ``RUN`` or ``{run, key}`` (seam ``runs/{id}:resolve``)      200
add_tenant          ``{as, name, api_key, workspace}`` (seam ``tenants``)       201
http                ``{path, method: POST, body, key, as}``; ``$NAME`` in the   2xx
                    path becomes the projected id
==================  ==========================================================  =======

Expectations (of one request; ``RUN`` as above, ``L`` an earlier request's label):

==========================  ===============================================================
``status: N``               the HTTP status (``201``: the created judge)
``error: CODE``             with ``status``: that code in a registered-code envelope
``no_echo: [V, ...]``       the response shows none of these ids, in any form
``identical_to: L | [L]``   byte-identical to those requests' responses
``same_code_as: L | [L]``   the same status and code as those responses
``echo: true | MAP``        ``eval.started.fixtureRuns`` equals the request's map (or MAP)
``outcomes_equal_source``   ``RUN | [RUN]``: each ``agent.tool-returned`` of the agent
                            equals the source's (several sources: concatenated in order)
``fixture_miss_count``      ``N`` (every task of the summary) or ``{task: N}``
``passed``                  ``BOOL`` (every task) or ``{task: BOOL}``
``counter_unchanged``       ``{key, tenant} | [...]``: the live counter before == after
``counter_moved``           ``{key, tenant} | [...]``: a positive control, it went up
``event_includes``          ``{type, payload}``: an event of the run carries that payload
``json_includes: VALUE``    the response body contains VALUE (mappings by subset)
``tool_statuses: [S, ...]`` the statuses of the agent's ``agent.tool-returned``, in order
``lane_content_free: RUN``  that run's tool events carry ``argsHash``, no inputs/outcome
``facet_implies_matching``  ``true``: discovery never has recordedFixtures alone
``summary_content_free``    ``true``: eval.* events and the EvalSummary carry no content
``no_derived_on_wire``      ``true``: no response, snapshot, event or summary of the run
                            carries a fixture entry (white-box control: the run has some)
==========================  ===============================================================

White-box expectations read the `SimHost` itself (``host.core``):

==========================  ===============================================================
``runs_unchanged: true``    ``len(host.core.runs)`` is the same before and after
``resolutions_unchanged``   ``RUN | [RUN]``: ``host.core.resolutions`` of each is unchanged
``live_calls_unchanged``    ``true``: no live tool ran and nothing left through egress
``no_secret_in_derived``    ``true``: no ``vault_credential`` in any derived copy
``derived_entries``         ``{source: RUN, task, entries: [...]}``: the copy this run
                            derived for ``task`` is exactly ``entries`` (``to_json`` form)
``derived_copies``          ``{source: RUN, count: N}``: copies stored under the source
==========================  ===============================================================

An unknown key anywhere is a `ValueError` naming the file and the row.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml

from refsim import paths, schemas
from refsim.check import judges
from refsim.check.findings import Disposition, Finding, Row, check, fail
from refsim.check.registry import load_registry
from refsim.check.session import Session, eval_body, run_path
from refsim.domain.agents import RECORDER
from refsim.domain.canonical import canonical
from refsim.domain.ids import RunId, parse_bound, project
from refsim.domain.profile import PROFILES
from refsim.domain.tools import vault_credential
from refsim.host import SimHost
from refsim.wire.response import Response

SCENARIO = "rfc-0252-examples"
DEFAULT_DIRECTORY = paths.SPECS / "examples"
DEFAULT_TENANTS: Mapping[str, str] = {"acme": "hk_test_acme", "globex": "hk_test_globex"}

ID_RE = {"rfc": re.compile(r"^rfc-0252\.example-[1-9][0-9]*$"),
         "refsim": re.compile(r"^refsim\.example\.0252\.[a-z0-9][a-z0-9-]*$")}
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_PATH_REF_RE = re.compile(r"\$([A-Za-z][A-Za-z0-9_-]*)")
# Keys that only a fixture entry has: none may reach the wire (RFC 0252 §D).
DERIVED_KEYS = frozenset({"toolResponses", "argsMatch", "isError"})


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
class Expectation:
    name: str
    value: Any = attrs.field(hash=False)


@attrs.frozen
class Request:
    label: str
    action: Action
    expect: tuple[Expectation, ...]


@attrs.frozen
class Example:
    """One row of the table, validated: every name it uses is defined before it is used."""

    id: str
    source: str
    requirement_id: str
    title: str
    profile: str | None  # None: the target's profile, gated on recordedFixtures
    setup: tuple[Action, ...]
    requests: tuple[Request, ...]
    file: str = attrs.field(default="", eq=False)

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


@attrs.frozen
class _Kind:
    required: frozenset[str]
    optional: frozenset[str]
    success: int | None  # None: any 2xx
    shorthand: str | None = None  # a bare scalar means {shorthand: value}
    creates_run: bool = False


def _kind(required: Iterable[str], optional: Iterable[str], success: int | None, *,
          shorthand: str | None = None, creates_run: bool = False) -> _Kind:
    return _Kind(frozenset(required), frozenset(optional), success, shorthand, creates_run)


ACTIONS: Mapping[str, _Kind] = {
    "register_suite": _kind(["suite"], ["key"], 201, shorthand="suite"),
    "create_eval": _kind(["suite"], ["agent", "fixture_runs", "eval_modes", "extra", "key", "as"],
                         201, creates_run=True),
    "create_workflow": _kind(["workflow"], ["inputs", "fixture_runs", "extra", "key", "as"], 201,
                             creates_run=True),
    "fork": _kind(["run", "mode"], ["body", "key", "as"], 201, creates_run=True),
    "erase": _kind(["run"], ["key"], 200, shorthand="run"),
    "resolve": _kind(["run"], ["key"], 200, shorthand="run"),
    "add_tenant": _kind(["as", "name", "api_key"], ["workspace"], 201),
    "http": _kind(["path"], ["method", "body", "key", "as"], None, creates_run=True),
}
ROW_KEYS = frozenset({"id", "source", "requirement_id", "title", "profile", "setup", "request",
                      "expect", "requests"})
REQUEST_KEYS = frozenset({"label", "expect"})
TOP_KEYS = frozenset({"examples", "suites", "definitions"})
# Expectations that read the run the request created: its events or its summary.
_NEEDS_RUN = frozenset({"echo", "outcomes_equal_source", "fixture_miss_count", "passed",
                        "event_includes", "tool_statuses", "summary_content_free",
                        "no_derived_on_wire", "derived_entries"})


class _Invalid(Exception):
    """A problem in one row; the loader adds the file and row id."""


# ------------------------------------------------------------------------------ loading


def load_examples(directory: Path = DEFAULT_DIRECTORY) -> list[Example]:
    """Every row of every `*.yaml` in `directory`, validated, in file then row order."""
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
    return out


def load_file(file: Path) -> list[Example]:
    try:
        data = yaml.safe_load(Path(file).read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ValueError(f"{file}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{file}: the top level must be a mapping with `examples:`")
    unknown = sorted(set(map(str, data)) - TOP_KEYS)
    if unknown:
        raise ValueError(f"{file}: unknown top-level key(s) {unknown}; expected "
                         + ", ".join(sorted(TOP_KEYS)))
    suites = data.get("suites") or {}
    if not isinstance(suites, dict):
        raise ValueError(f"{file}: `suites:` must map names to eval-suite documents")
    for name, doc in suites.items():
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
        unknown = sorted(set(map(str, raw)) - ROW_KEYS)
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
        return Example(row_id, source, requirement, title, profile, setup, requests,
                       self.file)

    # -- pieces

    @staticmethod
    def _text(raw: Mapping[str, Any], key: str) -> str:
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip():
            raise _Invalid(f"`{key}` must be a non-empty string, got {value!r}")
        return value

    def _request(self, raw: Any, where: str) -> Request:
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
        if "error" in names and status < 400:
            raise _Invalid(f"{where}: `error` needs a refusal status (>= 400), not {status}")
        needs_run = sorted(names & _NEEDS_RUN)
        if needs_run and (status != 201 or not ACTIONS[action.kind].creates_run):
            raise _Invalid(f"{where}: {needs_run} read the run the request creates, so the "
                           "action must create one and `status` must be 201")
        self.labels.append(label)
        return Request(label, action, expectations)

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
        suite = args["suite"]
        if isinstance(suite, str):
            if suite not in self.suites:
                raise _Invalid(f"{where}: no suite named {suite!r} under `suites:`")
            suite = self.suites[suite]
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
            suite_id = str(self.suites[suite]["suiteId"])
            if suite_id not in self.registered:
                raise _Invalid(f"{where}: suite {suite!r} is used before any "
                               f"`register_suite: {suite}`")
            args["suite"] = suite_id
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

    def _expectation(self, action: Action, name: str, value: Any, where: str) -> Expectation:
        where = f"{where}: expect {name}"
        validate = _EXPECTATIONS.get(name)
        if validate is None:
            raise _Invalid(f"{where.rsplit(':', 1)[0]}: unknown expectation {name!r}; "
                           "expected one of " + ", ".join(_EXPECTATIONS))
        normalised = validate(self, action, value, where)
        self._check_refs(normalised, where)
        return Expectation(name, normalised)

    # -- expectation validators: each returns the normalised value

    def _x_int(self, action: Action, value: Any, where: str) -> Any:
        if not isinstance(value, int) or isinstance(value, bool):
            raise _Invalid(f"{where}: must be an integer, got {value!r}")
        return value

    def _x_text(self, action: Action, value: Any, where: str) -> Any:
        if not isinstance(value, str) or not value:
            raise _Invalid(f"{where}: must be a string, got {value!r}")
        return value

    def _x_true(self, action: Action, value: Any, where: str) -> Any:
        if value is not True:
            raise _Invalid(f"{where}: the only value is `true`, got {value!r}")
        return True

    def _x_any(self, action: Action, value: Any, where: str) -> Any:
        return value

    def _x_values(self, action: Action, value: Any, where: str) -> Any:
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise _Invalid(f"{where}: must be a non-empty list of ids or $names")
        return value

    def _x_labels(self, action: Action, value: Any, where: str) -> Any:
        labels = value if isinstance(value, list) else [value]
        for label in labels:
            if label not in self.labels:
                raise _Invalid(f"{where}: {label!r} is no earlier request's label "
                               f"(earlier: {', '.join(self.labels) or 'none'})")
        return labels

    def _x_echo(self, action: Action, value: Any, where: str) -> Any:
        if value is True:
            if action.kind != "create_eval" or "fixture_runs" not in action.args:
                raise _Invalid(f"{where}: `true` echoes the request's own fixture_runs; this "
                               "request has none, so give the expected map")
            return True
        if not isinstance(value, dict) or not value:
            raise _Invalid(f"{where}: must be `true` or the expected fixtureRuns map")
        return value

    def _x_runs(self, action: Action, value: Any, where: str) -> Any:
        return self._runs(value, where)

    def _x_run(self, action: Action, value: Any, where: str) -> Any:
        return self._run_ref(value, where)

    def _x_per_task(self, kind: type, action: Action, value: Any, where: str) -> Any:
        def ok(v: Any) -> bool:
            return isinstance(v, kind) and (kind is bool or not isinstance(v, bool))
        if ok(value):
            return value
        if isinstance(value, dict) and value and all(ok(v) for v in value.values()):
            return value
        raise _Invalid(f"{where}: must be a {kind.__name__} or a mapping task -> "
                       f"{kind.__name__}, got {value!r}")

    def _x_miss(self, action: Action, value: Any, where: str) -> Any:
        return self._x_per_task(int, action, value, where)

    def _x_passed(self, action: Action, value: Any, where: str) -> Any:
        return self._x_per_task(bool, action, value, where)

    def _x_counters(self, action: Action, value: Any, where: str) -> Any:
        items = value if isinstance(value, list) else [value]
        out = []
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("key"), str) \
                    or set(item) - {"key", "tenant"}:
                raise _Invalid(f"{where}: each counter is {{key, tenant?}}, got {item!r}")
            tenant = item.get("tenant", action.tenant)
            if not isinstance(tenant, str) or tenant not in self.tenants:
                raise _Invalid(f"{where}: tenant {tenant!r} is unknown")
            out.append({"key": item["key"], "tenant": tenant})
        return out

    def _x_event(self, action: Action, value: Any, where: str) -> Any:
        if not isinstance(value, dict) or not isinstance(value.get("type"), str) \
                or set(value) - {"type", "payload"}:
            raise _Invalid(f"{where}: must be {{type, payload?}}, got {value!r}")
        return value

    def _x_statuses(self, action: Action, value: Any, where: str) -> Any:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _Invalid(f"{where}: must be a list of status names")
        return value

    def _x_derived(self, action: Action, value: Any, where: str) -> Any:
        if not isinstance(value, dict) or set(value) != {"source", "task", "entries"} \
                or not isinstance(value["task"], str) or not isinstance(value["entries"], list):
            raise _Invalid(f"{where}: must be {{source, task, entries: [...]}}")
        return {**value, "source": self._run_ref(value["source"], where)}

    def _x_copies(self, action: Action, value: Any, where: str) -> Any:
        if not isinstance(value, dict) or set(value) != {"source", "count"} \
                or not isinstance(value["count"], int):
            raise _Invalid(f"{where}: must be {{source, count}}")
        return {**value, "source": self._run_ref(value["source"], where)}


# Per-kind checks and normalisation of an action's arguments, beyond required/optional.
_REFINE: Mapping[str, Callable[[_RowParser, dict[str, Any], str], dict[str, Any]]] = {
    "register_suite": _RowParser._args_register_suite,
    "create_eval": _RowParser._args_create_eval,
    "add_tenant": _RowParser._args_add_tenant,
    "http": _RowParser._args_http,
}
_Validator = Callable[[_RowParser, Action, Any, str], Any]
_EXPECTATIONS: Mapping[str, _Validator] = {
    "status": _RowParser._x_int,
    "error": _RowParser._x_text,
    "no_echo": _RowParser._x_values,
    "identical_to": _RowParser._x_labels,
    "same_code_as": _RowParser._x_labels,
    "echo": _RowParser._x_echo,
    "outcomes_equal_source": _RowParser._x_runs,
    "fixture_miss_count": _RowParser._x_miss,
    "passed": _RowParser._x_passed,
    "counter_unchanged": _RowParser._x_counters,
    "counter_moved": _RowParser._x_counters,
    "event_includes": _RowParser._x_event,
    "json_includes": _RowParser._x_any,
    "tool_statuses": _RowParser._x_statuses,
    "lane_content_free": _RowParser._x_run,
    "facet_implies_matching": _RowParser._x_true,
    "summary_content_free": _RowParser._x_true,
    "no_derived_on_wire": _RowParser._x_true,
    "runs_unchanged": _RowParser._x_true,
    "resolutions_unchanged": _RowParser._x_runs,
    "live_calls_unchanged": _RowParser._x_true,
    "no_secret_in_derived": _RowParser._x_true,
    "derived_entries": _RowParser._x_derived,
    "derived_copies": _RowParser._x_copies,
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


# ------------------------------------------------------------------------------ running


def run_examples(make_host: Callable[[str | None], SimHost], prefix: str | None = None, *,
                 examples: Sequence[Example] | None = None) -> list[Row]:
    """Run every row (or those `prefix` selects) on `make_host(row.profile)`, one host each.

    `make_host(None)` builds the target's own host: a row without `profile:` runs there.
    """
    chosen = load_examples() if examples is None else examples
    return [run_example(e, make_host(e.profile)) for e in chosen if e.matches(prefix)]


def run_example(example: Example, host: SimHost) -> Row:
    """Judge one row on `host`. A row that names no profile is inapplicable on a host that
    does not advertise recordedFixtures: it has nothing to say about such a host."""
    if example.profile is None:
        reason = inapplicable_because(host)
        if reason is not None:
            return Row.unjudged(example.requirement_id, SCENARIO, Disposition.INAPPLICABLE,
                                reason, check_id=example.id)
    findings = _RowRun(example, host).run()
    return Row.judged(example.requirement_id, SCENARIO, findings, check_id=example.id)


def inapplicable_because(host: SimHost) -> str | None:
    """Why an unpinned row does not apply to `host`, read from its discovery; None if it does."""
    where = f"the host ({host.name})"
    discovery = Session(host, DEFAULT_TENANTS["acme"]).discovery()
    if discovery.status != 200 or not isinstance(discovery.json, dict):
        return (f"{where} answered discovery {discovery.status}; it advertises nothing "
                "readable, and the row names no profile of its own")
    if judges.eval_suite_facet(discovery.json).get("recordedFixtures") is not True:
        return (f"{where} does not advertise agents.evalSuite.recordedFixtures in "
                "GET /.well-known/openwop, and the row names no profile of its own")
    return None


class _Unbound(Exception):
    """A `$name` whose run was never captured, because the action that makes it failed."""


@attrs.define
class _Observed:
    """What one request produced, fetched once and only when an expectation asks."""

    run: _RowRun
    action: Action
    response: Response
    _events: list[dict[str, Any]] | None = None
    _summary: Any = None
    _summary_read: bool = False

    @property
    def run_id(self) -> str | None:
        body = self.response.json
        if self.response.status in (200, 201) and isinstance(body, dict) \
                and isinstance(body.get("runId"), str):
            return str(body["runId"])
        return None

    @property
    def events(self) -> list[dict[str, Any]]:
        if self._events is None:
            rid = self.run_id
            self._events = self.run.session(self.action.tenant).events(rid) if rid else []
        return self._events

    @property
    def summary(self) -> Any:
        if not self._summary_read:
            rid = self.run_id
            self._summary = self.run.session(self.action.tenant).summary(rid) if rid else None
            self._summary_read = True
        return self._summary

    @property
    def agent(self) -> str:
        return str(self.action.args.get("agent", RECORDER))


@attrs.define
class _RowRun:
    example: Example
    host: SimHost
    findings: list[Finding] = attrs.Factory(list)
    runs: dict[str, str] = attrs.Factory(dict)  # captured name -> bound run id
    owners: dict[str, str] = attrs.Factory(dict)  # captured name -> tenant label
    keys: dict[str, str] = attrs.Factory(lambda: dict(DEFAULT_TENANTS))
    responses: dict[str, Response] = attrs.Factory(dict)

    @property
    def req(self) -> str:
        return self.example.requirement_id

    def session(self, tenant: str) -> Session:
        return Session(self.host, self.keys[tenant])

    def run(self) -> list[Finding]:
        for index, action in enumerate(self.example.setup):
            what = f"setup {index + 1} ({action.kind})"
            try:
                response = self.perform(action)
            except _Unbound as exc:
                self.findings.append(fail(self.req, f"{what}: {exc}"))
                return self.findings
            want = ACTIONS[action.kind].success
            good = response.status == want if want else 200 <= response.status < 300
            self.findings.append(check(
                self.req, good, f"{what}: answered {response.status}"
                + ("" if good else f", expected {want or '2xx'}; the row cannot go on"),
                judges._obs(response)))
            if not good:
                return self.findings
            self.capture(action, response)
        for request in self.example.requests:
            try:
                self.findings += self.request(request)
            except _Unbound as exc:
                self.findings.append(fail(self.req, f"{request.label}: {exc}"))
                return self.findings
        return self.findings

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
            return value
        if isinstance(value, dict):
            return {k: self.subst(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.subst(v) for v in value]
        return value

    def perform(self, action: Action) -> Response:
        kind = action.kind
        if kind == "register_suite":  # a suite document is data, never substituted
            return self.host.request("POST", "/conformance/seams/eval-suites",
                                     api_key=self.keys[action.tenant],
                                     json={"suite": action.args["suite"]})
        args: dict[str, Any] = self.subst(dict(action.args))
        session = self.session(action.tenant)
        if kind == "create_eval":
            body = eval_body(args["suite"], args.get("fixture_runs"),
                             agent_id=args.get("agent", RECORDER))
            if "eval_modes" in args:
                body["evalModes"] = args["eval_modes"]
            body.update(args.get("extra", {}))
            return session.create(body)
        if kind == "create_workflow":
            body = {"workflowId": args["workflow"]}
            for name, field in (("inputs", "inputs"), ("fixture_runs", "fixtureRuns")):
                if name in args:
                    body[field] = args[name]
            body.update(args.get("extra", {}))
            return session.create(body)
        if kind == "fork":
            fork_body = {"mode": args["mode"], **args.get("body", {})}
            return self.host.request("POST", run_path(args["run"], ":fork"),
                                     api_key=session.api_key, json=fork_body)
        if kind in ("erase", "resolve"):
            return self.host.request("POST", "/conformance/seams"
                                     + run_path(args["run"], ":" + kind),
                                     api_key=session.api_key)
        if kind == "add_tenant":
            tenant = {"name": args["name"], "apiKey": args["api_key"]}
            if "workspace" in args:
                tenant["workspace"] = args["workspace"]
            return self.host.request("POST", "/conformance/seams/tenants",
                                     api_key=session.api_key, json=tenant)
        assert kind == "http", kind
        path = _PATH_REF_RE.sub(lambda m: project(self.subst("$" + m.group(1))), args["path"])
        method = args.get("method", "POST")
        if "body" in args:
            return self.host.request(method, path, api_key=session.api_key, json=args["body"])
        return self.host.request(method, path, api_key=session.api_key)

    def capture(self, action: Action, response: Response) -> None:
        name = action.capture
        if name is None:
            return
        if action.kind == "add_tenant":
            self.keys[name] = str(action.args["api_key"])
            return
        body = response.json
        if response.status in (200, 201) and isinstance(body, dict) \
                and isinstance(body.get("runId"), str):
            self.runs[name] = body["runId"]
            self.owners[name] = action.tenant

    def request(self, request: Request) -> list[Finding]:
        before = {e.name: self.before(e) for e in request.expect}
        response = self.perform(request.action)
        self.responses[request.label] = response
        self.capture(request.action, response)
        observed = _Observed(self, request.action, response)
        out: list[Finding] = []
        names = {e.name for e in request.expect}
        for e in request.expect:
            if e.name == "error" or (e.name == "status" and "error" in names):
                continue  # judged together below
            out += [_labelled(request.label, f)
                    for f in self.judge(request.label, e, observed, before[e.name])]
        if "error" in names:
            status = next(e.value for e in request.expect if e.name == "status")
            code = next(e.value for e in request.expect if e.name == "error")
            out = judges.refused(self.req, response, request.label, status=status,
                                 code=code) + out
        return out

    # -- observing

    def counter(self, tenant: str, key: str) -> int | None:
        return self.session(tenant).counter(key)

    def events_of(self, ref: str) -> list[dict[str, Any]]:
        name = ref.removeprefix("$")
        tenant = self.owners.get(name, "acme")
        return self.session(tenant).events(self.subst(ref))

    def resolutions(self, ref: str) -> int:
        """How often the host resolved a source id (white box; `HostCore.resolutions`)."""
        rid = _rid(self.subst(ref))
        return 0 if rid is None else self.host.core.resolutions.get(rid, 0)

    def before(self, e: Expectation) -> Any:
        core = self.host.core
        if e.name in ("counter_unchanged", "counter_moved"):
            return [self.counter(c["tenant"], c["key"]) for c in e.value]
        if e.name == "runs_unchanged":
            return len(core.runs)
        if e.name == "resolutions_unchanged":
            return [self.resolutions(r) for r in e.value]
        if e.name == "live_calls_unchanged":
            return (core.gateway.live_calls, len(core.gateway.egress))
        return None

    def judge(self, label: str, e: Expectation, obs: _Observed, before: Any) -> list[Finding]:
        method: Callable[[str, Any, _Observed, Any], list[Finding]] = getattr(
            self, "_j_" + e.name)
        return method(label, e.value, obs, before)

    # -- judging, one method per expectation

    def _j_status(self, label: str, value: Any, obs: _Observed, before: Any) -> list[Finding]:
        if value == 201:
            return [judges.created(self.req, obs.response, label)]
        got = obs.response.status
        return [check(self.req, got == value, f"{label}: expected {value}, got {got}",
                      judges._obs(obs.response))]

    def _j_no_echo(self, label: str, value: Any, obs: _Observed, before: Any) -> list[Finding]:
        return [judges.no_echo(self.req, obs.response, [str(v) for v in self.subst(value)],
                               label)]

    def _alike(self, label: str, value: Any, obs: _Observed, exact: bool) -> list[Finding]:
        pairs = [(other, self.responses[other]) for other in value]
        return [judges.uniform(self.req, [*pairs, (label, obs.response)], exact=exact)]

    def _j_identical_to(self, label: str, value: Any, obs: _Observed, before: Any
                        ) -> list[Finding]:
        return self._alike(label, value, obs, exact=True)

    def _j_same_code_as(self, label: str, value: Any, obs: _Observed, before: Any
                        ) -> list[Finding]:
        return self._alike(label, value, obs, exact=False)

    def _j_echo(self, label: str, value: Any, obs: _Observed, before: Any) -> list[Finding]:
        expected = self.subst(obs.action.args["fixture_runs"] if value is True else value)
        return [judges.echo(self.req, obs.events, expected)]

    def _j_outcomes_equal_source(self, label: str, value: Any, obs: _Observed, before: Any
                                 ) -> list[Finding]:
        source = [event for ref in value for event in self.events_of(ref)]
        return judges.outcomes_equal(self.req, source, obs.events, obs.agent)

    def _per_task(self, label: str, value: Any, obs: _Observed) -> list[tuple[str, Any]] | None:
        if isinstance(value, dict):
            return list(value.items())
        summary = obs.summary
        tasks = summary.get("tasks") if isinstance(summary, dict) else None
        if not isinstance(tasks, list) or not tasks:
            return None
        return [(str(t.get("taskId")), value) for t in tasks if isinstance(t, dict)]

    def _j_fixture_miss_count(self, label: str, value: Any, obs: _Observed, before: Any
                              ) -> list[Finding]:
        pairs = self._per_task(label, value, obs)
        if pairs is None:
            return [fail(self.req, f"{label}: the run has no EvalSummary with tasks")]
        return [f for task, n in pairs
                for f in judges.miss_count(self.req, obs.events, obs.summary, task, n)]

    def _j_passed(self, label: str, value: Any, obs: _Observed, before: Any) -> list[Finding]:
        pairs = self._per_task(label, value, obs)
        if pairs is None:
            return [fail(self.req, f"{label}: the run has no EvalSummary with tasks")]
        return [f for task, want in pairs
                for f in judges.passed_is(self.req, obs.events, obs.summary, task, want)]

    def _counters(self, label: str, value: Any, before: Any, moved: bool) -> list[Finding]:
        out = []
        for spec, was in zip(value, before, strict=True):
            now = self.counter(spec["tenant"], spec["key"])
            what = f"{label} (counter {spec['key']!r} of {spec['tenant']})"
            if was is None or now is None:
                out.append(fail(self.req, f"{what}: the live counter cannot be observed"))
            elif moved:
                out.append(judges.counter_moved(self.req, was, now, what))
            else:
                out.append(judges.counter_unchanged(self.req, was, now, what))
        return out

    def _j_counter_unchanged(self, label: str, value: Any, obs: _Observed, before: Any
                             ) -> list[Finding]:
        return self._counters(label, value, before, moved=False)

    def _j_counter_moved(self, label: str, value: Any, obs: _Observed, before: Any
                         ) -> list[Finding]:
        return self._counters(label, value, before, moved=True)

    def _j_event_includes(self, label: str, value: Any, obs: _Observed, before: Any
                          ) -> list[Finding]:
        want = self.subst(value.get("payload", {}))
        typed = judges.of_type(obs.events, value["type"])
        found = any(_includes(e.get("payload"), want) for e in typed)
        return [check(self.req, found,
                      f"{label}: a {value['type']} event carries {canonical(want)}" if found else
                      f"{label}: no {value['type']} event (of {len(typed)}) carries "
                      f"{canonical(want)}", [e.get("payload") for e in typed])]

    def _j_json_includes(self, label: str, value: Any, obs: _Observed, before: Any
                         ) -> list[Finding]:
        want = self.subst(value)
        found = _includes(obs.response.json, want)
        return [check(self.req, found, f"{label}: the response body contains {canonical(want)}"
                      if found else f"{label}: the response body lacks {canonical(want)}",
                      judges._obs(obs.response))]

    def _j_tool_statuses(self, label: str, value: Any, obs: _Observed, before: Any
                         ) -> list[Finding]:
        got = [(e.get("payload") or {}).get("status")
               for e in judges.of_type(obs.events, "agent.tool-returned")
               if (e.get("payload") or {}).get("agentId") == obs.agent]
        return [check(self.req, got == value,
                      f"{label}: {obs.agent}'s calls returned {got}"
                      + ("" if got == value else f", expected {value}"))]

    def _j_lane_content_free(self, label: str, value: Any, obs: _Observed, before: Any
                             ) -> list[Finding]:
        events = self.events_of(value)
        called = [e.get("payload") or {} for e in judges.of_type(events, "agent.tool-called")]
        returned = [e.get("payload") or {}
                    for e in judges.of_type(events, "agent.tool-returned")]
        hashed = bool(called) and all("argsHash" in p and "inputs" not in p for p in called)
        bare = all("outcome" not in p and "error" not in p for p in returned)
        return [check(self.req, bool(called), f"{label}: the source recorded "
                      f"{len(called)} tool call(s) on the wire"),
                check(self.req, hashed and bare,
                      f"{label}: the source's wire lane is content-free (argsHash, no outcome)"
                      if hashed and bare else
                      f"{label}: the source's wire lane carries content", called + returned)]

    def _j_facet_implies_matching(self, label: str, value: Any, obs: _Observed, before: Any
                                  ) -> list[Finding]:
        return [judges.facet_implies_matching(self.req, obs.response.json)]

    def _j_summary_content_free(self, label: str, value: Any, obs: _Observed, before: Any
                                ) -> list[Finding]:
        return judges.content_free(self.req, obs.summary, obs.events)

    def _j_no_derived_on_wire(self, label: str, value: Any, obs: _Observed, before: Any
                              ) -> list[Finding]:
        rid = _rid(obs.run_id)
        held = [entries for _, run, _, entries in self.host.core.copies.all_entries()
                if run == rid and entries]
        out = [check(self.req, bool(held), f"{label}: (white box) the run holds derived "
                     f"entries for {len(held)} task(s), so there is something to leak")]
        rid_text = obs.run_id or ""
        snapshot = self.host.request("GET", run_path(rid_text),
                                     api_key=self.keys[obs.action.tenant]).json
        for what, doc in (("the create response", obs.response.json),
                          ("the run snapshot", snapshot),
                          ("the EvalSummary", obs.summary),
                          *((f"event {e.get('sequence')} ({e.get('type')})", e)
                            for e in obs.events)):
            bad = sorted(_keys(doc) & DERIVED_KEYS)
            if bad:
                out.append(fail(self.req, f"{label}: {what} carries fixture-entry keys {bad}",
                                doc))
        if len(out) == 1:
            out.append(check(self.req, True, f"{label}: no response, event or summary carries "
                             "a fixture entry"))
        return out

    # -- white box

    def _j_runs_unchanged(self, label: str, value: Any, obs: _Observed, before: Any
                          ) -> list[Finding]:
        now = len(self.host.core.runs)
        return [check(self.req, now == before,
                      f"{label}: (white box) no run was created ({now} runs)" if now == before
                      else f"{label}: (white box) the host holds {now} runs, {before} before")]

    def _j_resolutions_unchanged(self, label: str, value: Any, obs: _Observed, before: Any
                                 ) -> list[Finding]:
        out = []
        for ref, was in zip(value, before, strict=True):
            now = self.resolutions(ref)
            out.append(judges.no_reresolution(self.req, was, now, f"{label} ({ref})"))
        return out

    def _j_live_calls_unchanged(self, label: str, value: Any, obs: _Observed, before: Any
                                ) -> list[Finding]:
        gateway = self.host.core.gateway
        now = (gateway.live_calls, len(gateway.egress))
        return [check(self.req, now == before,
                      f"{label}: (white box) no live tool ran, nothing left through egress"
                      if now == before else f"{label}: (white box) live calls / egress "
                      f"records went {before} -> {now}")]

    def _j_no_secret_in_derived(self, label: str, value: Any, obs: _Observed, before: Any
                                ) -> list[Finding]:
        core = self.host.core
        secrets = sorted({vault_credential(t.name) for t in core.tenants.values()})
        entries = [{"source": str(source), "evalRun": str(run), "task": task,
                    "entries": [e.to_json() for e in found]}
                   for source, run, task, found in core.copies.all_entries()]
        egress = json.dumps([list(r.headers) for r in core.gateway.egress])
        resolved = any(s in egress for s in secrets)
        return [check(self.req, resolved, f"{label}: (white box) control: the host resolved an "
                      "egress credential" if resolved else f"{label}: (white box) no egress "
                      "credential was ever resolved, so its absence shows nothing"),
                check(self.req, any(e["entries"] for e in entries),
                      f"{label}: (white box) derived copies exist ({len(entries)})"),
                judges.no_secret_in(self.req, entries, secrets, f"{label}: derived copies")]

    def _j_derived_entries(self, label: str, value: Any, obs: _Observed, before: Any
                           ) -> list[Finding]:
        source, run = _rid(self.subst(value["source"])), _rid(obs.run_id)
        found = None if source is None or run is None else self.host.core.copies.get(
            source, run, value["task"])
        got = None if found is None else [e.to_json() for e in found]
        want = self.subst(value["entries"])
        same = got is not None and canonical(got) == canonical(want)
        return [check(self.req, same,
                      f"{label}: (white box) task {value['task']} derived {len(want)} "
                      "expected entr(ies)" if same else f"{label}: (white box) task "
                      f"{value['task']} derived {got}, expected {want}",
                      {"got": got, "expected": want})]

    def _j_derived_copies(self, label: str, value: Any, obs: _Observed, before: Any
                          ) -> list[Finding]:
        source = _rid(self.subst(value["source"]))
        got = 0 if source is None else self.host.core.copies.count_for(source)
        return [check(self.req, got == value["count"],
                      f"{label}: (white box) {got} derived cop(ies) under {value['source']}"
                      + ("" if got == value["count"] else f", expected {value['count']}"))]


def _labelled(label: str, finding: Finding) -> Finding:
    """Name the request in a finding whose judge could not (it takes no `what`)."""
    if finding.message.startswith(label + ":") or finding.message.startswith(label + " ("):
        return finding
    return attrs.evolve(finding, message=f"{label}: {finding.message}")


def _rid(value: Any) -> RunId | None:
    return parse_bound(value)


def _includes(actual: Any, want: Any) -> bool:
    """Mappings by subset, at any depth; everything else by canonical equality."""
    if isinstance(want, dict):
        return isinstance(actual, dict) and all(
            k in actual and _includes(actual[k], v) for k, v in want.items())
    return canonical(actual) == canonical(want)


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        out = set(map(str, value))
        for v in value.values():
            out |= _keys(v)
        return out
    if isinstance(value, list):
        return set().union(*map(_keys, value)) if value else set()
    return set()
