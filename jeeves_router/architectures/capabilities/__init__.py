"""Capabilities: several skills per task, selected by classification and run by plan or ReAct.

* :mod:`.architecture` — :class:`Capabilities`, the architecture (extract, select, orchestrate).
* :mod:`.capability` — :class:`Capability` and what a capability function is given and returns.
* :mod:`.selection`, :mod:`.planning`, :mod:`.orchestrate` — classification of the
  capabilities, the planner's prompts and parsers, and the plan-first and ReAct loops.
* :mod:`.steps`, :mod:`.failure` — one step's session id, prompt and closing event, and the
  failure of a capability agent whose run ended without an answer.
"""

from .architecture import (
    ORCHESTRATOR_USAGE_KEY,
    SELECTION_USAGE_KEY,
    Capabilities,
    Capability,
    CapabilityCall,
    CapabilityFunction,
    CapabilityOutput,
    ClassifierExample,
    ClassifierGuide,
)

__all__ = [
    "ORCHESTRATOR_USAGE_KEY",
    "SELECTION_USAGE_KEY",
    "Capabilities",
    "Capability",
    "CapabilityCall",
    "CapabilityFunction",
    "CapabilityOutput",
    "ClassifierExample",
    "ClassifierGuide",
]
