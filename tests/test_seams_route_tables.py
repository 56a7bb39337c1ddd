"""Seams of the route-table features: the out-of-scope label, eval's auto-routed figures, saved files.

Each test here failed before the fix it names.
"""

from __future__ import annotations

import pytest

from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder
from jeeves_router.classify.types import RouteSpec
from jeeves_router.errors import UsageError
from jeeves_router.eval import LabelledRow, check_labels, evaluate
from tests.test_embedding_classifier import VAL
from tests.test_eval import Keyword

OOS_ROUTES = (
    RouteSpec("billing", "payments invoices refunds", ("I was charged twice", "refund my payment")),
    RouteSpec("OOS", "anything else", ("weather today", "tell me a joke")),
)


def test_check_labels_refuses_a_route_named_like_the_oos_label() -> None:
    # Rows labelled "oos" would count as out of scope while the classifier routes them to "OOS".
    rows = [LabelledRow("weather", "oos", 1)]
    with pytest.raises(UsageError, match="route 'OOS' has the name of the out-of-scope label 'oos'"):
        check_labels(rows, ["billing", "OOS"], oos_label="oos", path="d.jsonl")
    check_labels([LabelledRow("weather", "OOS", 1)], ["billing", "OOS"], oos_label="none", path="d.jsonl")


def test_fit_refuses_a_route_named_like_the_oos_label() -> None:
    clf = EmbeddingClassifier(OOS_ROUTES, encoder=HashingEncoder())
    texts = [t for t, _ in VAL]
    labels = ["billing" if lab == "billing" else "oos" for _, lab in VAL]
    with pytest.raises(UsageError, match="name of the out-of-scope label"):
        clf.fit(texts, labels)
    assert clf.calibrator is None and clf.threshold is None


@pytest.mark.anyio
async def test_evaluate_refuses_a_route_named_like_the_oos_label() -> None:
    # Keyword answers the declared route "OOS", which the report would have counted as a rejection.
    rows = [LabelledRow("about billing", "billing", 1), LabelledRow("OOS thing", "oos", 2)]
    with pytest.raises(UsageError, match="name of the out-of-scope label"):
        await evaluate(Keyword(), OOS_ROUTES, rows)
