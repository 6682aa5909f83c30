"""A job a test breaks mid-training, spark-submitted by test_network_faults.py to the multi-host test
YARN: ``ParameterServerStrategy`` (a chief, two workers serving with ``ctx.serve()``, one ps;
workers restartable in place), ``heartbeat_timeout`` from argv. The driver prints
``SPEC=<cluster spec json>`` once the chief has trained 2 epochs (the test then injects its
fault), then ``ENDED=<unix time> OUTCOME=<ok|error> <message>`` when the job ends.

``fault_job.py HEARTBEAT EPOCHS mwms [MAX_RESTARTS]``: MultiWorkerMirroredStrategy instead, a
chief and a worker in two executors (lock-step all-reduce: nothing restartable in place).
"""

import json
import os
import sys
import time

import cloudpickle
import helpers
from helpers.tf_jobs import _data

cloudpickle.register_pickle_by_value(helpers)


def main_fn(args, ctx):
    if ctx.job_name == "worker":
        ctx.serve()
        return None
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tensorflow as tf
    import tf_keras as keras

    strategy = tf.distribute.experimental.ParameterServerStrategy(ctx.cluster_resolver())
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
        model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse", steps_per_execution=5)

    def dataset_fn(input_context):
        x, y = _data(seed=input_context.input_pipeline_id)
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(512).batch(32).repeat()

    class Progress(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            ctx.report_progress(epoch + 1)

    hist = model.fit(
        keras.utils.experimental.DatasetCreator(dataset_fn),
        epochs=args["epochs"],
        steps_per_epoch=20,
        verbose=0,
        callbacks=[Progress()],
    )
    return {"loss": [float(v) for v in hist.history["loss"]]}


def mwms_fn(args, ctx):
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tensorflow as tf
    import tf_keras as keras

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
        model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    x, y = _data(seed=ctx.task_index)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).repeat().with_options(options)

    class Progress(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            ctx.report_progress(epoch + 1)

    hist = model.fit(
        ds, epochs=args["epochs"], steps_per_epoch=20, verbose=0, callbacks=[Progress()]
    )
    return {"loss": [float(v) for v in hist.history["loss"]]}


if __name__ == "__main__":
    from pyspark import SparkContext

    import sparktf

    sc = SparkContext(appName="sparktf-multihost-fault")
    mwms = sys.argv[3:4] == ["mwms"]
    restarts = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    cluster = None
    try:  # (run() itself may fail: the gang's rendezvous, or YARN ending the application)
        cluster = sparktf.run(
            sc,
            mwms_fn if mwms else main_fn,
            {"epochs": int(sys.argv[2])},
            num_executors=2 if mwms else 4,
            num_ps=0 if mwms else 1,
            heartbeat_timeout=float(sys.argv[1]),
            max_restarts=restarts,
        )
        deadline = time.monotonic() + 300
        while ((cluster.progress().get("chief:0") or {}).get("step") or 0) < 2:
            assert time.monotonic() < deadline, cluster.progress()
            time.sleep(0.2)
        print("SPEC=" + json.dumps(cluster.cluster_spec), flush=True)
        cluster.shutdown(timeout=600)
        outcome = "ok"
    except Exception as e:  # what the test checks: when and how the job ended
        outcome = f"error {type(e).__name__}: {e}".replace("\n", " | ")
    print(f"ENDED={time.time():.3f} OUTCOME={outcome}", flush=True)
    if cluster is not None:
        print("LAST_SPEC=" + json.dumps(cluster.cluster_spec), flush=True)  # the last attempt's
        print("FAILURES=" + json.dumps([str(f)[:500] for f in cluster.failures]), flush=True)
    os._exit(0)  # (sc.stop() can wait minutes for an executor on a partitioned host)
