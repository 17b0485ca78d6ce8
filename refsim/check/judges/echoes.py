"""Judges of what an answer carries of an id it was given (RFC 0252 §C): the forms an id
can come back in (`id_forms`, `encoded_forms`), the runs of it a text carries (`echoed`),
`no_echo` with its control value, and no other tenant's run id on an answer.

Part of `refsim.check.judges` (import the judges from there). A new judge of an id echoed or
leaked on the wire goes here, and is re-exported by `refsim.check.judges`.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote, unquote

from refsim.check.findings import Finding, check, fail, ok
from refsim.check.judges.answers import _obs
from refsim.domain.ids import ProjectionError, parse_bound, project, unproject
from refsim.wire.response import Response

ECHO_WINDOW = 8  # an echo is any run of this many characters of the supplied id


@functools.lru_cache(maxsize=4096)
def id_forms(value: str) -> frozenset[str]:
    """Every encoding in which a supplied id could come back: bound, `~2F`-projected,
    percent-encoded (either case, or every byte), JSON-escaped, and its opaque segment.
    Remembered (bounded): a machine run asks for the same ids' forms after every step."""
    forms = {value, project(value), value.replace("/", "%2F"), value.replace("/", "%2f"),
             value.replace("/", "\\/"), quote(value, safe=""), quote(value, safe="").lower(),
             json.dumps(value, ensure_ascii=True)[1:-1]}
    parsed = parse_bound(value)
    if parsed is not None:
        forms.add(parsed.opaque)
    return frozenset(f for f in forms if len(f) >= 4)


@functools.lru_cache(maxsize=4096)
def encoded_forms(value: str) -> frozenset[str]:
    """The supplied id packed the ways a host could hide it: base64 (standard and URL-safe,
    from each of the three byte alignments, so that any stretch of the id shows), base32
    (both alphabets, either case, from each of the five alignments) and hex (either case).
    Their runs of ECHO_WINDOW characters count as an echo too."""
    raw = value.encode("utf-8")
    forms: set[str] = set()
    for start in range(3):
        chunk = raw[start:]
        if len(chunk) >= 6:
            forms.add(base64.b64encode(chunk).decode("ascii").rstrip("="))
            forms.add(base64.urlsafe_b64encode(chunk).decode("ascii").rstrip("="))
    for start in range(5):  # base32, standard and extended-hex alphabets, either case
        chunk = raw[start:]
        if len(chunk) >= 10:
            for coded in (base64.b32encode(chunk), base64.b32hexencode(chunk)):
                text = coded.decode("ascii").rstrip("=")
                forms |= {text, text.lower()}
    forms |= {raw.hex(), raw.hex().upper()}
    return frozenset(f for f in forms if len(f) >= ECHO_WINDOW)


def _windows(value: str, size: int = ECHO_WINDOW) -> set[str]:
    if len(value) <= size:
        return {value} if len(value) >= 4 else set()
    return {value[i:i + size] for i in range(len(value) - size + 1)}


@functools.lru_cache(maxsize=4096)
def _id_windows(supplied: str) -> frozenset[str]:
    """Every ECHO_WINDOW-character run of every form of `supplied`, plain and packed
    (remembered, bounded). A base64 form's last characters depend on what follows the id,
    so those of its windows that end within two characters of its end are left out."""
    plain = {w for form in id_forms(supplied) for w in _windows(form)}
    plain |= {w.lower() for w in plain}  # met in the case-folded decoding
    packed = {form[i:i + ECHO_WINDOW] for form in encoded_forms(supplied)
              for i in range(max(0, len(form) - ECHO_WINDOW - 2) + 1)}
    return frozenset(plain | packed)


# Between the decodings `echoed` searches at once: the first that no window of the
# supplied value holds (so a window found in the joined text lies inside one decoding).
_APART = ("\x00", "\ufffe", "\U0010fffe", "\U0010ffff", "\ufdd0")


@functools.lru_cache(maxsize=4096)
def _separator(supplied: str) -> str | None:
    """A character no window of `supplied` holds, or None (each window is then searched
    for in each decoding)."""
    windows = _id_windows(supplied)
    return next((c for c in _APART if not any(c in w for w in windows)), None)


# `echoed` cuts the decodings into runs when the id has more windows than this and the
# decodings hold at most _GRAMS_TEXT_MAX characters (the set of runs is then bounded).
_GRAMS_FROM = 16
_GRAMS_TEXT_MAX = 65_536


@functools.lru_cache(maxsize=4096)
def _lengths(supplied: str) -> tuple[int, ...]:
    """The lengths of `supplied`'s windows (ECHO_WINDOW, and shorter forms' own)."""
    return tuple(sorted({len(w) for w in _id_windows(supplied)}))


def _decodings(text: str) -> list[str]:
    """The text as sent, and as a reader would decode it: %XX, ~XX and JSON escapes undone;
    and read case-folded and backwards (an id upper-cased or reversed is still the id).
    Text every refusal carries is set aside by the controls, read the same ways."""
    out = [text, unquote(text)]
    try:
        out.append(unproject(text))
    except (ProjectionError, UnicodeError):
        out.append(re.sub(r"~([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text))
    out.append(re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
               .replace("\\/", "/"))
    out += [out[1].lower(), out[1][::-1]]
    return out


def echoed(text: str, supplied: str) -> list[str]:
    """The runs of ECHO_WINDOW or more characters of `supplied` that `text` carries, in any
    of the encodings `id_forms` names (so a partial echo, less a few characters, counts)."""
    texts = list(dict.fromkeys(_decodings(text)))  # most decodings of a refusal are alike
    windows = _id_windows(supplied)
    if len(windows) > _GRAMS_FROM and sum(map(len, texts)) <= _GRAMS_TEXT_MAX:
        # The text's own runs of each window length, once, looked up in the windows: a
        # refusal is short and an id has a thousand windows, each otherwise a search.
        grams = {t[i:i + n] for n in _lengths(supplied) for t in texts
                 for i in range(len(t) - n + 1)}
        return sorted(windows.intersection(grams))
    apart = _separator(supplied)
    if apart is not None:  # one search per window instead of one per window and decoding
        joined = apart.join(texts)
        return sorted(w for w in _id_windows(supplied) if w in joined)
    return sorted(w for w in _id_windows(supplied) if any(w in t for t in texts))


def strings_in(value: Any) -> list[str]:
    """The strings a JSON value holds, at any depth (itself, where it is one)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings_in(v)]
    return []


def _text(response: Response) -> str:
    head = "\n".join(f"{k}: {v}" for k, v in response.headers.items())
    return head + "\n" + response.body.decode("utf-8", "replace")


def whole(response: Response) -> tuple[int, tuple[tuple[str, str], ...], bytes]:
    """A response as a client sees all of it: status, every header but Date, the body bytes."""
    headers = tuple(sorted((k.lower(), v) for k, v in response.headers.items()
                           if k.lower() != "date"))
    return response.status, headers, response.body


def no_foreign_run_ids(req: str, text: str, caller: str,
                       others: Iterable[tuple[str, str, Iterable[str]]]) -> Finding:
    """Isolation: an answer to `caller` carries no other tenant's run id. `others` holds
    (owner, run id, the strings any form of the id contains: `id_forms`, or the opaque
    segment every form shares)."""
    for owner, run_id, needles in others:
        if owner != caller and any(n in text for n in needles):
            return fail(req, f"a response to {caller} carries {owner}'s run id {run_id}")
    return ok(req, f"a response to {caller} carries no other tenant's run id")


def echo_windows(response: Response, supplied: Iterable[str]) -> set[str]:
    """The runs of ECHO_WINDOW characters of the supplied ids the response carries."""
    text = _text(response)
    return {w for value in supplied for w in echoed(text, value)}


def no_echo(req: str, response: Response, supplied: Iterable[str], what: str,
            controls: Sequence[Response] = (), same_as: Response | None = None) -> Finding:
    """§C: the refusal carries no run of 8 or more characters of the supplied id, in any
    encoding, in its headers or its body, that it carries because of this id.

    Text any refusal carries is not an echo: where a window of the id is found, the same
    request made with a control value in its place (`control_value`, same shape, no
    character in common) shows whether the host says it whatever the id is (the error
    code or a header value that happens to share characters with a tenant's name). An
    answer byte for byte `same_as`, the answer to another value, holds nothing that comes
    from this one: it is not searched."""
    if same_as is not None and whole(response) == whole(same_as):
        return ok(req, f"{what}: the answer is byte for byte the answer to another value, so "
                       "nothing in it comes from this one", _obs(response))
    values = list(supplied)
    found = echo_windows(response, values)
    fixed: set[str] = set()
    for control in controls:
        fixed |= echo_windows(control, values)
    leaked = sorted(found - fixed)
    return check(req, not leaked,
                 f"{what}: the response echoes the supplied id ({', '.join(leaked[:3])})"
                 if leaked else f"{what}: the supplied id appears in no form"
                 + (f" (text any refusal carries set aside: {', '.join(sorted(found)[:3])})"
                    if found else ""), _obs(response))


_CONTROL = str.maketrans(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
    "NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm5678901234")


def control_value(value: str) -> str:
    """A value of the same shape as `value` (separators kept) with every letter and digit
    replaced by another: it shares no ECHO_WINDOW run with `value`, so what the answer
    to it shares with the answer to `value` is text the host says whatever the value."""
    return value.translate(_CONTROL)
