"""The conformance fixture catalog (specs/fixtures/): what a host loads at boot so that the
checker runs its rows without refsim's own seams."""

from __future__ import annotations

from refsim import SimHost
from refsim.check.examples import load_examples
from refsim.domain.agents import default_agents
from refsim.domain.core import WORKFLOWS
from refsim.domain.tools import COUNTER, FLAKY, VAULT
from refsim.wire import catalog, schemas


def test_every_fixture_is_of_a_known_kind_and_every_suite_validates() -> None:
    kinds = {f.kind for f in catalog.fixtures()}
    assert kinds == {"suite", "workflow", "agent", "tool"}
    for f in catalog.fixtures():
        if f.kind == "suite":
            assert schemas.issues("eval-suite.schema.json", f.doc) == [], f.id
        else:
            assert f.doc["id"] == f.id and len(str(f.doc["description"])) > 40, f.id


def test_the_catalog_describes_what_the_reference_host_runs() -> None:
    assert {f.id for f in catalog.fixtures() if f.kind == "workflow"} == set(WORKFLOWS)
    agents = {f.names for f in catalog.fixtures() if f.kind == "agent"}
    tools = {f.names for f in catalog.fixtures() if f.kind == "tool"}
    assert agents and agents <= set(default_agents())
    assert tools and tools <= {COUNTER, VAULT, FLAKY}  # the tools the host serves
    # The recorder and the counter come with the three conformance fixtures, unlisted.
    assert catalog.for_agent_or_tool(catalog.RECORDER) is None
    assert catalog.for_agent_or_tool(catalog.COUNTER) is None


def test_the_reference_host_lists_the_whole_catalog() -> None:
    listed = SimHost().request("GET", "/.well-known/openwop").json["fixtures"]
    assert set(catalog.ids()) <= set(listed)


def test_every_suite_the_example_table_runs_is_in_the_catalog() -> None:
    for example in load_examples():
        for action in example.actions:
            suite = action.args.get("suite")
            if (action.kind in ("register_suite", "create_eval") and isinstance(suite, str)
                    and not suite.startswith(("conformance.", "refsim."))):
                assert catalog.is_suite(suite), (example.id, suite)


def test_needs_finds_the_agents_and_tools_a_script_names() -> None:
    script = [{"call": "refsim.tools:vault", "args": {"query": "q"}},
              {"delegate": "refsim.agents:helper",
               "script": [{"call": "refsim.tools:flaky", "args": {"mode": "ok"}}]},
              {"call": "conformance.eval:counter", "args": {"op": "inc", "key": "k"}}]
    assert catalog.needs(script) == {"refsim-tool-vault", "refsim-agent-helper",
                                     "refsim-tool-flaky"}
    assert catalog.suite_needs("refsim-eval-vault") == {"refsim-tool-vault"}
    assert catalog.suite_needs("conformance-eval-recorded-source") == set()
