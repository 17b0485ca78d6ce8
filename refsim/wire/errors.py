"""Refusals on the wire: each code answered at the status the v2 error registry gives it.

The domain names a code only; the status is picked here, once, from specs/error-registry.json.
"""

from __future__ import annotations

import re

from refsim.data.registry_codes import registry
from refsim.domain.refusals import Refusal

VENDOR_CODE_RE = re.compile(r"^(?!openwop\.)[a-z][a-z0-9]*(-[a-z0-9]+)*\.[a-z][a-z0-9_]*$")
# What a code the registry lacks leaves as: this host answers with registered codes only, so
# another code is a bug, shown as one (and a reading such as gone-copy-code may choose one).
UNREGISTERED = Refusal("internal_error", "the host tried to answer with an unregistered error code")


def is_registered(code: str, status: int | None = None) -> bool:
    """A registered code (at its registered status, when given) or a vendor code: what any
    host may answer with."""
    if VENDOR_CODE_RE.match(code):
        return True
    registered = registry().get(code)
    return registered is not None and (status is None or registered == status)


def checked(refusal: Refusal) -> tuple[int, Refusal]:
    """The status a refusal leaves at, from the registry, and the refusal that leaves."""
    status = registry().get(refusal.code)
    if status is None:
        return registry()[UNREGISTERED.code], UNREGISTERED
    return status, refusal
