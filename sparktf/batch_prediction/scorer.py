"""The scorer each Spark Python worker runs: Arrow batches in, the model's outputs appended as
columns.
"""

from __future__ import annotations

from collections.abc import Sequence

from sparktf.batch_prediction.model import _serving_fn
from sparktf.batch_prediction.outputs import (
    _NUMPY,
    _check_output,
    _check_range,
    _element,
    _Outputs,
    _per_row,
    _to_arrow,
)
from sparktf.errors import ConfigError


class _Scorer:
    """Scores Arrow batches with a signature in one Python worker: the input columns as numpy
    arrays (an ``array<float>`` column as a 2-D view of its values, no copy), the model
    called every ``batch_size`` rows, each output written into one array of the type asked
    for and handed to Arrow as it is (a list column from its values and offsets)."""

    def __init__(
        self,
        model_path: str,
        signature: str,
        input_cols: Sequence[str],
        outputs: _Outputs,
        batch_size: int,
        startup_logs: bool = False,
        identity: tuple | None = None,
    ) -> None:
        self.fn = _serving_fn(model_path, signature, startup_logs, identity)
        self.input_cols, self.batch_size = list(input_cols), batch_size
        self.specs = self.fn.structured_input_signature[1]
        self.inputs = sorted(self.specs)
        if len(self.inputs) != len(input_cols):
            raise ConfigError(
                f"{len(input_cols)} input_cols {list(input_cols)} for a signature with "
                f"{len(self.inputs)} input{'s' if len(self.inputs) != 1 else ''} "
                f"({', '.join(self.inputs)}) in {model_path} ({signature!r}): give one column "
                "per input, in the order of the inputs' sorted names"
            )
        self.dtypes = [self.specs[name].dtype.as_numpy_dtype for name in self.inputs]
        found = self.fn.structured_outputs
        self.keys = [k if k is not None else sorted(found)[0] for k in outputs.keys]
        missing = [k for k in self.keys if k not in found]
        if missing:
            listed = ", ".join(
                f"{k} ({spec.dtype.name}, {_per_row(spec.shape)} per row)"
                for k, spec in sorted(found.items())
            )
            raise ConfigError(
                f"output_key {missing if len(missing) > 1 else repr(missing[0])} "
                f"{'are not outputs' if len(missing) > 1 else 'is no output'} of "
                f"{signature!r} in {model_path}; its outputs: {listed}"
            )
        self.types, self.checked = outputs.types, False

    def score(self, columns: Sequence) -> list:
        """One Arrow array per output for these input columns (Arrow arrays of one batch)."""
        import numpy as np

        from sparktf.node.feed.batches import column_to_numpy

        rows = len(columns[0])
        feeds = [
            np.asarray(column_to_numpy(c, a), dtype=d)
            for c, a, d in zip(self.input_cols, columns, self.dtypes)
        ]
        if not self.checked and rows:  # rows of one column have one shape: a batch tells
            _check_shapes(dict(zip(self.inputs, feeds)), self.specs, self.input_cols)
        outs: list = [None] * len(self.keys)
        for start in range(0, rows, self.batch_size):
            got = self.fn(
                **{name: f[start : start + self.batch_size] for name, f in zip(self.inputs, feeds)}
            )
            for i, key in enumerate(self.keys):
                values = got[key].numpy()
                if outs[i] is None:
                    if not self.checked:
                        _check_output(
                            key, values, self.types[i], min(rows - start, self.batch_size)
                        )
                    outs[i] = np.empty((rows,) + values.shape[1:], _NUMPY[_element(self.types[i])])
                if (
                    values.dtype.kind in "iu"
                    and outs[i].dtype.kind == "i"
                    and outs[i].dtype != values.dtype
                ):
                    _check_range(key, values, outs[i].dtype, self.types[i])
                outs[i][start : start + len(values)] = values
            self.checked = True
        return [_to_arrow(o, t, rows) for o, t in zip(outs, self.types)]


def _check_shapes(feeds: dict, specs: dict, input_cols: Sequence[str]) -> None:
    """Each column's rows against its input's shape per row, where the model fixes one."""
    for (name, arr), col in zip(feeds.items(), input_cols):
        want = specs[name].shape
        if want.rank is None:
            continue
        row, want_row = arr.shape[1:], tuple(want.as_list()[1:])
        if len(row) != len(want_row) or any(
            w is not None and w != r for w, r in zip(want_row, row)
        ):
            shown = tuple("?" if w is None else w for w in want_row)
            raise ConfigError(
                f"input_cols {col!r} has rows of shape {row}, but the model's input {name!r} "
                f"takes {shown} per row: feed a column whose rows have that shape"
            )
