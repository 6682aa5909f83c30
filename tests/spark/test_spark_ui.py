"""Spark's UI says what runs: a cluster's barrier job is described by sparktf, its phase
(main_fn, training, inference), its job and attempt and its nodes, and sits in a job group of
its own unless the caller has one (a notebook cell's group, kept so that cancelling the cell
cancels the cluster). Real Spark (local[4]) and real node processes; the jobs are read from
Spark's status store, what the UI and its REST API show."""

import pytest
from helpers import feed_jobs, jobs

import sparktf
from sparktf import InputMode

pytestmark = pytest.mark.usefixtures("no_leaks")


def ui_jobs(sc, tag):
    """(description, job group) of each job Spark's UI shows for job tag ``tag``. There is no
    public Python API for a job's description: the status store (the UI's data) is read
    through py4j."""
    store = sc._jsc.sc().statusStore()
    ids = sc._jsc.sc().statusTracker().getJobIdsForTag(tag)
    shown = []
    for job in ids:
        data = store.job(job)
        description = data.description()
        group = data.jobGroup()
        shown.append(
            (
                description.get() if description.isDefined() else None,
                group.get() if group.isDefined() else None,
            )
        )
    return shown


def test_a_running_cluster_is_named_with_its_phase_attempt_and_nodes(sc_local, tmp_path):
    signal = tmp_path / "go"
    cluster = sparktf.run(sc_local, jobs.wait_for_file, {"file": str(signal)}, num_executors=2)
    try:
        shown = ui_jobs(sc_local, cluster.job_id)  # while it runs
        assert shown, "no Spark job carries the cluster's tag"
        description, group = shown[0]
        assert description == (
            f"sparktf main_fn: job {cluster.job_id}, attempt 0, nodes chief:0 worker:0"
        )
        assert group == cluster.job_id
    finally:
        signal.touch()
        cluster.shutdown(timeout=120)


def test_training_and_inference_say_so_and_keep_the_callers_group(sc_local):
    sc_local.setJobGroup("my-cell", "a notebook cell")
    try:
        cluster = sparktf.run(
            sc_local, feed_jobs.infer_double, {}, num_executors=2, input_mode=InputMode.SPARK
        )
        out = cluster.inference(sc_local.parallelize(range(100), 4))
        assert out.take(2) == [0, 2]
        cluster.shutdown(timeout=120)
        trained = sparktf.run(
            sc_local,
            feed_jobs.sum_ids,
            {"col": "id"},
            num_executors=2,
            input_mode=InputMode.SPARK,
        )
        trained.train(sc_local.parallelize(range(100), 4), num_epochs=1)
        trained.shutdown(timeout=120)
    finally:
        sc_local.setLocalProperty("spark.jobGroup.id", None)
        sc_local.setLocalProperty("spark.job.description", None)
    phases = {}
    for tag in (cluster.job_id, trained.job_id):
        for description, group in ui_jobs(sc_local, tag):
            if description and description.startswith("sparktf "):
                phases.setdefault(tag, []).append(description.split(":")[0])
                assert group == "my-cell"  # the cell's cancel reaches the cluster
    assert "sparktf inference" in phases[cluster.job_id], phases
    assert "sparktf training" in phases[trained.job_id], phases


def test_the_description_names_the_attempt_after_a_restart(sc_local):
    cluster = sparktf.run(
        sc_local,
        jobs.raise_on_attempt_zero,
        {},
        num_executors=2,
        max_restarts=1,
    )
    cluster.shutdown(timeout=180)
    assert cluster.attempt == 1
    # cluster.job_id names the current attempt's Spark job
    described = [d for d, _ in ui_jobs(sc_local, cluster.job_id) if d]
    assert any(d.startswith("sparktf main_fn:") and "attempt 1" in d for d in described), described
