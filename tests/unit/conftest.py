"""Fixtures of the unit tier (no Spark, no TensorFlow)."""

import os
import resource

import pytest


@pytest.fixture
def many_descriptors():
    """Over 1,100 descriptors open, as a TensorFlow process may hold: the next socket's number
    is above select()'s limit of 1024. Skipped where the descriptor limit cannot allow it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 1400
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.skip(f"the descriptor limit ({hard}) is below {want}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        yield
    finally:
        for fd in held:
            os.close(fd)
        if soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
