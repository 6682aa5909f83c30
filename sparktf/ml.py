"""Spark ML Pipeline API: train on the cluster with ``fit``, score on the executors with
``transform``.

>>> from pyspark.ml import Pipeline
>>> from pyspark.ml.feature import VectorAssembler
>>> from sparktf.ml import TFEstimator
>>> est = TFEstimator(main_fn, args, inputCols=["features"], labelCol="label",
...                   clusterSize=2, epochs=3, batchSize=64, exportDir="/tmp/model")
>>> model = Pipeline(stages=[VectorAssembler(inputCols=[...], outputCol="features"),
...                          est]).fit(train_df)
>>> model.transform(test_df).select("label", "prediction")

:class:`TFEstimator` ``fit(df)`` starts a sparktf cluster over ``df`` (InputMode.SPARK: the
input and label columns are fed to the nodes, ``epochs`` times) and runs ``main_fn(args, ctx)``
on every node, where ``args`` carries the estimator's params (``args.epochs``,
``args.batch_size``, ``args.export_dir``, ``args.model_dir``, ``args.input_cols``,
``args.label_col``, ...) and the user's own ``args`` as ``args.args``. Each fit has a
directory of its own under ``exportDir``, ``args.export_dir`` (``<exportDir>/fit-<time>-<id>``),
which nothing was in before; the chief exports a SavedModel there, and ``fit`` returns a
:class:`TFModel` over it, whose ``transform`` is :func:`sparktf.predict` (a ``mapInArrow`` on
the executors). So a fit never takes an older export for its own, and every ``TFModel`` of a
tuning loop (``CrossValidator``, ``TrainValidationSplit``) keeps scoring with the model its
own fit trained. Spark ML vector columns (``VectorAssembler``'s output) reach ``main_fn`` and
the SavedModel as float32 arrays.

Both are Spark ML ``Params`` and save/load through Spark ML persistence (``DefaultParams``
metadata; the estimator's ``main_fn`` and ``args`` travel in it, pickled by cloudpickle; a
model refers to its SavedModel directory, which it does not copy).
"""

from __future__ import annotations

import argparse
import base64
import inspect
import time
import uuid
from collections.abc import Callable
from typing import Any

from pyspark.ml import Estimator, Model
from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.param.shared import HasInputCols, HasLabelCol, HasPredictionCol
from pyspark.ml.util import (
    DefaultParamsReadable,
    DefaultParamsReader,
    DefaultParamsWritable,
    DefaultParamsWriter,
    MLReadable,
    MLReader,
    MLWritable,
    MLWriter,
)

from sparktf import batch_prediction, fs
from sparktf.driver import partition
from sparktf.errors import ConfigError, SparkTFError

#: ``batchSize`` of a :class:`TFEstimator`: the global batch ``main_fn`` trains with.
TRAIN_BATCH_SIZE = 64
#: ``batchSize`` of a :class:`TFModel`: rows per call in ``transform``, as ``sparktf.predict``
#: defaults it (read from its signature: one source).
PREDICT_BATCH_SIZE: int = (
    inspect.signature(batch_prediction.predict).parameters["batch_size"].default
)


class _TFParams(HasInputCols, HasPredictionCol):
    """Params shared by the estimator and the model."""

    exportDir = Param(
        Params._dummy(),
        "exportDir",
        "the estimator's: the directory under which each fit exports its "
        "SavedModel, in a directory of its own; the model's: that SavedModel's "
        "directory (local on every host, or a Hadoop path)",
        typeConverter=TypeConverters.toString,
    )
    batchSize = Param(
        Params._dummy(),
        "batchSize",
        "rows per batch: the global batch in training, per call in transform",
        typeConverter=TypeConverters.toInt,
    )
    outputType = Param(
        Params._dummy(),
        "outputType",
        "transform's column type: 'double' or 'array<double>'",
        typeConverter=TypeConverters.toString,
    )
    signature = Param(
        Params._dummy(),
        "signature",
        "the SavedModel signature transform calls",
        typeConverter=TypeConverters.toString,
    )
    outputKey = Param(
        Params._dummy(),
        "outputKey",
        "which output of the signature (default: the first by name)",
        typeConverter=TypeConverters.toString,
    )

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._setDefault(
            outputType="double",
            signature="serving_default",
            predictionCol="prediction",
        )

    def _output_key(self) -> str | None:
        return self.getOrDefault(self.outputKey) if self.isDefined(self.outputKey) else None


class TFModel(Model, _TFParams, DefaultParamsReadable, DefaultParamsWritable):
    """A SavedModel applied to a DataFrame on the executors (``sparktf.predict``)."""

    def __init__(
        self,
        *,
        exportDir: str | None = None,
        inputCols: list[str] | None = None,
        predictionCol: str = "prediction",
        batchSize: int | None = None,
        outputType: str = "double",
        signature: str = "serving_default",
        outputKey: str | None = None,
    ) -> None:
        super().__init__()
        self._setDefault(batchSize=PREDICT_BATCH_SIZE)
        self._set(**_given(locals()))

    def _transform(self, dataset):
        from sparktf.batch_prediction import predict

        if not self.isDefined(self.exportDir):
            raise ConfigError("TFModel needs exportDir: the SavedModel to apply")
        if not self.isDefined(self.inputCols):
            raise ConfigError("TFModel needs inputCols: the columns fed to the signature")
        return predict(
            dataset,
            self.getOrDefault(self.exportDir),
            self.getInputCols(),
            self.getPredictionCol(),
            output_type=self.getOrDefault(self.outputType),
            signature=self.getOrDefault(self.signature),
            output_key=self._output_key(),
            batch_size=self.getOrDefault(self.batchSize),
        )


class TFEstimator(Estimator, _TFParams, HasLabelCol, MLReadable, MLWritable):
    """Trains ``main_fn`` on a sparktf cluster over the DataFrame given to ``fit``."""

    clusterSize = Param(
        Params._dummy(),
        "clusterSize",
        "nodes in the cluster (default: every Spark task slot)",
        typeConverter=TypeConverters.toInt,
    )
    numPS = Param(
        Params._dummy(), "numPS", "parameter servers among them", typeConverter=TypeConverters.toInt
    )
    epochs = Param(
        Params._dummy(), "epochs", "epochs over the DataFrame", typeConverter=TypeConverters.toInt
    )
    modelDir = Param(
        Params._dummy(),
        "modelDir",
        "checkpoints (args.model_dir)",
        typeConverter=TypeConverters.toString,
    )
    shuffle = Param(
        Params._dummy(),
        "shuffle",
        "shuffle the rows before they are fed",
        typeConverter=TypeConverters.toBoolean,
    )

    def __init__(
        self,
        main_fn: Callable | None = None,
        args: Any = None,
        *,
        inputCols: list[str] | None = None,
        labelCol: str | None = None,
        clusterSize: int | None = None,
        numPS: int = 0,
        epochs: int = 1,
        batchSize: int | None = None,
        modelDir: str | None = None,
        exportDir: str | None = None,
        shuffle: bool = False,
        predictionCol: str = "prediction",
        outputType: str = "double",
        signature: str = "serving_default",
        outputKey: str | None = None,
    ) -> None:
        super().__init__()
        if main_fn is not None and not callable(main_fn):
            raise ConfigError(
                f"main_fn must be callable as main_fn(args, ctx), got {type(main_fn).__name__}"
            )
        self.main_fn = main_fn
        self.args = args
        self._setDefault(numPS=0, epochs=1, shuffle=False, batchSize=TRAIN_BATCH_SIZE)
        self._set(**_given(locals(), skip=("main_fn", "args")))

    def node_args(self, export_dir: str | None = None) -> argparse.Namespace:
        """What ``main_fn`` gets as ``args``: the params, snake_case, and ``args.args``;
        ``export_dir`` is the fit's own directory (default: ``exportDir``)."""
        get = self.getOrDefault
        if export_dir is None and self.isDefined(self.exportDir):
            export_dir = get(self.exportDir)
        return argparse.Namespace(
            args=self.args,
            input_cols=self.getInputCols(),
            label_col=get(self.labelCol) if self.isDefined(self.labelCol) else None,
            epochs=get(self.epochs),
            batch_size=get(self.batchSize),
            export_dir=export_dir,
            model_dir=get(self.modelDir) if self.isDefined(self.modelDir) else None,
            num_ps=get(self.numPS),
        )

    def _fit_dir(self, session) -> str:
        """A directory of this fit's own under ``exportDir``, where nothing is yet (so what is
        there after training can only be this fit's export)."""
        root = self.getOrDefault(self.exportDir).rstrip("/")
        while True:  # (a relative local path made the driver's where executors share it)
            name = time.strftime("fit-%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:8]
            path, seen = batch_prediction.as_executors_read(session, f"{root}/{name}")
            if not (seen and fs.exists(path)):
                return path

    def _checked_columns(self, dataset) -> list[str]:
        """The columns fit() feeds (inputCols, then labelCol), once its params are set and the
        DataFrame has those columns."""
        problems = []
        if self.main_fn is None:
            problems.append("TFEstimator needs main_fn: TFEstimator(main_fn, args, ...)")
        if not self.isDefined(self.inputCols):
            problems.append("TFEstimator needs inputCols: the feature columns to feed")
        if not self.isDefined(self.exportDir):
            problems.append(
                "TFEstimator needs exportDir: where the chief exports the "
                "SavedModel that the fitted TFModel applies"
            )
        if problems:
            raise ConfigError.from_problems(problems)
        cols = list(self.getInputCols())
        if self.isDefined(self.labelCol):
            cols.append(self.getLabelCol())
        missing = [c for c in cols if c not in dataset.columns]
        if missing:
            raise ConfigError(
                f"columns {missing} are not in the DataFrame ({dataset.columns}); "
                "check inputCols and labelCol"
            )
        return cols

    def _fit(self, dataset):
        import sparktf

        cols = self._checked_columns(dataset)
        df = partition.vectors_as_arrays(dataset.select(*cols), cols, dtype="float32")[0]
        size = self.getOrDefault(self.clusterSize) if self.isDefined(self.clusterSize) else None
        export_dir = self._fit_dir(dataset.sparkSession)
        assert self.main_fn is not None  # (checked: _checked_columns)
        cluster = sparktf.run(
            dataset.sparkSession,
            self.main_fn,
            self.node_args(export_dir),
            num_executors=size,
            num_ps=self.getOrDefault(self.numPS),
            input_mode=sparktf.InputMode.SPARK,
        )
        cluster.train(
            df, num_epochs=self.getOrDefault(self.epochs), shuffle=self.getOrDefault(self.shuffle)
        )
        cluster.shutdown()
        export, no_model = batch_prediction.saved_model_missing(dataset.sparkSession, export_dir)
        if no_model:
            raise SparkTFError(
                f"this fit's export directory {export} holds no saved_model.pb after "
                "training: the chief's main_fn must export the model to args.export_dir (a "
                "new directory under exportDir for every fit, not exportDir itself), e.g. "
                "with sparktf.fs.export_dir(args.export_dir) around model.save() or "
                "tf.saved_model.save(); the TFModel that fit() returns scores with it"
            )
        model = TFModel(
            exportDir=export_dir,
            inputCols=self.getInputCols(),
            predictionCol=self.getPredictionCol(),
            outputType=self.getOrDefault(self.outputType),
            signature=self.getOrDefault(self.signature),
            outputKey=self._output_key(),
        )
        return model._resetUid(self.uid.replace("TFEstimator", "TFModel"))

    def copy(self, extra: dict[Param, Any] | None = None) -> TFEstimator:
        that = super().copy(extra)
        that.main_fn, that.args = self.main_fn, self.args
        return that

    # --------------------------------------------------------------------- persistence
    def write(self) -> MLWriter:
        return _EstimatorWriter(self)

    @classmethod
    def read(cls) -> MLReader:  # save() and load() are MLWritable's and MLReadable's
        return _EstimatorReader(cls)


class _EstimatorWriter(MLWriter):
    """Spark ML's params metadata, plus ``main_fn`` and ``args`` (cloudpickle, base64)."""

    def __init__(self, instance: TFEstimator) -> None:
        super().__init__()
        self.instance = instance

    def saveImpl(self, path: str) -> None:
        import cloudpickle

        payload = base64.b64encode(
            cloudpickle.dumps((self.instance.main_fn, self.instance.args))
        ).decode("ascii")
        DefaultParamsWriter.saveMetadata(
            self.instance, path, self.sparkSession, extraMetadata={"sparktf_payload": payload}
        )


class _EstimatorReader(MLReader):
    def __init__(self, cls) -> None:
        super().__init__()
        self.cls = cls

    def load(self, path: str) -> TFEstimator:
        import pickle

        metadata = DefaultParamsReader.loadMetadata(path, self.sparkSession)
        main_fn, args = pickle.loads(base64.b64decode(metadata["sparktf_payload"]))
        instance = self.cls(main_fn, args)
        instance._resetUid(metadata["uid"])
        DefaultParamsReader.getAndSetParams(instance, metadata)
        return instance


def _given(values: dict, skip: tuple = ()) -> dict:
    """An ``__init__``'s keyword arguments that were given (not None), as params."""
    return {
        k: v for k, v in values.items() if k not in ("self", "__class__") + skip and v is not None
    }
