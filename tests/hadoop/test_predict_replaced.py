"""sparktf.predict from a SavedModel on the running test HDFS that is exported again to the
same path (see conftest's hdfs_cluster): every call scores with the export there at the call,
never the one a Python worker loaded before, and never two in one call."""

import pytest

import sparktf
from sparktf import fs

# timeout(400): the first test of a session starts the test HDFS, fetching its jars (about
# 230 MB) the first time.
pytestmark = [pytest.mark.tf, pytest.mark.hadoop, pytest.mark.timeout(400)]


@pytest.fixture(scope="module")
def spark(sc_local, hdfs):
    from pyspark.sql import SparkSession

    return SparkSession(sc_local)


@pytest.fixture(scope="module")
def scaled(tmp_path_factory):
    """Two real SavedModels that multiply the sum of their input by a variable (2, then 3):
    the same graph and file sizes, other weights."""
    import tensorflow as tf

    paths = {}
    for factor in (2.0, 3.0):

        class Scaled(tf.Module):
            def __init__(self):
                super().__init__()
                self.factor = tf.Variable(factor)  # noqa: B023 (used at once, in this iteration)

            @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x")])
            def serve(self, x):
                return {"y": tf.reduce_sum(x, axis=1) * self.factor}

        m = Scaled()
        paths[factor] = str(tmp_path_factory.mktemp("scaled") / "m")
        tf.saved_model.save(m, paths[factor], signatures={"serving_default": m.serve})
    return paths


def _export(source, remote):
    """As a chief's main_fn puts a model on HDFS."""
    import shutil

    with fs.export_dir(remote) as local:
        shutil.copytree(source, local, dirs_exist_ok=True)


def test_predict_from_hdfs_scores_with_the_model_exported_there_last(spark, hdfs, scaled):
    remote = hdfs.path("models", "replaced")
    df = spark.createDataFrame([([1.0, 2.0],), ([3.0, 4.0],)] * 4, "x array<float>").repartition(4)
    for factor in (2.0, 3.0, 2.0):
        _export(scaled[factor], remote)
        out = sparktf.predict(df, remote, ["x"], "y")
        assert sorted({r.y for r in out.collect()}) == [3 * factor, 7 * factor], factor
    _export(scaled[3.0], remote)
    with pytest.raises(Exception, match=r"another export.*since predict\(\) was called"):
        out.collect()  # made for the export before: not scored with the new one unsaid
