"""sparktf.node.feed.unpickle.loads gives what pickle.loads gives, for every kind of numpy
array and for pickles without any, reading the buffer in place. No Spark or TensorFlow."""

import pickle

import numpy as np
import pytest

from sparktf.node.feed.unpickle import loads


def _arrays():
    rng = np.random.RandomState(0)
    yield rng.rand(784).astype("float32")  # the usual feature vector
    yield rng.rand(3, 4)  # 2-D, C order
    yield np.asfortranarray(rng.rand(3, 4))  # F order
    yield rng.rand(2, 3, 4)[:, ::2, :]  # not contiguous
    yield rng.rand(4, 3).T  # F-contiguous view
    yield np.arange(24, dtype=">i4").reshape(2, 3, 4)  # big-endian
    yield np.zeros((0, 784), dtype="float32")  # empty
    yield np.array(3.5)  # 0-d
    yield np.array([True, False])  # bool
    yield np.array([(1, 2.0), (3, 4.0)], dtype=[("a", "i8"), ("b", "f4")])  # structured
    yield np.array(["ab", "c"])  # unicode
    yield np.array([b"x", b"yz"])  # bytes
    yield np.array([1, "mixed", None], dtype=object)  # objects
    yield np.arange(6, dtype="complex64").reshape(2, 3)
    yield np.array(["2026-11-23"], dtype="datetime64[D]")
    read_only = rng.rand(5)
    read_only.flags.writeable = False
    yield read_only


def _same(a, b):
    assert type(a) is type(b)
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and a.strides == b.strides
        assert a.flags.writeable == b.flags.writeable
        assert a.flags.c_contiguous == b.flags.c_contiguous
        assert a.flags.f_contiguous == b.flags.f_contiguous
        assert a.tobytes() == b.tobytes() if a.dtype != object else a.tolist() == b.tolist()
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        assert a == b


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_every_kind_of_array_comes_back_as_pickle_loads_gives_it(protocol):
    rows = [(a, i) for i, a in enumerate(_arrays())]
    data = pickle.dumps(rows, protocol=protocol)
    _same(loads(data), pickle.loads(data))


def test_it_reads_a_part_of_a_larger_buffer_in_place():
    parts = [
        pickle.dumps([np.full(4, i, "float32"), {"k": [i, "v"]}], protocol=5) for i in range(3)
    ]
    frame = bytearray(b"".join(parts))
    view, pos, out = memoryview(frame), 0, []
    for p in parts:
        out.append(loads(view[pos : pos + len(p)]))
        pos += len(p)
    assert [o[0].tolist() for o in out] == [[float(i)] * 4 for i in range(3)]
    assert [o[1] for o in out] == [{"k": [i, "v"]} for i in range(3)]
    frame[:] = b"\0" * len(frame)  # the arrays own their data: not views of the frame
    assert out[2][0].tolist() == [2.0] * 4


def test_plain_python_pickles_and_truncated_ones():
    value = {"a": [1, 2.5, "x", None, (True,)], "b": b"\n\nbytes\n", "c": {3, 4}}
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert loads(pickle.dumps(value, protocol=protocol)) == value
    with pytest.raises((pickle.UnpicklingError, EOFError)):
        loads(pickle.dumps(value, protocol=5)[:-5])


def test_arrays_are_built_by_the_constructor_not_numpys_python_function(monkeypatch):
    """The point of loads: numpy's Python-level _frombuffer is called only for what the
    constructor cannot build the same way (order 'K' with an axis order)."""
    import sys

    rows = [np.zeros((2, 3), "float32"), np.asfortranarray(np.ones((2, 3)))]
    data = pickle.dumps(rows, protocol=5)
    real = np.zeros(1).__reduce_ex__(5)[0]  # numpy's _frombuffer, as its pickles name it
    calls = []

    def counting(*args):
        calls.append(args[3])
        return real(*args)

    monkeypatch.setattr(sys.modules[real.__module__], real.__name__, counting)
    _same(loads(data), pickle.loads(data))
    assert calls == ["C", "F"]  # pickle.loads's two calls; none from loads
