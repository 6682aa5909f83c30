"""Batch prediction: a SavedModel applied to a DataFrame, without a TensorFlow cluster.

``sparktf.predict(df, model_path, input_cols, output_col)`` is a ``mapInArrow`` over ``df``: each
Spark Python worker loads the model once (and keeps it for the tasks it runs after), turns
each Arrow batch's input columns into numpy arrays (an ``array<float>`` column becomes a 2-D
array) and appends the model's output as ``output_col``. In the spirit of Spark's
``predict_batch_udf``, on Arrow batches end to end.

A worker keeps its model by the export's identity (:func:`export_identity`), not by its path:
a model exported again to the same path is loaded again. The driver takes the identity once
per call and ships it to the tasks, and every task checks the path still holds that export,
so one call never scores with two.

The modules: :mod:`~sparktf.batch_prediction.dataframe` (``predict`` itself),
:mod:`~sparktf.batch_prediction.model` (the SavedModel), :mod:`~sparktf.batch_prediction.scorer`
(what each worker runs), :mod:`~sparktf.batch_prediction.outputs` (the output columns).

Modules:

- ``dataframe``: ``predict()`` over a DataFrame: its arguments checked, the scorer mapped over it
- ``model``: The SavedModel a prediction scores with: where it is, its export identity, signature
- ``outputs``: What ``predict()`` writes: the output columns, their Spark and Arrow types
- ``scorer``: The scorer each Spark Python worker runs: Arrow batches in, outputs appended
"""

from __future__ import annotations

from sparktf.batch_prediction.dataframe import predict
from sparktf.batch_prediction.model import (
    ModelChangedError,
    as_executors_read,
    export_identity,
    saved_model_missing,
)
from sparktf.batch_prediction.outputs import OUTPUT_TYPES

# Its public name, as tracebacks, pickles and the errors reference show it.
ModelChangedError.__module__ = __name__

__all__ = [
    "OUTPUT_TYPES",
    "ModelChangedError",
    "as_executors_read",
    "export_identity",
    "predict",
    "saved_model_missing",
]
