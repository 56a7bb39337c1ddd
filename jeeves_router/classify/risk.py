"""Risk-controlled thresholds: cap the misroute rate of auto-routed requests, with a guarantee.

:func:`choose_risk_threshold` picks the lowest confidence threshold whose *misroute rate among
accepted requests* (wrong route, or an out-of-scope request given a route) is at most
``max_misroute``, with probability at least ``confidence`` over the draw of the labelled
validation rows. It works for any classifier that reports a score per request (embedded,
LLM, cascade, custom): only the ordering of requests by that score matters.

Method (Learn-then-Test with fixed-sequence testing, Angelopoulos et al. 2021, with exact
binomial tests):

1. The rows are split at random (seeded) into an *ordering* part (one third) and a *testing*
   part (two thirds).
2. On the ordering part, candidate cuts are the scores at accept-shares 1 %, 2 %, ... 100 %;
   the sequence starts at half the accept-share of the loosest cut that the ordering part
   alone certifies (its exact upper bound is within the cap), so the first test is very
   likely to pass, and goes on through every looser cut. When the ordering part is too small
   to certify any cut, it starts at the loosest cut with no misroute there.
3. On the testing part, each cut in turn is tested for "misroute rate > cap" with the exact
   binomial (Clopper-Pearson) test: among the ``n`` testing rows it accepts, ``k`` misrouted,
   p-value ``P(Binomial(n, cap) <= k)``. The walk stops at the first cut whose p-value exceeds
   ``1 - confidence``; the last cut that passed is chosen.

Because the sequence is fixed before the testing rows are looked at, fixed-sequence testing
controls the chance that *any* accepted cut is unsafe at ``1 - confidence`` without a
correction for scanning many cuts. Assumptions: the validation rows and future requests are
independent draws from one distribution (the same mix of in-scope and out-of-scope traffic);
the labels are right; the scores do not depend on the testing rows beyond a monotone map
(calibrating on the same rows is fine: pass the raw score). When no cut passes, the result is
``certified=False`` and its threshold rejects everything.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import UsageError

__all__ = ["RiskChoice", "choose_risk_threshold", "binomial_cdf", "clopper_pearson_upper"]


@dataclass(frozen=True, slots=True)
class RiskChoice:
    """The cut chosen by :func:`choose_risk_threshold` and what backs it.

    Attributes:
        cut: Accept a request when its score is >= this (``math.inf``: accept nothing).
        certified: Whether some cut passed the test; if not, ``cut`` is ``math.inf``.
        max_misroute: The cap asked for.
        confidence: The probability with which the cap holds.
        coverage: Share of the testing rows the cut accepts.
        misroute: Misroute rate among the testing rows it accepts.
        upper_bound: The exact upper confidence bound on the misroute rate at the cut.
        rows: Rows used (ordering + testing).
        testing_rows: Rows in the testing part.
    """

    cut: float
    certified: bool
    max_misroute: float
    confidence: float
    coverage: float
    misroute: float
    upper_bound: float
    rows: int
    testing_rows: int


def binomial_cdf(k: int, n: int, p: float) -> float:
    """``P(Binomial(n, p) <= k)``, summed in log space (exact up to float rounding)."""
    if k < 0:
        return 0.0
    if k >= n or p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    lp, lq = math.log(p), math.log1p(-p)
    base = math.lgamma(n + 1)
    terms = [base - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq for i in range(k + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


def clopper_pearson_upper(k: int, n: int, confidence: float) -> float:
    """The one-sided exact (Clopper-Pearson) upper bound on a rate with ``k`` events in ``n`` trials."""
    if n == 0:
        return 1.0
    if k >= n:
        return 1.0
    lo, hi = k / n, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if binomial_cdf(k, n, mid) > 1.0 - confidence:
            lo = mid
        else:
            hi = mid
    return hi


def choose_risk_threshold(
    scores: Sequence[float],
    correct: Sequence[bool],
    *,
    max_misroute: float,
    confidence: float = 0.95,
    seed: int = 0,
) -> RiskChoice:
    """Pick the loosest score cut whose misroute rate among accepted rows is certified <= ``max_misroute``.

    Args:
        scores: The classifier's score for its top route, per validation row (higher = surer).
        correct: Whether the top route is the right one (False for out-of-scope rows).
        max_misroute: The cap on wrong routes among accepted requests, in (0, 1).
        confidence: Probability that the cap holds, in (0, 1) (see the module docstring).
        seed: Seed of the ordering/testing split.

    Returns:
        The cut and its testing figures; ``certified=False`` when no cut could be certified.

    Raises:
        UsageError: For bad arguments or fewer than 10 rows.
    """
    s = [float(x) for x in scores]
    ok = [bool(x) for x in correct]
    if len(s) != len(ok):
        raise UsageError("choose_risk_threshold: one correct flag per score")
    if len(s) < 10:
        raise UsageError(f"risk control needs at least 10 labelled rows, got {len(s)}")
    if not all(math.isfinite(x) for x in s):
        raise UsageError("choose_risk_threshold: scores must be finite")
    if not 0.0 < max_misroute < 1.0:
        raise UsageError(f"max_misroute must be within (0, 1), got {max_misroute}")
    if not 0.0 < confidence < 1.0:
        raise UsageError(f"confidence must be within (0, 1), got {confidence}")
    order = list(range(len(s)))
    random.Random(seed).shuffle(order)
    split = len(s) // 3
    ordering, testing = order[:split], order[split:]
    a = sorted(((s[i], ok[i]) for i in ordering), key=lambda t: -t[0])
    cuts: list[float] = []
    certified = promising = -1
    for pct in range(1, 101):
        n = max(1, round(pct / 100 * len(a)))
        cuts.append(a[n - 1][0])
        wrong = sum(1 for _, good in a[:n] if not good)
        if binomial_cdf(wrong, n, max_misroute) <= 1.0 - confidence:  # its exact upper bound is within the cap
            certified = pct - 1
        if wrong == 0:
            promising = pct - 1
    start = certified // 2 if certified >= 0 else max(promising, 0)
    sequence = sorted(set(cuts[start:]), reverse=True)
    b = sorted(((s[i], ok[i]) for i in testing), key=lambda t: -t[0])
    alpha = 1.0 - confidence
    chosen: tuple[float, int, int] | None = None
    for cut in sequence:
        accepted = [good for score, good in b if score >= cut]
        n, k = len(accepted), sum(1 for good in accepted if not good)
        if n == 0 or binomial_cdf(k, n, max_misroute) > alpha:
            break
        chosen = (cut, n, k)
    if chosen is None:
        return RiskChoice(math.inf, False, max_misroute, confidence, 0.0, 0.0, 1.0, len(s), len(b))
    cut, n, k = chosen
    return RiskChoice(
        cut, True, max_misroute, confidence, n / len(b), k / n, clopper_pearson_upper(k, n, confidence), len(s), len(b)
    )
