"""Journey 1, a notebook: a user trains on a DataFrame, scores the same rows on a new cluster,
looks at the scores, joins them back to the input, writes them to Parquet and reads them back;
then trains and scores again in the same SparkSession, on other data. Every step's result is
checked. Real Spark (local[4]), real node processes; the model is a least-squares line the
nodes fit with numpy (no TensorFlow needed to tell right answers from wrong ones)."""

import cloudpickle
import journey_jobs
import pytest

import sparktf

cloudpickle.register_pickle_by_value(journey_jobs)
pytestmark = [pytest.mark.journeys, pytest.mark.usefixtures("no_leaks")]

SPARK = sparktf.InputMode.SPARK


@pytest.fixture(scope="module")
def spark(sc_local):
    from pyspark.sql import SparkSession

    return SparkSession(sc_local)


def _points(spark, slope, intercept, n=200, partitions=3):
    """``n`` rows (id, x, y) on the line y = slope x + intercept, in ``partitions``."""
    from pyspark.sql import functions as F

    return (
        spark.range(0, n, numPartitions=partitions)
        .withColumn("x", F.col("id") / 10.0 - 7.0)
        .withColumn("y", F.col("x") * slope + intercept)
    )


def _train_then_score(spark, df, model_dir):
    """The notebook's two cells: train on df, then score it on a new cluster."""
    sc = spark.sparkContext
    trainer = sparktf.run(
        sc, journey_jobs.fit_line_share, {"model_dir": model_dir}, num_executors=2, input_mode=SPARK
    )
    trainer.train(df.select("x", "y"), num_epochs=2)
    trainer.shutdown()
    scorer = sparktf.run(
        sc,
        journey_jobs.predict_line,
        {"model_dir": model_dir, "batch": 9},
        num_executors=2,
        input_mode=SPARK,
    )
    scores = scorer.inference(df.select("id", "x"), "id long, prediction double")
    line = scorer.shutdown()
    return trainer, scores, line


def test_train_score_show_join_write_parquet_and_read_back_then_again(spark, tmp_path, capsys):
    model_dir = str(tmp_path / "model")
    df = _points(spark, slope=3.0, intercept=1.0)

    # cell 1 + 2: train on 200 rows (2 epochs, dealt out to 2 nodes), score on a new cluster
    trainer, scores, line = _train_then_score(spark, df, model_dir)
    assert sorted(r["rows_per_epoch"] == [100, 100] for r in trainer.results.values()) == [
        True,
        True,
    ], trainer.results
    assert trainer.rows_held_back == 0
    assert line["slope"] == pytest.approx(3.0) and line["intercept"] == pytest.approx(1.0)
    with pytest.raises(sparktf.ClusterStateError, match=r"call sparktf\.run\(\) again"):
        trainer.train(df.select("x", "y"))  # the train cell alone, re-run

    # cell 3: look at it
    scores.show(5)
    shown = capsys.readouterr().out
    assert "prediction" in shown and "only showing top 5 rows" in shown
    assert [r.id for r in scores.take(3)] == [0, 1, 2]  # input order
    assert scores.count() == 200

    # cell 4: join back to the input on the id column; every prediction is its row's y
    joined = df.join(scores, "id").orderBy("id").collect()
    assert [r.id for r in joined] == list(range(200))
    assert all(r.prediction == pytest.approx(r.y) for r in joined)

    # cell 5: write Parquet, read it back, compare
    path = str(tmp_path / "scores.parquet")
    scores.write.mode("overwrite").parquet(path)
    back = spark.read.parquet(path)
    assert back.schema == scores.schema
    assert sorted(back.collect()) == sorted(scores.collect())

    # cells 1-5 again in the same session, on another line (the model dir reused, as a
    # notebook re-run does): the new scores are the new line's
    first = [(r.id, r.prediction) for r in scores.collect()]
    df2 = _points(spark, slope=-2.0, intercept=5.0, n=120, partitions=2)
    _, scores2, line2 = _train_then_score(spark, df2, model_dir)
    assert line2["slope"] == pytest.approx(-2.0) and line2["intercept"] == pytest.approx(5.0)
    joined2 = df2.join(scores2, "id").collect()
    assert len(joined2) == 120 and all(r.prediction == pytest.approx(r.y) for r in joined2)
    scores2.write.mode("overwrite").parquet(path)
    assert sorted((r.id, r.prediction) for r in spark.read.parquet(path).collect()) == sorted(
        (r.id, r.prediction) for r in scores2.collect()
    )

    # the first scores are still the first model's, even recomputed (not the second's)
    scores.unpersist(blocking=True)
    assert [(r.id, r.prediction) for r in scores.collect()] == first
