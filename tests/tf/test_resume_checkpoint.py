"""sparktf.node.resume.restore_latest: one call restores a tf.train.Checkpoint from the newest
checkpoint of a directory and says how often it had been saved (real TensorFlow, a local
directory; the hdfs:// copy goes through sparktf.fs, tested against a real HDFS there)."""

import pytest

from sparktf.node import resume

tf = pytest.importorskip("tensorflow")


def test_the_newest_checkpoint_is_restored_and_its_save_count_returned(tmp_path):
    step = tf.Variable(0)
    ckpt = tf.train.Checkpoint(step=step)
    manager = tf.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=2)
    for epoch in range(3):  # saved once an epoch
        step.assign(10 * (epoch + 1))
        manager.save()
    again = tf.Variable(0)
    assert resume.restore_latest(tf.train.Checkpoint(step=again), str(tmp_path)) == 3
    assert int(again.numpy()) == 30


def test_a_directory_without_a_checkpoint_restores_nothing(tmp_path):
    value = tf.Variable(7)
    assert resume.restore_latest(tf.train.Checkpoint(v=value), str(tmp_path)) == 0
    assert resume.restore_latest(tf.train.Checkpoint(v=value), str(tmp_path / "none")) == 0
    assert int(value.numpy()) == 7
