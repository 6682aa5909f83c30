"""Journey 5, a TensorFlowOnSpark program: a TFoS user changes one import,
``from sparktf import TFCluster``, and runs their driver as written: ``TFCluster.run(sc,
main_fun, args, num_executors, num_ps, tensorboard, TFCluster.InputMode.SPARK)``,
``cluster.train(rdd, num_epochs)``, ``cluster.shutdown()``; then, as TFoS's examples do, a
second cluster in inference mode, ``cluster.inference(rdd).take(5)``, and the whole output
against the input. The main_fun is TF2 eager (TFoS 2.x style): ``TFNode.DataFeed(ctx.mgr,
...)``, ``next_batch`` of (features, label) tuples, ``batch_results``. Real Spark (local[4]),
real TensorFlow."""

import cloudpickle
import journey_jobs
import pytest

cloudpickle.register_pickle_by_value(journey_jobs)
pytestmark = [
    pytest.mark.tf,
    pytest.mark.journeys,
    pytest.mark.slow,
    pytest.mark.usefixtures("no_leaks"),
]


def test_a_tfos_driver_trains_then_infers_with_one_import_changed(sc_local, tmp_path):
    from sparktf import TFCluster

    points = [(float(i % 20) / 10 - 1, 0.0) for i in range(400)]
    rows = [(x, 3.0 * x - 0.5) for x, _ in points]
    args = {"mode": "train", "batch_size": 20, "model_dir": str(tmp_path / "model")}

    cluster = TFCluster.run(
        sc_local, journey_jobs.tfos_linear, args, 2, 0, False, TFCluster.InputMode.SPARK
    )
    cluster.train(sc_local.parallelize(rows, 4), 3)
    cluster.shutdown(grace_secs=1)
    steps = {r["worker_num"]: r["steps"] for r in cluster.results.values()}
    assert sorted(steps) == [0, 1] and all(s > 0 for s in steps.values()), cluster.results

    args["mode"] = "inference"
    scorer = TFCluster.run(
        sc_local, journey_jobs.tfos_linear, args, 2, 0, False, TFCluster.InputMode.SPARK
    )
    data = sc_local.parallelize(rows, 3)
    out = scorer.inference(data)
    first = out.take(5)
    scorer.shutdown()
    assert len(first) == 5
    assert first == pytest.approx([3.0 * x - 0.5 for x, _ in rows[:5]], abs=0.05)
    scored = data.zip(out).collect()
    assert len(scored) == 400
    assert all(abs(pred - y) < 0.05 for (_, y), pred in scored)
