"""The schema checks remember which instances a `$ref` target accepted: a shortcut that must
never change a verdict or an error report."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, validators

from refsim.data import paths
from refsim.wire import schemas

# The same validator as refsim's, without the remembered acceptances: what every report
# must equal.
_Plain = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    {k: schemas._bounded(k) for k in schemas._BOUNDED})


def _plain_issues(ref: str, instance: Any) -> list[tuple[str, str]]:
    plain = _Plain({"$ref": schemas.BASE + ref}, registry=schemas.registry())
    return sorted({(schemas._pointer(e.absolute_path), str(e.validator))
                   for e in schemas._leaves(plain.iter_errors(instance))})


def _issues(ref: str, instance: Any) -> list[tuple[str, str]]:
    return [(i.pointer, i.keyword) for i in schemas.issues(ref, instance)]


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(
    ["", "ok", "conformance.eval:counter", "acme/run-abcdefghij0123456789", "x/y", "a b"]))
_ARGS = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["op", "key", "x"]), inner,
                                                 max_size=3)), max_leaves=6)
# Steps near the schema's shapes: each of its three, and near misses of them.
_STEPS = st.recursive(
    st.one_of(
        st.fixed_dictionaries({"call": _SCALARS}, optional={"args": _ARGS, "extra": _SCALARS}),
        st.fixed_dictionaries({"decide": _ARGS}, optional={"call": _SCALARS}),
        _SCALARS),
    lambda inner: st.fixed_dictionaries(
        {"delegate": _SCALARS, "script": st.lists(inner, max_size=3)}),
    max_leaves=8)


@settings(max_examples=100)
@given(st.lists(st.lists(_STEPS, max_size=4), min_size=1, max_size=4))
def test_reports_equal_the_plain_validators_whatever_came_before(scripts: list[Any]) -> None:
    # Several documents in a row, so later ones meet parts the earlier ones left accepted.
    for script in scripts:
        assert _issues("script.schema.json", script) == _plain_issues("script.schema.json",
                                                                      script)
        body = {"workflowId": "w", "inputs": {"script": script}}
        assert _issues("create-run.schema.json", body) == _plain_issues(
            "create-run.schema.json", body)


_CREATE_RUN_MEMBERS = sorted(json.loads(
    (paths.SCHEMAS / "create-run.schema.json").read_text(encoding="utf-8"))["properties"])
_MEMBER_VALUES = st.one_of(_SCALARS, st.sampled_from(
    [{}, [], ["golden"], ["golden", "golden"], {"version": 1}, {"t": "acme/run-x"},
     {"t": "acme/run-abcdefghij0123456789"}]))


@settings(max_examples=100)
@given(st.lists(st.dictionaries(
    st.one_of(st.sampled_from(_CREATE_RUN_MEMBERS), st.sampled_from(["extra", "Mode", ""])),
    _MEMBER_VALUES, max_size=6), min_size=1, max_size=3))
def test_create_run_reports_equal_the_plain_validators_known_members_or_not(
        bodies: list[dict[str, Any]]) -> None:
    """`unevaluatedProperties` is skipped when `properties` names every member: the same
    report as the stock keyword's, with members unknown, missing, or of the wrong shape."""
    for body in bodies:
        assert _issues("create-run.schema.json", body) == _plain_issues(
            "create-run.schema.json", body)


def test_a_part_accepted_before_is_still_refused_where_it_is_wrong() -> None:
    step = {"call": "conformance.eval:counter", "args": {"op": "inc"}}
    assert schemas.issues("script.schema.json", [step, {"decide": "ok"}]) == []
    # The same step, now beside a bad one, and a bad id where a good one was accepted.
    bad = [step, {"call": 7}]
    assert _issues("script.schema.json", bad) == _plain_issues("script.schema.json", bad)
    assert _issues("script.schema.json", bad) != []
    good = {"mode": "eval", "evalSuiteRef": "s", "agentId": "a",
            "fixtureRuns": {"t": "acme/run-abcdefghij0123456789"}}
    assert schemas.issues("create-run.schema.json", good) == []
    wrong = {**good, "fixtureRuns": {"t": "acme/run-abcdefghij0123456789 "}}
    assert _issues("create-run.schema.json", wrong) == _plain_issues("create-run.schema.json",
                                                                     wrong) != []


def test_only_acceptances_are_remembered_and_they_are_bounded(monkeypatch: Any) -> None:
    from refsim.domain.canonical import canonical
    schemas._ACCEPTED.clear()
    schemas.issues("script.schema.json", [{"decide": "ok"}])
    texts = {text for _, text in schemas._ACCEPTED}
    assert canonical([{"decide": "ok"}]) in texts and canonical({"decide": "ok"}) in texts
    refused = [{"call": 7}]
    assert schemas.issues("script.schema.json", refused) != []
    texts = {text for _, text in schemas._ACCEPTED}
    assert canonical(refused) not in texts and canonical({"call": 7}) not in texts
    monkeypatch.setattr(schemas, "_ACCEPTED_MAX", 50)
    for i in range(120):
        schemas.issues("ids.schema.json#/$defs/agentId", f"agent-{i}")
        assert len(schemas._ACCEPTED) <= 50


def test_a_tuple_is_never_taken_for_the_list_it_writes_as() -> None:
    """A tuple's canonical form is a list's, but jsonschema takes no tuple for an array:
    only plain JSON documents are remembered, or looked up."""
    script = [{"decide": "ok"}]
    assert schemas.issues("script.schema.json", script) == []
    as_tuple = ({"decide": "ok"},)
    assert _issues("script.schema.json", as_tuple) == _plain_issues("script.schema.json",
                                                                     as_tuple) != []
    assert schemas.valid_script(script) and not schemas.valid_script(as_tuple)


def _suite_docs() -> list[Any]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in
            sorted(paths.FIXTURES.glob("*.json"))]


def _paths(doc: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*at, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*at, i))
    return out


def _mutated(doc: Any, path: tuple[Any, ...], value: Any, drop: bool) -> Any:
    doc = copy.deepcopy(doc)
    if not path:
        return value
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    if drop and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return doc


@settings(max_examples=100)
@given(st.data())
def test_suite_reports_equal_the_plain_validators_on_near_misses(data: st.DataObject) -> None:
    """The suite schemas use `unevaluatedProperties`, `if`/`then` and `oneOf` around their
    `$ref`s: a remembered part must not change a report there either."""
    docs = _suite_docs()
    for _ in range(3):  # documents in a row: the later meet parts the earlier left accepted
        doc = data.draw(st.sampled_from(docs))
        path = data.draw(st.sampled_from(_paths(doc)))
        value: Any = data.draw(st.sampled_from([None, 1, 1.5, "x", "", [], {}, [{}], {"a": 1}]))
        near = _mutated(doc, path, value, data.draw(st.booleans()))
        for ref, instance in (("eval-suite.schema.json", near),
                              ("suite-seam.schema.json", {"suite": near})):
            assert _issues(ref, instance) == _plain_issues(ref, instance)
