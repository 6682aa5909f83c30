"""What tells one SavedModel export from another at the same path (``sparktf.batch_prediction.export_identity``),
on real files and without TensorFlow: sparktf.predict keys each Python worker's loaded model by
it, so a model replaced at its path is loaded again."""

import os
import subprocess
import sys

import pytest

from sparktf import fs
from sparktf.batch_prediction import export_identity


def _write(root, fingerprint=b"fp-1", graph=b"graph", index=b"index"):
    os.makedirs(os.path.join(root, "variables"), exist_ok=True)
    for rel, data in (
        ("fingerprint.pb", fingerprint),
        ("saved_model.pb", graph),
        ("variables/variables.index", index),
        ("variables/variables.data-00000-of-00001", b"weights"),
    ):
        if data is not None:
            with open(os.path.join(root, rel), "wb") as f:
                f.write(data)


def _later(path):
    """Set ``path``'s modification time a second later (as a rewrite a second later would)."""
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_an_untouched_export_keeps_its_identity(tmp_path):
    _write(str(tmp_path))
    first = export_identity(str(tmp_path))
    assert first is not None and export_identity(str(tmp_path)) == first
    assert export_identity(f"file://{tmp_path}") == first


@pytest.mark.parametrize(
    "change",
    [
        "another fingerprint (other weights, same file sizes)",
        "saved_model.pb rewritten",
        "variables.index rewritten",
        "a SavedModel without a fingerprint rewritten",
    ],
)
def test_each_kind_of_new_export_has_another_identity(tmp_path, change):
    root = str(tmp_path)
    no_fingerprint = change.startswith("a SavedModel without")
    _write(root, fingerprint=None if no_fingerprint else b"fp-1")
    first = export_identity(root)
    if change.startswith("another fingerprint"):
        names = ("fingerprint.pb", "saved_model.pb", "variables/variables.index")
        times = {n: os.stat(os.path.join(root, n)).st_mtime_ns for n in names}
        _write(root, fingerprint=b"fp-2")  # the same sizes, and the same times (as a copy
        for n in names:  # that keeps times, or one clock tick, gives)
            os.utime(os.path.join(root, n), ns=(times[n], times[n]))
    elif change == "saved_model.pb rewritten" or no_fingerprint:
        _later(os.path.join(root, "saved_model.pb"))
    else:
        _later(os.path.join(root, "variables", "variables.index"))
    assert export_identity(root) != first


def test_an_export_put_in_place_by_export_dir_is_a_new_identity(tmp_path):
    """What a chief's main_fn does: the same bytes exported again are another export."""
    path = str(tmp_path / "model")
    with fs.export_dir(path) as local:
        _write(local)
    first = export_identity(path)
    with fs.export_dir(path) as local:
        _write(local)
        for name in ("saved_model.pb",):
            _later(os.path.join(local, name))
    assert export_identity(path) != first


def test_no_saved_model_has_no_identity(tmp_path):
    assert export_identity(str(tmp_path / "none")) is None
    _write(str(tmp_path), graph=None)
    assert export_identity(str(tmp_path)) is None


def test_the_identity_is_plain_data_that_pickles_and_imports_no_tensorflow(tmp_path):
    import pickle

    _write(str(tmp_path))
    ident = export_identity(str(tmp_path))
    assert pickle.loads(pickle.dumps(ident)) == ident
    # in a fresh interpreter: another test of this process may have imported TensorFlow
    code = (
        "import sys; from sparktf.batch_prediction import export_identity; "
        f"export_identity({str(tmp_path)!r}); "
        "print('tensorflow' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "False"


def test_one_export_seen_through_libhdfs_and_webhdfs_has_one_identity(tmp_path):
    """The driver may reach HDFS through libhdfs (whole seconds) and the executors through
    WebHDFS (milliseconds), as in a client-mode job on a Kerberos YARN: the same files must
    be the same export to both, else predict() fails with ModelChangedError."""
    root = str(tmp_path)
    _write(root)
    for rel in ("saved_model.pb", "variables/variables.index"):
        path = os.path.join(root, rel)
        whole = os.stat(path).st_mtime_ns // 1_000_000_000 * 1_000_000_000
        os.utime(path, ns=(whole + 456_000_000, whole + 456_000_000))  # WebHDFS: 1234.456 s
    webhdfs = export_identity(root)
    for rel in ("saved_model.pb", "variables/variables.index"):
        path = os.path.join(root, rel)
        whole = os.stat(path).st_mtime_ns // 1_000_000_000 * 1_000_000_000
        os.utime(path, ns=(whole, whole))  # libhdfs: 1234 s
    assert export_identity(root) == webhdfs
