"""The ``tf.data.Dataset`` over a node's :class:`~sparktf.node.feed.datafeed.DataFeed`: one
epoch per iteration, each batch read by a ``numpy_function`` in order (``DataFeed.to_dataset``).

Runs in the TF process; imports tensorflow and numpy when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import tensorflow as tf

    from sparktf.node.feed.datafeed import DataFeed

from sparktf.errors import FeedError
from sparktf.node.feed import batches


def build(feed: DataFeed, batch_size: int, output_signature: Any = None) -> Any:
    """``feed.to_dataset(batch_size, output_signature)``: see its docstring."""
    import numpy as np
    import tensorflow as tf

    first = feed.next_batch(batch_size)
    if output_signature is None:
        output_signature = _signature(tf, feed, first)
    specs = tf.nest.flatten(output_signature)
    reader = _EpochReader(feed, batch_size, first, specs, tf, np)
    touts = [s.dtype for s in specs]

    def one_epoch(_: tf.Tensor) -> tf.data.Dataset:
        def call(_: tf.Tensor) -> tuple[tf.Tensor, ...]:
            out = tf.numpy_function(reader.next_batch, [_], touts, stateful=True)
            return tuple(tf.ensure_shape(t, s.shape) for t, s in zip(out, specs))

        return (
            tf.data.Dataset.from_tensors(np.int64(0))
            .repeat()
            .map(call)
            .take_while(lambda *t: tf.shape(t[0])[0] > 0)
            .map(lambda *t: tf.nest.pack_sequence_as(output_signature, list(t)))
        )

    # Not Dataset.from_generator: in TF 2.21 a model fed by it trains about 2x slower per
    # step than from tensors, even when its elements are cached (measured with the example's
    # CNN: 2.5 s against 1.2 s an epoch); numpy_function calls in a plain pipeline do not
    # pay that (docs/benchmarks.md, "The main job"). One batch per call, in order: the stateful
    # calls are never run in parallel or ahead of take_while, so no batch of the next epoch
    # is read before the consumer starts it.
    ds = (
        tf.data.Dataset.from_tensors(np.int64(0))
        .map(lambda z: tf.numpy_function(reader.start, [z], tf.int64, stateful=True))
        .flat_map(one_epoch)
    )
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return ds.with_options(options)


def _signature(tf, feed, first):
    """The elements' structure, read from the first batch (an error if the share is empty)."""
    if batches.count(first) == 0:
        held = feed.rows_held_back
        raise FeedError(
            "to_dataset(): this node's share has no rows"
            f"{f' ({held} held back by equalizing)' if held else ''}, so the elements' "
            "structure cannot be read from them: "
            "pass output_signature= (e.g. {'x': tf.TensorSpec([None, 784], tf.float32)}"
            ", one spec per column or component) for an empty dataset, or give every "
            "training node rows (more data, or fewer nodes)"
        )
    return batches.signature(tf, first)


class _EpochReader:
    """The feed's batches as the dataset's ``numpy_function`` calls read them: flat lists of
    arrays in the signature's order, an empty batch at the end of each epoch."""

    def __init__(self, feed, batch_size: int, first, specs: list, tf, np) -> None:
        self.feed, self.batch_size, self.specs = feed, batch_size, specs
        self.tf, self.np = tf, np
        self.pending = first  # the batch read for the signature
        self.ended = False
        self.empty = [  # what ends an epoch
            np.zeros(
                (0,) + tuple(d or 0 for d in s.shape[1:]),
                dtype=object if s.dtype == tf.string else s.dtype.as_numpy_dtype,
            )
            for s in specs
        ]

    def start(self, _: object) -> np.int64:
        """A new iterator over the dataset: a new epoch."""
        self.ended = False
        return self.np.int64(0)

    def next_batch(self, _: object) -> list[np.ndarray]:
        feed = self.feed
        if self.pending is not None:
            batch, self.pending = self.pending, None
        elif self.ended or feed.stopped:  # no look-ahead: epochs stay apart
            return self.empty
        else:
            batch = feed.next_batch(self.batch_size)
        if batches.count(batch) == 0:
            self.ended = True
            return self.empty
        if feed.delivered == 0:  # that batch closed the epoch
            self.ended = True
        return self._arrays(batches.structure(batch))

    def _arrays(self, data) -> list:
        """A batch's components as arrays of the signature's types (an error on a mismatch)."""
        tf, specs = self.tf, self.specs
        flat = tf.nest.flatten(data)
        if len(flat) != len(specs):
            raise FeedError(
                f"to_dataset(): a batch has {len(flat)} components, the "
                f"output_signature {len(specs)}"
            )
        for i, (a, s) in enumerate(zip(flat, specs)):
            if s.dtype == tf.string and a.dtype == object and any(v is None for v in a.flat):
                name = f"column {sorted(data)[i]!r}" if isinstance(data, dict) else f"component {i}"
                raise FeedError(
                    f"to_dataset(): {name} has nulls, which a string tensor "
                    "cannot hold; fill or drop them before feeding"
                )
        return [
            a if s.dtype == tf.string else self.np.asarray(a, s.dtype.as_numpy_dtype)
            for a, s in zip(flat, specs)
        ]
