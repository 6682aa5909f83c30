"""The Arrow schema the driver sends a DataFrame-fed node (:func:`sparktf.driver.stages.schema_to_arrow`),
with the PySpark this runs on and with the older ``to_arrow_schema`` of PySpark 4.0 and 4.1,
which takes ``timestamp_utc`` where 4.2 takes ``timezone`` (``setup.py`` allows pyspark>=4.0).
No Spark processes: a ``StructType`` is plain data."""

import inspect

import pyarrow as pa
import pytest
from pyspark.sql import types as T
from pyspark.sql.pandas import types as pandas_types

from sparktf.driver.stages import schema_to_arrow

SCHEMA = T.StructType(
    [
        T.StructField("x", T.ArrayType(T.FloatType())),
        T.StructField("at", T.TimestampType()),
        T.StructField("name", T.StringType()),
    ]
)


TAKES_ZONE = "timezone" in inspect.signature(pandas_types.to_arrow_schema).parameters
LARGE = "prefers_large_types" in inspect.signature(pandas_types.to_arrow_schema).parameters


@pytest.mark.skipif(not LARGE, reason="PySpark 3.5 has no large Arrow types (useLargeVarTypes)")
def test_the_schema_has_the_session_time_zone_and_large_strings_when_asked():
    schema = schema_to_arrow(SCHEMA, "Europe/Paris", large=True)
    # PySpark 4.0 and 4.1 label every timestamp UTC: the same instants
    zone = "Europe/Paris" if TAKES_ZONE else "UTC"
    assert schema.field("at").type == pa.timestamp("us", tz=zone)
    assert schema.field("name").type == pa.large_string()
    assert schema.field("x").type == pa.list_(pa.float32())


@pytest.mark.skipif(not TAKES_ZONE, reason="this PySpark's own is the older one")
def test_pyspark_4_0s_to_arrow_schema_without_timezone_is_called_as_it_takes_it(monkeypatch):
    real = pandas_types.to_arrow_schema

    def to_arrow_schema_4_0(
        schema,
        error_on_duplicated_field_names_in_struct=False,
        timestamp_utc=True,
        prefers_large_types=False,
    ):
        """PySpark 4.0.5's signature; the schema it builds for it (UTC timestamps)."""
        return real(
            schema,
            timezone="UTC" if timestamp_utc else None,
            error_on_duplicated_field_names_in_struct=(error_on_duplicated_field_names_in_struct),
            prefers_large_types=prefers_large_types,
        )

    monkeypatch.setattr(pandas_types, "to_arrow_schema", to_arrow_schema_4_0)
    schema = schema_to_arrow(SCHEMA, "Europe/Paris", large=False)
    # the same instants: Arrow keeps timestamps in UTC, the zone only names how to show them
    assert schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert schema.field("name").type == pa.string()
