"""The Router: classify a request (any classifier), apply the threshold and fallback, dispatch."""

from ..routes import RouterRoute
from .contract import with_failed_usage, within_contract
from .router import CLASSIFIER_USAGE_KEY, Router

__all__ = ["CLASSIFIER_USAGE_KEY", "Router", "RouterRoute", "with_failed_usage", "within_contract"]
