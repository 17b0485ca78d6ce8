"""The RFC's classes, once, as data (`specs/classes.yaml`): each class's RFC line and its
members, the operations that turn a seen id, task key or argument set into a member, and two
drawers over the same data: `strategy_*` for the stateful machine (Hypothesis) and `sample`
for `refsim check` (a bounded, seeded sample, without importing Hypothesis).

Operations read an id as text: nothing here splits an id or assumes a tenant prefix.

    from refsim.check import classes
    classes.derive(classes.load().source.from_id[0], "acme/run-0123456789abcdef")
"""

from __future__ import annotations

import functools
import itertools
import random
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import attrs

from refsim.data import paths, yaml_data
from refsim.domain.canonical import canonical
from refsim.domain.ids import project

FILE = "specs/classes.yaml"
CLASS_NAMES = ("source-values", "run-states", "task-keys", "exact-args", "owner-routes",
               "request-headers")
# The operations a `from-id` / `from-key` member may name, one key each (besides `name`).
TEXT_OPS = frozenset({"case", "before", "after", "insert", "cut", "repeat", "replace",
                      "percent", "fullwidth", "lookalike", "wrap", "splice", "project",
                      "shift", "keep-after-last"})
ARG_OPS = frozenset({"numbers", "booleans", "strings", "lists", "nulls", "add", "drop",
                     "wrap"})
RECIPES = frozenset({"eval", "workflow", "eval-of-eval", "trials", "cancelled", "waiting",
                     "resolved", "noop", "unheld", "failed-call", "erased"})
# At most this many members per class in one `refsim check` sample (the bound is printed).
SAMPLE_SIZE = 12


class ClassDataError(ValueError):
    """specs/classes.yaml does not say what a class needs; the message names where."""


@attrs.frozen
class Op:
    """One named member that turns a text (an id, a task key) or an argument set into
    another: `spec` is the member as the data writes it."""

    name: str
    spec: Mapping[str, Any]


@attrs.frozen
class RunState:
    name: str
    recipe: str
    terminal: bool
    invokes_agent: bool
    usable: bool | str  # True, False or "with-fixture-errors"


@attrs.frozen
class Route:
    name: str
    method: str
    path: str
    body: Any
    needs: str | None
    headers: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class Listing:
    """A listing another tenant may ask: it answers, and shows nothing of the owner's run.
    `path` may hold `{workflow}` and `{status}`, the run's own as its owner reads them."""

    name: str
    path: str


@attrs.frozen
class Classes:
    rfc: Mapping[str, str]
    requirement: Mapping[str, str]
    id_shaped: tuple[re.Pattern[str], ...]
    values: tuple[Any, ...]
    value_patterns: tuple[str, ...]
    from_id: tuple[Op, ...]
    from_two_ids: tuple[Op, ...]
    named_twice: tuple[NamedTwiceMember, ...]
    run_states: tuple[RunState, ...]
    owners: tuple[str, ...]
    key_values: tuple[str, ...]
    key_patterns: tuple[str, ...]
    from_key: tuple[Op, ...]
    recorded_args: tuple[Mapping[str, Any], ...]
    arg_variants: tuple[Op, ...]
    routes: tuple[Route, ...]
    spellings: tuple[Op, ...]
    idempotent: tuple[Mapping[str, str], ...]
    listings: tuple[Listing, ...]
    headers: tuple[tuple[str, Mapping[str, str]], ...]

    def id_like(self, value: Any) -> bool:
        """A string of a shape a run id could have: held to the unknown id's whole answer."""
        return isinstance(value, str) and any(p.match(value) for p in self.id_shaped)


def _need(doc: Any, key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(doc, dict) or key not in doc:
        raise ClassDataError(f"{FILE}: {where} has no {key!r}")
    value = doc[key]
    if not isinstance(value, kind):
        raise ClassDataError(f"{FILE}: {where}.{key} is not a {getattr(kind, '__name__', kind)}")
    return value


def _ops(items: Any, where: str, allowed: frozenset[str]) -> tuple[Op, ...]:
    if not isinstance(items, list):
        raise ClassDataError(f"{FILE}: {where} is not a list")
    out: list[Op] = []
    names: set[str] = set()
    for index, item in enumerate(items):
        name = _need(item, "name", f"{where}[{index}]", str)
        ops = set(item) - {"name"}
        if not (len(ops) == 1 or ops == {"before", "after"}) or not ops <= allowed:
            raise ClassDataError(f"{FILE}: {where} member {name!r} must name one operation of "
                                 f"{', '.join(sorted(allowed))} (it names {sorted(ops)})")
        if name in names:
            raise ClassDataError(f"{FILE}: {where} names {name!r} twice")
        names.add(name)
        op = Op(name, dict(item))
        try:  # an operation's parameters are checked by using it once
            if allowed is ARG_OPS:
                vary(op, _PROBE_ARGS)
            else:
                derive(op, "acme/probe-0123456789abcdef", "globex/probe-fedcba9876543210")
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise ClassDataError(f"{FILE}: {where} member {name!r}: {exc}") from exc
        out.append(op)
    return tuple(out)


# The values a `named-twice` member may name: the caller's usable run, another tenant's run,
# and an id of no run shaped like the caller's.
ROLES = ("usable", "foreign", "unknown")


@attrs.frozen
class NamedTwiceMember:
    """fixtureRuns naming one task twice, with the values of these roles in this order."""

    name: str
    roles: tuple[str, str]


def _named_twice(item: Any, where: str) -> NamedTwiceMember:
    roles = _need(item, "values", where, list)
    if len(roles) != 2 or not all(r in ROLES for r in roles) or "usable" not in roles:
        raise ClassDataError(f"{FILE}: {where}.values names two of {', '.join(ROLES)}, "
                             "the caller's usable run among them")
    return NamedTwiceMember(_need(item, "name", where, str), (str(roles[0]), str(roles[1])))


class NamedTwice(dict[str, Any]):
    """A JSON object that names a member more than once when it is encoded: `json` writes a
    dict subclass's `items()`, so the text carries every pair (RFC 8259 §4: names SHOULD be
    unique; I-JSON, RFC 7493: MUST). As a dict it holds the last value of each name."""

    def __init__(self, pairs: Sequence[tuple[str, Any]]) -> None:
        super().__init__(pairs)
        self.pairs = tuple(pairs)

    def items(self) -> Any:  # every pair, as the text is written
        return list(self.pairs)


def _listing(item: Any, where: str) -> Listing:
    path = _need(item, "path", where, str)
    if not path.startswith("/runs") or "{id}" in path:
        raise ClassDataError(f"{FILE}: {where}.path is a listing of runs (/runs...), with "
                             "no {id}")
    return Listing(_need(item, "name", where, str), path)


def listed(listing: Listing, snapshot: Any) -> str:
    """The listing's path with the run's workflowId and status, as its owner's `snapshot`
    (GET /runs/{id}) shows them, put in URL-encoded (empty where it shows none)."""
    shown = snapshot if isinstance(snapshot, dict) else {}
    return (listing.path.replace("{workflow}", quote(str(shown.get("workflowId", "")), safe=""))
            .replace("{status}", quote(str(shown.get("status", "")), safe="")))


def _patterns(items: Any, where: str) -> tuple[str, ...]:
    if not isinstance(items, list) or not all(isinstance(p, str) for p in items):
        raise ClassDataError(f"{FILE}: {where} is not a list of regular expressions")
    for p in items:
        try:
            re.compile(p)
        except re.error as exc:
            raise ClassDataError(f"{FILE}: {where}: {p!r} does not compile: {exc}") from exc
    return tuple(items)


_PROBE_ARGS: dict[str, Any] = {"op": "read", "key": "k", "n": 1, "tags": ["a", "b"], "label": "Ab",
               "note": None, "flag": True}


@functools.cache
def load() -> Classes:
    """specs/classes.yaml, checked: every class present, every member well formed."""
    path = paths.SPECS / "classes.yaml"
    try:
        doc = yaml_data.load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ClassDataError(f"{FILE}: cannot be read: {exc}") from exc
    found = _need(doc, "classes", "the file", dict)
    for name in CLASS_NAMES:
        if name not in found:
            raise ClassDataError(f"{FILE}: the class {name!r} is missing")
        _need(found[name], "rfc", name, str)
    src, states, keys = found["source-values"], found["run-states"], found["task-keys"]
    args, routes, heads = found["exact-args"], found["owner-routes"], found["request-headers"]
    run_states = []
    for index, m in enumerate(_need(states, "members", "run-states", list)):
        where = f"run-states.members[{index}]"
        recipe = _need(m, "recipe", where, str)
        if recipe not in RECIPES:
            raise ClassDataError(f"{FILE}: {where}: no recipe {recipe!r}; "
                                 f"the machine makes {', '.join(sorted(RECIPES))}")
        usable = _need(m, "usable", where, (bool, str))
        if usable not in (True, False, "with-fixture-errors"):
            raise ClassDataError(f"{FILE}: {where}.usable is true, false or "
                                 "with-fixture-errors")
        run_states.append(RunState(_need(m, "name", where, str), recipe,
                                   bool(_need(m, "terminal", where, bool)),
                                   bool(_need(m, "invokes-agent", where, bool)), usable))
    route_list = []
    for index, r in enumerate(_need(routes, "routes", "owner-routes", list)):
        where = f"owner-routes.routes[{index}]"
        path_ = _need(r, "path", where, str)
        if "{id}" not in path_:
            raise ClassDataError(f"{FILE}: {where}.path has no {{id}}")
        headers = r.get("headers") or {}
        if not isinstance(headers, dict):
            raise ClassDataError(f"{FILE}: {where}.headers is a map of header to value")
        route_list.append(Route(_need(r, "name", where, str),
                                _need(r, "method", where, str), path_,
                                r.get("body"), r.get("needs"),
                                {str(k): str(v) for k, v in headers.items()}))
    header_list = []
    for index, h in enumerate(_need(heads, "members", "request-headers", list)):
        where = f"request-headers.members[{index}]"
        headers = _need(h, "headers", where, dict)
        header_list.append((_need(h, "name", where, str),
                            {str(k): str(v) for k, v in headers.items()}))
    recorded = _need(args, "recorded", "exact-args", list)
    if not recorded or not all(isinstance(a, dict) and not {"op", "key"} & set(a)
                               for a in recorded):
        raise ClassDataError(f"{FILE}: exact-args.recorded is a list of argument sets "
                             "without op or key (the counter's own)")
    return Classes(
        rfc={name: " ".join(str(found[name]["rfc"]).split()) for name in CLASS_NAMES},
        requirement={name: str(found[name].get("requirement", "")) for name in CLASS_NAMES},
        id_shaped=tuple(re.compile(p) for p in _patterns(
            _need(src, "id-shaped", "source-values", list), "source-values.id-shaped")),
        values=tuple(_need(src, "values", "source-values", list)),
        value_patterns=_patterns(_need(src, "patterns", "source-values", list),
                                 "source-values.patterns"),
        from_id=_ops(_need(src, "from-id", "source-values", list), "source-values.from-id",
                     TEXT_OPS),
        named_twice=tuple(_named_twice(m, f"source-values.named-twice[{i}]")
                          for i, m in enumerate(src.get("named-twice") or [])),
        from_two_ids=_ops(src.get("from-two-ids", []), "source-values.from-two-ids",
                          TEXT_OPS),
        run_states=tuple(run_states),
        owners=tuple(_need(states, "owners", "run-states", list)),
        key_values=tuple(str(v) for v in _need(keys, "values", "task-keys", list)),
        key_patterns=_patterns(_need(keys, "patterns", "task-keys", list),
                               "task-keys.patterns"),
        from_key=_ops(_need(keys, "from-key", "task-keys", list), "task-keys.from-key",
                      TEXT_OPS),
        recorded_args=tuple(recorded),
        arg_variants=_ops(_need(args, "variants", "exact-args", list), "exact-args.variants",
                          ARG_OPS),
        routes=tuple(route_list),
        spellings=_ops(_need(routes, "spellings", "owner-routes", list),
                       "owner-routes.spellings", TEXT_OPS),
        idempotent=tuple(_need(routes, "idempotent-creates", "owner-routes", list)),
        listings=tuple(_listing(m, f"owner-routes.listings[{i}]")
                       for i, m in enumerate(routes.get("listings") or [])),
        headers=tuple(header_list))


# ----------------------------------------------------------------------------- text operations

_FULLWIDTH = {c: chr(ord(c) + 0xFEE0) for c in map(chr, range(0x21, 0x7F))}


def derive(op: Op, text: str, other: str | None = None, at: int = 0) -> Any:
    """`text` turned by `op` (None where it leaves `text` as it was). A splice takes the head
    of `text` and the tail of `other` at the `at`-th cut point (mod their number)."""
    spec = op.spec
    if "case" in spec:
        out: Any = {"upper": text.upper, "lower": text.lower, "swap": text.swapcase,
                    "title": text.title}[spec["case"]]()
    elif "before" in spec or "after" in spec:
        out = str(spec.get("before", "")) + text + str(spec.get("after", ""))
    elif "insert" in spec:
        out = text[:len(text) // 2] + str(spec["insert"]) + text[len(text) // 2:]
    elif "cut" in spec:
        out = {"last": text[:-1], "first": text[1:], "half": text[:len(text) // 2]}[spec["cut"]]
    elif "repeat" in spec:
        out = text * int(spec["repeat"])
    elif "replace" in spec:
        old, new = spec["replace"]
        out = text.replace(str(old), str(new))
    elif "shift" in spec:
        out = shifted(text)
    elif "keep-after-last" in spec:  # the text after the last such character, where any
        mark = str(spec["keep-after-last"])
        out = text.rpartition(mark)[2] if mark in text else text
    elif "project" in spec:
        out = project(text)
    elif "percent" in spec:
        out = "".join(f"%{b:02X}" for b in text.encode())
    elif "fullwidth" in spec:
        out = "".join(_FULLWIDTH.get(c, c) for c in text)
    elif "lookalike" in spec:
        table = {str(k): str(v) for k, v in spec["lookalike"].items()}
        index = next((i for i, c in enumerate(text) if c in table), None)
        out = text if index is None else text[:index] + table[text[index]] + text[index + 1:]
    elif "wrap" in spec:
        out = {"list": [text], "object": {"runId": text}}[spec["wrap"]]
    elif "splice" in spec:
        if other is None or other == text:
            return None
        cuts = splice_points(text, other)
        cut = cuts[at % len(cuts)]
        out = text[:cut] + other[cut:]
    else:
        raise ValueError(f"no operation in {dict(spec)}")
    return None if out == text or out is None else out


def shifted(text: str) -> str:
    """`text` with its last ASCII letter or digit moved to the next one of its kind (z to
    a, 9 to 0): the same length and shape, another value."""
    for index in range(len(text) - 1, -1, -1):
        c = text[index]
        for first, size in (("a", 26), ("A", 26), ("0", 10)):
            if ord(first) <= ord(c) < ord(first) + size:
                moved = chr(ord(first) + (ord(c) - ord(first) + 1) % size)
                return text[:index] + moved + text[index + 1:]
    return text


def splice_points(a: str, b: str) -> list[int]:
    """Where two ids may be cut and joined: after each character of `a` that is no letter
    or digit (wherever the shape has parts), and at the middle."""
    points = {i + 1 for i, c in enumerate(a[:-1]) if not c.isalnum() and i + 1 < len(b)}
    points.add(min(len(a), len(b)) // 2)
    return sorted(points)


def nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


# ----------------------------------------------------------------------------- argument variants

def _walk(value: Any, leaf: Callable[[Any], Any], lists: Callable[[list[Any]], list[Any]]
          | None = None, drop_nulls: bool = False) -> Any:
    if isinstance(value, dict):
        return {k: _walk(v, leaf, lists, drop_nulls) for k, v in value.items()
                if not (drop_nulls and v is None)}
    if isinstance(value, list):
        items = [_walk(v, leaf, lists, drop_nulls) for v in value
                 if not (drop_nulls and v is None)]
        return lists(items) if lists is not None else items
    return leaf(value)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def vary(op: Op, args: Mapping[str, Any]) -> Any:
    """`args` turned by the variant `op`, its `op` and `key` members (the counter's own)
    kept; None where the variant changes nothing in them."""
    spec = op.spec
    own = {k: v for k, v in args.items() if k in ("op", "key")}
    rest = {k: v for k, v in args.items() if k not in ("op", "key")}
    def same(v: Any) -> Any:
        return v
    if "numbers" in spec:
        change = {"text": lambda v: str(v) if _number(v) else v,
                  "plus-one": lambda v: v + 1 if _number(v) else v}[spec["numbers"]]
        out: Any = _walk(rest, change)
    elif "booleans" in spec:
        out = _walk(rest, lambda v: int(v) if isinstance(v, bool) else v)
    elif "strings" in spec:
        fold: Callable[[str], str] = {
            "casefold": str.casefold, "upper": str.upper, "pad": lambda s: f" {s} ",
            "nfkc": nfkc, "nfd": lambda s: unicodedata.normalize("NFD", s),
            "nfc": lambda s: unicodedata.normalize("NFC", s)}[spec["strings"]]
        out = _walk(rest, lambda v: fold(v) if isinstance(v, str) else v)
    elif "lists" in spec:
        how: Callable[[list[Any]], list[Any]] = {
            "reverse": lambda xs: xs[::-1],
            "sort-descending": lambda xs: sorted(xs, key=repr, reverse=True),
            "drop-last": lambda xs: xs[:-1]}[spec["lists"]]
        out = _walk(rest, same, how)
    elif "nulls" in spec:
        out = _walk(rest, same, drop_nulls=True)
    elif "add" in spec:
        out = {**rest, **{k: v for k, v in spec["add"].items() if k not in rest}}
    elif "drop" in spec:
        out = {k: v for k, v in rest.items() if k != spec["drop"]}
    elif "wrap" in spec:
        out = {k: [v] if k == spec["wrap"] else v for k, v in rest.items()}
    else:
        raise ValueError(f"no operation in {dict(spec)}")
    if _same_json(out, rest):
        return None
    return {**own, **out}


def _same_json(a: Any, b: Any) -> bool:
    return bool(canonical(a) == canonical(b))


def value_name(value: Any) -> str:
    """A source value's member name: `value` and its JSON text."""
    return f"value {canonical(value)}"


def member_names(cls: str) -> list[str]:
    """Every member of `cls` under the name the machine counts it by (`refsim fuzz`)."""
    data = load()
    if cls == "source-values":
        return ([value_name(v) for v in data.values]
                + [f"pattern {p}" for p in data.value_patterns]
                + [op.name for op in (*data.from_id, *data.from_two_ids)]
                + [m.name for m in data.named_twice])
    if cls == "run-states":
        return [f"{s.name} ({owner})" for s in data.run_states for owner in data.owners]
    if cls == "task-keys":
        return ([f"value {v!r}" for v in data.key_values]
                + [f"pattern {p}" for p in data.key_patterns]
                + [op.name for op in data.from_key])
    if cls == "exact-args":
        return ([f"recorded {i}" for i in range(len(data.recorded_args))]
                + [op.name for op in data.arg_variants])
    if cls == "owner-routes":
        return ([f"{r.name} ({op.name})" for r in data.routes for op in data.spellings]
                + [str(m["name"]) for m in data.idempotent]
                + [m.name for m in data.listings])
    if cls == "request-headers":
        return [name for name, _ in data.headers]
    raise KeyError(f"no class {cls!r}; the classes are {', '.join(CLASS_NAMES)}")


# ----------------------------------------------------------------------------- check's sample

@attrs.frozen
class Member:
    """One member drawn for a class: its class, its member name, and its value."""

    cls: str
    name: str
    value: Any


def _take(rng: random.Random, items: Sequence[Member], size: int) -> list[Member]:
    if len(items) <= size:
        return list(items)
    return rng.sample(list(items), size)


def _regex_example(rng: random.Random, pattern: str) -> str | None:
    """A string of `pattern`, drawn without Hypothesis: the character classes and counted
    repeats this file's patterns use (`\\A`, `[...]{m,n}`, `.{m,n}`, literals, `\\Z`);
    None for a pattern of another form (then only the machine draws it)."""
    body = pattern.removeprefix("\\A").removeprefix("^").removesuffix("\\Z").removesuffix("$")
    token = re.compile(r"(\[[^\]]+\]|\.|[^\[\.{\\])(\{(\d+)(?:,(\d+))?\})?")
    out: list[str] = []
    pos = 0
    while pos < len(body):
        m = token.match(body, pos)
        if m is None:
            return None
        atom, low, high = m.group(1), m.group(3), m.group(4)
        count = rng.randint(int(low), int(high or low)) if low else 1
        if atom == ".":
            chars = [chr(c) for c in range(0x20, 0x7F)] + ["é", "\u200b", "ß", "\t"]
        elif atom.startswith("["):
            chars = _class_chars(atom[1:-1])
        else:
            chars = [atom]
        out.append("".join(rng.choice(chars) for _ in range(count)))
        pos = m.end()
    text = "".join(out)
    return text if re.fullmatch(body, text, re.DOTALL) else None


def _class_chars(spec: str) -> list[str]:
    chars: list[str] = []
    i = 0
    while i < len(spec):
        if i + 2 < len(spec) and spec[i + 1] == "-":
            chars += [chr(c) for c in range(ord(spec[i]), ord(spec[i + 2]) + 1)]
            i += 3
        else:
            chars.append(spec[i])
            i += 1
    return chars


def sample(cls: str, seed: int, *, ids: Sequence[str] = (), keys: Sequence[str] = (),
           args: Mapping[str, Any] | None = None, size: int = SAMPLE_SIZE) -> list[Member]:
    """A bounded, seeded sample of `cls` for `refsim check`: at most `size` members, the
    same for the same seed and inputs. `ids` are ids the caller has seen (own first, then
    another tenant's), `keys` the suite's task ids, `args` a recorded argument set."""
    data = load()
    rng = random.Random(f"{seed}:{cls}")
    pool: list[Member] = []
    if cls == "source-values":
        pool += [Member(cls, value_name(v), v) for v in data.values]
        pool += _drawn(cls, rng, data.value_patterns, data.from_id, ids)
        for op in data.from_two_ids:
            for a, b in itertools.pairwise(ids):
                value = derive(op, a, b, rng.randrange(1 << 16))
                if value is not None and value not in ids:
                    pool.append(Member(cls, op.name, value))
    elif cls == "task-keys":
        pool += [Member(cls, f"value {v!r}", v) for v in data.key_values if v not in keys]
        pool += _drawn(cls, rng, data.key_patterns, data.from_key, keys)
    elif cls == "exact-args":
        base = args if args is not None else {"op": "read", "key": "k", **data.recorded_args[0]}
        for op in data.arg_variants:
            value = vary(op, base)
            if value is not None:
                pool.append(Member(cls, op.name, value))
    elif cls == "run-states":
        pool += [Member(cls, f"{s.name} ({owner})", (s, owner)) for s in data.run_states
                 for owner in data.owners]
    elif cls == "owner-routes":
        pool += [Member(cls, r.name, r) for r in data.routes]
    elif cls == "request-headers":
        pool += [Member(cls, name, headers) for name, headers in data.headers]
    else:
        raise KeyError(f"no class {cls!r}; the classes are {', '.join(CLASS_NAMES)}")
    return _take(rng, _distinct(pool), size)


def _drawn(cls: str, rng: random.Random, patterns: Sequence[str], ops: Sequence[Op],
           texts: Sequence[str]) -> list[Member]:
    """A class's members made from data beside its literal values: one string of each
    pattern, and each operation on each seen text (an id, a task key); none that is one of
    `texts` itself."""
    out = [Member(cls, f"pattern {p}", drawn) for p in patterns
           if (drawn := _regex_example(rng, p)) is not None and drawn not in texts]
    for op in ops:
        for text in texts:
            value = derive(op, text)
            if value is not None and value not in texts:
                out.append(Member(cls, op.name, value))
    return out


def _distinct(pool: Iterable[Member]) -> list[Member]:
    seen: set[str] = set()
    out: list[Member] = []
    for m in pool:
        key = m.name if m.cls in ("run-states", "owner-routes", "request-headers") else (
            canonical(m.value))
        if key not in seen:
            seen.add(key)
            out.append(m)
    return out


def headers_for(headers: Mapping[str, str], fresh: Callable[[], str]) -> dict[str, str]:
    """A header member's headers, `{fresh}` replaced by a fresh value each time."""
    return {k: fresh() if v == "{fresh}" else v for k, v in headers.items()}


def with_recorded(args: Mapping[str, Any], which: int) -> dict[str, Any]:
    """A counter call's arguments with the `which`-th recorded argument set beside them."""
    recorded = load().recorded_args
    return {**args, **recorded[which % len(recorded)]}


def spelt(route: Route, run_id: str, spelling: Op) -> str:
    """The route's path with `run_id` in `spelling` (the id as it is where the spelling
    does not change it)."""
    value = derive(spelling, run_id)
    return route.path.replace("{id}", value if isinstance(value, str) else run_id)


__all__ = [
    "CLASS_NAMES",
    "ROLES",
    "ClassDataError",
    "Classes",
    "Listing",
    "Member",
    "NamedTwice",
    "NamedTwiceMember",
    "Op",
    "Route",
    "RunState",
    "derive",
    "headers_for",
    "listed",
    "load",
    "member_names",
    "nfkc",
    "sample",
    "shifted",
    "spelt",
    "splice_points",
    "value_name",
    "vary",
    "with_recorded",
]
