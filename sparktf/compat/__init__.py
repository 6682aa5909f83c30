"""TensorFlowOnSpark compatibility: its driver API (:mod:`~sparktf.compat.tfcluster`, as
``sparktf.TFCluster``) and its helpers for ``main_fn`` (:mod:`~sparktf.compat.tfnode`, as
``sparktf.TFNode``), translated to sparktf's own.

``from sparktf import TFCluster, TFNode`` is the way in, as ``from tensorflowonspark import
TFCluster, TFNode`` was.

Modules:

- ``tfcluster``: TensorFlowOnSpark's driver API over sparktf
- ``tfnode``: TensorFlowOnSpark's ``TFNode`` helpers for a ``main_fn``
"""
