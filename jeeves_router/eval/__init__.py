"""Measure a classifier on labelled data: accuracy, coverage, misroutes, OOS recall, ECE.

What lives where:

- ``_data``: reading route files and labelled JSONL (bad input raises :class:`DataFileError`
  naming the file and line);
- ``_report``: predicting every row (:func:`predict`, :func:`evaluate`) and the
  :class:`EvalReport` computed from the predictions, with its risk-coverage curve;
- ``_plots``: the report's plots (matplotlib, optional).
"""

from __future__ import annotations

from ._data import DataFileError, LabelledRow, check_labels, load_labelled, load_negatives, load_routes, read_text
from ._plots import write_plots
from ._report import (
    EvalReport,
    EvaluationError,
    Misrouted,
    Prediction,
    compute_report,
    evaluate,
    predict,
    risk_coverage_curve,
    write_misrouted,
)

__all__ = [
    "DataFileError",
    "EvaluationError",
    "LabelledRow",
    "Prediction",
    "Misrouted",
    "EvalReport",
    "read_text",
    "load_routes",
    "load_negatives",
    "load_labelled",
    "check_labels",
    "compute_report",
    "evaluate",
    "predict",
    "write_misrouted",
    "write_plots",
    "risk_coverage_curve",
]
