from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from jeeves_router.classify.cascade import CascadeClassifier
from jeeves_router.classify.types import Classification, ClassifyRequest, ClassifyResult, RouteSpec
from jeeves_router.errors import UsageError
from jeeves_router.usage import Usage

ROUTES = (RouteSpec("billing"), RouteSpec("technical"), RouteSpec("shipping"))


@dataclass
class FixedFirst:
    """A fake first stage that ranks routes with fixed confidences."""

    ranked: tuple[tuple[str, float], ...]
    threshold: float = 0.0
    calls: int = 0

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        self.calls += 1
        top, conf = self.ranked[0]
        if conf < self.threshold:
            c = Classification(None, 0.0, "missing_route", "below")
        else:
            second, second_conf = self.ranked[1]
            c = Classification(top, conf, "ok", "first", runner_up=second, runner_up_confidence=second_conf)
        return ClassifyResult(c, stage="embedding", scores=self.ranked)


@dataclass
class FakeLLM:
    """A fake second stage that answers a fixed route and records the hints it saw."""

    answer: str | None
    seen: list[ClassifyRequest] = field(default_factory=list)

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        self.seen.append(request)
        usage = Usage(input_tokens=100, output_tokens=5, requests=1, cost_usd=0.001)
        if self.answer is None:
            return ClassifyResult(Classification(None, 0.0, "missing_route", "no idea"), usage=usage, model_calls=1)
        c = Classification(self.answer, 0.9, "ok", f"route: {self.answer}")
        return ClassifyResult(c, usage=usage, stage="llm", model_calls=1)


def req(text: str = "hello") -> ClassifyRequest:
    return ClassifyRequest(text, ROUTES)


@pytest.mark.anyio
async def test_confident_first_stage_decides_and_saves_a_call() -> None:
    llm = FakeLLM("technical")
    cascade = CascadeClassifier(FixedFirst((("billing", 0.95), ("shipping", 0.03))), llm, accept_above=0.8)
    res = await cascade.classify(req())
    assert res.stage == "cascade:embedding"
    assert res.classification.route == "billing"
    assert res.model_calls_saved == 1 and res.model_calls == 0
    assert llm.seen == []
    assert cascade.stats.first == 1 and cascade.stats.model_calls_saved == 1


@pytest.mark.anyio
async def test_unsure_first_stage_asks_the_llm_with_hints() -> None:
    first = FixedFirst((("shipping", 0.55), ("billing", 0.40), ("technical", 0.05)))
    llm = FakeLLM("billing")
    cascade = CascadeClassifier(first, llm, accept_above=0.8, max_hints=2)
    res = await cascade.classify(req("my parcel was charged"))
    assert res.stage == "cascade:llm"
    assert res.classification.route == "billing"
    assert llm.seen[0].hints == ("shipping", "billing")
    assert llm.seen[0].text == "my parcel was charged" and llm.seen[0].routes == ROUTES
    assert res.model_calls == 1 and res.model_calls_saved == 0
    assert res.usage.requests == 1 and res.usage.input_tokens == 100
    assert cascade.stats.second == 1 and cascade.stats.model_calls_saved == 0


@pytest.mark.anyio
async def test_rejected_by_first_stage_still_goes_to_the_llm() -> None:
    first = FixedFirst((("billing", 0.2), ("technical", 0.1)), threshold=0.5)
    llm = FakeLLM("technical")
    res = await CascadeClassifier(first, llm).classify(req())
    assert res.stage == "cascade:llm" and res.classification.route == "technical"
    assert llm.seen[0].hints == ("billing", "technical")


@pytest.mark.anyio
async def test_neither_stage_decides_returns_not_ok_for_the_fallback() -> None:
    first = FixedFirst((("billing", 0.3), ("technical", 0.2)))
    cascade = CascadeClassifier(first, FakeLLM(None), accept_above=0.9)
    res = await cascade.classify(req())
    assert not res.classification.ok
    assert res.stage == "cascade:llm"
    assert cascade.stats.undecided == 1


@pytest.mark.anyio
async def test_hints_skip_routes_not_offered_in_the_request() -> None:
    first = FixedFirst((("returns", 0.5), ("billing", 0.4), ("technical", 0.1)))
    llm = FakeLLM("billing")
    await CascadeClassifier(first, llm).classify(req())
    assert llm.seen[0].hints == ("billing", "technical")


@pytest.mark.anyio
async def test_counts_accumulate_and_reset() -> None:
    first = FixedFirst((("billing", 0.95), ("technical", 0.01)))
    cascade = CascadeClassifier(first, FakeLLM("technical"), accept_above=0.9)
    for _ in range(3):
        await cascade.classify(req())
    first.ranked = (("billing", 0.5), ("technical", 0.4))
    await cascade.classify(req())
    assert (cascade.stats.first, cascade.stats.second, cascade.stats.model_calls_saved) == (3, 1, 3)
    cascade.reset_stats()
    assert cascade.stats.first == 0


def test_construction_errors() -> None:
    with pytest.raises(UsageError, match="accept_above"):
        CascadeClassifier(FakeLLM("a"), FakeLLM("b"), accept_above=2.0)
    with pytest.raises(UsageError, match="second stage"):
        CascadeClassifier(FakeLLM("a"), object())  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_cascade_over_the_real_embedding_classifier() -> None:
    from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder

    routes = (
        RouteSpec("billing", "payments and refunds", ("I was charged twice", "refund my payment")),
        RouteSpec("technical", "errors and crashes", ("the app crashes", "API error 500")),
    )
    emb = EmbeddingClassifier(routes, encoder=HashingEncoder())
    llm = FakeLLM("technical")
    cascade = CascadeClassifier(emb, llm, accept_above=0.5)
    sure = await cascade.classify(ClassifyRequest("I was charged twice", routes))
    assert sure.stage == "cascade:embedding" and sure.classification.route == "billing"
    unsure = await cascade.classify(ClassifyRequest("zebra xylophone", routes))
    assert unsure.stage == "cascade:llm" and set(llm.seen[-1].hints) == {"billing", "technical"}
