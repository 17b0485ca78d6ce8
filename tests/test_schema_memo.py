"""The schema checks remember which instances a `$ref` target accepted: a shortcut that must
never change a verdict or an error report."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, validators

from refsim import schemas

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
