from __future__ import annotations

import pytest
from hypothesis import settings

from refsim import SimHost

KEY_A = "hk_test_acme"
KEY_B = "hk_test_globex"
RECORDER = "conformance.eval:recorder"

# The first failure ends a Hypothesis search here. By default Hypothesis goes on looking
# for other failures for up to 10 s after the first and shrinks each one it finds, which
# doubled the shrunk machine runs' cost; every test that expects a failure wants the one.
# On top of the profile in force (Hypothesis's own "ci" one under CI=true).
settings.register_profile("refsim-tests", settings(), report_multiple_bugs=False)
settings.load_profile("refsim-tests")


@pytest.fixture
def host() -> SimHost:
    return SimHost(seed=0)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first: spread over xdist workers (`.ci/run`), a long one then never
    starts last with the other worker idle; the quick ones fill in after."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
