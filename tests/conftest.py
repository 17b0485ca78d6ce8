from __future__ import annotations

import pytest

from refsim import SimHost

KEY_A = "hk_test_acme"
KEY_B = "hk_test_globex"
RECORDER = "conformance.eval:recorder"


@pytest.fixture
def host() -> SimHost:
    return SimHost(seed=0)
