"""What predict() writes: the output columns planned from the arguments, their Spark and Arrow
types, and each model output checked and converted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sparktf.errors import ConfigError

# ------------------------------------------------------------------ what predict() writes
_NUMPY = {"float": "float32", "double": "float64", "int": "int32", "long": "int64"}
OUTPUT_TYPES = tuple(_NUMPY) + tuple(f"array<{t}>" for t in _NUMPY)


@dataclass(frozen=True)
class _Outputs:
    """Which outputs of the signature ``predict`` writes, as what, where: ``keys`` (None: the
    first output by name), one type of :data:`OUTPUT_TYPES` per key, and the new columns'
    ``names``: one per key, or one struct column (``struct``) whose fields are the keys."""

    keys: tuple
    types: tuple
    names: tuple
    struct: bool = False


def _names(value, what: str, problems: list) -> tuple | None:
    """A str or a non-empty list of distinct str, as a tuple; None (and a problem) otherwise."""
    if isinstance(value, str) and value:
        return (value,)
    if (
        not isinstance(value, str)
        and isinstance(value, Sequence)
        and value
        and all(isinstance(v, str) and v for v in value)
        and len(set(value)) == len(value)
    ):
        return tuple(value)
    problems.append(f"{what} must be a name or a list of distinct names, got {value!r}")
    return None


def _output_plan(
    output_col, output_type, output_key, columns: Sequence[str], problems: list
) -> _Outputs | None:
    """The outputs' plan from ``predict``'s arguments, or None with what is wrong added to
    ``problems``. Pure: the driver's check, table-tested without Spark."""
    n = len(problems)
    cols = _names(output_col, "output_col", problems)
    keys = (None,) if output_key is None else _names(output_key, "output_key", problems)
    types = _names(output_type, "output_type", problems)
    if types and any(t not in OUTPUT_TYPES for t in types):
        problems.append(
            f"output_type must be one of {list(OUTPUT_TYPES)} (or a list of them, "
            f"one per output_key), got {output_type!r}"
        )
    taken = [c for c in cols or () if c in columns]
    if taken:
        problems.append(
            f"output_col {taken if len(taken) > 1 else repr(taken[0])} "
            f"{'are' if len(taken) > 1 else 'is'} already a column; pick another name"
        )
    if not (cols and keys and types):
        return None
    several = not isinstance(output_key, (str, type(None)))
    struct = several and isinstance(output_col, str)
    outputs = f"{len(keys)} output{'s' if len(keys) != 1 else ''}"
    if len(types) not in (1, len(keys)):
        problems.append(
            f"output_type lists {len(types)} types for {outputs} ({list(keys)}): "
            "give one type per output_key, or one type for all"
        )
    if not struct and len(cols) != len(keys):
        problems.append(
            f"output_col names {len(cols)} columns for {outputs}: "
            + (
                "give one column per output_key, or one name for a struct column holding them all"
                if several
                else "name the signature's outputs to write in output_key (a list, one per column)"
            )
        )
    if len(problems) > n:
        return None
    return _Outputs(keys, types * len(keys) if len(types) == 1 else types, cols, struct)


def _spark_type(output_type: str):
    from pyspark.sql.types import ArrayType, DoubleType, FloatType, IntegerType, LongType

    element = _element(output_type)
    spark = {"float": FloatType, "double": DoubleType, "int": IntegerType, "long": LongType}[
        element
    ]()
    return ArrayType(spark) if element != output_type else spark


def _spark_schema(outputs: _Outputs):
    """The new columns, as Spark fields."""
    from pyspark.sql.types import StructField, StructType

    types = [_spark_type(t) for t in outputs.types]
    if outputs.struct:
        return [
            StructField(
                outputs.names[0],
                StructType([StructField(k, t) for k, t in zip(outputs.keys, types)]),
            )
        ]
    return [StructField(name, t) for name, t in zip(outputs.names, types)]


def _arrow_type(output_type: str):
    import pyarrow as pa

    element = _element(output_type)
    arrow = pa.from_numpy_dtype(_NUMPY[element])
    return pa.list_(arrow) if element != output_type else arrow


def _element(output_type: str) -> str:
    return output_type[6:-1] if output_type.startswith("array<") else output_type


def _per_row(shape) -> str:
    dims = shape.as_list()[1:] if shape.rank is not None else None
    return "any shape" if dims is None else str(tuple("?" if d is None else d for d in dims))


def _check_output(key: str, values, output_type: str, rows: int) -> None:
    """An output's values fit ``output_type``: a value (or array) per row, numbers, integers
    for an integer type (a float is not rounded or cut behind the user's back), one value per
    row for a scalar type."""
    element, row = _element(output_type), values.shape[1:]
    if values.ndim == 0 or len(values) != rows:
        raise ConfigError(
            f"output {key!r} has shape {values.shape} for {rows} rows in: "
            "predict takes outputs with a row per input row (write another "
            "output with output_key)"
        )
    if values.dtype.kind not in "fiub":
        raise ConfigError(
            f"output {key!r} holds {values.dtype} values; output_type "
            f"{output_type!r} takes numbers: write another output (output_key)"
        )
    if element in ("int", "long") and values.dtype.kind == "f":
        kind = "array<double>" if element != output_type else "double"
        raise ConfigError(
            f"output {key!r} holds {values.dtype} values; output_type {output_type!r} takes "
            f"integer outputs (a class index: tf.argmax in the signature): use "
            f"{kind!r} for these, or export a signature that returns the integers"
        )
    if element == output_type and math.prod(row) != 1:
        raise ConfigError(
            f"output {key!r} has {math.prod(row)} values per row (shape {row}); output_type "
            f"{output_type!r} takes one: use 'array<{element}>' for a vector per row"
        )


def _check_range(key: str, values, dtype, output_type: str) -> None:
    import numpy as np

    info = np.iinfo(dtype)
    if values.size and (values.min() < info.min or values.max() > info.max):
        raise ConfigError(
            f"output {key!r} holds {values.dtype} values beyond {dtype}'s range "
            f"({values.min()} to {values.max()}); output_type {output_type!r}: "
            f"use '{output_type.replace('int', 'long')}'"
        )


def _to_arrow(values, output_type: str, rows: int):
    """``values`` (an output's rows, any shape per row) as an Arrow array of ``output_type``
    over the same memory: a number per row, or a list column of each row's values, flat."""
    import numpy as np
    import pyarrow as pa

    if values is None:  # no rows
        return pa.array([], type=_arrow_type(output_type))
    flat = pa.array(values.reshape(-1))
    if _element(output_type) == output_type:
        return flat
    width = math.prod(values.shape[1:])
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * np.int32(width))
    return pa.ListArray.from_arrays(offsets, flat)
