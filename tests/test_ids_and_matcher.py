"""Unit tests of two pure domain helpers: tenant-bound ids and their `~2F` projection
(refsim/domain/ids.py), and the RFC 0244 §D fixture matcher (refsim/domain/fixtures.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refsim.domain.fixtures as fixtures_module
from refsim.domain.canonical import canonical
from refsim.domain.fixtures import FixtureEntry, FixtureMatcher
from refsim.domain.ids import (
    BOUND_RE,
    OPAQUE_RE,
    IdMinter,
    ProjectionError,
    RunId,
    parse_bound,
    parse_segment,
    project,
    unproject,
)

FAST = settings(max_examples=200, deadline=None)
OPAQUE = "run-aaaaaaaaaaaaaaaa"
BOUND_IDS = st.from_regex(r"\A(anon:)?[A-Za-z0-9._~-]{1,40}/[A-Za-z0-9._~-]{16,60}\Z")


# ----------------------------------------------------------------------------- ids: grammar


@pytest.mark.parametrize("value", [f"acme/{OPAQUE}", f"anon:guest/{OPAQUE}", f"a~b/{OPAQUE}",
                                   "t/" + "x" * 16, "t/" + "x" * 128, "A.b_c-d/" + "._~-" * 4])
def test_bound_ids_in_the_grammar_parse(value: str) -> None:
    rid = parse_bound(value)
    assert rid is not None
    assert rid.bound == value
    assert str(rid) == value
    assert rid == RunId(*value.rsplit("/", 1))


@pytest.mark.parametrize("value", ["", "acme", "acme/short", "acme/" + "x" * 129,
                                   "/" + OPAQUE, f"ac me/{OPAQUE}", f"acme/{OPAQUE}/x",
                                   f"acme//{OPAQUE}", f"acme~2F{OPAQUE}", f"acme%2F{OPAQUE}",
                                   f"anon:/{OPAQUE}", f"{'t' * 129}/{OPAQUE}",
                                   None, 42, ["acme", OPAQUE], {"tenant": "acme"}])
def test_values_outside_the_grammar_do_not_parse(value: Any) -> None:
    assert parse_bound(value) is None


def test_trailing_newline_is_outside_the_grammar() -> None:
    assert parse_bound(f"acme/{OPAQUE}\n") is None


def test_a_tenant_may_contain_slash_free_text_only() -> None:
    # the opaque segment never holds '/', so the last '/' splits tenant from opaque
    assert parse_bound(f"a/b/{OPAQUE}") is None


@FAST
@given(st.integers(0, 2**32), st.sampled_from(["acme", "anon:g", "t.x-y_z"]))
def test_minted_ids_fit_the_grammar_and_never_contain_a_tilde(seed: int, tenant: str) -> None:
    minter = IdMinter(seed)
    for _ in range(5):
        rid = minter.run_id(tenant)
        assert BOUND_RE.match(rid.bound)
        assert OPAQUE_RE.match(rid.opaque)
        assert "~" not in rid.opaque
        assert parse_bound(rid.bound) == rid


def test_minter_is_reproducible_per_seed() -> None:
    a, b, c = IdMinter(5), IdMinter(5), IdMinter(6)
    ids_a = [a.run_id("acme") for _ in range(3)]
    assert ids_a == [b.run_id("acme") for _ in range(3)]
    assert ids_a != [c.run_id("acme") for _ in range(3)]
    assert len(set(ids_a)) == 3


# ----------------------------------------------------------------------------- ids: projection


def test_projection_examples() -> None:
    assert project("acme/r-9f3c") == "acme~2Fr-9f3c"
    assert project("a:b") == "a~3Ab"
    assert project("a~b") == "a~7Eb"
    assert project("é") == "~C3~A9"


@pytest.mark.slow  # hundreds of Hypothesis examples
@FAST
@given(BOUND_IDS)
def test_project_unproject_round_trip_over_bound_ids(value: str) -> None:
    projected = project(value)
    assert "/" not in projected and ":" not in projected
    assert all(c.isalnum() or c in "._-~" for c in projected)
    assert unproject(projected) == value
    assert parse_segment(projected) == parse_bound(value)
    # escapes are two upper-case hex digits
    for i, ch in enumerate(projected):
        if ch == "~":
            assert all(h in "0123456789ABCDEF" for h in projected[i + 1 : i + 3])


@FAST
@given(st.text())
def test_project_unproject_round_trip_over_any_text(value: str) -> None:
    assert unproject(project(value)) == value


@pytest.mark.slow  # hundreds of Hypothesis examples
@FAST
@given(BOUND_IDS)
def test_percent_forms_are_accepted(value: str) -> None:
    forms = [project(value).replace("~2F", "%2F"), project(value).replace("~2F", "%2f")]
    if "~" not in value and ":" not in value:  # otherwise the raw form needs escapes too
        forms += [value.replace("/", "%2F"), value.replace("/", "%2f")]
    for encoded in forms:
        assert parse_segment(encoded) == parse_bound(value)


def test_bare_opaque_segment_resolves_under_the_default_tenant() -> None:
    assert parse_segment(OPAQUE) is None
    assert parse_segment(OPAQUE, default_tenant="acme") == RunId("acme", OPAQUE)
    # a bound form keeps its own tenant whatever the default
    assert parse_segment(f"globex~2F{OPAQUE}", default_tenant="acme") == RunId("globex", OPAQUE)


@pytest.mark.parametrize("segment", ["~", "~2", "acme~ZZx", "acme~2", "%", "%G0", "%2",
                                     f"acme~2F{OPAQUE}~", "~~2F", "~ 2", "~2G"])
def test_dangling_or_bad_escape_is_an_error(segment: str) -> None:
    with pytest.raises(ProjectionError):
        unproject(segment)
    assert parse_segment(segment) is None
    assert parse_segment(segment, default_tenant="acme") is None


def test_escaped_bytes_that_are_not_utf8_are_an_error() -> None:
    with pytest.raises(ProjectionError):
        unproject("~FF~FE")
    assert parse_segment("acme~2F~C3") is None


@FAST
@given(st.text(), st.one_of(st.none(), st.sampled_from(["acme", "globex"])))
def test_parse_segment_never_raises_on_arbitrary_text(segment: str, tenant: str | None) -> None:
    result = parse_segment(segment, default_tenant=tenant)
    assert result is None or BOUND_RE.match(result.bound)


@FAST
@given(st.text(st.sampled_from("~%2Fa/F0z:")))
def test_parse_segment_never_raises_on_escape_heavy_text(segment: str) -> None:
    result = parse_segment(segment, default_tenant="acme")
    assert result is None or isinstance(result, RunId)


@pytest.mark.parametrize("segment", ["\ud800", f"acme/{OPAQUE}\udc80"])
def test_parse_segment_never_raises_on_lone_surrogates(segment: str) -> None:
    assert parse_segment(segment) is None


# ----------------------------------------------------------------------------- matcher

TOOL = "conformance.eval:counter"


def entry(i: int, tool: str = TOOL, args: Any = None, has_args: bool = True) -> FixtureEntry:
    return FixtureEntry(tool, args, has_args, {"served": i})


def served(m: FixtureMatcher, tool: str, args: Any) -> int | None:
    e = m.select(tool, args)
    return None if e is None else int(e.response["served"])


def test_first_unconsumed_match_in_list_order_and_consumption() -> None:
    m = FixtureMatcher((entry(0, args={"k": 1}), entry(1, args={"k": 2}),
                        entry(2, args={"k": 1}), entry(3, tool="x:y", args={"k": 1})))
    assert served(m, TOOL, {"k": 1}) == 0
    assert served(m, TOOL, {"k": 1}) == 2
    assert served(m, TOOL, {"k": 1}) is None  # both consumed
    assert served(m, TOOL, {"k": 2}) == 1
    assert served(m, "x:y", {"k": 1}) == 3
    assert m.consumed == 4


def test_reset_makes_every_entry_unconsumed_again() -> None:
    m = FixtureMatcher((entry(0, args=1), entry(1, args=1)))
    assert [served(m, TOOL, 1) for _ in range(3)] == [0, 1, None]
    m.reset()
    assert m.consumed == 0
    assert [served(m, TOOL, 1) for _ in range(3)] == [0, 1, None]


def test_entries_without_args_match_any_args() -> None:
    m = FixtureMatcher((entry(0, has_args=False), entry(1, tool="x:y", has_args=False)))
    assert served(m, TOOL, {"anything": [1, 2]}) == 0
    assert served(m, TOOL, None) is None  # consumed
    assert served(m, "x:y", "text") == 1


def test_loose_and_exact_entries_interleave_in_list_order() -> None:
    m = FixtureMatcher((entry(0, has_args=False), entry(1, args="a"), entry(2, has_args=False)))
    assert served(m, TOOL, "a") == 0  # the loose entry comes first
    assert served(m, TOOL, "b") == 2  # the exact "a" entry does not serve "b"
    assert served(m, TOOL, "a") == 1
    assert served(m, TOOL, "a") is None
    m2 = FixtureMatcher((entry(0, args="a"), entry(1, has_args=False)))
    assert served(m2, TOOL, "b") == 1
    assert served(m2, TOOL, "a") == 0


def test_exact_args_match_regardless_of_key_order() -> None:
    m = FixtureMatcher((entry(0, args={"a": 1, "b": {"c": [1, {"d": 2, "e": 3}]}}),))
    assert served(m, TOOL, {"b": {"c": [1, {"e": 3, "d": 2}]}, "a": 1}) == 0


@pytest.mark.parametrize("call", [{"a": 1, "b": 3}, {"a": 1}, {"a": 1, "b": 2, "c": 0},
                                  {"a": "1", "b": 2}, [1, 2], None, {"A": 1, "b": 2}])
def test_exact_args_differing_in_value_or_keys_miss(call: Any) -> None:
    m = FixtureMatcher((entry(0, args={"a": 1, "b": 2}),))
    assert served(m, TOOL, call) is None
    assert m.consumed == 0


def test_explicit_null_args_are_exact_not_loose() -> None:
    m = FixtureMatcher((entry(0, args=None, has_args=True),))
    assert served(m, TOOL, {"x": 1}) is None
    assert served(m, TOOL, None) == 0


def test_from_json_reads_args_presence() -> None:
    with_args = FixtureEntry.from_json({"tool": TOOL, "args": None, "response": 1})
    without = FixtureEntry.from_json({"tool": TOOL, "response": 1, "isError": True})
    assert with_args.has_args and not without.has_args and without.is_error
    assert with_args.to_json() == {"tool": TOOL, "args": None, "argsMatch": "exact",
                                   "response": 1}
    assert without.to_json() == {"tool": TOOL, "response": 1, "isError": True}


ARGS = st.sampled_from([None, 1, "a", {"k": 1}, {"k": 2}, [1], {"k": 1, "j": 0}])
ENTRIES = st.lists(st.tuples(st.sampled_from([TOOL, "x:y"]), st.booleans(), ARGS), max_size=12)
OPS = st.lists(st.one_of(st.tuples(st.sampled_from([TOOL, "x:y"]), ARGS), st.just("reset")),
               max_size=25)


@FAST
@given(ENTRIES, OPS)
def test_matcher_agrees_with_a_linear_scan_model(spec: list[tuple[str, bool, Any]],
                                                 ops: list[Any]) -> None:
    entries = tuple(entry(i, tool, args, has_args) for i, (tool, has_args, args) in
                    enumerate(spec))
    m = FixtureMatcher(entries)
    used = [False] * len(entries)
    for op in ops:
        if op == "reset":
            m.reset()
            used = [False] * len(entries)
            continue
        tool, args = op
        want = next((i for i, e in enumerate(entries) if not used[i] and e.tool == tool and (
            not e.has_args or json.dumps(e.args, sort_keys=True)
            == json.dumps(args, sort_keys=True))), None)
        if want is not None:
            used[want] = True
        assert served(m, tool, args) == want
        assert m.consumed == sum(used)


class CountingTuple(tuple):  # type: ignore[type-arg]
    """Counts element reads and full iterations, to show select never scans."""

    reads = 0
    scans = 0

    def __getitem__(self, index: Any) -> Any:
        CountingTuple.reads += 1
        return super().__getitem__(index)

    def __iter__(self) -> Any:
        CountingTuple.scans += 1
        return super().__iter__()


def test_select_does_not_scan_the_entry_list(monkeypatch: pytest.MonkeyPatch) -> None:
    n = 20_000
    entries = tuple(entry(i, args={"op": "read", "key": f"k{i}"}) for i in range(n))
    entries += tuple(entry(n + i, args={"op": "read", "key": "same"}) for i in range(n))
    m = FixtureMatcher(entries)  # indexing at construction may canonicalise every entry
    m.entries = CountingTuple(entries)
    calls = 0
    real = canonical

    def counting(value: Any) -> str:
        nonlocal calls
        calls += 1
        return real(value)

    monkeypatch.setattr(fixtures_module, "canonical", counting)
    probes: list[tuple[Any, int | None]] = [
        ({"op": "read", "key": "k19999"}, 19_999), ({"key": "k0", "op": "read"}, 0),
        ({"op": "read", "key": "nope"}, None), ({"op": "read", "key": "k0"}, None)]
    probes += [({"op": "read", "key": "same"}, n + i) for i in range(200)]
    for number, (args, want) in enumerate(probes, start=1):
        assert served(m, TOOL, args) == want
        assert calls == number  # exactly one canonicalisation per select
    assert CountingTuple.scans == 0
    assert CountingTuple.reads <= len(probes)  # at most the one entry served
    assert m.lookups == len(probes)


def _unproject_by_characters(segment: str) -> str:
    """The first `unproject`: one character at a time (the oracle for the faster one)."""
    hexdigits = frozenset("0123456789abcdefABCDEF")
    out = bytearray()
    i, n = 0, len(segment)
    while i < n:
        ch = segment[i]
        if ch in "~%":
            hexpart = segment[i + 1:i + 3]
            if len(hexpart) != 2 or not set(hexpart) <= hexdigits:
                raise ProjectionError(
                    f"escape {ch!r} at offset {i} is not followed by two hex digits")
            out.append(int(hexpart, 16))
            i += 3
        else:
            try:
                out += ch.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ProjectionError("the segment holds a lone surrogate") from exc
            i += 1
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProjectionError("escaped bytes are not UTF-8") from exc


def _outcome(f: Any, segment: str) -> tuple[str, str]:
    try:
        return "ok", f(segment)
    except ProjectionError as exc:
        return "error", str(exc)


@settings(max_examples=200)
@given(st.lists(st.one_of(st.sampled_from(["~", "%", "~2F", "%2f", "~7E", "%E2%82%AC", "~C3",
                                           "~41", "~4", "%G1", "\ud800", "é", "/"]),
                          st.text(max_size=4)), max_size=8).map("".join))
def test_unproject_agrees_with_reading_one_character_at_a_time(segment: str) -> None:
    assert _outcome(unproject, segment) == _outcome(_unproject_by_characters, segment)
