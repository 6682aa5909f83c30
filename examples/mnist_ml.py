"""MNIST in a Spark ML Pipeline: ``sparktf.ml.TFEstimator`` trains on the cluster in ``fit``,
and the ``TFModel`` it returns scores on the executors in ``transform``.

``spark-submit examples/mnist_ml.py``

The pipeline scales the pixels with a ``SQLTransformer``, then ``TFEstimator`` feeds the
``features`` and ``label`` columns to ``main_fn`` on every node (InputMode.SPARK,
MultiWorkerMirroredStrategy); the chief exports a SavedModel to ``args.export_dir`` (a new
directory under ``exportDir`` for every fit). The fitted ``PipelineModel`` is saved and loaded
again with Spark ML's persistence and scores the held-out digits.
"""

import argparse
import operator
import os
import tempfile

import mnist_data
import numpy as np
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.feature import SQLTransformer

import sparktf
from sparktf.ml import TFEstimator


# ------------------------------------------------------------- main_fn: every training node
def main_fn(args, ctx):
    """``args``: the estimator's params (``epochs``, ``batch_size``, ``export_dir``,
    ``input_cols``, ``label_col``) and the estimator's own ``args`` as ``args.args``."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # Keras 3 cannot fit() under MultiWorkerMirrored
    import tensorflow as tf
    import tf_keras as keras

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        inputs = keras.Input(shape=(784,), name="features")
        hidden = keras.layers.Dense(args.args["hidden"], activation="relu")(inputs)
        model = keras.Model(inputs, keras.layers.Dense(10)(hidden))
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        model.compile(optimizer=keras.optimizers.Adam(2e-3), loss=loss, metrics=["accuracy"])
    (features,), label = args.input_cols, args.label_col
    feed = ctx.get_data_feed(train_mode=True)
    train = feed.to_dataset(args.batch_size).map(operator.itemgetter(features, label))
    model.fit(train, epochs=args.epochs, callbacks=[ctx.keras_callback()], verbose=0)
    # The SavedModel that TFModel scores with. Every node must save; the chief's is kept.
    target = (
        sparktf.fs.export_dir(args.export_dir) if ctx.is_chief else tempfile.TemporaryDirectory()
    )
    with target as local:
        model.save(local)
    return {"steps": int(model.optimizer.iterations.numpy())}


# ----------------------------------------------------------------------------- the driver
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=2, help="TensorFlow nodes (clusterSize)")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--export-dir", default="mnist_ml_export", help="SavedModels, one a fit")
    p.add_argument("--pipeline-dir", default="mnist_pipeline", help="the saved PipelineModel")
    args = p.parse_args(argv)
    for name in ("export_dir", "pipeline_dir"):  # local or Hadoop paths (hdfs://...)
        path = getattr(args, name)
        if "://" not in path:
            setattr(args, name, os.path.abspath(path))

    # TensorFlow and tf_keras imported once per executor; the daemons start now, while the
    # driver loads the data.
    spark = sparktf.spark_session("sparktf-mnist-ml", preload=("tensorflow", "tf_keras"))
    (x, y), (x_test, y_test) = mnist_data.load_default()
    train_df = sparktf.from_numpy(spark, {"image": x, "label": y}).cache()
    test_df = sparktf.from_numpy(spark, {"image": x_test, "label": y_test})

    scale = SQLTransformer(
        statement="SELECT CAST(transform(image, p -> p / 255) AS array<float>) AS features, label "
        "FROM __THIS__"
    )
    estimator = TFEstimator(
        main_fn,
        {"hidden": 128},
        inputCols=["features"],
        labelCol="label",
        clusterSize=args.nodes,
        epochs=args.epochs,
        batchSize=64,
        exportDir=args.export_dir,
        outputType="array<double>",  # the model's logits
    )
    model = Pipeline(stages=[scale, estimator]).fit(train_df)  # trains on the cluster
    model.write().overwrite().save(args.pipeline_dir)
    loaded = PipelineModel.load(args.pipeline_dir)
    print(
        f"mnist: fitted, saved and loaded; the TFModel scores {loaded.stages[-1].getOrDefault('exportDir')}"
    )

    rows = loaded.transform(test_df).select("label", "prediction").collect()  # on the executors
    accuracy = np.mean([np.argmax(r.prediction) == r.label for r in rows])
    print(f"test_accuracy={accuracy:.4f}")
    return accuracy


if __name__ == "__main__":
    main()
