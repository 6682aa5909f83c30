"""Resume from the latest checkpoint in one call, on a node: :func:`restore_latest`.

Runs inside the TF process (imports TensorFlow when called, never pyspark). A local directory
is read in place; an ``hdfs://`` one (TensorFlow 2.21 has no Hadoop file system) has its newest
checkpoint (the files its ``checkpoint`` index names) copied into a local directory first,
through :mod:`sparktf.fs`.
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import TYPE_CHECKING

from sparktf import fs

if TYPE_CHECKING:
    import tensorflow as tf

#: The line of TensorFlow's ``checkpoint`` index file that names the newest checkpoint.
_NEWEST = re.compile(r'^model_checkpoint_path:\s*"(.*)"\s*$', re.MULTILINE)


def restore_latest(
    checkpoint: tf.train.Checkpoint, directory: str, local_dir: str | None = None
) -> int:
    """Restore ``checkpoint`` (a ``tf.train.Checkpoint``) from the newest checkpoint in
    ``directory`` (a local path or ``hdfs://...``), as written by ``checkpoint.save`` or a
    ``tf.train.CheckpointManager``.

    Returns how many times it had been saved (its ``save_counter``): the epochs done where it
    is saved once an epoch, which is what ``ctx.get_data_feed(start_epoch=...)`` takes. Returns
    0 and restores nothing where ``directory`` has no checkpoint (the first attempt).
    Variables created later (an optimizer's slots) are restored when created, as
    ``Checkpoint.restore`` does; a Hadoop checkpoint's local copy (a new directory in
    ``local_dir``: ``ctx.restore_latest`` gives the node's private work directory, removed
    when the node ends) stays for that reason.
    """
    import tensorflow as tf

    local: str | None = directory
    if fs.is_hadoop(directory):
        local = _fetch_newest(directory, local_dir)
        if local is None:
            return 0
    path = tf.train.latest_checkpoint(local)
    if path is None:
        return 0
    checkpoint.restore(path)
    return int(checkpoint.save_counter.numpy())


def _fetch_newest(remote: str, parent: str | None) -> str | None:
    """Copy the newest checkpoint of the Hadoop directory ``remote`` (and its index) into a
    new local directory under ``parent``; None where it has none."""
    index = remote.rstrip("/") + "/checkpoint"
    if not fs.exists(index):
        return None
    found = _NEWEST.search(fs.read_bytes(index).decode("utf-8"))
    if not found:
        return None
    prefix = os.path.basename(found.group(1))
    local = tempfile.mkdtemp(prefix="sparktf-ckpt-", dir=parent)
    for name in fs.listdir(remote):
        if name.startswith(prefix + "."):
            fs.download(f"{remote.rstrip('/')}/{name}", os.path.join(local, name))
    with open(os.path.join(local, "checkpoint"), "w") as f:
        f.write(f'model_checkpoint_path: "{prefix}"\nall_model_checkpoint_paths: "{prefix}"\n')
    return local
