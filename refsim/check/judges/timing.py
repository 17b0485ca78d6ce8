"""Judges of refusal timing: whether the time a refusal takes tells the groups apart, by
their medians (Mann-Whitney U) and by their tails (Fisher's exact test, from
`refsim.check.judges.uniformity`), and the sample sizes the askers use.

Part of `refsim.check.judges` (import the judges from there). A new judge of latency goes
here, and is re-exported by `refsim.check.judges`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from refsim.check.findings import Finding, fail, ok
from refsim.check.judges.uniformity import fisher_exact

# Two-sided Mann-Whitney U at this level: a correct host is flagged about once in ten
# thousand judgements, whatever its latency's distribution (the samples interleaved, so
# that drift in the host or the network reaches both groups alike).
LATENCY_ALPHA = 1e-4
# A difference of medians below this is not reported, however significant: a client
# timing refusals over a network cannot use a fraction of a millisecond.
LATENCY_MIN_EFFECT = 0.001
LATENCY_SAMPLES = 24  # per group


def latency_alike(req: str, a: tuple[str, Sequence[float]], b: tuple[str, Sequence[float]],
                  alpha: float = LATENCY_ALPHA) -> Finding:
    """Security (SHOULD): the time a refusal takes does not tell another tenant's run from
    no run. Two-sided Mann-Whitney U (normal approximation, ties corrected) on interleaved
    samples; flagged when p < `alpha` and the medians differ by LATENCY_MIN_EFFECT or more.
    A row making k such comparisons passes LATENCY_ALPHA / k (Bonferroni), so the row's
    false alarm rate stays under LATENCY_ALPHA."""
    (la, xa), (lb, xb) = a, b
    if len(xa) < 8 or len(xb) < 8:
        return fail(req, f"the latency judge needs 8 samples a group, had {len(xa)} and "
                    f"{len(xb)}")
    u, p = mann_whitney(xa, xb)
    ma, mb = statistics.median(xa), statistics.median(xb)
    effect = abs(ma - mb)
    told = p < alpha and effect >= LATENCY_MIN_EFFECT
    figures = {"n": [len(xa), len(xb)], "u": u, "p": p, f"{la} median ms": ma * 1000,
               f"{lb} median ms": mb * 1000}
    if told:  # the figures move from run to run: the message names what they show
        slower = lb if mb > ma else la
        return fail(req, f"refusal latency tells the groups apart: {slower} is refused "
                    f"slower (medians {LATENCY_MIN_EFFECT * 1000:g} ms or more apart, p < "
                    f"{alpha:g}; the figures are in the observation)", figures)
    return ok(req, f"refusal latency does not tell the groups apart: {la} median "
              f"{ma * 1000:.2f} ms, {lb} median {mb * 1000:.2f} ms (n = {len(xa)} + "
              f"{len(xb)}, U = {u:.0f}, p = {p:.2g})", figures)


# A slower tail (some refusals much slower) can leave the medians alike. Where any of the
# first samples lies beyond the pooled 75th percentile by LATENCY_MIN_EFFECT, TAIL_SAMPLES
# more a group are timed and their tails alone judged (fresh samples: the screen costs no
# false alarms). The screen asks only whether a tail exists at all, not whether it differs:
# a busy machine puts slow samples in both groups, and 24 a group then cannot tell a tail
# that one group has from the noise both have (a faulty host went unjudged that way).
TAIL_SAMPLES = 160  # per group


def _tail_line(xa: Sequence[float], xb: Sequence[float]) -> float:
    pooled = sorted([*xa, *xb])
    return pooled[(3 * len(pooled)) // 4] + LATENCY_MIN_EFFECT


def tail_seen(xa: Sequence[float], xb: Sequence[float]) -> bool:
    """Whether any sample of either group lies beyond the pooled 75th percentile by
    LATENCY_MIN_EFFECT or more (so the groups have a tail worth timing afresh)."""
    line = _tail_line(xa, xb)
    return any(x > line for x in (*xa, *xb))


def latency_tail_alike(req: str, a: tuple[str, Sequence[float]],
                       b: tuple[str, Sequence[float]], alpha: float = LATENCY_ALPHA
                       ) -> Finding:
    """Security (SHOULD): no group of refusals is slow more often than the other, judged
    on the tail (beyond the pooled 75th percentile by LATENCY_MIN_EFFECT or more)."""
    (la, xa), (lb, xb) = a, b
    line = _tail_line(xa, xb)
    na, nb = sum(x > line for x in xa), sum(x > line for x in xb)
    p = fisher_exact(na, len(xa), nb, len(xb))
    figures = {"n": [len(xa), len(xb)], "line ms": line * 1000, f"{la} beyond": na,
               f"{lb} beyond": nb, "p": p}
    if p < alpha:
        slower = la if na * len(xb) > nb * len(xa) else lb
        return fail(req, f"refusal latency tells the groups apart in its tail: {slower} is "
                    f"refused slow more often (beyond the pooled 75th percentile by "
                    f"{LATENCY_MIN_EFFECT * 1000:g} ms; Fisher p < {alpha:g}; the figures "
                    "are in the observation)", figures)
    return ok(req, f"refusal latency's tail does not tell the groups apart: {na} of "
              f"{len(xa)} and {nb} of {len(xb)} beyond {line * 1000:.2f} ms (p = {p:.2g})",
              figures)


def latency_and_tail(median: Finding, tail: Finding | None) -> Finding:
    """One finding for one pair of groups, whether or not their tail was timed afresh: a
    row judges alike (same findings, same digest) however busy the machine that timed it.
    A difference of medians stands; otherwise the tail, when timed, decides."""
    if not median.ok:
        return median
    if tail is None:
        return ok(median.requirement_id, f"{median.message}; no first sample lay beyond "
                  "the tail line, so no tail was timed", median.observation)
    observation = {"medians": median.observation, "tail": tail.observation}
    if not tail.ok:
        return fail(tail.requirement_id, tail.message, observation)
    return ok(median.requirement_id, f"{median.message}; {tail.message}", observation)


def mann_whitney(xa: Sequence[float], xb: Sequence[float]) -> tuple[float, float]:
    """U of the first sample and the two-sided p-value, by the normal approximation with
    the tie correction (exact enough from eight samples a group)."""
    na, nb = len(xa), len(xb)
    pooled = sorted([(x, 0) for x in xa] + [(x, 1) for x in xb])
    ranks = [0.0] * len(pooled)
    ties = 0.0
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        rank = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[k] = rank
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    rank_a = sum(r for r, (_, g) in zip(ranks, pooled, strict=True) if g == 0)
    u = rank_a - na * (na + 1) / 2
    n = na + nb
    variance = na * nb / 12 * ((n + 1) - ties / (n * (n - 1)))
    if variance <= 0:
        return u, 1.0
    z = (abs(u - na * nb / 2) - 0.5) / math.sqrt(variance)
    return u, math.erfc(max(z, 0.0) / math.sqrt(2))
