"""Tenant-bound ids (`<tenant>/<opaque>`), their v2 grammar and the `~2F` path projection.

An id that does not decode is a value, never an exception: callers get `None`.
"""

from __future__ import annotations

import random
import re

import attrs

TENANT_RE = re.compile(r"^(anon:)?[A-Za-z0-9._~-]{1,128}$")
WORKSPACE_RE = re.compile(r"^[A-Za-z0-9._~-]{1,128}$")
OPAQUE_RE = re.compile(r"^[A-Za-z0-9._~-]{16,128}$")
BOUND_RE = re.compile(r"^(anon:)?[A-Za-z0-9._~-]{1,128}/[A-Za-z0-9._~-]{16,128}$")

_PASSTHROUGH = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_HEX = frozenset("0123456789abcdefABCDEF")
# Minted opaque segments use a plain alphabet: never `~` (the grammar forbids minting it).
_MINT_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
# Random bytes become alphabet characters through one table (a slight bias towards the
# first characters is no concern for ids), so minting costs a slice, not a draw per char.
_MINT_TABLE = bytes(ord(_MINT_ALPHABET[b % len(_MINT_ALPHABET)]) for b in range(256))
_POOL_BYTES = 4096


@attrs.frozen(order=True)
class RunId:
    """A parsed tenant-bound run id."""

    tenant: str
    opaque: str

    @property
    def bound(self) -> str:
        return f"{self.tenant}/{self.opaque}"

    @property
    def projected(self) -> str:
        return project(self.bound)

    def __str__(self) -> str:
        return self.bound


def parse_bound(value: object) -> RunId | None:
    """The `RunId` of a bound-form string, or None when it is not one."""
    if not isinstance(value, str) or not BOUND_RE.fullmatch(value):
        return None
    tenant, _, opaque = value.rpartition("/")
    return RunId(tenant, opaque)


def seen_parts(run_id: str) -> tuple[str, str]:
    """An id a host minted, as the checker may take it apart without assuming a shape:
    `(head, tail)`, split after its last `/` where it holds one (a bound id's tenant
    segment with the `/`, and its opaque segment), else `("", run_id)`: an id of another
    shape is one opaque whole. `head + tail == run_id` always."""
    head, sep, tail = run_id.rpartition("/")
    return head + sep, tail


def spliced(head_of: str, tail_of: str) -> str | None:
    """`head_of`'s head with `tail_of`'s tail (another id's opaque part under this id's
    tenant), where both ids have a head and the heads differ; None where the ids carry no
    part to splice (an id without a separator) or splicing gives one of them back."""
    head, _ = seen_parts(head_of)
    other, tail = seen_parts(tail_of)
    if not head or not other or head == other or not tail:
        return None
    return head + tail


# The projection of every ASCII character, for `str.translate` (a C loop, not a Python one).
_PROJECT_ASCII = {b: chr(b) if b in _PASSTHROUGH else f"~{b:02X}" for b in range(128)}


def project(bound: str) -> str:
    """Project an id to one path segment: each byte outside `[A-Za-z0-9._-]` as `~XX`."""
    if bound.isascii():
        return bound.translate(_PROJECT_ASCII)
    return "".join(chr(b) if b in _PASSTHROUGH else f"~{b:02X}" for b in bound.encode("utf-8"))


class ProjectionError(ValueError):
    """A path segment with a `~` or `%` not followed by two hex digits."""


_ESCAPE_RE = re.compile(r"[~%]([0-9A-Fa-f]{2})")


def unproject(segment: str) -> str:
    """Decode a projected (`~2F`) or percent-encoded (`%2F`) segment to its bound form.

    Raises ProjectionError on a dangling escape; the router turns that into a
    400. Bytes that do not form UTF-8 also raise ProjectionError.
    """
    try:
        if "~" not in segment and "%" not in segment:
            segment.encode("utf-8")  # a lone surrogate cannot be decoded to
            return segment
        out = bytearray()
        at = 0
        for match in _ESCAPE_RE.finditer(segment):
            _plain(segment, at, match.start(), out)
            out.append(int(match.group(1), 16))
            at = match.end()
        _plain(segment, at, len(segment), out)
    except UnicodeEncodeError as exc:
        raise ProjectionError("the segment holds a lone surrogate") from exc
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProjectionError("escaped bytes are not UTF-8") from exc


def _plain(segment: str, start: int, end: int, out: bytearray) -> None:
    """Append segment[start:end], which holds no well-formed escape, as UTF-8; a `~` or `%`
    there is one not followed by two hex digits. Errors come in the order a left-to-right
    reading meets them."""
    part = segment[start:end]
    found = [i for i in (part.find("~"), part.find("%")) if i >= 0]
    if not found:
        out += part.encode("utf-8")
        return
    first = min(found)
    out += part[:first].encode("utf-8")
    raise ProjectionError(f"escape {part[first]!r} at offset {start + first} is not followed "
                          "by two hex digits")


def parse_segment(segment: str, default_tenant: str | None = None) -> RunId | None:
    """Parse a path segment (projected, percent-encoded or bare opaque) to a RunId.

    A bare opaque segment resolves under `default_tenant` (the v1 overlap rule).
    Returns None for anything that does not decode to the grammar.
    """
    try:
        bound = unproject(segment)
    except (ProjectionError, UnicodeError):  # a dangling escape, or a lone surrogate
        return None
    return parse_decoded(bound, default_tenant)


def parse_decoded(bound: str, default_tenant: str | None = None) -> RunId | None:
    """`parse_segment` after the segment is unprojected: the bound form, or a bare opaque
    segment under `default_tenant`."""
    parsed = parse_bound(bound)
    if parsed is None and default_tenant is not None and OPAQUE_RE.fullmatch(bound):
        return RunId(default_tenant, bound)
    return parsed


@attrs.define
class IdMinter:
    """Mints opaque segments from a seeded generator, so a seeded host is reproducible."""

    seed: int
    _rng: random.Random = attrs.field(init=False)
    # Characters drawn ahead from `_rng`, consumed left to right: the same seed mints the
    # same sequence, and a call costs a slice instead of one `random.choice` per character.
    _pool: str = attrs.field(init=False, default="")
    _pos: int = attrs.field(init=False, default=0)
    _hex_pool: str = attrs.field(init=False, default="")
    _hex_pos: int = attrs.field(init=False, default=0)

    def __attrs_post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def opaque(self, length: int = 20) -> str:
        pos, end = self._pos, self._pos + length
        if end > len(self._pool):
            self._pool = self._pool[pos:] + self._draw(max(_POOL_BYTES, length))
            pos, end = 0, length
        self._pos = end
        return self._pool[pos:end]

    def _draw(self, n: int) -> str:
        return self._rng.randbytes(n).translate(_MINT_TABLE).decode("ascii")

    def run_id(self, tenant: str) -> RunId:
        return RunId(tenant, "run-" + self.opaque(20))

    def uuid_like(self) -> str:
        pos = self._hex_pos
        if pos + 32 > len(self._hex_pool):
            self._hex_pool, pos = self._rng.randbytes(_POOL_BYTES).hex(), 0
        self._hex_pos = pos + 32
        h = self._hex_pool[pos:pos + 32]
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"
