"""Arrays in a classifier file: numpy arrays as JSON-safe dicts and back.

An array is stored as base64 of its little-endian bytes with its dtype and shape, so a
float32 table reads back exactly. Every array of a fitted classifier (scorer weights,
centroids, token vectors, lexical postings) goes through these two functions. Also here:
:func:`ragged_arange`, the index arithmetic of the scorers' tables of variable-length rows.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ...errors import UsageError

__all__ = ["Array", "decode_array", "encode_array", "ragged_arange"]

#: The float32 arrays the embedded classifier computes with.
Array = NDArray[np.float32]

_DTYPES = {"float32": "<f4", "float16": "<f2", "int32": "<i4"}


def encode_array(a: NDArray[Any], dtype: str = "float32") -> dict[str, Any]:
    """An array as a JSON-safe dict (base64 of little-endian bytes; exact for float32).

    ``dtype="float16"`` halves the size of large tables such as token vectors; ``"int32"``
    stores indexes (read back exactly as float32 up to 2**24).
    """
    arr = np.ascontiguousarray(a, dtype=_DTYPES[dtype])
    return {"dtype": dtype, "shape": list(arr.shape), "b64": base64.b64encode(arr.tobytes()).decode("ascii")}


def decode_array(d: Mapping[str, Any]) -> Array:
    """The inverse of :func:`encode_array`, always as float32.

    Raises:
        UsageError: if ``d`` is not an encoded array.
    """
    try:
        raw = base64.b64decode(d["b64"])
        code = _DTYPES[d.get("dtype", "float32")]
        arr: Array = np.frombuffer(raw, dtype=code).reshape(d["shape"]).astype(np.float32)
        return arr
    except (KeyError, ValueError, TypeError) as exc:
        raise UsageError(f"malformed array in classifier file: {exc}") from exc


def ragged_arange(starts: NDArray[np.int64], lengths: NDArray[np.int64]) -> NDArray[np.int64]:
    """``concatenate([arange(s, s + n) for s, n in zip(starts, lengths)])`` without a Python loop."""
    ends = lengths.cumsum()
    if not len(ends):
        return np.zeros(0, dtype=np.int64)
    out: NDArray[np.int64] = np.arange(ends[-1]) + (starts - ends + lengths).repeat(lengths)
    return out
