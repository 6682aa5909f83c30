"""sparktf.node.process._known_cause: the line a node adds to an error TensorFlow reports in
its own terms (no TensorFlow here: the exceptions are made as TensorFlow and Keras raise them,
their frames compiled under Keras' file names)."""

import os

import pytest

from sparktf.node import process


def raised_in(filename: str, message: str) -> BaseException:
    """A ValueError raised by code whose frame has ``filename``, as Keras' own would."""
    scope = {}
    exec(compile(f"def fit():\n    raise ValueError({message!r})\n", filename, "exec"), scope)
    try:
        scope["fit"]()
    except ValueError as exc:
        return exc
    raise AssertionError("not raised")


KERAS3 = os.path.join(os.sep, "site-packages", "keras", "src", "trainers", "trainer.py")
TF_KERAS = os.path.join(os.sep, "site-packages", "tf_keras", "src", "engine", "training.py")


@pytest.mark.parametrize(
    "filename, message, says",
    [
        (
            KERAS3,
            "Attempt to convert a value (PerReplica:{0: 1}) with an unsupported type",
            "Keras 3 cannot train under MultiWorkerMirroredStrategy",
        ),
        (
            KERAS3,
            "To use this dataset, you need to pass this dataset to "
            "ClusterCoordinator.create_per_worker_dataset.",
            "Keras 3 cannot train under ParameterServerStrategy",
        ),
        (TF_KERAS, "Attempt to convert a value (PerReplica:{0: 1}) with an unsupported type", None),
        (KERAS3, "some other error", None),
        (
            "/site-packages/tensorflow/python/distribute/cluster_resolver/tfconfig_cluster_"
            "resolver.py",
            "Disallowed task type found in cluster spec. Allowed types are ('chief', "
            "'worker', 'evaluator', 'ps', None) and the cluster spec is ClusterSpec({'master': "
            "['localhost:1'], 'worker': ['localhost:2']}).",
            "master_node='master' names the chief's job 'master', as TF1 programs",
        ),
    ],
)
def test_the_line_a_node_adds_to_a_known_failure(filename, message, says):
    note = process._known_cause(raised_in(filename, message))
    if says is None:
        assert note is None
    else:
        assert says in note
