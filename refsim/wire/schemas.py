"""The JSON Schemas in specs/schemas/, loaded once into a `referencing` registry.

Schema errors are reported by JSON pointer and keyword only: jsonschema's own
messages quote the instance, and a refusal must never echo what the caller sent.
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
from jsonschema import Draft202012Validator, validators
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from refsim.data import paths
from refsim.domain.canonical import canonical_or_none

BASE = "https://refsim.invalid/schemas/"


@attrs.frozen
class SchemaIssue:
    pointer: str
    keyword: str

    def __str__(self) -> str:
        return f"{self.pointer or '/'}: {self.keyword}"


def _pointer(parts: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


@functools.cache
def registry(directory: Path = paths.SCHEMAS) -> Registry[Any]:
    resources = []
    for file in sorted(directory.glob("*.json")):
        doc = json.loads(file.read_text(encoding="utf-8"))
        # Every file is draft 2020-12. Without `$schema` in the registered contents,
        # jsonschema keeps refsim's validator class across `$ref` instead of picking
        # the stock one by that URI (see `_bounded_unique_items`).
        doc.pop("$schema", None)
        resources.append((doc.get("$id", BASE + file.name), DRAFT202012.create_resource(doc)))
    return Registry().with_resources(resources)


def _too_long(instance: Any, schema: Any) -> bool:
    if isinstance(instance, list) and isinstance(schema, dict):
        bound = schema.get("maxItems")
        return isinstance(bound, int) and len(instance) > bound
    if isinstance(instance, dict) and isinstance(schema, dict):
        bound = schema.get("maxProperties")
        return isinstance(bound, int) and len(instance) > bound
    return False


def _bounded(keyword: str) -> Any:
    """`keyword`, skipped when `maxItems`/`maxProperties` already fails: an array or object
    past its bound is refused anyway, so its members are not looked at (comparing every
    pair for `uniqueItems` is quadratic), and it costs no more than its length."""
    stock = Draft202012Validator.VALIDATORS[keyword]

    def bounded(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        # The stock keyword's own iterator, not one wrapped in another generator: this
        # runs for every object and array a document holds.
        if _too_long(instance, schema):
            return iter(())
        errors: Iterator[Any] = stock(validator, value, instance, schema) or iter(())
        return errors

    return bounded


_BOUNDED = ("uniqueItems", "items", "prefixItems", "contains", "additionalProperties",
            "patternProperties", "propertyNames", "unevaluatedItems", "unevaluatedProperties")

# Instances a subschema was found to accept (a `$ref` target, by the schema object holding
# the `$ref`; a `properties` member, by its own subschema), with the instance's canonical
# form (bounded). Whether a subschema accepts an instance
# depends on nothing else here (no `$dynamicRef`; every file is one resource), so a
# remembered acceptance is exact; a refusal is always worked out afresh, for its errors.
# A document is mostly parts seen before (a script's steps, a suite's tasks, an id), and
# jsonschema makes a new validator object for every subschema it descends into.
_ACCEPTED: set[tuple[int, str]] = set()
_ACCEPTED_MAX = 16_384
_ACCEPTED_TEXT_MAX = 4_096  # longer parts are validated afresh (the key costs more)
# Whether the document under validation may use and feed `_ACCEPTED`: set by `issues` and
# `valid_script` for a document that is plain JSON and small enough for its canonical form
# to be worth keeping (see `_rememberable`); off for any other caller.
_REMEMBER: contextvars.ContextVar[bool] = contextvars.ContextVar("refsim_schema_memo",
                                                                  default=False)


def _remembered(schema: Any, instance: Any,
                errors: Callable[[], Iterator[Any]]) -> Iterator[Any]:
    """`errors()` (the errors of `instance` against `schema`), or none without a call when
    that pair was accepted before; an acceptance is remembered once the errors ran out
    empty (a caller that stopped at the first error left nothing to remember)."""
    key = None
    if _REMEMBER.get():
        text = canonical_or_none(instance)
        if text is not None and len(text) <= _ACCEPTED_TEXT_MAX:
            key = (id(schema), text)
            if key in _ACCEPTED:
                return
    failed = False
    for error in errors():
        failed = True
        yield error
    if not failed and key is not None:
        if len(_ACCEPTED) >= _ACCEPTED_MAX:
            _ACCEPTED.clear()
        _ACCEPTED.add(key)


def _remembered_ref(validator: Any, ref: str, instance: Any, schema: Any) -> Iterator[Any]:
    return _remembered(schema, instance,
                       lambda: validator._validate_reference(ref=ref, instance=instance))


_STOCK_PROPERTIES = Draft202012Validator.VALIDATORS["properties"]


def _remembered_properties(validator: Any, properties: Any, instance: Any,
                           schema: Any) -> Iterator[Any]:
    """`properties`, remembering per member as `$ref` does per target: the members of a
    body that differ from one request to the next are few (a run id, a suite), the rest is
    looked up instead of walked again. The stock keyword, member by member otherwise."""
    if not _REMEMBER.get() or not validator.is_type(instance, "object"):
        yield from _STOCK_PROPERTIES(validator, properties, instance, schema)
        return
    for name, subschema in properties.items():
        if name in instance:
            value = instance[name]
            yield from _remembered(subschema, value, functools.partial(
                validator.descend, value, subschema, path=name, schema_path=name))


def _rememberable(instance: Any, text: str | None, *, parsed: bool) -> bool:
    """A document whose canonical form `text` stands for it alone: small, and plain JSON (a
    tuple, which jsonschema takes for no array, writes as the list it is not). One a JSON
    parser made (`parsed`) is plain JSON without a look."""
    if text is None or len(text) > _ISSUES_KEY_MAX:
        return False
    if parsed:
        return True
    try:
        return bool(json.loads(text) == instance)
    except RecursionError:
        return False


def _unevaluated_properties() -> Any:
    """`unevaluatedProperties`, skipped when every member of the object is named by the
    same schema's `properties`. The stock keyword finds the evaluated members by walking
    every applicator again (and descending each member into this keyword's own subschema:
    one error object per member for `false`) only to collect their names, and a name that
    `properties` lists is always among them; so when all are, it has nothing to report.
    A create-run body is in that case unless it carries an unknown member."""
    bounded = _bounded("unevaluatedProperties")

    def unevaluated(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if (isinstance(instance, dict) and isinstance(properties, dict)
                and instance.keys() <= properties.keys()):
            return iter(())
        errors: Iterator[Any] = bounded(validator, value, instance, schema)
        return errors

    return unevaluated


_Validator = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator, {"$ref": _remembered_ref, "properties": _remembered_properties}
    | {keyword: _bounded(keyword) for keyword in _BOUNDED}
    | {"unevaluatedProperties": _unevaluated_properties()})


@functools.cache
def validator(ref: str) -> Draft202012Validator:
    """A validator for `ref`: a file name, optionally with a `#/...` fragment."""
    made: Draft202012Validator = _Validator({"$ref": BASE + ref}, registry=registry())
    return made


def _leaves(errors: Any) -> Iterator[Any]:
    for error in errors:
        if error.context:
            yield from _leaves(error.context)
        else:
            yield error


_ISSUES: dict[tuple[str, str, int | None], tuple[SchemaIssue, ...]] = {}
_ISSUES_MAX = 4096
# Documents larger than this are validated afresh: their canonical form would cost more to
# keep than the validation saves.
_ISSUES_KEY_MAX = 16_384


def issues(ref: str, instance: Any, max_issues: int | None = None, *,
           parsed: bool = False) -> list[SchemaIssue]:
    """Every schema failure of `instance` against `ref` (the first `max_issues` found,
    when given, so a body with many faults costs no more than a few), sorted, as pointer +
    keyword.

    Remembered by canonical form (bounded): the schemas are fixed for the process, and a
    machine run sends the same suites and bodies again and again. `parsed` says the
    instance came from a JSON parser (plain JSON: no check needed that it is)."""
    text = canonical_or_none(instance)
    remember = _rememberable(instance, text, parsed=parsed)
    key = (ref, text, max_issues) if remember and text is not None else None
    known = _ISSUES.get(key) if key is not None else None  # one look: lanes share it
    if known is not None:
        return list(known)
    token = _REMEMBER.set(remember)
    try:
        found = {SchemaIssue(_pointer(e.absolute_path), str(e.validator))
                 for e in itertools.islice(_leaves(validator(ref).iter_errors(instance)),
                                           max_issues)}
    finally:
        _REMEMBER.reset(token)
    result = sorted(found, key=lambda i: (i.pointer, i.keyword))
    if key is not None:
        if len(_ISSUES) >= _ISSUES_MAX:
            _ISSUES.clear()
        _ISSUES[key] = tuple(result)
    return result


def is_valid(ref: str, instance: Any) -> bool:
    return bool(validator(ref).is_valid(instance))


_SCRIPT_VERDICTS: dict[str, bool] = {}
_SCRIPT_VERDICTS_MAX = 4096


def valid_script(script: Any, *, parsed: bool = False) -> bool:
    """Whether `script` validates against script.schema.json, remembered by canonical form:
    the schema is fixed for the process, a validation costs milliseconds and a canonical
    form microseconds, and fuzzing sends the same few scripts again and again."""
    key = canonical_or_none(script)
    if key is None or not _rememberable(script, key, parsed=parsed):
        return is_valid("script.schema.json", script)
    verdict = _SCRIPT_VERDICTS.get(key)
    if verdict is None:
        token = _REMEMBER.set(True)
        try:
            verdict = is_valid("script.schema.json", script)
        finally:
            _REMEMBER.reset(token)
        if len(_SCRIPT_VERDICTS) >= _SCRIPT_VERDICTS_MAX:
            _SCRIPT_VERDICTS.clear()
        _SCRIPT_VERDICTS[key] = verdict
    return verdict
