"""The old name of :mod:`sparktf.common.plain_numbers`, kept while the driver's modules import it."""

from sparktf.common.plain_numbers import integer, metric, real, step  # noqa: F401
