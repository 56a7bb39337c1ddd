"""The embedded router: sentence vectors on the CPU, calibrated, offline.

Install with ``pip install 'jeeves-router[embed]'``. Importing this package loads numpy but
no model; the default encoder is loaded on first use.
"""

from .calibration import IsotonicCalibrator, PlattCalibrator, ThresholdChoice, choose_threshold
from .classifier import EmbeddingClassifier, default_encoder
from .encoders import Encoder, HashingEncoder, MiniLMEncoder, TokenEncoder, WordLlamaEncoder
from .fitting import FitReport
from .late import LateInteractionScorer
from .scorers import CentroidScorer, LogRegScorer, NearestScorer, Scorer

__all__ = [
    "EmbeddingClassifier",
    "FitReport",
    "default_encoder",
    "Encoder",
    "TokenEncoder",
    "MiniLMEncoder",
    "WordLlamaEncoder",
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
