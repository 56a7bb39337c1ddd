"""The saved form of an :class:`~.classifier.EmbeddingClassifier`: one JSON document.

It holds the routes, the encoder's name and size (a classifier reloads with the encoder it
was fitted with, see :func:`~.encoders.encoder_for`), the fitted scorer, the calibration and
the threshold. Nothing in it is code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ...errors import UsageError
from ...ids import validate_route_names
from ..types import RouteSpec
from .calibration import Calibrator, calibrator_from_dict
from .encoders import Encoder, encoder_for
from .scorers import scorer_from_dict

if TYPE_CHECKING:
    from .classifier import EmbeddingClassifier

__all__ = ["FILE_FORMAT", "FILE_VERSION", "from_saved", "saved_dict"]

FILE_FORMAT = "jeeves-router/embedding-classifier"
FILE_VERSION = 1
C = TypeVar("C", bound="EmbeddingClassifier")


def saved_dict(clf: EmbeddingClassifier, calibrator: Calibrator | None, threshold: float | None) -> dict[str, Any]:
    """``clf`` with its fitted ``calibrator`` and ``threshold`` as JSON-safe data (the saved file)."""
    return {
        "format": FILE_FORMAT,
        "version": FILE_VERSION,
        "encoder": {"name": clf.encoder.name, "dim": clf.encoder.dim},
        "routes": [{"name": r.name, "description": r.description, "examples": list(r.examples)} for r in clf.routes],
        "use_descriptions": clf.use_descriptions,
        "negatives": list(clf.negatives),
        "threshold": threshold,
        "scorer": clf.scorer.to_dict(),
        "calibration": None if calibrator is None else calibrator.to_dict(),
    }


def from_saved(cls: type[C], data: dict[str, Any], *, encoder: Encoder | None, source: str, threads: int | None) -> C:
    """Rebuild a classifier of class ``cls`` from :func:`saved_dict` output (see :meth:`EmbeddingClassifier.from_dict`).

    Raises:
        UsageError: When ``data`` is not a saved classifier, is malformed, or was saved with
            another encoder than ``encoder``.
    """
    if not isinstance(data, dict) or data.get("format") != FILE_FORMAT:
        raise UsageError(f"{source}: not a saved EmbeddingClassifier (missing format {FILE_FORMAT!r})")
    if data.get("version") != FILE_VERSION:
        raise UsageError(f"{source}: unsupported classifier file version {data.get('version')!r}")
    try:
        saved = data["encoder"]
        enc = encoder if encoder is not None else encoder_for(str(saved["name"]), threads=threads)
        if saved["name"] != enc.name or int(saved["dim"]) != enc.dim:
            raise UsageError(
                f"{source}: saved with encoder {saved['name']!r} but loaded with {enc.name!r}; "
                "pass the same encoder or fit again"
            )
        routes = [RouteSpec(r["name"], r.get("description", ""), tuple(r.get("examples", ()))) for r in data["routes"]]
        validate_route_names([r.name for r in routes], owner=source)  # errors name the file, as for a route file
        scorer = scorer_from_dict(data["scorer"])
        fitted = scorer.fitted_routes()
        if fitted is not None and fitted != len(routes):
            raise UsageError(
                f"{source}: its scorer was fitted on {fitted} routes but it lists {len(routes)}; a saved classifier's "
                "routes cannot be added or removed by hand: edit the route file and fit again"
            )
        clf = cls(
            routes,
            encoder=enc,
            threshold=data["threshold"],
            use_descriptions=bool(data.get("use_descriptions", True)),
            negatives=tuple(data.get("negatives", ())),
            _fitted_scorer=scorer,
        )
    except (KeyError, TypeError) as exc:
        raise UsageError(f"{source}: malformed classifier file ({exc!r})") from exc
    if data.get("calibration") is not None:
        clf.calibrator = calibrator_from_dict(data["calibration"])
    return clf


def read_saved(path: Path) -> Any:
    """The JSON data of a saved classifier file.

    Raises:
        UsageError: naming the file when it is missing, unreadable (a directory, no
            permission), not UTF-8 text (with the offset of the first bad byte) or not JSON.
    """
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise UsageError(f"{path}: file not found") from exc
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the file ({exc.strerror or type(exc).__name__})") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (a byte at offset {exc.start}); save it again with save()") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from exc
