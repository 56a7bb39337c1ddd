from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jeeves_router.classify.embedding.calibration import (
    IsotonicCalibrator,
    PlattCalibrator,
    calibrator_from_dict,
    choose_threshold,
    make_calibrator,
)
from jeeves_router.errors import UsageError

feature_lists = st.lists(st.floats(-5, 5, allow_nan=False), min_size=4, max_size=60)


def synthetic(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    f = rng.uniform(0, 1, n)
    correct = rng.uniform(0, 1, n) < f  # P(correct | f) = f
    return f, correct


@pytest.mark.parametrize("kind", ["platt", "isotonic"])
def test_calibrators_are_monotone_and_bounded(kind: str) -> None:
    f, correct = synthetic()
    cal = make_calibrator(kind)
    cal.fit(f, correct)
    grid = np.linspace(-2, 3, 200)
    p = cal.predict(grid)
    assert np.all(np.diff(p) >= -1e-7)
    assert p.min() >= 0.0 and p.max() <= 1.0


@pytest.mark.parametrize("kind", ["platt", "isotonic"])
def test_calibrators_recover_a_known_probability(kind: str) -> None:
    f, correct = synthetic(n=4000)
    cal = make_calibrator(kind)
    cal.fit(f, correct)
    assert abs(float(cal.predict(np.array([0.8]))[0]) - 0.8) < 0.1
    assert abs(float(cal.predict(np.array([0.2]))[0]) - 0.2) < 0.1


@settings(max_examples=60, deadline=None)
@given(feature_lists, st.data())
def test_any_fit_stays_monotone_and_in_unit_interval(features: list[float], data: st.DataObject) -> None:
    correct = data.draw(st.lists(st.booleans(), min_size=len(features), max_size=len(features)))
    for cal in (PlattCalibrator(), IsotonicCalibrator()):
        cal.fit(np.array(features), np.array(correct))
        p = cal.predict(np.linspace(-6, 6, 50))
        assert np.all((p >= 0) & (p <= 1))
        assert np.all(np.diff(p) >= -1e-7)


def test_platt_never_has_a_negative_slope() -> None:
    f = np.array([0.1, 0.2, 0.8, 0.9])
    cal = PlattCalibrator()
    cal.fit(f, np.array([True, True, False, False]))
    assert cal.a >= 0


@pytest.mark.parametrize("kind", ["platt", "isotonic"])
def test_calibrator_round_trip(kind: str) -> None:
    f, correct = synthetic()
    cal = make_calibrator(kind)
    cal.fit(f, correct)
    again = calibrator_from_dict(cal.to_dict())
    grid = np.linspace(0, 1, 17)
    np.testing.assert_array_equal(cal.predict(grid), again.predict(grid))


def test_calibration_input_errors() -> None:
    with pytest.raises(UsageError):
        PlattCalibrator().fit(np.array([0.1]), np.array([True]))
    with pytest.raises(UsageError):
        IsotonicCalibrator().fit(np.array([0.1, np.nan]), np.array([True, False]))
    with pytest.raises(UsageError, match="unknown calibration"):
        make_calibrator("beta")
    with pytest.raises(UsageError):
        calibrator_from_dict({"kind": "platt"})


def test_balanced_threshold_separates_in_scope_from_oos() -> None:
    conf = np.array([0.95, 0.9, 0.85, 0.7, 0.4, 0.3, 0.2])
    correct = np.array([True, True, True, False, False, False, False])
    in_scope = np.array([True, True, True, True, False, False, False])
    choice = choose_threshold(conf, correct, in_scope)
    # Any cut between 0.4 and 0.85 keeps the 3 right answers (3/4 in-scope) and rejects every OOS row.
    assert 0.4 < choice.threshold < 0.85
    assert choice.in_scope_accuracy == pytest.approx(0.75)
    assert choice.oos_recall == pytest.approx(1.0)


def test_threshold_lies_between_distinct_values_not_inside_ties() -> None:
    conf = np.array([0.9, 0.5, 0.5, 0.1])
    correct = np.array([True, True, False, False])
    in_scope = np.array([True, True, False, False])
    t = choose_threshold(conf, correct, in_scope).threshold
    assert t != 0.5


def test_precision_objective_takes_the_lowest_threshold_meeting_the_target() -> None:
    conf = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
    correct = np.array([True, True, True, False, True])
    in_scope = np.ones(5, dtype=bool)
    strict = choose_threshold(conf, correct, in_scope, objective="precision", target_precision=1.0)
    assert 0.6 < strict.threshold < 0.7 and strict.precision == 1.0
    loose = choose_threshold(conf, correct, in_scope, objective="precision", target_precision=0.8)
    assert loose.threshold < 0.5 and loose.precision == pytest.approx(0.8)


def test_choose_threshold_validates() -> None:
    with pytest.raises(UsageError):
        choose_threshold(np.array([]), np.array([]), np.array([]))
    with pytest.raises(UsageError, match="objective"):
        choose_threshold(np.array([0.5]), np.array([True]), np.array([True]), objective="f1")  # type: ignore[arg-type]
