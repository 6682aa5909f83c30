"""sparktf.TFCluster, TensorFlowOnSpark's driver API: what it refuses before anything starts
(no Spark needed: each refusal comes before the call reaches sparktf.run or a cluster).
tests/spark/test_tf_models.py runs a TFoS driver program and main_fn through it."""

import pytest

from sparktf import ConfigError, InputMode, TFCluster


def test_tfos_input_modes_are_sparktfs():
    assert TFCluster.InputMode.SPARK is InputMode.SPARK
    assert TFCluster.InputMode.TENSORFLOW is InputMode.TENSORFLOW


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (
            dict(driver_ps_nodes=True),
            "driver_ps_nodes: sparktf runs every node, parameter servers "
            "included, in a Spark barrier task",
        ),
        (dict(queues="input"), "queues must be a list of queue names, got 'input'"),
        (dict(release_port="no"), "release_port must be True or False"),
    ],
)
def test_what_sparktf_does_not_do_is_refused_saying_what_to_change(kwargs, fragment):
    with pytest.raises(ConfigError) as err:
        TFCluster.run(None, print, None, 3, 1, **kwargs)
    assert fragment in str(err.value)


@pytest.mark.parametrize(
    "call, fragment",
    [
        (lambda c: c.train(None, 2, 600, "other"), "one input feed, 'input'; got 'other'"),
        (lambda c: c.inference(None, 600, "q"), "one input feed"),
        (lambda c: c.shutdown(object()), "sparktf does not feed Spark Streaming"),
    ],
)
def test_the_cluster_methods_refuse_what_tfos_meant_otherwise(call, fragment):
    with pytest.raises(ConfigError, match=fragment):
        call(TFCluster.TFCluster(None))


def test_tfnode_helpers_take_the_main_fns_ctx_and_say_so_otherwise():
    from sparktf import TFNode

    with pytest.raises(
        TypeError, match="TFNode: pass ctx.mgr .or ctx., the main_fn's context; got dict"
    ):
        TFNode.DataFeed({}, False)
    with pytest.raises(TypeError, match="pass ctx.mgr"):
        TFNode.hdfs_path("ctx", "model")
