"""The Router: classify a request (any classifier), decide, dispatch, follow handoffs.

* :mod:`.router` — :class:`Router`, its options and its decision.
* :mod:`.run` — one run: the handoff chain with the classifier at its entry.
* :mod:`.preset` — :class:`HandoffRouter`, the preset for tool-call classification.
"""

from ..routes import RouterRoute
from .contract import CLASSIFIER_USAGE_KEY, within_contract
from .preset import HandoffRouter
from .router import Router

__all__ = ["CLASSIFIER_USAGE_KEY", "HandoffRouter", "Router", "RouterRoute", "within_contract"]
