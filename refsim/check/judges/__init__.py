"""Pure judges: observations in, findings out. No I/O, no host, no clock.

Each judge exists for one defect, and tests/test_judges.py shows it failing on it. The
judges live in modules by what they judge, and this one gathers them: import them from here.

- `answers`: an answer's status, error code and envelope; a refusal that made nothing.
- `controls`: positive controls, counts and plain comparisons a check stands on.
- `echoes`: an id it was given, echoed on an answer in any form; another tenant's id.
- `uniformity`: refusals alike, or told apart by what they say or how often.
- `timing`: refusals told apart by how long they take.
- `replays`: an eval run's events, summary and live counter (replay and matching).
- `content`: recorded content, derived entries and credentials where they must not be.

A new judge goes in the module of its kind and is re-exported here (a name a test patches
is patched where the code reads it: in that module, unless its caller reads it from here).
"""

from __future__ import annotations

from refsim.check.judges.answers import _obs as _obs
from refsim.check.judges.answers import absent as absent
from refsim.check.judges.answers import answered as answered
from refsim.check.judges.answers import code_registered as code_registered
from refsim.check.judges.answers import created as created
from refsim.check.judges.answers import envelope as envelope
from refsim.check.judges.answers import no_new_runs as no_new_runs
from refsim.check.judges.answers import nothing_minted as nothing_minted
from refsim.check.judges.answers import refused as refused
from refsim.check.judges.answers import refused_as as refused_as
from refsim.check.judges.answers import refused_registered as refused_registered
from refsim.check.judges.answers import refused_registered_any as refused_registered_any
from refsim.check.judges.answers import succeeded as succeeded
from refsim.check.judges.answers import undecodable as undecodable
from refsim.check.judges.content import CONTENT_FORBIDDEN as CONTENT_FORBIDDEN
from refsim.check.judges.content import _readable as _readable
from refsim.check.judges.content import _unpacked as _unpacked
from refsim.check.judges.content import any_present_in as any_present_in
from refsim.check.judges.content import content_free as content_free
from refsim.check.judges.content import copies_gone as copies_gone
from refsim.check.judges.content import erased_as_reported as erased_as_reported
from refsim.check.judges.content import no_content_in as no_content_in
from refsim.check.judges.content import no_derived_entries as no_derived_entries
from refsim.check.judges.content import no_entries_on_wire as no_entries_on_wire
from refsim.check.judges.content import no_recorded_content as no_recorded_content
from refsim.check.judges.content import no_secret_in as no_secret_in
from refsim.check.judges.content import nothing_of_run as nothing_of_run
from refsim.check.judges.content import present_in as present_in
from refsim.check.judges.content import recorded_calls as recorded_calls
from refsim.check.judges.content import recorded_content as recorded_content
from refsim.check.judges.controls import at_least as at_least
from refsim.check.judges.controls import byte_identical as byte_identical
from refsim.check.judges.controls import completed as completed
from refsim.check.judges.controls import could_not_go_on as could_not_go_on
from refsim.check.judges.controls import count_is as count_is
from refsim.check.judges.controls import counter_delta as counter_delta
from refsim.check.judges.controls import done as done
from refsim.check.judges.controls import leg_passed as leg_passed
from refsim.check.judges.controls import not_asked as not_asked
from refsim.check.judges.controls import readable as readable
from refsim.check.judges.controls import run_status_is as run_status_is
from refsim.check.judges.controls import same_as as same_as
from refsim.check.judges.controls import schema_vector as schema_vector
from refsim.check.judges.controls import unchanged as unchanged
from refsim.check.judges.echoes import ECHO_WINDOW as ECHO_WINDOW
from refsim.check.judges.echoes import _decodings as _decodings
from refsim.check.judges.echoes import _id_windows as _id_windows
from refsim.check.judges.echoes import control_value as control_value
from refsim.check.judges.echoes import echo_windows as echo_windows
from refsim.check.judges.echoes import echoed as echoed
from refsim.check.judges.echoes import encoded_forms as encoded_forms
from refsim.check.judges.echoes import id_forms as id_forms
from refsim.check.judges.echoes import no_echo as no_echo
from refsim.check.judges.echoes import no_foreign_run_ids as no_foreign_run_ids
from refsim.check.judges.echoes import strings_in as strings_in
from refsim.check.judges.echoes import whole as whole
from refsim.check.judges.replays import counter_moved as counter_moved
from refsim.check.judges.replays import counter_unchanged as counter_unchanged
from refsim.check.judges.replays import echo as echo
from refsim.check.judges.replays import eval_events_alike as eval_events_alike
from refsim.check.judges.replays import eval_order as eval_order
from refsim.check.judges.replays import event_validates as event_validates
from refsim.check.judges.replays import facet_implies_matching as facet_implies_matching
from refsim.check.judges.replays import miss_count as miss_count
from refsim.check.judges.replays import named_twice as named_twice
from refsim.check.judges.replays import no_outcomes_on_wire as no_outcomes_on_wire
from refsim.check.judges.replays import no_reresolution as no_reresolution
from refsim.check.judges.replays import of_type as of_type
from refsim.check.judges.replays import outcomes_equal as outcomes_equal
from refsim.check.judges.replays import outcomes_on_wire as outcomes_on_wire
from refsim.check.judges.replays import passed_is as passed_is
from refsim.check.judges.replays import scored as scored
from refsim.check.judges.replays import scored_miss_count as scored_miss_count
from refsim.check.judges.replays import scored_once as scored_once
from refsim.check.judges.replays import scored_passed as scored_passed
from refsim.check.judges.replays import suite_taken as suite_taken
from refsim.check.judges.replays import summary_reread_alike as summary_reread_alike
from refsim.check.judges.timing import LATENCY_ALPHA as LATENCY_ALPHA
from refsim.check.judges.timing import LATENCY_MIN_EFFECT as LATENCY_MIN_EFFECT
from refsim.check.judges.timing import LATENCY_SAMPLES as LATENCY_SAMPLES
from refsim.check.judges.timing import TAIL_SAMPLES as TAIL_SAMPLES
from refsim.check.judges.timing import latency_alike as latency_alike
from refsim.check.judges.timing import latency_and_tail as latency_and_tail
from refsim.check.judges.timing import latency_tail_alike as latency_tail_alike
from refsim.check.judges.timing import mann_whitney as mann_whitney
from refsim.check.judges.timing import tail_seen as tail_seen
from refsim.check.judges.uniformity import FREQUENCY_ALPHA as FREQUENCY_ALPHA
from refsim.check.judges.uniformity import FREQUENCY_SAMPLES as FREQUENCY_SAMPLES
from refsim.check.judges.uniformity import NOT_THE_ANSWERS as NOT_THE_ANSWERS
from refsim.check.judges.uniformity import features as features
from refsim.check.judges.uniformity import fisher_exact as fisher_exact
from refsim.check.judges.uniformity import frequencies_alike as frequencies_alike
from refsim.check.judges.uniformity import indistinguishable as indistinguishable
from refsim.check.judges.uniformity import noise_of as noise_of
from refsim.check.judges.uniformity import signature as signature
from refsim.check.judges.uniformity import uneven as uneven
from refsim.check.judges.uniformity import uniform as uniform
from refsim.check.observe import eval_suite_facet as eval_suite_facet
