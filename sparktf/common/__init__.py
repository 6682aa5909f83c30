"""What all three sides share: roles, cluster spec and TF_CONFIG (:mod:`.topology`), the specs
that cross a process boundary (:mod:`.spec`), the control channel (:mod:`.protocol`) and its
messages (:mod:`.messages`), the feed's frames (:mod:`.feedwire`), port reservation
(:mod:`.ports`) and process lifetime (:mod:`.procs`).

Runs on every side. Imports the standard library (and psutil) only: never pyspark, never
tensorflow (``tests/unit/test_preflight.py::test_layering`` checks).

Modules:

- ``envvars``: Every ``SPARKTF_*`` environment variable, in one table
- ``feedwire``: The local data channel between a node's barrier task and its TF process
- ``gpus``: Which GPUs a node's TensorFlow sees: those Spark's resource scheduling gave its task
- ``horovod``: Horovod's view of a sparktf cluster (``run(framework="horovod")``): pure functions
- ``keepalive``: How a node and its supervisor notice that their driver is gone without a word
- ``logfilter``: Which lines of a node's output are TensorFlow's C++ start-up chatter
- ``messages``: The control channel's messages, in one catalogue used by all three sides
- ``plain_numbers``: Numbers as users pass them, taken as the plain ``int`` and ``float`` they are
- ``ports``: Reserve a TCP port for a TensorFlow server with no window for another process to take it
- ``private``: Directories and files private to the user running the job
- ``procs``: Process lifetime helpers: die with the parent, reap orphans, stop a whole tree
- ``protocol/``: The control and log channel between the driver and its nodes
- ``scripts``: A Python script run as it is on every node (``sparktf.run(spark, "train.py")``)
- ``settings``: One table of settings: each key's name, default, type, check and doc line, in one place
- ``shipped``: Large bytes of the launch spec (``main_fn``, ``args``) shipped as a broadcast
- ``spec``: Plain-data descriptions shipped from the driver to the executors and nodes
- ``tfimport``: ``import tensorflow`` without its eager Keras import
- ``topology``: Roles, cluster spec and TF_CONFIG: pure functions over plain data
"""
