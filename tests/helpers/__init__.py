"""Helpers the tests share (not tests themselves): the ``main_fn``s the tests run as jobs
(``jobs``, ``tf_jobs``, ``feed_jobs``, ``hdfs_jobs``, ``ml_jobs``), a feed wire served without
Spark (``feed_wire``) and a man in the middle for the control channel (``mitm``).

``tests/`` is on ``sys.path`` (pytest puts the root conftest's folder there), so the tests import
``from helpers import jobs``. The executors cannot import this package: tests/conftest.py
registers it with ``cloudpickle.register_pickle_by_value``, so the functions travel by value.
"""
