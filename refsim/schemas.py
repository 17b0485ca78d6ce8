"""The JSON Schemas in specs/schemas/, loaded once into a `referencing` registry.

Schema errors are reported by JSON pointer and keyword only: jsonschema's own
messages quote the instance, and a refusal must never echo what the caller sent.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from refsim import paths

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
        resources.append((doc.get("$id", BASE + file.name),
                          Resource.from_contents(doc, default_specification=DRAFT202012)))
    return Registry().with_resources(resources)


@functools.cache
def validator(ref: str) -> Draft202012Validator:
    """A validator for `ref`: a file name, optionally with a `#/...` fragment."""
    return Draft202012Validator({"$ref": BASE + ref}, registry=registry())


def _leaves(errors: Any) -> Iterator[Any]:
    for error in errors:
        if error.context:
            yield from _leaves(error.context)
        else:
            yield error


def issues(ref: str, instance: Any) -> list[SchemaIssue]:
    """Every schema failure of `instance` against `ref`, sorted, as pointer + keyword."""
    found = {SchemaIssue(_pointer(e.absolute_path), str(e.validator))
             for e in _leaves(validator(ref).iter_errors(instance))}
    return sorted(found, key=lambda i: (i.pointer, i.keyword))


def is_valid(ref: str, instance: Any) -> bool:
    return bool(validator(ref).is_valid(instance))
