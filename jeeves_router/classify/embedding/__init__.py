"""The embedded router: sentence vectors on the CPU, calibrated, offline.

Install with ``pip install 'jeeves-router[embed]'``. Each name here is imported from its
module on first use (numpy with the first of them); the default encoder's model is loaded
when a classifier first needs it. Loading a saved classifier does not import the
late-interaction scorer.
"""

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

if TYPE_CHECKING:
    from .calibration import IsotonicCalibrator, PlattCalibrator, ThresholdChoice, choose_threshold
    from .classifier import EmbeddingClassifier
    from .encoders import Encoder, MiniLMEncoder, TokenEncoder, default_encoder
    from .fitting import FitReport
    from .late import LateInteractionScorer
    from .mpnet import MPNetEncoder
    from .multilingual import MultilingualUSEEncoder
    from .scorers import CentroidScorer, LogRegScorer, NearestScorer, Scorer
    from .static import HashingEncoder, WordLlamaEncoder

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        ".calibration": ("IsotonicCalibrator", "PlattCalibrator", "ThresholdChoice", "choose_threshold"),
        ".classifier": ("EmbeddingClassifier",),
        ".encoders": ("Encoder", "MiniLMEncoder", "TokenEncoder", "default_encoder"),
        ".fitting": ("FitReport",),
        ".late": ("LateInteractionScorer",),
        ".mpnet": ("MPNetEncoder",),
        ".multilingual": ("MultilingualUSEEncoder",),
        ".scorers": ("CentroidScorer", "LogRegScorer", "NearestScorer", "Scorer"),
        ".static": ("HashingEncoder", "WordLlamaEncoder"),
    },
)

__all__ = [
    "EmbeddingClassifier",
    "FitReport",
    "default_encoder",
    "Encoder",
    "TokenEncoder",
    "MiniLMEncoder",
    "MPNetEncoder",
    "WordLlamaEncoder",
    "MultilingualUSEEncoder",
    "HashingEncoder",
    "Scorer",
    "CentroidScorer",
    "NearestScorer",
    "LogRegScorer",
    "LateInteractionScorer",
    "PlattCalibrator",
    "IsotonicCalibrator",
    "ThresholdChoice",
    "choose_threshold",
]
