"""``DataFeed.to_dataset`` over a real Unix socket carrying the real feed wire (what a barrier
task sends), without Spark: epochs, batch boundaries, structures, dtypes. Imports TensorFlow
(a few seconds)."""

import os
import pickle

import numpy as np
import pyarrow as pa
import pytest
from helpers.feed_wire import serve_partition

from sparktf.common import feedwire
from sparktf.common.spec import FeedConfig
from sparktf.errors import FeedError
from sparktf.node.feed.datafeed import DataFeed
from sparktf.node.feed.equalize import FeedBound

tf = pytest.importorskip("tensorflow")


def feed_of(tmp_path, frames, epochs, **config):
    path = serve_partition(os.path.join(tmp_path, "feed.sock"), frames)
    return DataFeed(
        path,
        train_mode=True,
        input_mapping=None,
        config=FeedConfig(num_epochs=epochs, **config),
        spool_dir=str(tmp_path),
        report=lambda msg: None,
        bound=FeedBound(),
    )


def arrow_frames(n, per_frame):
    batch = pa.RecordBatch.from_pydict(
        {
            "x": pa.array(np.arange(n, dtype=np.float64)),
            "tag": pa.array([f"r{i}" for i in range(n)]),
            "vec": pa.array([[float(i)] * 3 for i in range(n)], type=pa.list_(pa.float32(), 3)),
        }
    )
    frames = [(feedwire.SCHEMA, batch.schema.serialize().to_pybytes(), 0)]
    for start in range(0, n, per_frame):
        part = batch.slice(start, per_frame)
        frames.append((feedwire.ARROW, part.serialize().to_pybytes(), part.num_rows))
    return frames


def test_each_iteration_is_one_epoch_of_full_batches_then_the_remainder(tmp_path):
    feed = feed_of(tmp_path, arrow_frames(50, 7), epochs=3)
    ds = feed.to_dataset(16)
    seen = []
    for _ in range(3):
        sizes, xs = [], []
        for b in ds:
            sizes.append(int(b["x"].shape[0]))
            xs.extend(b["x"].numpy().tolist())
        seen.append(sorted(xs))
        assert sizes == [16, 16, 16, 2]  # batches never cross the epoch's end
    assert seen == [list(map(float, range(50)))] * 3
    assert feed.should_stop() and feed.rows_fed == 150
    assert list(ds) == []  # nothing after the last epoch
    feed.close()


def test_columns_keep_their_types_and_shapes(tmp_path):
    feed = feed_of(tmp_path, arrow_frames(10, 10), epochs=1)
    (b,) = list(feed.to_dataset(10))
    assert b["x"].dtype == tf.float64 and b["vec"].shape == (10, 3)
    assert b["tag"].dtype == tf.string and b["tag"].numpy()[3] == b"r3"
    feed.close()


def test_a_string_column_with_nulls_is_an_error_that_names_it(tmp_path):
    """TensorFlow cannot hold None in a string tensor: say which column, and what to do,
    instead of TensorFlow's own error from inside the dataset's function."""
    batch = pa.RecordBatch.from_pydict(
        {"x": pa.array([1.0, 2.0, 3.0]), "tag": pa.array(["a", None, "c"])}
    )
    frames = [
        (feedwire.SCHEMA, batch.schema.serialize().to_pybytes(), 0),
        (feedwire.ARROW, batch.serialize().to_pybytes(), 3),
    ]
    feed = feed_of(tmp_path, frames, epochs=1)
    with pytest.raises(Exception, match="column 'tag' has nulls.*fill or drop them"):
        list(feed.to_dataset(3))
    feed.close()


def test_rdd_tuples_follow_a_given_signature_converting_dtypes(tmp_path):
    elements = [(np.full(4, i, np.float64), i % 3) for i in range(30)]
    frames = [
        (feedwire.PICKLED, pickle.dumps(elements[:20]), 20),
        (feedwire.PICKLED, pickle.dumps(elements[20:]), 10),
    ]
    feed = feed_of(tmp_path, frames, epochs=2, shuffle=True)
    sig = (tf.TensorSpec((None, 4), tf.float32), tf.TensorSpec((None,), tf.int32))
    ds = feed.to_dataset(8, output_signature=sig)
    assert ds.element_spec == sig
    for _ in range(2):
        got = [(x.numpy(), y.numpy()) for x, y in ds]
        assert [len(y) for _, y in got] == [8, 8, 8, 6]
        assert got[0][0].dtype == np.float32
        assert sorted(int(x[0]) for xs, _ in got for x in xs) == list(range(30))
    feed.close()


def test_a_decimal_column_becomes_float64(tmp_path):
    """Spark SQL makes decimals of literals like 1.5 and of many CSV and JDBC columns."""
    import decimal

    batch = pa.RecordBatch.from_pydict(
        {"d": pa.array([decimal.Decimal("1.25")] * 3, type=pa.decimal128(5, 2))}
    )
    frames = [
        (feedwire.SCHEMA, batch.schema.serialize().to_pybytes(), 0),
        (feedwire.ARROW, batch.serialize().to_pybytes(), 3),
    ]
    feed = feed_of(tmp_path, frames, epochs=1)
    (b,) = list(feed.to_dataset(3))
    assert b["d"].dtype == tf.float64 and b["d"].numpy().tolist() == [1.25] * 3
    feed.close()


def test_a_timestamp_column_is_an_error_that_names_it(tmp_path):
    import datetime

    batch = pa.RecordBatch.from_pydict(
        {"x": pa.array([1.0]), "when": pa.array([datetime.datetime(2020, 1, 1)])}
    )
    frames = [
        (feedwire.SCHEMA, batch.schema.serialize().to_pybytes(), 0),
        (feedwire.ARROW, batch.serialize().to_pybytes(), 1),
    ]
    feed = feed_of(tmp_path, frames, epochs=1)
    with pytest.raises(FeedError, match="column 'when' holds dates or times"):
        feed.to_dataset(1)
    feed.close()


def test_rdd_dicts_become_dicts_of_tensors(tmp_path):
    elements = [{"features": np.full(4, i, np.float32), "label": i % 3} for i in range(10)]
    feed = feed_of(tmp_path, [(feedwire.PICKLED, pickle.dumps(elements), 10)], epochs=1)
    ds = feed.to_dataset(4)
    assert set(ds.element_spec) == {"features", "label"}
    got = list(ds)
    assert [int(b["label"].shape[0]) for b in got] == [4, 4, 2]
    assert got[0]["features"].shape == (4, 4) and got[0]["features"].dtype == tf.float32
    assert sorted(int(v) for b in got for v in b["features"][:, 0]) == list(range(10))
    feed.close()


def test_keras_fit_takes_every_row_each_epoch(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "1")
    import tf_keras as keras

    elements = [(np.full(2, i / 40, np.float32), np.float32(i / 20)) for i in range(40)]
    feed = feed_of(tmp_path, [(feedwire.PICKLED, pickle.dumps(elements), 40)], epochs=4)
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(2,))])
    model.compile(optimizer="sgd", loss="mse")
    steps = []

    class Count(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            steps.append(0)

        def on_train_batch_end(self, batch, logs=None):
            steps[-1] += 1

    model.fit(feed.to_dataset(16), epochs=4, verbose=0, callbacks=[Count()])
    assert steps == [3, 3, 3, 3] and feed.rows_fed == 160
    feed.close()


@pytest.mark.parametrize("frames", [[], arrow_frames(0, 1)[:1]], ids=["rdd", "dataframe"])
def test_a_share_without_rows_says_so_and_takes_an_output_signature(tmp_path, frames):
    """An empty share (1 row over 2 equalized nodes, or an empty DataFrame) failed in
    to_dataset() with "RDD elements of different shapes ... need at least one array to
    stack", for a DataFrame too. Without rows there is no structure to read: it says so and
    what to pass; with output_signature the dataset is empty each epoch."""
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
    with pytest.raises(FeedError, match=r"this node's share has no rows.* output_signature="):
        feed_of(tmp_path / "a", frames, epochs=2).to_dataset(4)
    spec = {"x": tf.TensorSpec([None], tf.float64)}
    ds = feed_of(tmp_path / "b", frames, epochs=2).to_dataset(4, output_signature=spec)
    assert list(ds) == [] and list(ds) == []


@pytest.mark.parametrize(
    "column, says",
    [
        (pa.array([{"a": 1, "b": 2.0}] * 3), "column 'x' holds dict values"),  # a struct column
        (
            pa.array([[("k", 1)]] * 3, type=pa.map_(pa.string(), pa.int64())),
            "column 'x' holds list values",
        ),  # a map column
    ],
)
def test_a_column_a_tensor_cannot_hold_is_an_error_that_names_it(tmp_path, column, says):
    """A struct or map column reaches next_batch as an object array of dicts or lists, which
    no tensor holds: to_dataset says which column and what to do, at once, instead of
    TensorFlow's "Unsupported object type dict" from inside the dataset's function."""
    batch = pa.RecordBatch.from_pydict({"x": column, "y": pa.array([1.0, 2.0, 3.0])})
    frames = [
        (feedwire.SCHEMA, batch.schema.serialize().to_pybytes(), 0),
        (feedwire.ARROW, batch.serialize().to_pybytes(), 3),
    ]
    feed = feed_of(tmp_path, frames, epochs=1)
    with pytest.raises(FeedError, match=f"to_dataset\\(\\): {says}.*input_mapping"):
        feed.to_dataset(3)
    feed.close()


class _Point:
    def __init__(self, x):
        self.x = x


def test_rdd_elements_a_tensor_cannot_hold_are_an_error_that_names_them(tmp_path):
    elements = [(_Point(i), i) for i in range(4)]
    feed = feed_of(tmp_path, [(feedwire.PICKLED, pickle.dumps(elements), 4)], epochs=1)
    with pytest.raises(FeedError, match="to_dataset\\(\\): component 0 holds _Point values"):
        feed.to_dataset(4)
    feed.close()
