"""Guards the wire: only registered codes (or vendor codes) at their registered status."""

from __future__ import annotations

import re

from refsim.domain.refusals import Refusal
from refsim.registry_codes import registry

VENDOR_CODE_RE = re.compile(r"^(?!openwop\.)[a-z][a-z0-9]*(-[a-z0-9]+)*\.[a-z][a-z0-9_]*$")


def is_registered(code: str, status: int | None = None) -> bool:
    """A registered code (at its registered status, when given) or a vendor code."""
    if VENDOR_CODE_RE.match(code):
        return True
    registered = registry().get(code)
    return registered is not None and (status is None or registered == status)


def checked(refusal: Refusal) -> Refusal:
    """Guard the wire: an unregistered code or a wrong status is a bug, shown as one."""
    if not is_registered(refusal.code, refusal.status):
        return Refusal(500, "internal_error",
                       "the host tried to answer with an unregistered error code")
    return refusal
