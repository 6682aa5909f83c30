"""Helpers the tests share (not tests themselves): the ``main_fn``s the tests run as jobs
(``jobs``, ``tf_jobs``, ``feed_jobs``, ``hdfs_jobs``, ``ml_jobs``), a feed wire served without
Spark (``feed_wire``), a man in the middle for the control channel (``mitm``) and a recorder of
what a control server reports (``control``), and what the tests ask of processes, threads and
ports (``procs``: ``wait_until``, ``sparktf_processes``, ``pid_alive``, ...).

``tests/`` is on ``sys.path`` (pytest puts the root conftest's folder there), so the tests import
``from helpers import jobs``. The executors cannot import this package: tests/conftest.py
registers it with ``cloudpickle.register_pickle_by_value``, so the functions travel by value.
"""
