"""Loading the example table: the file, row and request keys (`TOP_KEYS`, `ROW_KEYS`,
`REQUEST_KEYS`, each with what it means), and the parser that reads `specs/examples/*.yaml`
into validated `Example` rows. An unknown key anywhere is a `ValueError` naming the file
and the row.

Part of `refsim.check.examples` (import the table from there). A new key, or a new check
of a row or of an action's arguments (`_REFINE`), goes here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from refsim.check.examples.actions import _PATH_REF_RE, ACTIONS
from refsim.check.examples.rows import (
    FACET_MEMBERS,
    FAMILIES,
    Action,
    Example,
    Expected,
    RowRequest,
    _counter_keys,
)
from refsim.check.expectations import EXPECTATIONS, Invalid, names_needing_run
from refsim.check.observe import KEYS
from refsim.check.registry import load_registry
from refsim.data import paths, yaml_data
from refsim.domain.profile import PROFILES
from refsim.wire import catalog, schemas
from refsim.wire.render import agents_family

DEFAULT_DIRECTORY = paths.SPECS / "examples"
DEFAULT_TENANTS: Mapping[str, str] = KEYS

ID_RE = {"rfc": re.compile(r"^rfc-0252\.example-[1-9][0-9]*$"),
         "refsim": re.compile(r"^refsim\.example\.0252\.[a-z0-9][a-z0-9-]*$")}
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


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


# Expectations that read the run the request created: its events or its summary.
_NEEDS_RUN = names_needing_run()


_Invalid = Invalid


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
