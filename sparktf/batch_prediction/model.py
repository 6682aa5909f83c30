"""The SavedModel a prediction scores with: where it is, its export identity, and its serving
function, loaded once per Spark Python worker.
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING

from sparktf.common import logfilter, tfimport
from sparktf.errors import ConfigError, SparkTFError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# (model path, signature) -> (export identity, loaded SavedModel, signature function), per
# Python worker: the latest export loaded from that path only
_MODELS: dict = {}
_IDENTITY_FILES = ("saved_model.pb", "variables/variables.index")


class ModelChangedError(SparkTFError, RuntimeError):
    """The SavedModel at a ``model_path`` is another export than the one a call was made for
    (exported again since ``predict()`` was called, or while a worker loaded it)."""


def export_identity(model_path: str) -> tuple | None:
    """What tells one SavedModel export at ``model_path`` from another: a hash of its
    fingerprint (``fingerprint.pb``: TensorFlow's hashes of the graph and of the variables'
    checkpoint), and the size and modification time of ``saved_model.pb`` and
    ``variables/variables.index`` (a model exported again counts as another export, even with
    the same bytes, once the clock has moved). Times count in whole seconds: libhdfs gives
    no more, WebHDFS gives milliseconds, and a driver on one and executors on the other (a
    client-mode job on a Kerberos YARN) must see one export alike.
    Plain data; None when the path holds no ``saved_model.pb``. Local and Hadoop paths
    (:mod:`sparktf.fs`); a few metadata calls and one small read."""
    from sparktf import fs

    root = model_path.rstrip("/")
    files = [(rel, fs.stat(f"{root}/{rel}")) for rel in _IDENTITY_FILES]
    if files[0][1] is None or files[0][1][0] != "file":
        return None
    fingerprint = None  # (none before TensorFlow 2.12)
    if fs.stat(f"{root}/fingerprint.pb") is not None:
        fingerprint = hashlib.sha256(fs.read_bytes(f"{root}/fingerprint.pb")).hexdigest()
    return (fingerprint,) + tuple(
        (rel, st[1], st[2] // 1_000_000_000) if st else (rel, None, None) for rel, st in files
    )


def _serving_fn(
    model_path: str, signature: str, startup_logs: bool = False, identity: tuple | None = None
):
    """The SavedModel's signature function, loaded once per Python worker and export
    (TensorFlow's native start-up lines left off the executor's stderr unless
    ``startup_logs``). ``identity``: the export the driver saw when the call was made (None:
    whatever the path holds now); a path that holds another export is a
    :class:`ModelChangedError`, as is an export replaced while it was loaded."""
    from sparktf import fs

    now = export_identity(model_path)
    if now is None:
        raise ConfigError(
            f"model_path {model_path} holds no saved_model.pb on this executor: "
            f"{_not_a_saved_model(model_path, fs.is_hadoop(model_path))}"
        )
    if identity is not None and now != identity:
        raise ModelChangedError(
            f"model_path {model_path} holds another export than when predict() was called "
            "(a model was exported there since predict() was called): call predict() (or "
            "TFModel.transform) again to score with the model there now"
        )
    key = (model_path, signature)
    cached = _MODELS.get(key)
    if cached is not None and cached[0] == now:
        return cached[2]
    _MODELS.pop(key, None)  # the former export's model goes before the new one is loaded
    with logfilter.startup_chatter_filtered(show=startup_logs):
        loaded, fn = _load(model_path, signature)
    if export_identity(model_path) != now:  # (read half of one export, half of the next)
        raise ModelChangedError(
            f"model_path {model_path} was exported to again while a Python worker loaded it: "
            "call predict() (or TFModel.transform) again once the export is done"
        )
    _MODELS[key] = (now, loaded, fn)
    return fn


def _load(model_path: str, signature: str):
    """(the loaded SavedModel, its signature function); Hadoop paths copied locally first.
    TensorFlow without its eager Keras import (:mod:`sparktf.common.tfimport`): a signature
    needs no Keras, which is half the import."""
    from sparktf import fs

    tf = tfimport.tensorflow_without_keras()

    if fs.is_hadoop(model_path):  # TF has no hdfs://: a local copy per Python worker, removed
        import shutil  # once loaded (the worker may end without cleaning up after itself)
        import tempfile

        local = tempfile.mkdtemp(prefix="sparktf-model-")
        try:
            fs.download(model_path, local)
            loaded = tf.saved_model.load(local)
        finally:
            shutil.rmtree(local, ignore_errors=True)
    else:
        loaded = tf.saved_model.load(model_path)
    if signature not in loaded.signatures:
        raise ConfigError(
            f"{model_path} has no signature {signature!r}; it has {sorted(loaded.signatures)}"
        )
    return loaded, loaded.signatures[signature]  # the function needs its object


def as_executors_read(session: SparkSession, model_path: str) -> tuple[str, bool]:
    """``model_path`` as the executors will read it, and whether the driver sees the same
    files: a Hadoop path; a local path under a ``local`` or ``local-cluster`` master (on
    Spark Connect, the server's, on this machine), where a relative path is the driver's.
    Elsewhere a local path may exist on the executors' hosts alone (``--files``, an image),
    and is taken on trust."""
    from sparktf import fs

    if fs.is_hadoop(model_path):
        return model_path, True
    if _local_master_here(session):
        if model_path.startswith("file:"):
            return model_path, True
        return os.path.abspath(model_path), True
    return model_path, False


def _local_master_here(session: SparkSession) -> bool:
    """Whether the executors run on this machine: a ``local[-cluster]`` master (on Spark
    Connect, the server's, reached on loopback)."""
    from sparktf.driver import sparkfacts, sparkside

    if sparkfacts.is_connect(session):
        return sparkside.local_master_here(session)
    return (session.sparkContext.master or "").startswith("local")  # local[-cluster]


def saved_model_missing(session: SparkSession, model_path: str) -> tuple[str, bool]:
    """``model_path`` as the executors will read it, and whether it is known to hold no
    SavedModel (checked where the driver sees what the executors will: see
    :func:`as_executors_read`)."""
    from sparktf import fs

    model_path, seen = as_executors_read(session, model_path)
    return model_path, seen and not fs.exists(model_path.rstrip("/") + "/saved_model.pb")


def _not_a_saved_model(path: str, hadoop: bool) -> str:
    """Why a path without ``saved_model.pb`` is not what ``predict`` reads, and what to give."""
    export = (
        "give the directory a SavedModel was exported to (Keras 3: model.export(dir); "
        "tf-keras: model.save(dir), a path without .keras or .h5; or "
        "tf.saved_model.save(model, dir))"
    )
    if path.rstrip("/").lower().endswith((".keras", ".h5", ".hdf5")):
        return f"it is a Keras model file, not a SavedModel directory: {export}"
    if not hadoop and not os.path.exists(path):
        return f"it does not exist; {export}"
    return export
