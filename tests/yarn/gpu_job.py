"""A GPU job for tests/yarn/test_yarn_gpus.py, spark-submitted to the test YARN: two nodes, one
GPU each from YARN's GPU scheduling (stand-in GPUs); prints each node's view as JSON, and what
YARN's NodeManager said each executor's container holds."""

import json
import os

from pyspark.sql import SparkSession

import sparktf


def describe(args, ctx):
    return {
        "gpus": list(ctx.gpus),
        "env": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "container": os.environ.get("CONTAINER_ID"),
    }


if __name__ == "__main__":
    spark = SparkSession.builder.getOrCreate()
    cluster = sparktf.run(spark.sparkContext, describe, num_executors=2)
    cluster.shutdown()
    print("NODES=" + json.dumps(cluster.results, sort_keys=True))
    spark.stop()
