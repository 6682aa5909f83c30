"""Chunks and batches: what the feed holds (a ``pyarrow.RecordBatch`` for a DataFrame, a list
of elements for an RDD) and what ``next_batch`` and ``to_dataset`` hand out.

numpy and pyarrow are imported by the functions that need them; tensorflow is never imported
here (``signature`` is given the module).
"""

from __future__ import annotations

import decimal
import pickle
from typing import TYPE_CHECKING, Any

from sparktf.common import feedwire
from sparktf.errors import FeedError
from sparktf.node.feed import unpickle

if TYPE_CHECKING:
    import numpy as np
    import tensorflow

#: A chunk of the feed: a ``pyarrow.RecordBatch`` (DataFrame rows) or a list of RDD elements.
Chunk = Any


def read_schema(payload: Any) -> Any:
    """A DataFrame partition's Arrow schema, from its SCHEMA frame."""
    import pyarrow as pa

    return pa.ipc.read_schema(pa.py_buffer(payload))


def buffer_for(kind: bytes, size: int) -> Any:
    """A buffer to receive or read one frame into. An Arrow batch's (tens of MB with Spark's
    10,000-row batches) comes from Arrow's memory pool, uninitialized: its allocator reuses the
    pages of the frames already consumed, where a new ``bytearray`` is zeroed, and its fresh
    pages are faulted in, every time (it was half of a DataFrame-fed node's CPU)."""
    if kind == feedwire.ARROW:
        import pyarrow as pa

        return pa.allocate_buffer(size)
    return bytearray(size)


def decode(kind: bytes, payload: Any, schema: Any) -> Chunk:
    """One data frame of the feed wire as a chunk."""
    if kind == feedwire.ARROW:
        import pyarrow as pa

        return pa.ipc.read_record_batch(pa.py_buffer(payload), schema)
    if kind == feedwire.PICKLED:
        return unpickle.loads(payload)
    if kind == feedwire.MULTI:
        items = []
        for part in feedwire.unpack_parts(payload):
            items.extend(unpickle.loads(part))
        return items
    raise FeedError(f"unexpected frame {kind!r} on the data feed")


def encode(chunk: Chunk) -> tuple[bytes, bytes]:
    """A chunk as a data frame: an Arrow record batch (IPC message), or a pickled list."""
    if hasattr(chunk, "num_rows"):
        return feedwire.ARROW, chunk.serialize()
    return feedwire.PICKLED, pickle.dumps(list(chunk), protocol=pickle.HIGHEST_PROTOCOL)


def rows(chunk: Chunk) -> int:
    return chunk.num_rows if hasattr(chunk, "num_rows") else len(chunk)


def cut(chunk: Chunk, start: int, n: int) -> Chunk:
    """``n`` rows of a chunk from ``start`` (zero-copy for Arrow)."""
    return chunk.slice(start, n) if hasattr(chunk, "num_rows") else chunk[start : start + n]


def shuffled(chunk: Chunk, rng: Any) -> Chunk:
    """The chunk's rows in an order drawn from ``rng`` (a numpy RandomState)."""
    order = rng.permutation(rows(chunk))
    if hasattr(chunk, "num_rows"):
        import pyarrow as pa

        return chunk.take(pa.array(order))
    return [chunk[j] for j in order]


def count(batch: Any) -> int:
    """Rows in a batch as ``next_batch`` returns it."""
    if isinstance(batch, dict):
        return len(next(iter(batch.values()))) if batch else 0
    return len(batch)


def assemble(parts: list, schema: Any, input_mapping: dict | None) -> Any:
    """The batch ``next_batch`` returns from the chunk slices it took: a list of RDD elements,
    or a dict of column (or ``input_mapping`` name) to numpy array for a DataFrame."""
    if schema is None:  # an RDD: lists of elements
        if input_mapping:
            raise FeedError(
                f"input_mapping={input_mapping!r} names a DataFrame's columns, but "
                "this feed is an RDD's elements: leave input_mapping out"
            )
        return [item for part in parts for item in part]
    import pyarrow as pa

    if input_mapping:
        missing = [c for c in input_mapping if c not in schema.names]
        if missing:
            raise FeedError(
                f"input_mapping names columns {missing} that the DataFrame does "
                f"not have; its columns are {schema.names}"
            )
    table = pa.Table.from_batches(parts, schema=schema) if parts else schema.empty_table()
    names = input_mapping or {n: n for n in schema.names}
    return {
        out: column_to_numpy(col, table.column(col).combine_chunks()) for col, out in names.items()
    }


def column_to_numpy(name: str, arr: Any) -> Any:
    """An Arrow array as numpy: lists of equal length become one more dimension."""
    import numpy as np
    import pyarrow as pa

    t = arr.type
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        if arr.null_count:
            raise FeedError(f"column {name!r} has null arrays; drop or fill them before feeding")
        if pa.types.is_fixed_size_list(t):
            width = t.list_size
        else:
            lengths = np.diff(_plain_to_numpy(arr.offsets))
            if len(lengths) and (lengths != lengths[0]).any():
                raise FeedError(
                    f"column {name!r} holds arrays of different lengths ({lengths.min()} to "
                    f"{lengths.max()}) in one batch; make every row's array the same length"
                )
            width = int(lengths[0]) if len(lengths) else 0
        values = column_to_numpy(name, arr.flatten())
        return values.reshape((len(arr), width) + values.shape[1:])
    if (
        pa.types.is_binary(t)
        or pa.types.is_string(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_large_string(t)
    ):
        return arr.to_numpy(zero_copy_only=False)
    if arr.null_count and not pa.types.is_floating(t):
        raise FeedError(f"column {name!r} ({t}) has nulls; fill or drop them before feeding")
    if not arr.null_count and (
        pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
    ):
        return _plain_to_numpy(arr)
    return arr.to_numpy(zero_copy_only=False)


def _plain_to_numpy(arr):
    """A null-free numeric or boolean Arrow array as numpy, read from its buffer (numbers
    without a copy, read-only, as ``to_numpy`` gives them). ``Array.to_numpy`` would do the
    same but imports pandas the first time, where it is installed: 0.2-0.3 s of every node's
    first batch."""
    import numpy as np
    import pyarrow as pa

    n, start, data = len(arr), arr.offset, arr.buffers()[1]
    if pa.types.is_boolean(arr.type):  # one bit a value, least significant first
        if data is None or n == 0:
            return np.zeros(0, dtype=bool)
        bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little")
        return bits[start : start + n].astype(bool)
    dtype = _numpy_dtype(arr.type)
    if data is None or n == 0:
        out = np.zeros(0, dtype=dtype)
    else:
        out = np.frombuffer(data, dtype=dtype, count=n, offset=start * dtype.itemsize)
    out.flags.writeable = False  # Arrow's memory, as to_numpy leaves it: never written in place
    return out


_NUMERIC = (
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
)
_DTYPES: dict = {}  # Arrow number type -> numpy dtype


def _numpy_dtype(arrow_type):
    """The numpy dtype of an Arrow integer or floating type (``DataType.to_pandas_dtype``
    gives the same but imports pandas on pyarrow before 26)."""
    if not _DTYPES:
        import numpy as np
        import pyarrow as pa

        _DTYPES.update({pa.from_numpy_dtype(np.dtype(n)): np.dtype(n) for n in _NUMERIC})
    return _DTYPES[arrow_type]


def structure(batch: Any) -> Any:
    """RDD elements (tuples of arrays/scalars) stacked into a tuple of arrays, or (dicts)
    into a dict of arrays; a DataFrame's dict as it is."""
    import numpy as np

    if isinstance(batch, dict):
        return batch
    if batch and isinstance(batch[0], dict):
        names = sorted(batch[0])
        other = next((e for e in batch if sorted(e) != names), None)
        if other is not None:
            raise FeedError(
                f"to_dataset() needs RDD elements of one structure; this batch "
                f"has dicts with different keys ({names} and {sorted(other)}): "
                "give every element the same keys"
            )
        return dict(zip(names, structure([tuple(e[k] for k in names) for e in batch])))
    try:
        if batch and isinstance(batch[0], (tuple, list)):
            return tuple(np.stack([np.asarray(e[i]) for e in batch]) for i in range(len(batch[0])))
        return np.stack([np.asarray(e) for e in batch])
    except (ValueError, IndexError) as exc:
        shapes = sorted({str(np.shape(e[0] if isinstance(e, (tuple, list)) else e)) for e in batch})
        raise FeedError(
            f"to_dataset() needs RDD elements of one structure and shape; this "
            f"batch has elements of different shapes ({', '.join(shapes[:4])}): "
            f"{exc}. Make every element the same shape, or use next_batch() and "
            "handle them yourself"
        ) from None


def signature(tf: Any, batch: Any) -> Any:
    """The ``tf.data`` output signature of a batch (first dimension unknown)."""
    data = structure(batch)

    def spec(a: np.ndarray, name: str) -> tensorflow.TensorSpec:
        if a.dtype.kind in "mM":
            raise FeedError(
                f"to_dataset(): {name} holds dates or times ({a.dtype}), which "
                "TensorFlow has no type for: leave it out (input_mapping) or make "
                "it a number first (e.g. unix_timestamp() in Spark)"
            )
        sample = next((v for v in a.flat if v is not None), None) if a.dtype == object else None
        if a.dtype != object:
            dtype = tf.as_dtype(a.dtype)
        elif isinstance(sample, decimal.Decimal):  # a decimal(p, s) column
            dtype = tf.float64
        elif sample is None or isinstance(sample, (str, bytes, bytearray)):
            dtype = tf.string
        else:  # a struct or map column's dicts and lists, objects of a class of the user's
            raise FeedError(
                f"to_dataset(): {name} holds {type(sample).__name__} values (a struct, map or "
                "nested column, or objects), which no tensor holds: select the fields you "
                "train on as columns of numbers, strings or arrays of one length (for a "
                "struct, df.select('col.*')), leave it out with input_mapping, or read it "
                "with next_batch() and build the tensors yourself"
            )
        return tf.TensorSpec(shape=(None,) + a.shape[1:], dtype=dtype)

    if isinstance(data, dict):
        return {k: spec(v, f"column {k!r}") for k, v in data.items()}
    if isinstance(data, tuple):
        return tuple(spec(a, f"component {i}") for i, a in enumerate(data))
    return spec(data, "the batch")
