"""Honest fits and risk-controlled thresholds (issue 18)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder
from jeeves_router.classify.embedding.calibration import choose_threshold
from jeeves_router.classify.risk import (
    binomial_cdf,
    choose_risk_threshold,
    clopper_pearson_upper,
    shifted_misroute_bound,
)
from jeeves_router.errors import UsageError
from tests.test_embedding_classifier import ROUTES, VAL


def make() -> EmbeddingClassifier:
    return EmbeddingClassifier(ROUTES, encoder=HashingEncoder())


def test_a_fit_that_cannot_separate_right_from_wrong_is_refused_and_changes_nothing() -> None:
    clf = make()
    in_scope = [(t, lab) for t, lab in VAL if lab != "oos"]  # all routed right, no out-of-scope row
    with pytest.raises(UsageError, match="for every validation row"):
        clf.fit([t for t, _ in in_scope], [lab for _, lab in in_scope])
    assert clf.calibrator is None and clf.threshold is None


def test_fitting_on_the_routes_own_examples_is_refused() -> None:
    texts = [e for r in ROUTES for e in r.examples]
    labels = [r.name for r in ROUTES for _ in r.examples]
    with pytest.raises(UsageError, match="own examples"):
        make().fit(texts, labels)


def test_no_oos_rows_means_no_oos_recall() -> None:
    conf = np.array([0.9, 0.8, 0.3])
    choice = choose_threshold(conf, np.array([True, True, False]), np.array([True, True, True]))
    assert choice.oos_recall is None
    with pytest.raises(UsageError, match="target_precision"):
        choose_threshold(conf, np.ones(3, bool), np.ones(3, bool), objective="precision", target_precision=7)


def test_binomial_helpers_match_hand_values() -> None:
    assert binomial_cdf(0, 10, 0.1) == pytest.approx(0.9**10)
    assert binomial_cdf(1, 3, 0.5) == pytest.approx(0.5)
    assert binomial_cdf(3, 3, 0.5) == 1.0 and binomial_cdf(-1, 3, 0.5) == 0.0
    # zero events in n trials: the one-sided bound solves (1 - p)^n = 1 - confidence
    assert clopper_pearson_upper(0, 100, 0.95) == pytest.approx(1 - 0.05 ** (1 / 100), rel=1e-6)
    assert clopper_pearson_upper(5, 5, 0.95) == 1.0


def synthetic(n: int, seed: int) -> tuple[list[float], list[bool]]:
    """Scores whose error probability falls with the score: P(wrong | s) = 0.1 * (1 - s)^2."""
    rng = random.Random(seed)
    scores = [rng.random() for _ in range(n)]
    return scores, [rng.random() >= 0.1 * (1 - s) ** 2 for s in scores]


def true_misroute(cut: float) -> float:
    """Exact misroute rate among accepted rows for :func:`synthetic` at ``cut``."""
    c = min(max(cut, 0.0), 1.0)
    return 0.1 * (1 - c) ** 2 / 3


def test_the_certified_cut_keeps_its_promise_across_draws() -> None:
    cap = 0.02
    violations = 0
    coverages = []
    for seed in range(40):
        scores, correct = synthetic(3000, seed)
        choice = choose_risk_threshold(scores, correct, max_misroute=cap, confidence=0.9, seed=seed)
        assert choice.certified and choice.upper_bound <= cap
        violations += true_misroute(choice.cut) > cap
        coverages.append(1 - max(choice.cut, 0.0))
    # with confidence 0.9, at most ~10 % of draws may break the cap; allow sampling slack
    assert violations <= 8
    # the cap is reached at coverage sqrt(0.6) ~ 0.775: the chosen cut is not needlessly strict
    assert 0.5 < float(np.mean(coverages)) < 0.775


def test_an_impossible_cap_is_not_certified() -> None:
    scores, _ = synthetic(300, 1)
    choice = choose_risk_threshold(scores, [False] * 300, max_misroute=0.02)
    assert not choice.certified and choice.cut == math.inf


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"max_misroute": 0.0}, "max_misroute"), ({"max_misroute": 0.1, "confidence": 1.0}, "confidence")],
)
def test_risk_arguments_are_checked(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        choose_risk_threshold([0.5] * 20, [True] * 20, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="at least 10"):
        choose_risk_threshold([0.5], [True], max_misroute=0.1)


def test_fit_with_max_misroute_sets_a_threshold_that_keeps_the_cap() -> None:
    rng = random.Random(3)
    texts, labels = [], []
    for route in ROUTES:
        for ex in route.examples:
            for i in range(12):
                words = ex.split()
                rng.shuffle(words)
                texts.append(" ".join(words) + f" please {i}")
                labels.append(route.name)
    texts += [f"banana bread recipe number {i}" for i in range(12)]
    labels += ["oos"] * 12
    clf = make()
    report = clf.fit(texts, labels, max_misroute=0.1, risk_confidence=0.9)
    assert report.risk is not None and report.risk.certified and report.threshold.objective == "max_misroute"
    assert clf.threshold == report.threshold.threshold
    decided = clf.classify_batch(texts)
    accepted = [(d.classification.route, lab) for d, lab in zip(decided, labels, strict=True) if d.classification.ok]
    assert accepted and sum(r != lab for r, lab in accepted) / len(accepted) <= 0.1
    with pytest.raises(UsageError, match="platt"):
        make().fit(texts, labels, max_misroute=0.1, calibration="isotonic")


def test_a_small_clean_validation_set_still_certifies_its_clean_region() -> None:
    # 60 right answers above 20 wrong ones: too few rows for the ordering third to certify a
    # cut by itself, so the walk starts where that third saw no misroute.
    scores = [1.0 - i / 100 for i in range(80)]
    correct = [i < 60 for i in range(80)]
    choice = choose_risk_threshold(scores, correct, max_misroute=0.1, confidence=0.9)
    assert choice.certified and choice.misroute <= 0.1 and choice.coverage > 0.5
    assert choice.cut > 1.0 - 60 / 100 - 0.05


def shifted(n_in: int, n_oos: int, seed: int) -> tuple[list[float], list[bool], list[bool]]:
    """In-scope scores uniform, P(wrong | s) = 0.2 * (1 - s); out-of-scope scores uniform on [0, 0.7]."""
    rng = random.Random(seed)
    ins = [rng.random() for _ in range(n_in)]
    oos = [0.7 * rng.random() for _ in range(n_oos)]
    correct = [rng.random() >= 0.2 * (1 - s) for s in ins] + [False] * n_oos
    return ins + oos, correct, [True] * n_in + [False] * n_oos


def misroute_at_share(cut: float, share: float) -> float:
    """Exact misroute rate among accepted requests of :func:`shifted` traffic with ``share`` out of scope."""
    t = min(max(cut, 0.0), 1.0)
    wrong_in, accepted_in, accepted_oos = 0.1 * (1 - t) ** 2, 1 - t, max(0.0, (0.7 - t) / 0.7)
    return ((1 - share) * wrong_in + share * accepted_oos) / ((1 - share) * accepted_in + share * accepted_oos)


def test_a_stated_oos_share_keeps_the_cap_when_traffic_has_more_oos_than_validation() -> None:
    # Validation is 3 % out of scope, traffic 20 %: the one-distribution bound is certified on the
    # validation mix and breaks on the traffic; bounding each class on its own rows holds.
    cap, share = 0.1, 0.2
    broke_mixed = broke_shifted = 0
    for seed in range(6):
        scores, correct, in_scope = shifted(6000, 185, seed)
        mixed = choose_risk_threshold(scores, correct, max_misroute=cap, confidence=0.9, seed=seed)
        held = choose_risk_threshold(
            scores, correct, max_misroute=cap, confidence=0.9, seed=seed, in_scope=in_scope, oos_share=share
        )
        assert mixed.certified and held.certified and held.oos_share == share and mixed.oos_share is None
        assert held.upper_bound <= cap and held.cut > mixed.cut
        broke_mixed += misroute_at_share(mixed.cut, share) > cap
        broke_shifted += misroute_at_share(held.cut, share) > cap
        # not needlessly strict: every out-of-scope score is below 0.7 and in-scope errors are rare above it
        assert held.cut < 0.8
    assert broke_mixed == 6 and broke_shifted == 0


def test_a_zero_oos_share_bounds_the_in_scope_rows_alone() -> None:
    scores, correct, in_scope = shifted(3000, 0, 4)
    # Out-of-scope rows that outscore everything: fatal on the validation mix, ignored at share 0.
    scores, correct, in_scope = scores + [0.999] * 300, correct + [False] * 300, in_scope + [False] * 300
    assert not choose_risk_threshold(scores, correct, max_misroute=0.05).certified
    choice = choose_risk_threshold(scores, correct, max_misroute=0.05, in_scope=in_scope, oos_share=0.0)
    assert choice.certified and choice.cut < 0.8 and choice.misroute <= 0.05


def test_shifted_bound_hand_values() -> None:
    # No out-of-scope traffic: the bound is the in-scope misroute bound alone.
    assert shifted_misroute_bound(3, 100, 200, 0, 10, oos_share=0.0, alpha=0.05) == pytest.approx(
        clopper_pearson_upper(3, 100, 1 - 0.45 * 0.05)
    )
    assert shifted_misroute_bound(0, 0, 200, 0, 10, oos_share=0.2, alpha=0.05) == 1.0
    # Accepting every out-of-scope row when half the traffic is out of scope: at least a third misrouted.
    assert shifted_misroute_bound(0, 100, 100, 10, 10, oos_share=0.5, alpha=0.05) > 1 / 3


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"oos_share": 0.2}, "in_scope flag"),
        ({"oos_share": 1.0, "in_scope": [True] * 20}, "oos_share"),
        ({"oos_share": 0.2, "in_scope": [True] * 20}, "out-of-scope rows"),
    ],
)
def test_oos_share_arguments_are_checked(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        choose_risk_threshold([0.5] * 20, [True] * 20, max_misroute=0.1, **kwargs)  # type: ignore[arg-type]


def test_fit_passes_the_oos_share_through() -> None:
    rng = random.Random(5)
    texts, labels = [], []
    for route in ROUTES:
        for ex in route.examples:
            for i in range(12):
                words = ex.split()
                rng.shuffle(words)
                texts.append(" ".join(words) + f" please {i}")
                labels.append(route.name)
    texts += [f"banana bread recipe number {i}" for i in range(40)]
    labels += ["oos"] * 40
    report = make().fit(texts, labels, max_misroute=0.2, risk_confidence=0.9, oos_share=0.1)
    assert report.risk is not None and report.risk.certified and report.risk.oos_share == 0.1


def test_an_oos_share_without_in_scope_rows_is_refused_in_one_line() -> None:
    # Every row out of scope: there is no in-scope misroute rate to bound (was an IndexError).
    with pytest.raises(UsageError, match="needs in-scope rows"):
        choose_risk_threshold([0.3] * 30, [False] * 30, max_misroute=0.1, in_scope=[False] * 30, oos_share=0.2)


@pytest.mark.parametrize("n_in", [1, 2])
def test_an_oos_share_with_too_few_in_scope_rows_certifies_nothing(n_in: int) -> None:
    # One or two in-scope rows leave none to order the cuts on (was an IndexError): not certified.
    scores = [0.9] * n_in + [0.2] * 30
    correct = [True] * n_in + [False] * 30
    in_scope = [True] * n_in + [False] * 30
    choice = choose_risk_threshold(scores, correct, max_misroute=0.1, in_scope=in_scope, oos_share=0.2)
    assert not choice.certified and choice.cut == math.inf and choice.rows == n_in + 30
