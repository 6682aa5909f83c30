"""What ``DataFeed.batch_results`` takes, as one output per input row: tensors as numpy (the
Spark task has no TensorFlow), a dict of columns or a pandas DataFrame as a dict per row.

Runs in the TF process; imports nothing heavy.
"""

from __future__ import annotations

from typing import Any

from sparktf.errors import FeedError


def _host(value):
    """An eager tensor (anything with a ``numpy()`` method) as its numpy value; else as is."""
    numpy = getattr(value, "numpy", None)
    return numpy() if callable(numpy) else value


def as_rows(results: Any) -> list:
    """``batch_results``' argument as one output per row (tensors as numpy, so that the Spark
    task, which has no TensorFlow, can read them; a dict of columns, or a pandas DataFrame, as
    a dict per row)."""
    results = _host(results)
    if hasattr(results, "columns") and callable(getattr(results, "to_dict", None)):
        results = results.to_dict("list")  # a pandas DataFrame: a column per output column
    if isinstance(results, dict):
        columns = {name: _host(col) for name, col in results.items()}
        lengths = {name: len(col) for name, col in columns.items()}
        if len(set(lengths.values())) > 1:
            raise FeedError(
                f"batch_results(): the dict's columns have different lengths "
                f"({lengths}); give each column one value per row of the batch"
            )
        return [dict(zip(columns, row)) for row in zip(*columns.values())]
    results = list(results)
    if results and callable(getattr(results[0], "numpy", None)):
        results = [_host(r) for r in results]
    return results
