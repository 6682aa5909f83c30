"""The node's feed in parts, without Spark or TensorFlow: the equalization bound, the spool,
and chunks into batches."""

import pickle
import threading
import time

import numpy as np
import pyarrow as pa
import pytest

from sparktf.common import feedwire
from sparktf.errors import FeedError
from sparktf.node.feed import batches
from sparktf.node.feed.equalize import FeedBound
from sparktf.node.feed.spool import Spool


def test_the_bound_only_grows_and_final_sticks():
    b = FeedBound()
    b.update(10, False)
    b.update(4, False)  # a late, smaller word changes nothing
    assert (b.value, b.final) == (10, False)
    b.update(12, True)
    b.update(12, False)
    assert (b.value, b.final) == (12, True)


@pytest.mark.parametrize(
    "value,delivered,want,allowed",
    [(0, 0, 5, 0), (10, 0, 5, 5), (10, 8, 5, 2), (10, 10, 5, 0), (10, 12, 5, 0)],
)
def test_the_bound_allows_no_row_beyond_it(value, delivered, want, allowed):
    b = FeedBound()
    b.update(value, False)
    assert b.allows(delivered, want) == allowed


def test_a_wait_for_the_bound_ends_when_it_grows_or_turns_final():
    b = FeedBound()
    b.update(5, False)
    threading.Timer(0.1, b.update, (8, False)).start()
    t = time.monotonic()
    b.wait_beyond(5, timeout=5)
    assert b.value == 8 and time.monotonic() - t < 2
    threading.Timer(0.1, b.update, (8, True)).start()
    b.wait_beyond(8, timeout=5)  # final: nothing more will come, and the wait ends
    assert b.final


def test_a_bound_that_never_moves_is_a_feed_error_naming_the_timeout():
    b = FeedBound()
    with pytest.raises(FeedError, match="feed_timeout=0.3s"):
        b.wait_beyond(0, timeout=0.3)


def test_the_spool_replays_frames_in_any_order_and_deletes_its_file(tmp_path):
    s = Spool(str(tmp_path / "s"), max_bytes=None, num_epochs=2)
    frames = [pickle.dumps(list(range(i, i + 3))) for i in (0, 3, 6)]
    for f in frames:
        s.append(feedwire.PICKLED, f, 3)
    s.flush()
    got = [pickle.loads(bytes(s.read(i)[1])) for i in (2, 0, 1)]
    assert got == [[6, 7, 8], [0, 1, 2], [3, 4, 5]]
    s.append(feedwire.PICKLED, pickle.dumps([9]), 1)  # read while appending
    s.flush()
    assert s.read(3) == (feedwire.PICKLED, bytearray(pickle.dumps([9])), 1)
    s.close()
    assert not (tmp_path / "s").exists()


def test_a_spool_over_its_limit_names_the_setting(tmp_path):
    s = Spool(str(tmp_path / "s"), max_bytes=10, num_epochs=3)
    s.append(feedwire.PICKLED, b"x" * 8, 1)
    with pytest.raises(FeedError, match="spoolMaxBytes=10.*num_epochs=3"):
        s.append(feedwire.PICKLED, b"x" * 8, 1)
    s.close()


def test_arrow_chunks_become_numpy_batches_with_list_columns_as_a_dimension():
    schema = pa.schema([("x", pa.list_(pa.float32())), ("y", pa.int64())])
    rb = pa.record_batch(
        [pa.array([[1, 2], [3, 4], [5, 6]], pa.list_(pa.float32())), pa.array([7, 8, 9])],
        schema=schema,
    )
    batch = batches.assemble([batches.cut(rb, 1, 2)], schema, {"x": "image", "y": "label"})
    assert batch["image"].shape == (2, 2) and batch["image"].dtype == np.float32
    assert batch["label"].tolist() == [8, 9]
    assert batches.count(batch) == 2
    empty = batches.assemble([], schema, None)
    assert batches.count(empty) == 0


def test_ragged_or_null_columns_are_feed_errors_naming_the_column():
    with pytest.raises(FeedError, match="'x' holds arrays of different lengths"):
        batches.column_to_numpy("x", pa.array([[1], [2, 3]]))
    with pytest.raises(FeedError, match="'y'.*has nulls"):
        batches.column_to_numpy("y", pa.array([1, None]))


@pytest.mark.parametrize(
    "values, type_",
    [
        ([1.5, -2.0, 3.25, 4.0, 5.5], pa.float32()),
        ([1.5, -2.0, 3.25, 4.0, 5.5], pa.float64()),
        ([1.5, -2.0, 3.25, 4.0, 5.5], pa.float16()),
        ([1, -2, 3, 4, 5], pa.int8()),
        ([1, 2, 3, 4, 5], pa.uint16()),
        ([1, -2, 3, 2**40, 5], pa.int64()),
        ([True, False, True, True, False, False, True, False, True, True], pa.bool_()),
    ],
)
def test_numeric_and_boolean_columns_become_numpy_at_any_offset(values, type_):
    # half floats from numpy: pyarrow before 21 converts no Python float to float16
    arr = pa.array(np.array(values, type_.to_pandas_dtype()), type_)
    flat = pa.array(np.array([1, 2, 3, 4, 5, 6], type_.to_pandas_dtype()), type_)
    for piece in (arr, arr.slice(1), arr.slice(3, 2), arr.slice(len(values))):
        got = batches.column_to_numpy("x", piece)
        want = piece.to_numpy(zero_copy_only=False)
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), (piece, got)
        assert got.flags.writeable == want.flags.writeable  # Arrow's memory stays read-only
    image = (
        pa.ListArray.from_arrays(pa.array([0, 2, 4, 6], pa.int32()), flat)
        if type_ != pa.bool_()
        else pa.array([[True, False], [False, True], [True, True]])
    )
    assert batches.column_to_numpy("x", image.slice(1)).tolist() == image.slice(1).to_pylist()


def test_a_dataframe_batch_of_numbers_does_not_import_pandas(tmp_path):
    """pyarrow's Array.to_numpy imports pandas on first use (0.2-0.3 s in every node's first
    batch); numeric, boolean and list-of-number columns do not need it."""
    import subprocess
    import sys

    batch = pa.RecordBatch.from_pydict(
        {
            "image": pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float32())),
            "label": pa.array([1, 2], pa.int64()),
            "flag": pa.array([True, False]),
        }
    )
    path = tmp_path / "batch.arrow"
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_stream(f, batch.schema) as w:
        w.write_batch(batch)
    code = f"""
import sys, pyarrow as pa, pyarrow.ipc
from sparktf.node.feed import batches
parts = list(pa.ipc.open_stream(open({str(path)!r}, "rb").read()))
got = batches.assemble(parts, parts[0].schema, None)
print("pandas" in sys.modules, got["image"].tolist(), got["label"].tolist(), got["flag"].tolist())
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "False [[1.0, 2.0], [3.0, 4.0]] [1, 2] [True, False]"


def test_rdd_elements_stack_into_arrays_or_say_why_not():
    x, y = batches.structure([(np.zeros(3), 1), (np.ones(3), 0)])
    assert x.shape == (2, 3) and y.tolist() == [1, 0]
    with pytest.raises(FeedError, match="different shapes"):
        batches.structure([np.zeros(3), np.zeros(4)])


def test_rdd_dict_elements_stack_into_a_dict_of_arrays():
    """rdd.map(lambda r: {"features": ..., "label": ...}): to_dataset gets a dict per batch,
    as a DataFrame's, for Keras' named inputs."""
    out = batches.structure([{"x": np.zeros(3), "y": 1}, {"x": np.ones(3), "y": 0}])
    assert out["x"].shape == (2, 3) and out["y"].tolist() == [1, 0]
    with pytest.raises(FeedError, match="different keys"):
        batches.structure([{"x": 1, "y": 2}, {"x": 1}])


def test_a_shuffled_chunk_has_the_same_rows():
    rng = np.random.RandomState(0)
    rb = pa.record_batch([pa.array(range(50))], names=["a"])
    out = batches.shuffled(rb, rng)
    assert sorted(out.column(0).to_pylist()) == list(range(50))
    assert out.column(0).to_pylist() != list(range(50))
    assert sorted(batches.shuffled(list(range(20)), rng)) == list(range(20))


def test_decode_reads_each_data_frame_kind():
    assert batches.decode(feedwire.PICKLED, pickle.dumps([1, 2]), None) == [1, 2]
    with pytest.raises(FeedError, match="unexpected frame"):
        batches.decode(b"?", b"", None)


def test_an_rdd_feed_reads_its_rows_without_importing_pyarrow(tmp_path):
    """The node of an RDD feed never needs Arrow: a forked node of a Spark Python worker that
    did not import it would pay ~50 ms of import before its feed connects (a fresh interpreter
    shows whether reading a pickled partition pulls it in)."""
    import subprocess
    import sys

    code = f"""
import os, pickle, sys
sys.path.insert(0, {str(__import__('pathlib').Path(__file__).parents[1])!r})
from helpers.feed_wire import serve_partition
from sparktf.common import feedwire
from sparktf.common.spec import FeedConfig
from sparktf.node.feed import FeedBound, DataFeed
rows = [(i, float(i)) for i in range(10)]
path = serve_partition(os.path.join({str(tmp_path)!r}, "feed.sock"),
                       [(feedwire.PICKLED, pickle.dumps(rows[:6]), 6),
                        (feedwire.PICKLED, pickle.dumps(rows[6:]), 4)])
feed = DataFeed(path, train_mode=True, input_mapping=None, config=FeedConfig(),
                spool_dir={str(tmp_path)!r}, report=lambda m: None, bound=FeedBound())
got = []
while not feed.should_stop():
    got += feed.next_batch(4)
feed.close()
assert got == rows, got
print("pyarrow" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def _feed(tmp_path, frames, input_mapping=None):
    import os

    from helpers.feed_wire import serve_partition

    from sparktf.common.spec import FeedConfig
    from sparktf.node.feed import DataFeed

    path = serve_partition(os.path.join(tmp_path, "feed.sock"), frames)
    return DataFeed(
        path,
        train_mode=True,
        config=FeedConfig(),
        spool_dir=str(tmp_path),
        report=lambda m: None,
        bound=FeedBound(),
        input_mapping=input_mapping,
    )


def _arrow_frames():
    batch = pa.RecordBatch.from_pydict({"id": pa.array([1, 2, 3]), "x": pa.array([0.5, 1.0, 2.0])})
    return [
        (feedwire.SCHEMA, batch.schema.serialize().to_pybytes(), 0),
        (feedwire.ARROW, batch.serialize().to_pybytes(), 3),
    ]


@pytest.mark.parametrize("mapping", [["x"], "x", {"x": 3}, {1: "x"}])
def test_an_input_mapping_that_is_not_a_dict_of_names_is_refused(tmp_path, mapping):
    from sparktf.errors import ConfigError

    with pytest.raises(ConfigError, match="input_mapping must be a dict"):
        _feed(tmp_path, _arrow_frames(), input_mapping=mapping)


def test_an_input_mapping_of_a_missing_column_names_the_columns_there_are(tmp_path):
    feed = _feed(tmp_path, _arrow_frames(), input_mapping={"nocol": "y", "x": "x"})
    with pytest.raises(FeedError, match=r"\['nocol'\].*\['id', 'x'\]"):
        feed.next_batch(2)
    feed.close()


def test_an_input_mapping_over_an_rdd_is_an_error_not_ignored(tmp_path):
    feed = _feed(
        tmp_path, [(feedwire.PICKLED, pickle.dumps([1, 2, 3]), 3)], input_mapping={"x": "x"}
    )
    with pytest.raises(FeedError, match="RDD"):
        feed.next_batch(2)
    feed.close()


def test_an_input_mapping_picks_and_renames_columns(tmp_path):
    feed = _feed(tmp_path, _arrow_frames(), input_mapping={"x": "features"})
    batch = feed.next_batch(5)
    assert list(batch) == ["features"] and batch["features"].tolist() == [0.5, 1.0, 2.0]
    feed.close()


@pytest.mark.parametrize("size", [True, 0, "4", 2.0])
def test_next_batch_takes_a_positive_int_only(tmp_path, size):
    from sparktf.errors import ConfigError

    feed = _feed(tmp_path, _arrow_frames())
    with pytest.raises(ConfigError, match="batch_size must be an int >= 1"):
        feed.next_batch(size)
    feed.close()


@pytest.mark.parametrize("mode", ["no", 0, None])
def test_get_data_feed_takes_train_mode_as_a_bool(mode):
    from sparktf.errors import ConfigError
    from sparktf.node.context import NodeContext

    ctx = NodeContext(
        job_name="worker",
        task_index=0,
        cluster_spec={},
        tf_config={},
        rank=0,
        host="h",
        port=1,
        num_cpus=1,
        train_mode=True,
    )
    with pytest.raises(ConfigError, match="train_mode must be True or False"):
        ctx.get_data_feed(train_mode=mode)


@pytest.mark.parametrize("epochs, train_mode", [(1, True), (3, True), (1, False)])
def test_a_should_stop_loop_never_gets_an_empty_batch(tmp_path, epochs, train_mode):
    """``while not feed.should_stop(): feed.next_batch(n)`` where the rows are a multiple of n
    (8 rows, batches of 4): should_stop() looks ahead, so the loop gets 2 full batches per
    epoch and never the empty one Keras' predict fails on; feed.epoch, read before each
    batch, is that batch's epoch."""
    import os

    from helpers.feed_wire import serve_partition

    from sparktf.common.spec import FeedConfig
    from sparktf.node.feed import DataFeed

    rows = list(range(8))
    path = serve_partition(
        os.path.join(tmp_path, "feed.sock"),
        [
            (feedwire.PICKLED, pickle.dumps(rows[:5]), 5),
            (feedwire.PICKLED, pickle.dumps(rows[5:]), 3),
        ],
    )
    feed = DataFeed(
        path,
        train_mode=train_mode,
        config=FeedConfig(num_epochs=epochs),
        spool_dir=str(tmp_path),
        report=lambda m: None,
        bound=FeedBound(),
        input_mapping=None,
    )
    got = []
    while not feed.should_stop():
        epoch = feed.epoch
        got.append((epoch, feed.next_batch(4)))
        if not train_mode:
            feed.batch_results(got[-1][1])
    feed.close()
    assert got == [(e, b) for e in range(epochs) for b in ([0, 1, 2, 3], [4, 5, 6, 7])]
    assert feed.next_batch(4) == [] and feed.should_stop()


def test_next_batch_without_should_stop_still_ends_each_epoch_with_an_empty_batch(tmp_path):
    """The epochs stay apart for a loop that never asks should_stop() (to_dataset's): where an
    epoch ends on a batch boundary, the next call returns it empty."""
    feed = _feed(tmp_path, [(feedwire.PICKLED, pickle.dumps([1, 2, 3, 4]), 4)])
    assert feed.next_batch(2) == [1, 2] and feed.next_batch(2) == [3, 4]
    assert feed.next_batch(2) == [] and feed.should_stop()
    feed.close()


def test_batch_results_dict_columns_become_rows_and_unequal_ones_are_named():
    """A model's named outputs, {column: array}, answer one dict per row; columns of different
    lengths are an error that names each length (no row silently dropped by zip)."""
    import numpy as np

    from sparktf.errors import FeedError
    from sparktf.node.feed.results import as_rows

    rows = as_rows({"a": np.array([1, 2]), "b": [0.5, 1.5]})
    assert rows == [{"a": 1, "b": 0.5}, {"a": 2, "b": 1.5}]
    with pytest.raises(FeedError, match=r"different lengths \({'a': 2, 'b': 3}\)"):
        as_rows({"a": np.array([1, 2]), "b": [0.5, 1.5, 2.5]})


def test_batch_results_takes_a_pandas_dataframe_a_row_per_input_row():
    """A pandas DataFrame of outputs (a column per output column) answers one dict per row,
    not its column names (what list() of it gives)."""
    import pandas as pd

    from sparktf.node.feed.results import as_rows

    rows = as_rows(pd.DataFrame({"a": [1, 2, 3], "b": [0.5, 1.5, 2.5]}))
    assert rows == [{"a": 1, "b": 0.5}, {"a": 2, "b": 1.5}, {"a": 3, "b": 2.5}]
    assert as_rows(pd.Series([1.0, 2.0])) == [1.0, 2.0]
