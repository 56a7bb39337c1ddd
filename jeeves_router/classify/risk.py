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
   likely to pass, and goes on through every looser cut. (With ``oos_share``, below, it
   starts at the cut with the lowest bound on the ordering part.) When the ordering part is too small
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

**When the share of out-of-scope traffic may differ from validation** (CLINC150's ``val`` is 3 %
out of scope, its ``test`` 18 %), pass ``in_scope`` and ``oos_share``, a worst-case share of
out-of-scope requests the user states. The misroute rate of traffic with out-of-scope share
``pi`` is then

    R = ((1 - pi) * c * q + pi * a) / ((1 - pi) * c + pi * a)

with ``c`` the share of in-scope requests accepted, ``q`` the misroute rate among accepted
in-scope requests and ``a`` the share of out-of-scope requests accepted. ``R`` grows with
``q``, with ``a`` and as ``c`` shrinks, so exact bounds on each (upper for ``q`` and ``a``,
lower for ``c``, at ``0.45``, ``0.45`` and ``0.1`` of ``1 - confidence``; a union bound)
give an upper bound on ``R`` that holds with probability ``confidence``. Each class is bounded
on its own rows, so the guarantee needs only that in-scope rows are exchangeable with
in-scope traffic and out-of-scope rows with out-of-scope traffic, whatever their mix, up to
``oos_share`` (a larger real share can break it). The ordering third is drawn from each
class separately. ``a`` is bounded from few rows (with 67 testing rows and none accepted its
bound is still about 5.5 %), which is what caps the coverage at a large ``oos_share``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import UsageError

__all__ = [
    "RiskChoice",
    "choose_risk_threshold",
    "shifted_misroute_bound",
    "binomial_cdf",
    "clopper_pearson_upper",
]


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
        oos_share: The worst-case out-of-scope share the bound assumes (``None``: the
            validation mix). With it, ``coverage`` and ``misroute`` are the testing rows'
            figures reweighted to that share.
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
    oos_share: float | None = None


def binomial_cdf(k: int, n: int, p: float) -> float:
    """``P(Binomial(n, p) <= k)``, exact up to float rounding.

    Sums the probabilities outward from ``k`` (the lower tail when ``k`` is below the mean,
    else one minus the upper tail), stopping once the terms no longer change the sum: a few
    times ``sqrt(n)`` terms instead of ``k``.
    """
    if k < 0:
        return 0.0
    if k >= n or p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    lower = k < n * p
    first = k if lower else k + 1  # the term nearest the mean of the tail summed
    log_first = (
        math.lgamma(n + 1) - math.lgamma(first + 1) - math.lgamma(n - first + 1)
        + first * math.log(p) + (n - first) * math.log1p(-p)
    )  # fmt: skip
    odds = p / (1.0 - p)
    term = total = 1.0
    i = first
    while (i > 0) if lower else (i < n):
        term *= i / ((n - i + 1) * odds) if lower else (n - i) / (i + 1) * odds
        i += -1 if lower else 1
        total += term
        if term < 1e-17 * total:
            break
    tail = min(1.0, math.exp(log_first) * total)
    return tail if lower else 1.0 - tail


def clopper_pearson_upper(k: int, n: int, confidence: float) -> float:
    """The one-sided exact (Clopper-Pearson) upper bound on a rate with ``k`` events in ``n`` trials."""
    if n == 0:
        return 1.0
    if k >= n:
        return 1.0
    lo, hi = k / n, 1.0
    for _ in range(45):  # 2**-45: far below any rate that matters
        mid = (lo + hi) / 2
        if binomial_cdf(k, n, mid) > 1.0 - confidence:
            lo = mid
        else:
            hi = mid
    return hi


def shifted_misroute_bound(
    wrong: int, accepted: int, in_rows: int, oos_accepted: int, oos_rows: int, *, oos_share: float, alpha: float
) -> float:
    """An upper bound on the misroute rate of traffic whose out-of-scope share is ``oos_share``.

    Args:
        wrong: In-scope rows accepted with a wrong route.
        accepted: In-scope rows accepted.
        in_rows: In-scope rows.
        oos_accepted: Out-of-scope rows accepted.
        oos_rows: Out-of-scope rows.
        oos_share: The out-of-scope share of the traffic, in [0, 1).
        alpha: Chance that the bound fails (see the module docstring for how it is split).

    Returns:
        The bound, within [0, 1].
    """
    if accepted == 0:
        return 1.0
    q = clopper_pearson_upper(wrong, accepted, 1.0 - 0.45 * alpha)
    c = 1.0 - clopper_pearson_upper(in_rows - accepted, in_rows, 1.0 - 0.1 * alpha)
    a = clopper_pearson_upper(oos_accepted, oos_rows, 1.0 - 0.45 * alpha) if oos_share > 0 else 0.0
    x, y = (1.0 - oos_share) * c, oos_share * a
    return min(1.0, (x * q + y) / (x + y)) if x + y > 0 else 1.0


def _flags(name: str, values: Sequence[object]) -> list[bool]:
    """``values`` as booleans: True/False (or 1/0); a string such as ``"no"`` would read as True."""
    if isinstance(values, (str, bytes)) or not all(type(x) is bool or x in (0, 1) for x in values):
        raise UsageError(f"choose_risk_threshold: {name} must be True/False flags, one per score, got {values!r:.80}")
    return [bool(x) for x in values]


def _unit(name: str, value: object, *, closed_low: bool = False) -> None:
    """Refuse ``value`` unless it is a number in (0, 1) (or [0, 1) with ``closed_low``)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (number and (0.0 <= value if closed_low else 0.0 < value) and value < 1.0):  # type: ignore[operator]
        raise UsageError(f"{name} must be within {'[' if closed_low else '('}0, 1), got {value!r}")


def _check(scores: Sequence[float], correct: Sequence[bool], max_misroute: float, confidence: float) -> None:
    if len(scores) != len(correct):
        raise UsageError("choose_risk_threshold: one correct flag per score")
    if len(scores) < 10:
        raise UsageError(f"risk control needs at least 10 labelled rows, got {len(scores)}")
    if not all(math.isfinite(x) for x in scores):
        raise UsageError("choose_risk_threshold: scores must be finite")
    _unit("max_misroute", max_misroute)
    _unit("confidence", confidence)


def choose_risk_threshold(
    scores: Sequence[float],
    correct: Sequence[bool],
    *,
    max_misroute: float,
    confidence: float = 0.95,
    seed: int = 0,
    in_scope: Sequence[bool] | None = None,
    oos_share: float | None = None,
) -> RiskChoice:
    """Pick the loosest score cut whose misroute rate among accepted rows is certified <= ``max_misroute``.

    Args:
        scores: The classifier's score for its top route, per validation row (higher = surer).
        correct: Whether the top route is the right one (False for out-of-scope rows).
        max_misroute: The cap on wrong routes among accepted requests, in (0, 1).
        confidence: Probability that the cap holds, in (0, 1) (see the module docstring).
        seed: Seed of the ordering/testing split.
        in_scope: Whether each row has a real route; needed with ``oos_share``.
        oos_share: Certify for traffic with up to this share of out-of-scope requests, in
            [0, 1), bounding each class on its own rows (see the module docstring);
            ``None`` assumes traffic mixes them as the validation rows do.

    Returns:
        The cut and its testing figures; ``certified=False`` when no cut could be certified.

    Raises:
        UsageError: For bad arguments, fewer than 10 rows, or ``oos_share`` without
            ``in_scope``, without out-of-scope rows or without in-scope rows.
    """
    s = [float(x) for x in scores]
    ok = _flags("correct", correct)
    _check(s, ok, max_misroute, confidence)
    inside = [True] * len(s)
    if oos_share is not None:
        _unit("oos_share", oos_share, closed_low=True)
        if in_scope is None or len(in_scope) != len(s):
            raise UsageError("choose_risk_threshold: oos_share needs one in_scope flag per score")
        inside = _flags("in_scope", in_scope)
        if oos_share > 0 and all(inside):
            raise UsageError(
                "oos_share needs out-of-scope rows in the validation data to bound how many of them are accepted"
            )
        if not any(inside):
            raise UsageError("oos_share needs in-scope rows in the validation data to bound their misroute rate")
    rng = random.Random(seed)
    order = [i for i in range(len(s)) if inside[i]]
    rng.shuffle(order)
    outside = [i for i in range(len(s)) if not inside[i]]
    rng.shuffle(outside)
    split, oos_split = len(order) // 3, len(outside) // 3
    ordering, testing = order[:split], order[split:] + outside[oos_split:]
    a = sorted(((s[i], ok[i]) for i in ordering), key=lambda t: -t[0])
    oos_ordering = sorted((s[i] for i in outside[:oos_split]), reverse=True)
    if not a:  # too few in-scope rows to order the cuts (only with oos_share): nothing can be certified
        return RiskChoice(math.inf, False, max_misroute, confidence, 0.0, 0.0, 1.0, len(s), len(testing), oos_share)
    alpha = 1.0 - confidence
    cuts: list[float] = []
    certified: list[int] = []
    bounds: list[tuple[float, int]] = []
    promising = -1
    for pct in range(1, 101):
        n = max(1, round(pct / 100 * len(a)))
        cuts.append(a[n - 1][0])
        wrong = sum(1 for _, good in a[:n] if not good)
        if binomial_cdf(wrong, n, max_misroute) <= alpha:  # its exact upper bound is within the cap
            certified.append(pct - 1)
        if wrong == 0:
            promising = pct - 1
        if oos_share is not None:
            j = sum(1 for x in oos_ordering if x >= cuts[-1])
            bound = shifted_misroute_bound(wrong, n, len(a), j, len(oos_ordering), oos_share=oos_share, alpha=alpha)
            bounds.append((bound, pct - 1))
    if oos_share is not None:  # the bound also fails at strict cuts (few in-scope rows accepted)
        start = min(bounds)[1]
    elif certified:
        start = certified[-1] // 2
    else:
        start = max(promising, 0)
    sequence = sorted(set(cuts[start:]), reverse=True)
    b = sorted(((s[i], ok[i], inside[i]) for i in testing), key=lambda t: -t[0])
    if oos_share is None:
        return _walk_exchangeable(b, sequence, max_misroute, confidence, len(s))
    return _walk_shifted(b, sequence, max_misroute, confidence, len(s), oos_share)


def _walk_exchangeable(
    b: list[tuple[float, bool, bool]], sequence: list[float], cap: float, confidence: float, rows: int
) -> RiskChoice:
    """Fixed-sequence testing with one binomial test on all accepted testing rows."""
    alpha = 1.0 - confidence
    chosen: tuple[float, int, int] | None = None
    for cut in sequence:
        accepted = [good for score, good, _ in b if score >= cut]
        n, k = len(accepted), sum(1 for good in accepted if not good)
        if n == 0 or binomial_cdf(k, n, cap) > alpha:
            break
        chosen = (cut, n, k)
    if chosen is None:
        return RiskChoice(math.inf, False, cap, confidence, 0.0, 0.0, 1.0, rows, len(b))
    cut, n, k = chosen
    return RiskChoice(cut, True, cap, confidence, n / len(b), k / n, clopper_pearson_upper(k, n, confidence), rows,
                      len(b))  # fmt: skip


def _walk_shifted(
    b: list[tuple[float, bool, bool]], sequence: list[float], cap: float, confidence: float, rows: int, share: float
) -> RiskChoice:
    """Fixed-sequence testing with the class-conditional bound of :func:`shifted_misroute_bound`."""
    alpha = 1.0 - confidence
    in_rows = sum(1 for *_, inside in b if inside)
    oos_rows = len(b) - in_rows
    chosen: tuple[float, float, float, float] | None = None
    for cut in sequence:
        acc_in = [good for score, good, inside in b if inside and score >= cut]
        n, k = len(acc_in), sum(1 for good in acc_in if not good)
        j = sum(1 for score, _, inside in b if not inside and score >= cut)
        bound = shifted_misroute_bound(k, n, in_rows, j, oos_rows, oos_share=share, alpha=alpha)
        if bound > cap:
            break
        c, a = n / max(in_rows, 1), j / max(oos_rows, 1)
        coverage = (1 - share) * c + share * a
        misroute = ((1 - share) * c * (k / n) + share * a) / coverage
        chosen = (cut, coverage, misroute, bound)
    if chosen is None:
        return RiskChoice(math.inf, False, cap, confidence, 0.0, 0.0, 1.0, rows, len(b), share)
    return RiskChoice(chosen[0], True, cap, confidence, chosen[1], chosen[2], chosen[3], rows, len(b), share)
