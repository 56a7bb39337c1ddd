"""The checks of :class:`~.classifier.EmbeddingClassifier`'s options and of where it is saved.

Each refusal is a :class:`~jeeves_router.errors.UsageError` naming the option and the fix,
raised before any work (encoding the routes, writing a file).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ...errors import UsageError
from ...policies import check_count, check_number


def check_negatives(negatives: object) -> tuple[str, ...]:
    """The classifier's ``negatives``: its texts that are not blank.

    Raises:
        UsageError: For one string instead of a sequence, something that is no sequence, or an
            item that is no string (naming its index), e.g. the ``...`` of a sketch.
    """
    if isinstance(negatives, str):
        raise UsageError("negatives must be a sequence of texts, not one string; wrap it in a list")
    if not isinstance(negatives, Iterable):
        raise UsageError(f"negatives must be a sequence of texts, got {type(negatives).__name__}")
    texts = tuple(negatives)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise UsageError(
                f"negatives[{i}] must be a text (a request none of the routes should take), "
                f"got {type(text).__name__} {text!r:.60}"
            )
    return tuple(t for t in texts if t.strip())


def check_options(encoder: object, offload: object, offload_above_ms: object, max_scores: object = 10) -> None:
    """Refuse a bad ``encoder``, ``offload``, ``offload_above_ms`` or ``max_scores`` of the classifier.

    Raises:
        UsageError: For an encoder that is a name or has no ``encode`` method, an ``offload``
            other than ``True``/``False``/``"auto"``, an ``offload_above_ms`` that is not a number
            >= 0, or a ``max_scores`` that is no integer >= 1.
    """
    if isinstance(encoder, str):
        raise UsageError(
            f"encoder must be an Encoder object, not the name {encoder!r}: pass e.g. MiniLMEncoder(), MPNetEncoder() "
            "or MultilingualUSEEncoder() (from jeeves_router.classify.embedding), or leave it out for the default"
        )
    if encoder is not None and not callable(getattr(encoder, "encode", None)):
        raise UsageError(
            f"encoder must be an Encoder (an object with name, dim and encode(texts)), got {type(encoder).__name__}; "
            "pass e.g. MiniLMEncoder(), or leave it out for the default"
        )
    if offload not in (True, False, "auto"):
        raise UsageError(f"offload must be True, False or 'auto', got {offload!r}")
    check_number("offload_above_ms", offload_above_ms, low=0)
    check_count("max_scores (how many ranked routes ClassifyResult.scores lists; 1 for the best alone)", max_scores, 1)


def check_save_path(path: str | os.PathLike[str]) -> Path:
    """The file ``save`` writes, once it can be: refuse a folder, or a file in a missing folder.

    As ``jeeves-router fit --out`` does, a missing folder is refused rather than created (a
    mistyped folder name would otherwise scatter classifiers).

    Raises:
        UsageError: Naming the path and what to do.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise UsageError(f"save needs a file path (str or Path), got {type(path).__name__}")
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"save({str(p)!r}): is a folder; name the file to write, e.g. {p / 'classifier.json'}")
    if not p.absolute().parent.is_dir():
        raise UsageError(
            f"save({str(p)!r}): the folder {p.parent} does not exist; create it first "
            "(Path(folder).mkdir(parents=True)) or save elsewhere"
        )
    return p
