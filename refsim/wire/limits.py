"""Every bound the wire enforces, in one place; docs/host-author.md "Limits" documents each.

Each refusal names its limit. The work caps are set so that the largest request the host
accepts costs well under 200 ms of host time (`refsim bench http` prints the figure).
"""

from __future__ import annotations

from refsim.domain.suites import MAX_RUN_SERVED_BYTES as MAX_RUN_SERVED_BYTES

MAX_BODY_BYTES = 1_048_576  # larger bodies get 413 payload_too_large
MAX_HEADER_BYTES = 16_384  # request line plus headers; more gets 400
MAX_JSON_DEPTH = 64
HEADER_TIMEOUT_SECONDS = 10.0  # a request's line and headers must arrive within this
BODY_TIMEOUT_SECONDS = 10.0  # and its body within this, once the header is in
KEEP_ALIVE_SECONDS = 5  # an idle keep-alive connection closes after this

POLL_DEFAULT_LIMIT = 1000  # events per page of GET /runs/{id}/events/poll
POLL_MAX_LIMIT = 1000
PAGE_MAX_BYTES = 1_048_576  # a page of events stops before it would pass this
LONG_POLL_MAX_SECONDS = 30  # ?timeout= is at most this
RUN_LIST_DEFAULT_LIMIT = 50  # runs per page of GET /runs (listRuns), OpenWOP v2's bounds
RUN_LIST_MAX_LIMIT = 100  # (a page also stops before PAGE_MAX_BYTES)

# Suites registered through the seam, and workflow scripts in POST /runs.
MAX_SUITE_TASKS = 50
MAX_TASK_STEPS = 200  # a task's script, delegate steps included, flattened
MAX_TRIALS = 20  # as eval-suite.schema.json says
MAX_RUN_TASK_TRIALS = 200  # tasks x trials in one eval run
MAX_RUN_CALLS = 500  # tool calls one eval run can make: sum over tasks of calls x trials
MAX_RUN_SCRIPT_BYTES = 2_097_152  # trials x the bytes of every task's input, fixtures, expected
# An eval run's fixture responses, at most: calls x trials x each task's largest entry
# (derived from fixtureRuns or the suite's own); the domain refuses the run past it.
