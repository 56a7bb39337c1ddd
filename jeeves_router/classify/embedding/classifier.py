"""EmbeddingClassifier: routes by vector similarity on the CPU, offline, in milliseconds."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Literal, cast

import anyio
import anyio.to_thread
import numpy as np
from numpy.typing import NDArray

from ..._args import check_texts_to_classify, route_specs
from ..._files import write_whole
from ..._log import get_logger
from ..._text import valid_texts
from ...errors import UsageError
from ...ids import check_oos_label, validate_route_names
from ..types import Classification, ClassifyRequest, ClassifyResult, RouteSpec
from ._decide import ranked_results
from ._options import check_negatives, check_options, check_save_path
from ._saved import from_saved, read_saved, saved_dict
from ._threads import encode_limiter, in_threads, sharing
from .calibration import Calibrator
from .encoders import Encoder, TokenEncoder, blas_single_thread, default_encoder
from .fitting import FitReport, check_held_out, fit_threshold
from .scorers import Scorer, make_scorer

__all__ = ["EmbeddingClassifier", "FitReport", "DEFAULT_SCORER"]

log = get_logger(__name__)

DEFAULT_SCORER = "late"


#: Fewest texts per thread worth splitting a batch for (below it, the encoder alone shares its chunks).
_MIN_SHARE = 8


class EmbeddingClassifier:
    """A :class:`~jeeves_router.classify.types.Classifier` that compares sentence vectors.

    Each route is represented by its description and examples. A query's route scores become
    per-route probabilities of being right (calibrated by :meth:`fit`); the best route is
    returned when its probability reaches ``threshold``, otherwise the classification is
    not ok (status ``missing_route``: out of scope) so the Router falls back or a cascade asks
    the next stage. ``ClassifyResult.scores`` lists the best routes with their probabilities.
    Construction encodes every description and example once (about 1 s per 400 texts on
    one core with MiniLM); :meth:`save` / :meth:`load` skip that.

    Construction and :meth:`load` (which also load the encoder the first time: about 0.4 s
    for MiniLM) and :meth:`fit` are CPU work that blocks the calling thread. Build the
    classifier before the event loop starts (at import, or in the synchronous setup before
    ``anyio.run``), or, from inside a running loop, in a worker thread:
    ``await anyio.to_thread.run_sync(build)``. :meth:`classify` itself moves its encoding off
    the loop (``offload``).

    Args:
        routes: The routes it knows.
        encoder: Any :class:`Encoder`; default the shared :class:`MiniLMEncoder`.
        scorer: ``"late"`` (the default and the most accurate: regression, token MaxSim and
            lexical similarity; best with an encoder that has token vectors, such as MiniLM),
            ``"centroid"``, ``"nearest"``, ``"logreg"`` or a :class:`Scorer` instance. Unfitted,
            ``"late"`` and ``"centroid"`` give confidences that already reject requests unlike
            every example; :meth:`fit` calibrates them.
        scorer_options: Keyword options for a scorer given by name.
        negatives: Out-of-scope example requests (things the router must *not* accept);
            scorers with ``uses_negatives`` (``"late"``) learn to reject their like.
        threshold: Minimum confidence to accept a route; ``None`` accepts every best route.
        use_descriptions: Count each route's description as one more example.
        offload: Run encoding in a worker thread in :meth:`classify`: ``True``, ``False`` or
            ``"auto"`` (offload once a measured encode takes more than ``offload_above_ms``).
        offload_above_ms: See ``offload``.
        max_scores: How many ranked routes ``ClassifyResult.scores`` carries (an integer >= 1).
        blas_one_thread: Limit numpy's BLAS to one thread while scoring (faster on small CPUs).

    Raises:
        UsageError: For no routes, duplicate names, a route without any text, bad options (each named).
    """

    def __init__(
        self,
        routes: Sequence[RouteSpec],
        *,
        encoder: Encoder | None = None,
        scorer: str | Scorer = DEFAULT_SCORER,
        scorer_options: dict[str, Any] | None = None,
        negatives: Sequence[str] = (),
        threshold: float | None = None,
        use_descriptions: bool = True,
        offload: bool | Literal["auto"] = "auto",
        offload_above_ms: float = 0.5,
        max_scores: int = 10,
        blas_one_thread: bool = True,
        _fitted_scorer: Scorer | None = None,
    ) -> None:
        self.routes = route_specs(routes, owner="EmbeddingClassifier")
        names = validate_route_names([r.name for r in self.routes], owner="EmbeddingClassifier")
        check_options(encoder, offload, offload_above_ms, max_scores)
        self.negatives = check_negatives(negatives)
        self.encoder: Encoder = encoder if encoder is not None else default_encoder()
        # One attribute, replaced whole: a decision never pairs one fit's calibration with another's threshold.
        self._calibration: tuple[Calibrator | None, float | None] = (None, None)
        self.threshold = threshold
        self.use_descriptions = use_descriptions
        self.offload = offload
        self.offload_above_ms = offload_above_ms
        self.max_scores = max_scores
        self.blas_one_thread = blas_one_thread
        self._index = {n: i for i, n in enumerate(names)}
        self._encode_ms: float | None = None
        self._token_check: tuple[object, bool] = (None, False)
        self.scorer = _fitted_scorer if _fitted_scorer is not None else make_scorer(scorer, **(scorer_options or {}))
        if self.negatives and not self.scorer.uses_negatives:
            raise UsageError(f"scorer {self.scorer.kind!r} does not use negatives; use scorer='late' or drop them")
        if _fitted_scorer is None:
            self._train()

    @property
    def route_names(self) -> tuple[str, ...]:
        """The known route names, in order."""
        return tuple(r.name for r in self.routes)

    def _train(self) -> None:
        texts: list[str] = []
        labels: list[int] = []
        for i, route in enumerate(self.routes):
            items = [*route.examples, route.description] if self.use_descriptions else list(route.examples)
            items = [t for t in items if t.strip()]
            if not items:
                raise UsageError(f"route {route.name!r} has no examples and no description; give it some text")
            texts.extend(items)
            labels.extend([i] * len(items))
        texts.extend(self.negatives)
        labels.extend([len(self.routes)] * len(self.negatives))
        texts, vectors, tokens = self._encode(texts)
        with self._blas():
            self.scorer.fit(vectors, np.asarray(labels, dtype=np.int64), len(self.routes), tokens, **self._texts(texts))

    def _encode(self, texts: Sequence[str]) -> tuple[list[str], NDArray[np.float32], list[NDArray[np.float32]] | None]:
        """The texts as valid Unicode, their sentence vectors, and token vectors when the scorer uses them.

        Every text the classifier encodes or scores passes here first: an unpaired UTF-16
        surrogate (half of an emoji) becomes U+FFFD (:func:`~jeeves_router._text.valid_text`),
        which the encoders' tokenizers and the lexical features can read. With an encoder that
        has no token vectors, each text's sentence vector stands as its only token (token-level
        scorers then compare whole sentences).
        """
        texts = valid_texts(texts)
        if self.scorer.uses_tokens:
            enc = self.encoder
            if self._token_check[0] is not enc:  # a runtime-protocol check takes tens of µs: once per encoder
                self._token_check = (enc, isinstance(enc, TokenEncoder))
            if self._token_check[1]:
                return (texts, *cast(TokenEncoder, enc).encode_tokens(texts))
            vectors = enc.encode(texts)
            return texts, vectors, [vectors[i : i + 1] for i in range(len(vectors))]
        return texts, self.encoder.encode(texts), None

    def _texts(self, texts: Sequence[str]) -> dict[str, Sequence[str]]:
        """``texts`` as a keyword for scorers that read them (custom scorers may predate the keyword)."""
        return {"texts": texts} if self.scorer.uses_texts else {}

    def _blas(self) -> Any:
        return blas_single_thread() if self.blas_one_thread else nullcontext()

    @property
    def threshold(self) -> float | None:
        """The confidence below which a request is out of scope (``None``: every request is routed)."""
        return self._calibration[1]

    @threshold.setter
    def threshold(self, value: float | None) -> None:
        if value is not None and not (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):
            raise UsageError(f"threshold must be within [0, 1] or None, got {value!r}")
        self._calibration = (self._calibration[0], value)

    @property
    def calibrator(self) -> Calibrator | None:
        """Maps route scores to probabilities (set by :meth:`fit`; ``None``: the scorer's default)."""
        return self._calibration[0]

    @calibrator.setter
    def calibrator(self, value: Calibrator | None) -> None:
        self._calibration = (value, self._calibration[1])

    # -- scoring -------------------------------------------------------------------------

    def _probabilities(
        self,
        vectors: NDArray[np.float32],
        cols: NDArray[np.int64] | None,
        tokens: list[NDArray[np.float32]] | None,
        texts: Sequence[str],
        calibrator: Calibrator | None,
    ) -> tuple[Any, Any]:
        """Per-route features and probabilities [n, len(cols)] over the allowed columns (None: every route)."""
        with self._blas():
            among = None if cols is None or len(cols) == len(self.routes) else cols
            scores = self.scorer.scores(vectors, tokens, among, **self._texts(texts))
        features = self.scorer.features(scores if cols is None else scores[:, cols])
        if calibrator is not None:
            probs = calibrator.predict(features)
        else:
            probs = self.scorer.default_confidence(features)
        return features, probs

    def _results(
        self,
        vectors: NDArray[np.float32],
        allowed: Sequence[str] | None,
        tokens: list[NDArray[np.float32]] | None,
        texts: Sequence[str],
    ) -> list[ClassifyResult]:
        names = tuple(self._index) if allowed is None else tuple(n for n in allowed if n in self._index)
        if not names:
            c = Classification(None, 0.0, "missing_route", "", reason="none of the requested routes is known")
            return [ClassifyResult(c, stage="embedding") for _ in range(len(vectors))]
        cols = None if allowed is None else np.asarray([self._index[n] for n in names], dtype=np.int64)
        calibrator, threshold = self._calibration  # read once: a fit meanwhile replaces both together
        features, probs = self._probabilities(vectors, cols, tokens, texts, calibrator)
        return ranked_results(names, features, probs, threshold, self.max_scores)

    def _classify_sync(self, text: str, allowed: Sequence[str] | None) -> ClassifyResult:
        if not text.strip():
            return ClassifyResult(Classification(None, 0.0, "empty", text), stage="embedding")
        start = time.perf_counter()
        texts, vectors, tokens = self._encode([text])
        ms = (time.perf_counter() - start) * 1000
        self._encode_ms = ms if self._encode_ms is None else 0.8 * self._encode_ms + 0.2 * ms
        return self._results(vectors, allowed, tokens, texts)[0]

    # -- public API ------------------------------------------------------------------------

    def classify_text(self, text: str, routes: Sequence[str] | None = None) -> ClassifyResult:
        """Classify one text synchronously, optionally among a subset of route names."""
        check_texts_to_classify("EmbeddingClassifier.classify_text", text, routes, one=True)
        return self._classify_sync(text, routes)

    def classify_batch(self, texts: Sequence[str], routes: Sequence[str] | None = None) -> list[ClassifyResult]:
        """Classify many texts at once: what :meth:`classify_text` gives each, exactly, in less time.

        The texts (a list of strings) are encoded in batches. With an encoder that shares calls
        between threads (its ``workers``: 2 for the ONNX encoders on two cores or more), a batch
        of 16 texts or more is split between that many threads, each encoding and scoring its
        share; they are joined before this returns, and a failure on any is raised here.
        """
        check_texts_to_classify("EmbeddingClassifier.classify_batch", texts, routes)
        live = [i for i, t in enumerate(texts) if t.strip()]  # blank texts are ``empty``
        done: dict[int, ClassifyResult] = {}

        def classify(share: list[int]) -> None:
            share_texts, vectors, tokens = self._encode([texts[i] for i in share])
            done.update(zip(share, self._results(vectors, routes, tokens, share_texts), strict=True))

        workers = 1 if sharing() else min(getattr(self.encoder, "workers", 1), len(live) // _MIN_SHARE)
        if workers > 1:  # each thread encodes and scores its share (the encoder then runs on its thread alone)
            in_threads(classify, [live[w::workers] for w in range(workers)])
        elif live:
            classify(live)
        return [
            done[i] if i in done else ClassifyResult(Classification(None, 0.0, "empty", t), stage="embedding")
            for i, t in enumerate(texts)
        ]

    def _should_offload(self) -> bool:
        if self.offload == "auto":
            return self._encode_ms is not None and self._encode_ms > self.offload_above_ms
        return bool(self.offload)

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        """Classify ``request.text`` among ``request.routes`` (the Classifier protocol).

        The first call encodes on the event loop and measures; with ``offload="auto"``
        later calls move to a worker thread when encoding is slower than
        ``offload_above_ms`` (onnxruntime releases the GIL, so other tasks keep running).
        At most one worker per CPU core encodes at a time (shared by every classifier in
        the event loop).
        """
        allowed = [r.name for r in request.routes] if request.routes else None
        if self._should_offload():
            return await anyio.to_thread.run_sync(self._classify_sync, request.text, allowed, limiter=encode_limiter())
        return self._classify_sync(request.text, allowed)

    def fit(
        self,
        texts: Sequence[str],
        labels: Sequence[str],
        *,
        oos_label: str = "oos",
        calibration: Literal["platt", "isotonic"] = "platt",
        objective: Literal["balanced", "precision"] = "balanced",
        target_precision: float = 0.9,
        max_misroute: float | None = None,
        risk_confidence: float = 0.95,
        oos_share: float | None = None,
    ) -> FitReport:
        """Calibrate confidences and choose the threshold on labelled validation rows.

        Args:
            texts: Validation requests, held out from the routes' examples.
            labels: Their route names, or ``oos_label`` for out-of-scope rows.
            oos_label: The label of out-of-scope rows.
            calibration: ``"platt"`` (smooth, robust on small sets) or ``"isotonic"``.
            objective: ``"balanced"`` maximises (in-scope accuracy + OOS recall) / 2;
                ``"precision"`` takes the lowest threshold reaching ``target_precision``.
            target_precision: See ``objective``; within (0, 1].
            max_misroute: Instead of ``objective``: the lowest threshold whose misroute rate
                among accepted requests is certified to be at most this, with probability
                ``risk_confidence`` (see :mod:`jeeves_router.classify.risk` for the method and
                its assumptions).
            risk_confidence: See ``max_misroute``.
            oos_share: With ``max_misroute``: certify the cap for traffic with up to this share
                of out-of-scope requests, whatever share the validation rows have (in-scope
                and out-of-scope rows are bounded separately; needs out-of-scope rows).

        Returns:
            The chosen calibration and threshold with their validation figures. Without
            out-of-scope rows the threshold is not tuned to reject them
            (``report.threshold.oos_recall is None``).

        Raises:
            UsageError: For unknown labels, a route named like ``oos_label``, validation rows
                that are mostly the routes' own examples, a degenerate fit (the same confidence
                for every row), or a ``max_misroute`` that cannot be certified. The classifier
                is unchanged then.
        """
        check_texts_to_classify("EmbeddingClassifier.fit", texts, labels, labels=True)
        if len(texts) != len(labels) or len(texts) < 2:
            raise UsageError("fit needs at least two texts with one label each")
        check_oos_label(oos_label, self.route_names)
        unknown = sorted({lab for lab in labels if lab != oos_label and lab not in self._index})
        if unknown:
            raise UsageError(f"fit: unknown route labels {unknown[:5]}; known routes are {list(self.route_names)}")
        check_held_out(texts, [t for r in self.routes for t in (*r.examples, r.description) if t.strip()])
        valid, vectors, tokens = self._encode(texts)
        with self._blas():
            features = self.scorer.features(self.scorer.scores(vectors, tokens, None, **self._texts(valid)))
        truth = np.asarray([self._index.get(lab, -1) for lab in labels], dtype=np.int64)
        calibrator, report = fit_threshold(
            features, truth, calibration=calibration, objective=objective, target_precision=target_precision,
            max_misroute=max_misroute, risk_confidence=risk_confidence, oos_share=oos_share,
        )  # fmt: skip
        self._calibration = (calibrator, report.threshold.threshold)
        log.debug("embedding.fit", threshold=self.threshold, in_scope_acc=report.threshold.in_scope_accuracy,
                  oos_recall=report.threshold.oos_recall, rows=len(texts))  # fmt: skip
        return report

    # -- persistence ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The fitted classifier as JSON-safe data (see :meth:`save` and :mod:`._saved`)."""
        return saved_dict(self, *self._calibration)  # read once: a fit meanwhile replaces both together

    def save(self, path: str | Path) -> None:
        """Write the fitted classifier (routes, scorer, calibration, threshold) as JSON, whole or not at all.

        Raises:
            UsageError: For a folder, or a file in a folder that does not exist (create it first).
        """
        p = check_save_path(path)  # a missing folder is refused, as `jeeves-router fit --out` refuses it
        data = (json.dumps(self.to_dict(), indent=1) + "\n").encode("utf-8")
        write_whole(p, lambda out: out.write(data))

    @classmethod
    def from_dict(
        cls, data: dict[str, Any], *, encoder: Encoder | None = None, source: str = "<dict>", threads: int | None = None
    ) -> EmbeddingClassifier:
        """Rebuild from :meth:`to_dict` output, with ``encoder`` or else the saved one (on ``threads`` threads)."""
        return from_saved(cls, data, encoder=encoder, source=source, threads=threads)

    @classmethod
    def load(cls, path: str | Path, *, encoder: Encoder | None = None) -> EmbeddingClassifier:
        """Read a classifier written by :meth:`save` (a UsageError names the file and what is wrong with it)."""
        p = Path(path)
        return cls.from_dict(read_saved(p), encoder=encoder, source=str(p))
