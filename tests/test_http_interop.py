"""The published client, openwop-client 2.7.0, against `refsim serve`: its typed models
accept what the host sends, and RFC 0252 reads the same through it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from refsim import SimHost
from refsim.wire.server import WireServer, background

openwop_client = pytest.importorskip("openwop_client")
from openwop_client import OpenwopClient, WopError  # noqa: E402
from openwop_client.types import (  # noqa: E402
    CancelRunRequest,
    CreateRunRequest,
    ForkRunRequest,
)

KEY_A, KEY_B = "hk_test_acme", "hk_test_globex"
RECORDER = "conformance.eval:recorder"
SOURCE = "conformance-eval-recorded-source"
REPLAY = "conformance-eval-recorded-replay"
DRIFT = "conformance-eval-recorded-drift"


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SimHost, WireServer]]:
    # The SDK's urllib honours proxy variables; the loopback must never go through one.
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, "127.0.0.1,localhost,::1")
    host = SimHost(seed=0)
    with background(host) as server:
        yield host, server
    assert server.handler_errors == []


def sdk(server: WireServer, key: str = KEY_A) -> Any:
    return OpenwopClient(base_url=server.url, api_key=key, timeout=10)


def eval_request(suite: str, fixture_runs: dict[str, str] | None = None) -> Any:
    return CreateRunRequest(mode="eval", evalSuiteRef=suite, agentId=RECORDER,
                            fixtureRuns=fixture_runs)


def test_capabilities_advertise_recorded_fixtures(served: Any) -> None:
    _, server = served
    caps = sdk(server).discovery_capabilities()
    assert caps.preferredVersion == "2.0" and "2.0" in caps.protocolVersions
    agents = caps.family("agents")
    assert agents is not None
    assert (agents.status, agents.since, agents.witness) == ("stable", "2.0",
                                                             "witnessable-gated")
    facet = agents.facets["evalSuite"]
    assert facet["recordedFixtures"] is True and facet["fixtureMatching"] is True
    assert {SOURCE, REPLAY, DRIFT} <= set(caps.raw["fixtures"])
    assert caps.eventLogSchemaVersion == 2


def test_source_replay_events_summary_and_fork(served: Any) -> None:
    host, server = served
    client = sdk(server)
    source = client.runs_create(eval_request(SOURCE))
    assert source.status == "running"  # createRun's 201 names an active status
    assert source.eventsUrl.startswith("/runs/acme~2F")
    snapshot = client.runs_get(source.runId)
    assert snapshot.runId == source.runId and snapshot.owner.tenant == "acme"
    assert snapshot.status == "completed"
    assert snapshot.owner.subject.lane == "api-key"

    replay = client.runs_create(eval_request(REPLAY, {"record": source.runId}))
    page = client.runs_poll_events(replay.runId)
    assert page.isTerminal and page.status == "completed"
    assert [e.sequence for e in page.events] == list(range(len(page.events)))
    assert page.lastSequence == page.events[-1].sequence
    started = [e for e in page.events if e.type == "eval.started"]
    assert len(started) == 1
    assert started[0].payload["fixtureRuns"] == {"record": source.runId}
    assert page.events[-1].type == "run.completed"

    # the SDK's SSE consumer: every event, through the terminal one, and a resume
    streamed = list(client.runs_events(replay.runId, timeout_seconds=10))
    assert [e.eventId for e in streamed] == [e.eventId for e in page.events]
    resumed = list(client.runs_events(replay.runId, last_event_id=page.events[2].eventId,
                                      timeout_seconds=10))
    assert [e.sequence for e in resumed] == [e.sequence for e in page.events[3:]]

    summary = client.runs_eval_summary(replay.runId)
    assert summary is not None
    assert summary.passed is True and summary.taskCount == 1 and summary.passedCount == 1
    assert summary.tasks[0].taskId == "record" and summary.tasks[0].passed is True
    assert summary.suiteId == "conformance.openwop.evals.recorded-replay"

    fork = client.runs_fork(replay.runId, ForkRunRequest(fromSeq=0, mode="replay"))
    assert fork.sourceRunId == replay.runId and fork.mode == "replay"
    assert fork.status == "running"
    forked = client.runs_poll_events(fork.runId)
    assert [e.type for e in forked.events] == [e.type for e in page.events]
    branch = client.runs_fork(replay.runId, ForkRunRequest(fromSeq=0, mode="branch"))
    assert client.runs_eval_summary(branch.runId).passed is True

    counter = host.request("GET", "/conformance/seams/eval-counter?key=recorded-fixtures",
                           api_key=KEY_A).json["count"]
    assert counter == 1  # the replay, the replay fork and the branch moved nothing


def test_drift_fails_closed_through_the_sdk(served: Any) -> None:
    _, server = served
    client = sdk(server)
    source = client.runs_create(eval_request(SOURCE))
    drift = client.runs_create(eval_request(DRIFT, {"record": source.runId}))
    summary = client.runs_eval_summary(drift.runId)
    assert summary is not None and summary.passed is False


def test_unusable_sources_raise_wop_error_400_validation_error(served: Any) -> None:
    _, server = served
    acme, globex = sdk(server, KEY_A), sdk(server, KEY_B)
    foreign = globex.runs_create(eval_request(SOURCE))
    errors = []
    for value in ("acme/run-0252unknown0000000", foreign.runId):
        with pytest.raises(WopError) as caught:
            acme.runs_create(eval_request(REPLAY, {"record": value}))
        err = caught.value
        assert err.status == 400
        assert err.envelope is not None and err.envelope.error == "validation_error"
        assert err.envelope.details is None
        assert value not in err.raw_text and value.split("/")[1] not in err.raw_text
        errors.append(err.raw_text)
    assert errors[0] == errors[1]  # one byte-identical body for both


def test_cancel_and_run_terminal_through_the_sdk(served: Any) -> None:
    _, server = served
    client = sdk(server)
    run = client.runs_create(CreateRunRequest(workflowId="conformance-wait-input"))
    assert run.status == "waiting-input"
    cancelled = client.runs_cancel(run.runId, CancelRunRequest())
    assert cancelled.status == "cancelled"
    with pytest.raises(WopError) as caught:
        client.runs_cancel(run.runId)
    assert caught.value.status == 409
    assert caught.value.envelope.error == "run_terminal"


def test_sdk_follows_a_live_stream_to_its_end(served: Any) -> None:
    import threading

    _, server = served
    client = sdk(server)
    run = client.runs_create(CreateRunRequest(workflowId="conformance-wait-input"))
    threading.Timer(0.3, lambda: sdk(server).runs_cancel(run.runId)).start()
    types = [e.type for e in client.runs_events(run.runId, timeout_seconds=10)]
    assert types == ["run.started", "run.cancelled"]


def test_idempotent_create_through_the_sdk(served: Any) -> None:
    host, server = served
    client = sdk(server)
    first = client.runs_create(CreateRunRequest(workflowId="conformance-noop"),
                               idempotency_key="sdk-key")
    again = client.runs_create(CreateRunRequest(workflowId="conformance-noop"),
                               idempotency_key="sdk-key")
    assert first.runId == again.runId
    assert len(host.core.runs) == 1


def test_sdk_other_major_is_refused(served: Any) -> None:
    _, server = served
    client = OpenwopClient(base_url=server.url, api_key=KEY_A, major=3)
    with pytest.raises(WopError) as caught:
        client.discovery_capabilities()
    assert caught.value.status == 406
    assert caught.value.envelope.error == "protocol_version_unsupported"
