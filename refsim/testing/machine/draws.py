"""What the machine's rules draw: the classes of specs/classes.yaml as strategies (read
when the machine first draws, so that a data error is the data check's to report, never
an import's), the lanes, and the tenants a rule may add.

A new class, or a new draw over one, goes here; the rule that draws it goes in the rules
module of its kind (`sources.py`, `replays.py`, `refusals.py`, `owners.py`).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from refsim.check import classes
from refsim.domain.agents import CONTENT_FREE, RECORDER, UNHELD

LANES = (RECORDER, CONTENT_FREE, UNHELD)
EXTRA_TENANTS = ("initech", "umbrella")


def _class_data() -> classes.Classes:
    return classes.load()


def _named(items: list[tuple[str, Any]]) -> st.SearchStrategy[tuple[str, Any]]:
    return st.sampled_from(items)


def _of_patterns(patterns: tuple[str, ...]) -> list[st.SearchStrategy[tuple[str, Any]]]:
    def labelled(pattern: str) -> st.SearchStrategy[tuple[str, Any]]:
        return st.tuples(st.just(f"pattern {pattern}"), st.from_regex(pattern, fullmatch=True))
    return [labelled(p) for p in patterns]


def _source_values() -> st.SearchStrategy[tuple[str, Any]]:
    """source-values' own members: its JSON values, and strings of its patterns."""
    data = _class_data()
    drawn = [_named([(classes.value_name(v), v) for v in data.values])]
    return st.one_of(drawn + _of_patterns(data.value_patterns))


def _task_keys() -> st.SearchStrategy[tuple[str, Any]]:
    data = _class_data()
    drawn = [_named([(f"value {v!r}", v) for v in data.key_values])]
    return st.one_of(drawn + _of_patterns(data.key_patterns))


# Each class drawn from specs/classes.yaml, read when the machine first draws (a data error
# is reported by the data check before any command runs, never at import).
SOURCE_VALUES = st.deferred(_source_values)
FROM_ID = st.deferred(lambda: st.sampled_from([op.name for op in _class_data().from_id]))
TASK_KEYS = st.deferred(_task_keys)
FROM_KEY = st.deferred(lambda: st.sampled_from([op.name for op in _class_data().from_key]))
ARG_VARIANTS = st.deferred(lambda: st.sampled_from(
    [op.name for op in _class_data().arg_variants]))
RECORDED_ARGS = st.deferred(lambda: st.integers(0, len(_class_data().recorded_args)))
RUN_STATES = st.deferred(lambda: st.sampled_from([m.name for m in _class_data().run_states]))
ROUTES = st.deferred(lambda: st.sampled_from([r.name for r in _class_data().routes]))
SPELLINGS = st.deferred(lambda: st.sampled_from([op.name for op in _class_data().spellings]))
NAMED_TWICE = st.deferred(lambda: st.sampled_from([m.name for m in _class_data().named_twice]
                                                  or ["-"]))
LISTINGS = st.deferred(lambda: st.sampled_from([m.name for m in _class_data().listings]
                                               or ["-"]))
IDEMPOTENT = st.deferred(lambda: st.sampled_from(
    [str(m["name"]) for m in _class_data().idempotent]))
HEADERS = st.deferred(lambda: st.sampled_from([name for name, _ in _class_data().headers]))


def _op(ops: tuple[classes.Op, ...], name: str) -> classes.Op:
    return next(op for op in ops if op.name == name)
