"""The old path of :mod:`sparktf.batch_prediction`, kept while :mod:`sparktf.ml` imports it."""

from sparktf.batch_prediction import (  # noqa: F401
    ModelChangedError,
    as_executors_read,
    export_identity,
    predict,
    saved_model_missing,
)
